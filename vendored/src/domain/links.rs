//! Signed approval links (DESIGN §11): `/a/{key}/{signature}`, a capability
//! URL that lets a person see and decide one pending approval without an API
//! token.
//!
//! The signature is an HMAC-SHA256, keyed with `TOLLGATE_LINK_SECRET`, over
//! the approval key and an optional bound identity (who the link decides
//! as). Links are computed whenever they are shown (event streams,
//! `GET /approvals/{key}`, `approvals show`, Slack messages) and never
//! stored: the store holds nothing that would let a reader of the database
//! decide, and rotating the secret voids every link ever handed out.
//!
//! The same secret also keys other signers of the server (the session
//! cookie) through [`LinkSigner::derive_key`], domain-separated so that no
//! signature made for one purpose is valid for another.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use subtle::ConstantTimeEq;

use crate::support::hmac::{HmacKey, MAC_LEN};

/// The link secret; unset turns signed links off.
pub use crate::support::env::LINK_SECRET as LINK_SECRET_ENV;
/// The server's address as people reach it: links shown outside the server
/// (Slack, `approvals show`) need it to be absolute.
pub use crate::support::env::PUBLIC_URL as PUBLIC_URL_ENV;
/// `1` (or `true`, `yes`, `on`) turns unbound links on: links that decide
/// as [`LINK_CALLER`] for whoever holds them. Off by default: every link
/// shown is bound to the person it is shown to.
pub use crate::support::env::UNBOUND_LINKS as UNBOUND_LINKS_ENV;
/// `decided_by` of a decision made through an unbound link.
pub const LINK_CALLER: &str = "link";
/// The shortest secret accepted, in characters (what docs/inbox.md promises
/// and the error says): 32, HMAC-SHA256's own key strength when they are
/// random. A secret of 32 multi-byte characters is longer still in bytes.
pub const MIN_SECRET_CHARS: usize = 32;

/// Whether `name` may decide under `approvers` (a spec's
/// `approvals.approvers`; `None` lets anyone decide). The one test, which the
/// decide path uses too (`AgentRun::check_voter`, through [`may_decide_record`]): a link is shown only to
/// someone who passes it, and a link decides only as someone who does.
pub fn may_decide(approvers: Option<&[String]>, name: &str) -> bool {
    approvers.is_none_or(|allowed| allowed.iter().any(|a| a == name))
}

/// Who may decide the records of a served spec (see
/// [`crate::domain::spec::Spec::deciders_of`]): its approvers, and whether those
/// who asked for a record's gate may decide it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deciders<'a> {
    /// `approvals.approvers`; `None` lets anyone decide.
    pub approvers: Option<&'a [String]>,
    /// The gate's `allow_self_approval` in force (false: separation of
    /// duties), for a record without a roster.
    pub allow_self_approval: bool,
}

impl<'a> Deciders<'a> {
    /// Anyone `approvers` allows, requesters barred: what a caller that
    /// has the approvers but not the spec (a notice's route) can tell.
    pub fn approvers(approvers: Option<&'a [String]>) -> Deciders<'a> {
        Deciders {
            approvers,
            allow_self_approval: false,
        }
    }
}

/// Whether `name` may decide `record` now: on a gate with rules, a member
/// of one of its groups as resolved at the pause (and added by escalations
/// since); on any other gate, someone the approvers allow ([`may_decide`])
/// or an escalation added; and, on every gate, not one who asked for it
/// (separation of duties, `policy::barred_as_requester`). The one test the
/// decide path uses too (`AgentRun::check_voter`): a link is shown only to
/// someone who passes it, and a link decides only as someone who does.
pub fn may_decide_record(
    record: &crate::domain::pending_approval::ApprovalRecord,
    deciders: Deciders<'_>,
    name: &str,
) -> bool {
    is_decider_of(record, deciders.approvers, name)
        && !crate::domain::policy::barred_as_requester(record, deciders.allow_self_approval, name)
}

/// Whether `name` is among `record`'s deciders (its groups, its approvers,
/// whom its escalations added), whether or not they asked for it.
pub fn is_decider_of(
    record: &crate::domain::pending_approval::ApprovalRecord,
    approvers: Option<&[String]>,
    name: &str,
) -> bool {
    match &record.roster {
        Some(roster) if !roster.rules.is_empty() => roster.is_member(name),
        Some(roster) if roster.added.iter().any(|a| a == name) => true,
        _ => may_decide(approvers, name),
    }
}

/// The prefix of every link message. Versioned so that a later scheme can
/// never accept a signature made under this one.
const LINK_TAG: &str = "tollgate-link-v1";
/// The prefix of every derived key's message: distinct from [`LINK_TAG`],
/// so a derived key is never a link signature and the other way round.
const DERIVE_TAG: &str = "tollgate-derive-v1";

/// What is percent-encoded in a key (a path segment) and an identity (a
/// query value): everything but RFC 3986's unreserved characters, so `&`,
/// `#`, `+`, `/`, `%`, spaces and non-ASCII can never change the link's
/// meaning.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why the link configuration cannot be used. The messages name the
/// variable and what is wrong with it, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkConfigError {
    #[error(
        "{LINK_SECRET_ENV} is set but blank: set it to at least {MIN_SECRET_CHARS} random characters (for example `openssl rand -base64 32`), or unset it to turn signed links off"
    )]
    BlankSecret,
    #[error(
        "{LINK_SECRET_ENV} is too short: use at least {MIN_SECRET_CHARS} characters (for example `openssl rand -base64 32`)"
    )]
    ShortSecret,
    #[error("{UNBOUND_LINKS_ENV} must be 1, true, yes or on (or 0, false, no, off): {problem}")]
    Unbound { problem: String },
    #[error("{LINK_SECRET_ENV} is not valid UTF-8")]
    SecretNotUnicode,
    #[error(
        "{PUBLIC_URL_ENV} must be an absolute http(s) URL without a query or fragment, such as https://tollgate.example.org: {problem}"
    )]
    PublicUrl { problem: String },
}

/// Signs and checks approval links. Cheap to clone; its `Debug` shows the
/// public URL only, never the secret.
#[derive(Clone)]
pub struct LinkSigner {
    /// The secret, as an HMAC key.
    key: HmacKey,
    /// Without a trailing slash.
    public_url: Option<String>,
    /// [`UNBOUND_LINKS_ENV`]: unbound links are made and accepted.
    unbound: bool,
}

impl std::fmt::Debug for LinkSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSigner")
            .field("secret", &"<redacted>")
            .field("public_url", &self.public_url)
            .field("unbound", &self.unbound)
            .finish()
    }
}

impl LinkSigner {
    /// A signer for `secret` (at least [`MIN_SECRET_CHARS`] characters,
    /// not blank), with links made absolute under `public_url` when given.
    /// Unbound links are off ([`LinkSigner::with_unbound`] turns them on).
    pub fn new(secret: &str, public_url: Option<&str>) -> Result<LinkSigner, LinkConfigError> {
        if secret.trim().is_empty() {
            return Err(LinkConfigError::BlankSecret);
        }
        // Characters, as documented: a byte count would let 11 three-byte
        // characters pass as "32".
        if secret.chars().count() < MIN_SECRET_CHARS {
            return Err(LinkConfigError::ShortSecret);
        }
        let public_url = public_url.map(parse_public_url).transpose()?;
        Ok(LinkSigner {
            key: HmacKey::new(secret.as_bytes()),
            public_url,
            unbound: false,
        })
    }

    /// With unbound links on or off ([`UNBOUND_LINKS_ENV`]).
    pub fn with_unbound(mut self, unbound: bool) -> LinkSigner {
        self.unbound = unbound;
        self
    }

    /// Whether unbound links are on: made where no single person is
    /// shown the link, and accepted when presented.
    pub fn unbound(&self) -> bool {
        self.unbound
    }

    /// From [`LINK_SECRET_ENV`] and [`PUBLIC_URL_ENV`]: `None` when the
    /// secret is unset (links off); an error when either is set but unusable.
    pub fn from_env() -> Result<Option<LinkSigner>, LinkConfigError> {
        let secret = match std::env::var(LINK_SECRET_ENV) {
            Ok(secret) => secret,
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(LinkConfigError::SecretNotUnicode);
            }
        };
        let public_url = match std::env::var(PUBLIC_URL_ENV) {
            Ok(url) => Some(url),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(LinkConfigError::PublicUrl {
                    problem: "it is not valid UTF-8".into(),
                });
            }
        };
        let unbound = unbound_from_env()?;
        LinkSigner::new(&secret, public_url.as_deref())
            .map(|signer| Some(signer.with_unbound(unbound)))
    }

    /// The link to show `viewer` for `record`: `None` unless the viewer
    /// may decide it ([`may_decide_record`]: a link is a way to decide;
    /// someone who may not decide is shown none). Bound to the viewer, so
    /// it decides as them; unbound only when unbound links are on and
    /// `link` may decide it.
    pub fn link_for_viewer(
        &self,
        record: &crate::domain::pending_approval::ApprovalRecord,
        viewer: &str,
        deciders: Deciders<'_>,
    ) -> Option<String> {
        if !may_decide_record(record, deciders, viewer) {
            return None;
        }
        let unbound = self.unbound && may_decide_record(record, deciders, LINK_CALLER);
        Some(self.url(&record.key, (!unbound).then_some(viewer)))
    }

    /// The link to show where there is no single viewer (a Slack channel,
    /// `approvals show` without `--link-for`): an unbound link when
    /// unbound links are on and `link` may decide, else `None`.
    pub fn unattended_link(&self, key: &str, approvers: Option<&[String]>) -> Option<String> {
        (self.unbound && may_decide(approvers, LINK_CALLER)).then(|| self.url(key, None))
    }

    /// The public URL links are made absolute under, without a trailing slash.
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref()
    }

    /// base64url (no padding) HMAC-SHA256 over a domain tag, the key and
    /// the bound identity. Whether an identity is bound is signed too, so
    /// an unbound link and a link bound to `""` differ.
    pub fn signature(&self, key: &str, bound: Option<&str>) -> String {
        base64url(&self.tag(key, bound))
    }

    /// Constant-time check of `signature` for `key` and `bound`. A key or
    /// identity holding a NUL byte is refused: NUL separates the signed
    /// fields, and refusing it keeps every message's reading unique.
    pub fn verify(&self, key: &str, signature: &str, bound: Option<&str>) -> bool {
        if key.contains('\0') || bound.is_some_and(|b| b.contains('\0')) {
            return false;
        }
        let expected = self.signature(key, bound);
        // ct_eq answers false for slices of different lengths; the length
        // of a valid signature is public anyway.
        expected.as_bytes().ct_eq(signature.as_bytes()).into()
    }

    /// `/a/{key}/{signature}`, plus `?as={percent-encoded identity}` when bound.
    pub fn path(&self, key: &str, bound: Option<&str>) -> String {
        let mut path = format!(
            "/a/{}/{}",
            utf8_percent_encode(key, COMPONENT),
            self.signature(key, bound)
        );
        if let Some(bound) = bound {
            path.push_str("?as=");
            path.extend(utf8_percent_encode(bound, COMPONENT));
        }
        path
    }

    /// The public URL + [`LinkSigner::path`], or the path alone when no
    /// public URL is set.
    pub fn url(&self, key: &str, bound: Option<&str>) -> String {
        let path = self.path(key, bound);
        match &self.public_url {
            Some(base) => format!("{base}{path}"),
            None => path,
        }
    }

    /// The approval's inbox page, `{public URL}/ui/approvals/{key}`: no
    /// capability, it asks for sign-in. `None` without a public URL.
    pub fn inbox_url(&self, key: &str) -> Option<String> {
        let base = self.public_url.as_deref()?;
        Some(format!(
            "{base}/ui/approvals/{}",
            utf8_percent_encode(key, COMPONENT)
        ))
    }

    /// A key derived from the link secret for another purpose, such as
    /// `derive_key("tollgate-session-v1")` for the session signer: an HMAC
    /// of a tag distinct from every link's, so knowing a derived key (or
    /// any link) tells nothing about the secret or another purpose's key.
    pub fn derive_key(&self, purpose: &str) -> [u8; MAC_LEN] {
        self.key
            .sign(&[DERIVE_TAG.as_bytes(), b"\0", purpose.as_bytes()])
    }

    fn tag(&self, key: &str, bound: Option<&str>) -> [u8; MAC_LEN] {
        let message = format!(
            "{LINK_TAG}\0{key}\0{}\0{}",
            bound.unwrap_or(""),
            bound.is_some()
        );
        self.key.sign(&[message.as_bytes()])
    }
}

/// [`UNBOUND_LINKS_ENV`]: unset or blank is off.
fn unbound_from_env() -> Result<bool, LinkConfigError> {
    match std::env::var(UNBOUND_LINKS_ENV) {
        Ok(text) => parse_switch(&text).ok_or_else(|| LinkConfigError::Unbound {
            problem: "it is neither".into(),
        }),
        Err(std::env::VarError::NotPresent) => Ok(false),
        Err(std::env::VarError::NotUnicode(_)) => Err(LinkConfigError::Unbound {
            problem: "it is not valid UTF-8".into(),
        }),
    }
}

/// An on/off switch; blank is off.
fn parse_switch(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "" | "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Checks a public URL and trims its trailing slash.
fn parse_public_url(text: &str) -> Result<String, LinkConfigError> {
    let problem = |problem: &str| LinkConfigError::PublicUrl {
        problem: problem.to_string(),
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(problem("it is set but blank"));
    }
    let url = url::Url::parse(text).map_err(|e| LinkConfigError::PublicUrl {
        problem: format!("it is not a URL ({e})"),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(problem("its scheme is not http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(problem("it has no host"));
    }
    // Credentials in a URL that is pasted into chat and mail would leak.
    if !url.username().is_empty() || url.password().is_some() {
        return Err(problem("it holds a user name or password"));
    }
    if url.query().is_some() {
        return Err(problem("it has a query (?...)"));
    }
    if url.fragment().is_some() {
        return Err(problem("it has a fragment (#...)"));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// base64url without padding (RFC 4648 §5), as links carry it.
fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";
    const KEY: &str = "3f0a2b9e-5c1d-4e7f-8a9b-0c1d2e3f4a5b";

    fn signer() -> LinkSigner {
        LinkSigner::new(SECRET, Some("https://approvals.example.com/")).unwrap()
    }

    #[test]
    fn who_may_decide_a_record_follows_its_roster_then_the_approvers() {
        use crate::domain::policy::{GatePolicy, Roster, RuleSpec};
        let approvers = ["alice".to_string(), "erin".to_string()];
        let deciders = Deciders::approvers(Some(approvers.as_slice()));
        let mut record = crate::domain::pending_approval::sample_record("k", "r");
        assert!(may_decide_record(&record, deciders, "alice"));
        assert!(!may_decide_record(&record, deciders, "dave"));
        assert!(
            may_decide_record(&record, Deciders::approvers(None), "dave"),
            "no list: anyone"
        );

        // A gate with rules: its groups' members, whatever approvers says.
        let groups = [(
            "finance".to_string(),
            vec!["bob".to_string(), "dave".to_string()],
        )]
        .into_iter()
        .collect();
        let policy = GatePolicy {
            rules: vec![RuleSpec {
                group: "finance".into(),
                min: 1,
            }],
            ..GatePolicy::plain()
        };
        let mut roster = Roster::resolve(&policy, &groups, vec![]).unwrap();
        record.roster = Some(roster.clone());
        assert!(may_decide_record(&record, deciders, "dave"));
        assert!(!may_decide_record(&record, deciders, "alice"));

        // A plain gate with a roster: approvers, and whom escalations added.
        roster.rules.clear();
        roster.added = vec!["dave".into()];
        record.roster = Some(roster);
        assert!(may_decide_record(&record, deciders, "dave"));
        assert!(may_decide_record(&record, deciders, "erin"));
        assert!(!may_decide_record(&record, deciders, "bob"));
    }

    #[test]
    fn whoever_asked_for_a_record_may_not_decide_it_unless_the_gate_allows_it() {
        let approvers = ["alice".to_string(), "bot".to_string()];
        let barred = Deciders::approvers(Some(approvers.as_slice()));
        let allowed = Deciders {
            allow_self_approval: true,
            ..barred
        };
        let mut record = crate::domain::pending_approval::sample_record("k", "r");
        record.trigger = serde_json::json!({"kind": "api", "started_by": "bot"});
        assert!(
            !may_decide_record(&record, barred, "bot"),
            "started the run"
        );
        assert!(may_decide_record(&record, barred, "alice"));
        assert!(may_decide_record(&record, allowed, "bot"), "opted out");
        assert!(is_decider_of(&record, barred.approvers, "bot"));

        record.trigger =
            serde_json::json!({"kind": "gate", "requested_by": "bot", "requester": "alice"});
        assert!(!may_decide_record(&record, barred, "bot"), "asked");
        assert!(!may_decide_record(&record, barred, "alice"), "asked for");

        // A team gate: its roster's requesters, even when they are members
        // (before, a link was shown to them though they may not vote).
        record.roster = Some(crate::domain::policy::Roster::sample(
            &[("finance", 1, &["bot", "ann"])],
            &["bot"],
        ));
        assert!(
            !may_decide_record(&record, barred, "bot"),
            "asked, a member"
        );
        assert!(may_decide_record(&record, barred, "ann"));
        record.roster = None;

        // The one decider of a server without tokens is never barred.
        record.trigger = serde_json::json!({"kind": "api", "started_by": "local"});
        assert!(may_decide_record(
            &record,
            Deciders::approvers(None),
            "local"
        ));
    }

    #[test]
    fn a_signature_verifies_for_its_key_and_identity() {
        let s = signer();
        let unbound = s.signature(KEY, None);
        assert!(s.verify(KEY, &unbound, None));
        let bound = s.signature(KEY, Some("alice"));
        assert!(s.verify(KEY, &bound, Some("alice")));
        // 32 bytes of HMAC in unpadded base64url.
        assert_eq!(unbound.len(), 43);
        assert!(
            unbound
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        // Deterministic: the same link every time it is shown.
        assert_eq!(unbound, signer().signature(KEY, None));
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_the_documented_message() {
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(format!("tollgate-link-v1\0{KEY}\0alice\0true").as_bytes());
        let expected = base64url(&mac.finalize().into_bytes());
        assert_eq!(signer().signature(KEY, Some("alice")), expected);
    }

    #[test]
    fn a_tampered_key_signature_or_identity_is_refused() {
        let s = signer();
        let sig = s.signature(KEY, Some("alice"));
        let other_key = KEY.replace('3', "4");
        assert!(!s.verify(&other_key, &sig, Some("alice")));
        assert!(!s.verify(KEY, &sig, Some("mallory")));
        assert!(!s.verify(KEY, &sig, None));
        assert!(!s.verify(KEY, &sig, Some("")));
        let mut flipped = sig.clone().into_bytes();
        flipped[0] = if flipped[0] == b'A' { b'B' } else { b'A' };
        assert!(!s.verify(KEY, &String::from_utf8(flipped).unwrap(), Some("alice")));
        assert!(!s.verify(KEY, &sig[..42], Some("alice")));
        assert!(!s.verify(KEY, &format!("{sig}A"), Some("alice")));
        assert!(!s.verify(KEY, "", Some("alice")));
        // Another secret's signature is worthless here.
        let other = LinkSigner::new(&SECRET.replace('0', "x"), None).unwrap();
        assert!(!s.verify(KEY, &other.signature(KEY, Some("alice")), Some("alice")));
    }

    #[test]
    fn bound_and_unbound_links_differ() {
        let s = signer();
        let unbound = s.signature(KEY, None);
        let empty = s.signature(KEY, Some(""));
        assert_ne!(unbound, empty);
        assert_ne!(unbound, s.signature(KEY, Some("alice")));
        assert!(!s.verify(KEY, &unbound, Some("")));
        assert!(!s.verify(KEY, &empty, None));
    }

    #[test]
    fn nul_bytes_cannot_shift_one_field_into_another() {
        let s = signer();
        // Signed as key "a\0b", unbound; presented as key "a", bound "b".
        let sig = s.signature("a\0b", None);
        assert!(!s.verify("a", &sig, Some("b")));
        assert!(!s.verify("a\0b", &sig, None));
        assert!(!s.verify(KEY, &s.signature(KEY, Some("x\0y")), Some("x\0y")));
    }

    #[test]
    fn paths_and_urls_carry_the_signature_and_an_encoded_identity() {
        let s = signer();
        assert_eq!(
            s.path(KEY, None),
            format!("/a/{KEY}/{}", s.signature(KEY, None))
        );
        assert_eq!(
            s.url(KEY, None),
            format!(
                "https://approvals.example.com/a/{KEY}/{}",
                s.signature(KEY, None)
            )
        );
        let odd = "Zoë O'Brien & co/ops?x=1#y+z%";
        let path = s.path(KEY, Some(odd));
        let sig = s.signature(KEY, Some(odd));
        assert_eq!(
            path,
            format!("/a/{KEY}/{sig}?as=Zo%C3%AB%20O%27Brien%20%26%20co%2Fops%3Fx%3D1%23y%2Bz%25")
        );
        let encoded = path.split_once("?as=").unwrap().1;
        let decoded = percent_encoding::percent_decode_str(encoded)
            .decode_utf8()
            .unwrap();
        assert_eq!(decoded, odd);
        assert!(s.verify(KEY, &sig, Some(&decoded)));
        // An odd key cannot break out of its path segment either.
        assert!(s.path("a/b?c", None).starts_with("/a/a%2Fb%3Fc/"));
        // Without a public URL the link is the path alone.
        let local = LinkSigner::new(SECRET, None).unwrap();
        assert_eq!(local.url(KEY, None), local.path(KEY, None));
        assert_eq!(local.public_url(), None);
    }

    #[test]
    fn debug_shows_no_secret() {
        let shown = format!("{:?}", signer());
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(!shown.contains("0123456789"), "{shown}");
        assert!(shown.contains("https://approvals.example.com"), "{shown}");
    }

    #[test]
    fn derived_keys_are_separated_by_purpose_and_from_links() {
        let s = signer();
        let session = s.derive_key("tollgate-session-v1");
        assert_eq!(session, signer().derive_key("tollgate-session-v1"));
        assert_ne!(session, s.derive_key("tollgate-csrf-v1"));
        assert_ne!(session.as_slice(), SECRET.as_bytes());
        // A derived key is not any link's signature, nor the reverse.
        assert_ne!(
            base64url(&session),
            s.signature("tollgate-session-v1", None)
        );
        assert_ne!(base64url(&s.derive_key(KEY)), s.signature(KEY, None));
        let other = LinkSigner::new(&SECRET.replace('0', "x"), None).unwrap();
        assert_ne!(session, other.derive_key("tollgate-session-v1"));
    }

    #[test]
    fn unusable_secrets_are_refused_without_showing_them() {
        for secret in ["", "   \t  ", "short-secret", &"x".repeat(31)] {
            let err = LinkSigner::new(secret, None).unwrap_err();
            let message = err.to_string();
            assert!(message.contains(LINK_SECRET_ENV), "{message}");
            if !secret.trim().is_empty() {
                assert!(!message.contains(secret), "{message}");
            }
        }
        assert!(LinkSigner::new(&"x".repeat(32), None).is_ok());
    }

    #[test]
    fn the_minimum_length_counts_characters_as_documented() {
        // 31 characters of three bytes each: 93 bytes, still too short.
        let err = LinkSigner::new(&"€".repeat(31), None).unwrap_err();
        assert_eq!(err, LinkConfigError::ShortSecret);
        assert!(err.to_string().contains("32 characters"), "{err}");
        assert!(LinkSigner::new(&"€".repeat(32), None).is_ok());
    }

    #[test]
    fn a_link_is_shown_only_to_who_may_decide_and_bound_to_them() {
        let approvers = vec!["alice".to_string(), LINK_CALLER.to_string()];
        let list = Some(approvers.as_slice());
        let deciders = Deciders::approvers(list);
        let s = signer();
        let record = crate::domain::pending_approval::sample_record(KEY, "r");
        assert!(!s.unbound(), "unbound links are off by default");
        assert_eq!(s.link_for_viewer(&record, "bob", deciders), None);
        assert_eq!(
            s.link_for_viewer(&record, "alice", deciders),
            Some(s.url(KEY, Some("alice")))
        );
        // No list: anyone may decide, still as themselves.
        assert_eq!(
            s.link_for_viewer(&record, "bob", Deciders::approvers(None)),
            Some(s.url(KEY, Some("bob")))
        );
        // Nobody in particular: no link unless unbound links are on.
        assert_eq!(s.unattended_link(KEY, list), None);
        assert_eq!(s.unattended_link(KEY, None), None);

        let open = signer().with_unbound(true);
        assert_eq!(open.unattended_link(KEY, list), Some(open.url(KEY, None)));
        assert_eq!(
            open.link_for_viewer(&record, "alice", Deciders::approvers(list)),
            Some(open.url(KEY, None))
        );
        // Still none for someone who may not decide.
        assert_eq!(
            open.link_for_viewer(&record, "bob", Deciders::approvers(list)),
            None
        );
        // A list without `link`: an unbound link would be refused, so the
        // viewer gets a bound one and a channel gets none.
        let only_alice = vec!["alice".to_string()];
        let list = Some(only_alice.as_slice());
        assert_eq!(open.unattended_link(KEY, list), None);
        assert_eq!(
            open.link_for_viewer(&record, "alice", Deciders::approvers(list)),
            Some(open.url(KEY, Some("alice")))
        );
        // A gate with rules: its groups decide, and `link` is no member.
        let groups = [("finance".to_string(), vec!["bob".to_string()])]
            .into_iter()
            .collect();
        let policy = crate::domain::policy::GatePolicy {
            rules: vec![crate::domain::policy::RuleSpec {
                group: "finance".into(),
                min: 1,
            }],
            ..crate::domain::policy::GatePolicy::plain()
        };
        let team = crate::domain::pending_approval::ApprovalRecord {
            roster: Some(crate::domain::policy::Roster::resolve(&policy, &groups, vec![]).unwrap()),
            ..record
        };
        assert_eq!(
            open.link_for_viewer(&team, "alice", Deciders::approvers(list)),
            None
        );
        assert_eq!(
            open.link_for_viewer(&team, "bob", Deciders::approvers(list)),
            Some(open.url(KEY, Some("bob")))
        );
        // Whoever started the run is shown no link to decide it.
        let mine = crate::domain::pending_approval::ApprovalRecord {
            trigger: serde_json::json!({"kind": "api", "started_by": "alice"}),
            ..team
        };
        let mine = crate::domain::pending_approval::ApprovalRecord {
            roster: None,
            ..mine
        };
        assert_eq!(
            open.link_for_viewer(&mine, "alice", Deciders::approvers(list)),
            None
        );
    }

    #[test]
    fn the_unbound_switch_reads_on_and_off_words_only() {
        for on in ["1", "true", "YES", " on "] {
            assert_eq!(parse_switch(on), Some(true), "{on}");
        }
        for off in ["", "0", "false", "No", "off"] {
            assert_eq!(parse_switch(off), Some(false), "{off}");
        }
        assert_eq!(parse_switch("maybe"), None);
    }

    #[test]
    fn public_urls_must_be_absolute_http_without_query_or_fragment() {
        for bad in [
            "",
            "approvals.example.com",
            "/approvals",
            "ftp://approvals.example.com",
            "https://approvals.example.com/?x=1",
            "https://approvals.example.com/#top",
            "https://user:pw@approvals.example.com",
            "mailto:ops@example.com",
        ] {
            let err = LinkSigner::new(SECRET, Some(bad)).unwrap_err();
            assert!(
                matches!(err, LinkConfigError::PublicUrl { .. }),
                "{bad}: {err}"
            );
            let message = err.to_string();
            assert!(message.contains(PUBLIC_URL_ENV), "{message}");
            if !bad.is_empty() {
                assert!(!message.contains(bad), "{message}");
            }
        }
        for (good, kept) in [
            (
                "https://approvals.example.com",
                "https://approvals.example.com",
            ),
            (
                "https://approvals.example.com/",
                "https://approvals.example.com",
            ),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            (
                "https://example.com/tollgate/",
                "https://example.com/tollgate",
            ),
        ] {
            let s = LinkSigner::new(SECRET, Some(good)).unwrap();
            assert_eq!(s.public_url(), Some(kept));
        }
    }

    #[test]
    fn base64url_matches_rfc_4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64url(input.as_bytes()), expected);
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
