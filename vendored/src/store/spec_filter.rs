//! Which spec versions' approvals a listing asks for (DESIGN §12):
//! `GET /approvals?spec=stale|current|HASH`, `approvals list
//! --spec-version`, and what the store's SQL filters on.

use chrono::{DateTime, Utc};
use thiserror::Error;

use super::{SpecVersions, StoreError};
use crate::domain::pending_approval::ApprovalRecord;

/// The shortest hash prefix a listing accepts: 8 hex characters tell
/// apart any versions one agent will have.
pub const MIN_HASH_PREFIX: usize = 8;

/// The length of a full spec hash (SHA-256, hex).
const FULL_HASH: usize = 64;

/// A spec version filter as the store applies it, on `spec_hash`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecFilter {
    /// Records paused under exactly this hash.
    Is(String),
    /// Records paused under any other version: with the served hash, the
    /// stale ones. Gate requests belong to no version: never stale.
    IsNot(String),
    /// Records whose hash starts with these lowercase hex characters
    /// ([`MIN_HASH_PREFIX`] to 63 of them).
    Prefix(String),
}

/// What a person asks for: `current`, `stale`, or a hash (full, or a
/// prefix of at least [`MIN_HASH_PREFIX`] hex characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecSelector {
    /// Paused under the served spec.
    Current,
    /// Paused under any other version.
    Stale,
    /// Paused under this version (lowercase hex, full or a prefix).
    Hash(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "spec filter {given:?} is not `current`, `stale`, or a spec hash (64 hex characters, or a prefix of at least {MIN_HASH_PREFIX})"
)]
pub struct BadSpecSelector {
    pub given: String,
}

impl SpecSelector {
    pub fn parse(text: &str) -> Result<SpecSelector, BadSpecSelector> {
        let bad = || BadSpecSelector {
            given: text.to_string(),
        };
        match text {
            "current" => Ok(SpecSelector::Current),
            "stale" => Ok(SpecSelector::Stale),
            hash if (MIN_HASH_PREFIX..=FULL_HASH).contains(&hash.len())
                && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                // Hashes are stored lowercase: a hash pasted in capitals
                // still names its version.
                Ok(SpecSelector::Hash(hash.to_ascii_lowercase()))
            }
            _ => Err(bad()),
        }
    }

    /// The store's filter, with `served` the hash of the spec being served.
    pub fn filter(&self, served: &str) -> SpecFilter {
        match self {
            SpecSelector::Current => SpecFilter::Is(served.to_string()),
            SpecSelector::Stale => SpecFilter::IsNot(served.to_string()),
            SpecSelector::Hash(hash) if hash.len() == FULL_HASH => SpecFilter::Is(hash.clone()),
            SpecSelector::Hash(prefix) => SpecFilter::Prefix(prefix.clone()),
        }
    }
}

/// Why a `spec` filter cannot be applied.
#[derive(Debug, Error)]
pub enum SpecFilterError {
    #[error(transparent)]
    Bad(#[from] BadSpecSelector),
    #[error(
        "spec hash prefix {prefix} names {} stored versions ({}): give more of the hash",
        .hashes.len(),
        .hashes.join(", ")
    )]
    Ambiguous { prefix: String, hashes: Vec<String> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SpecSelector {
    /// The filter for `agent_id`'s approvals (every agent's: `None`). A
    /// prefix names one version: one that several stored versions start with is
    /// refused; one that names a stored version is that version exactly.
    /// A prefix no stored version has is kept as a prefix (records can be
    /// older than the versions table).
    pub async fn resolve<S: SpecVersions + ?Sized>(
        &self,
        served: &str,
        versions: &S,
        agent_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<SpecFilter, SpecFilterError> {
        let filter = self.filter(served);
        let SpecFilter::Prefix(prefix) = &filter else {
            return Ok(filter);
        };
        let mut hashes: Vec<String> = versions
            .list_spec_versions(agent_id, now)
            .await?
            .into_iter()
            .map(|v| v.hash)
            .filter(|h| h.starts_with(prefix.as_str()))
            .collect();
        match hashes.len() {
            0 => Ok(filter),
            1 => Ok(SpecFilter::Is(hashes.remove(0))),
            _ => {
                hashes.sort();
                Err(SpecFilterError::Ambiguous {
                    prefix: prefix.clone(),
                    hashes,
                })
            }
        }
    }
}

impl SpecFilter {
    /// Whether `record` passes: the rule the SQL of each store spells. A
    /// gate request belongs to no version, so it passes none: it is on
    /// neither the served version nor another one.
    pub fn matches(&self, record: &ApprovalRecord) -> bool {
        let Some(hash) = record.paused_under() else {
            return false;
        };
        match self {
            SpecFilter::Is(h) => hash == h,
            SpecFilter::IsNot(h) => hash != h,
            SpecFilter::Prefix(p) => hash.starts_with(p.as_str()),
        }
    }
}

impl SpecFilter {
    /// The condition on `spec_hash` for a SQL store, with `param` the
    /// placeholder bound to [`SpecFilter::sql_value`]. A prefix is hex
    /// only (see [`SpecSelector::parse`]), so LIKE reads none of it as a
    /// wildcard.
    pub(crate) fn sql(&self, param: &str) -> String {
        // Only pauses belong to a version (a gate request's `spec_hash` is
        // empty): an empty prefix would otherwise let requests through.
        let condition = match self {
            SpecFilter::Is(_) => format!("spec_hash = {param}"),
            SpecFilter::IsNot(_) => format!("spec_hash <> {param}"),
            SpecFilter::Prefix(_) => format!("spec_hash LIKE {param}"),
        };
        format!(" AND origin = 'pause' AND {condition}")
    }

    /// What [`SpecFilter::sql`]'s placeholder is bound to.
    pub(crate) fn sql_value(&self) -> String {
        match self {
            SpecFilter::Is(h) | SpecFilter::IsNot(h) => h.clone(),
            SpecFilter::Prefix(p) => format!("{p}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";

    #[test]
    fn current_and_stale_are_relative_to_the_served_hash() {
        let served = HASH;
        assert_eq!(
            SpecSelector::parse("current").unwrap().filter(served),
            SpecFilter::Is(served.into())
        );
        assert_eq!(
            SpecSelector::parse("stale").unwrap().filter(served),
            SpecFilter::IsNot(served.into())
        );
    }

    #[test]
    fn a_full_hash_is_exact_and_a_shorter_one_a_prefix() {
        assert_eq!(
            SpecSelector::parse(&HASH.to_uppercase())
                .unwrap()
                .filter("x"),
            SpecFilter::Is(HASH.into())
        );
        assert_eq!(
            SpecSelector::parse("A1B2C3D4").unwrap().filter("x"),
            SpecFilter::Prefix("a1b2c3d4".into())
        );
        let mut paused = crate::domain::pending_approval::sample_record("k", "r");
        paused.spec_hash = HASH.into();
        assert!(SpecFilter::Prefix("a1b2c3d4".into()).matches(&paused));
        assert!(!SpecFilter::Prefix("a1b2c3d5".into()).matches(&paused));
    }

    #[test]
    fn a_gate_request_is_on_no_version() {
        let mut request = crate::domain::pending_approval::sample_record("k", "r");
        request.spec_hash = String::new();
        request.origin = crate::domain::pending_approval::ApprovalOrigin::Request {
            requested_by: Some("bot".into()),
            fingerprint: None,
        };
        for filter in [
            SpecFilter::Is(HASH.into()),
            SpecFilter::IsNot(HASH.into()),
            SpecFilter::Prefix(String::new()),
        ] {
            assert!(!filter.matches(&request), "{filter:?}");
            assert!(filter.sql("?1").contains("origin = 'pause'"), "{filter:?}");
        }
    }

    #[test]
    fn anything_else_is_refused_naming_what_was_given() {
        for bad in [
            "",
            "old",
            "a1b2c3d",
            "a1b2c3dz",
            &format!("{HASH}0"),
            "%%%%%%%%",
        ] {
            let e = SpecSelector::parse(bad).unwrap_err();
            assert_eq!(e.given, bad);
            assert!(e.to_string().contains("`stale`"), "{e}");
        }
    }

    #[tokio::test]
    async fn a_prefix_names_one_stored_version_or_is_refused_as_ambiguous() {
        use crate::domain::spec_version::SpecVersion;
        use crate::store::{MemoryStore, SpecVersions};

        let store = MemoryStore::new();
        let now = crate::support::time::now();
        let version = |hash: &str, agent: &str| SpecVersion {
            hash: hash.into(),
            agent_id: agent.into(),
            canonical: "{}".into(),
            source: "version: 1".into(),
            first_seen: now,
            last_seen: now,
        };
        let twin = format!("{}{}", &HASH[..8], "0".repeat(56));
        for (hash, agent) in [
            (HASH, "desk"),
            (twin.as_str(), "desk"),
            ("f".repeat(64).as_str(), "other"),
        ] {
            store
                .record_spec_version(&version(hash, agent))
                .await
                .expect("record");
        }
        let resolve = |text: &str| {
            let selector = SpecSelector::parse(text).expect("parses");
            let store = &store;
            async move { selector.resolve("served", store, Some("desk"), now).await }
        };
        // One stored version starts so: that version, exactly.
        assert_eq!(
            resolve(&HASH[..9]).await.expect("one"),
            SpecFilter::Is(HASH.into())
        );
        // Both of the agent's versions start so: refused, naming them.
        match resolve(&HASH[..8]).await {
            Err(SpecFilterError::Ambiguous { prefix, hashes }) => {
                assert_eq!(prefix, &HASH[..8]);
                assert_eq!(hashes, vec![twin.clone(), HASH.to_string()]);
            }
            other => panic!("{other:?}"),
        }
        // Another agent's version does not count; none stored: a prefix.
        assert_eq!(
            resolve("ffffffff").await.expect("kept"),
            SpecFilter::Prefix("ffffffff".into())
        );
        assert_eq!(
            resolve("current").await.expect("current"),
            SpecFilter::Is("served".into())
        );
    }
}
