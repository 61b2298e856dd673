//! What asked for an approval ([`ApprovalOrigin`]), and the record's wire
//! shape, which spells it out: a pause names its spec hash and step, a gate
//! request who asked and its fingerprint, and a request's `spec_hash` is
//! `null` (it belongs to no spec version).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{ApprovalRecord, ApprovalStatus, Phase};

/// What asked for an approval. Stored as its kind (`tollgate_approvals.
/// origin`); the rest is read from the record's own columns (a pause's
/// spec hash and step, a request's trigger), so nothing is kept twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalOrigin {
    /// A workflow run paused at a gate: the record's `spec_hash` and
    /// `step_id` say under which spec version and at which step.
    Pause,
    /// A gate request (a pending approval asked for by a program through
    /// the gate API, `POST /gates` or MCP rather than by a workflow run):
    /// it belongs to no spec version, so it is never `spec_changed`, never
    /// pinned or migrated, and its decision ends its own run.
    Request {
        /// The caller that asked for it (through a server); `None` for a
        /// program's own request ([`crate::engine::gate::Gate::request`]).
        requested_by: Option<String>,
        /// The digest of what was asked (everything but the idempotency
        /// key), by which a retry with the same idempotency key is told
        /// from a different request; `None` when none was taken.
        fingerprint: Option<String>,
    },
}

impl ApprovalOrigin {
    /// The stored kind: `pause` or `request`.
    pub fn kind(&self) -> &'static str {
        match self {
            ApprovalOrigin::Pause => "pause",
            ApprovalOrigin::Request { .. } => "request",
        }
    }

    /// A gate request's origin as its trigger records it (`requested_by`,
    /// `fingerprint`: see `server::gates`).
    pub fn request_from_trigger(trigger: &Value) -> ApprovalOrigin {
        let text = |name: &str| {
            trigger
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        ApprovalOrigin::Request {
            requested_by: text("requested_by"),
            fingerprint: text("fingerprint"),
        }
    }

    /// The origin of the stored `kind` for a record with `trigger`, or
    /// `None` for a kind this build does not know.
    pub fn from_stored(kind: &str, trigger: &Value) -> Option<ApprovalOrigin> {
        match kind {
            "pause" => Some(ApprovalOrigin::Pause),
            "request" => Some(ApprovalOrigin::request_from_trigger(trigger)),
            _ => None,
        }
    }
}

/// [`ApprovalOrigin`] as clients see it: `{"kind": "pause", "spec_hash",
/// "step_id"}` or `{"kind": "request", "requested_by", "fingerprint"}`.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum OriginWire {
    Pause {
        spec_hash: String,
        step_id: String,
    },
    Request {
        requested_by: Option<String>,
        fingerprint: Option<String>,
    },
}

/// The record's fields in the order clients have always seen them, with
/// `origin` last.
#[derive(Serialize)]
struct RecordRef<'a> {
    key: &'a str,
    run_id: &'a str,
    agent_id: &'a str,
    spec_hash: Option<&'a str>,
    step_index: usize,
    step_id: &'a str,
    phase: Phase,
    message: &'a Option<String>,
    payload: &'a Value,
    outputs: &'a Map<String, Value>,
    input: &'a crate::support::json_doc::JsonDoc,
    trigger: &'a Value,
    status: ApprovalStatus,
    decision_data: &'a Option<Value>,
    decided_by: &'a Option<String>,
    decided_at: &'a Option<chrono::DateTime<chrono::Utc>>,
    created_at: &'a chrono::DateTime<chrono::Utc>,
    expires_at: &'a chrono::DateTime<chrono::Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    roster: &'a Option<crate::domain::policy::Roster>,
    origin: OriginWire,
}

impl Serialize for ApprovalRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let origin = match &self.origin {
            ApprovalOrigin::Pause => OriginWire::Pause {
                spec_hash: self.spec_hash.clone(),
                step_id: self.step_id.clone(),
            },
            ApprovalOrigin::Request {
                requested_by,
                fingerprint,
            } => OriginWire::Request {
                requested_by: requested_by.clone(),
                fingerprint: fingerprint.clone(),
            },
        };
        RecordRef {
            key: &self.key,
            run_id: &self.run_id,
            agent_id: &self.agent_id,
            spec_hash: self.paused_under(),
            step_index: self.step_index,
            step_id: &self.step_id,
            phase: self.phase,
            message: &self.message,
            payload: &self.payload,
            outputs: &self.outputs,
            input: &self.input,
            trigger: &self.trigger,
            status: self.status,
            decision_data: &self.decision_data,
            decided_by: &self.decided_by,
            decided_at: &self.decided_at,
            created_at: &self.created_at,
            expires_at: &self.expires_at,
            roster: &self.roster,
            origin,
        }
        .serialize(serializer)
    }
}

/// What [`RecordRef`] writes, read back.
#[derive(Deserialize)]
struct RecordOwned {
    key: String,
    run_id: String,
    agent_id: String,
    spec_hash: Option<String>,
    step_index: usize,
    step_id: String,
    phase: Phase,
    message: Option<String>,
    payload: Value,
    outputs: Map<String, Value>,
    input: crate::support::json_doc::JsonDoc,
    trigger: Value,
    status: ApprovalStatus,
    decision_data: Option<Value>,
    decided_by: Option<String>,
    decided_at: Option<chrono::DateTime<chrono::Utc>>,
    created_at: chrono::DateTime<chrono::Utc>,
    expires_at: chrono::DateTime<chrono::Utc>,
    #[serde(default)]
    roster: Option<crate::domain::policy::Roster>,
    /// Absent in a record written before origins: a pause when it has a
    /// spec hash, else a request.
    #[serde(default)]
    origin: Option<OriginWire>,
}

impl<'de> Deserialize<'de> for ApprovalRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let r = RecordOwned::deserialize(deserializer)?;
        let origin = match r.origin {
            Some(OriginWire::Request {
                requested_by,
                fingerprint,
            }) => ApprovalOrigin::Request {
                requested_by,
                fingerprint,
            },
            Some(OriginWire::Pause { .. }) => ApprovalOrigin::Pause,
            None if r.spec_hash.is_some() => ApprovalOrigin::Pause,
            None => ApprovalOrigin::request_from_trigger(&r.trigger),
        };
        if matches!(origin, ApprovalOrigin::Pause) && r.spec_hash.is_none() {
            return Err(serde::de::Error::custom(
                "a pause's approval record needs its spec_hash",
            ));
        }
        Ok(ApprovalRecord {
            key: r.key,
            run_id: r.run_id,
            agent_id: r.agent_id,
            spec_hash: r.spec_hash.unwrap_or_default(),
            step_index: r.step_index,
            step_id: r.step_id,
            phase: r.phase,
            message: r.message,
            payload: r.payload,
            outputs: r.outputs,
            input: r.input,
            trigger: r.trigger,
            status: r.status,
            decision_data: r.decision_data,
            decided_by: r.decided_by,
            decided_at: r.decided_at,
            created_at: r.created_at,
            expires_at: r.expires_at,
            roster: r.roster,
            origin,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request() -> ApprovalRecord {
        let mut record = crate::domain::pending_approval::sample_record("k", "r");
        record.spec_hash = String::new();
        record.trigger = json!({"kind": "gate", "requested_by": "bot", "fingerprint": "f1"});
        record.origin = ApprovalOrigin::request_from_trigger(&record.trigger);
        record
    }

    #[test]
    fn a_pause_names_its_spec_hash_and_step() {
        let record = crate::domain::pending_approval::sample_record("k", "r");
        let wire = serde_json::to_value(&record).unwrap();
        assert_eq!(wire["spec_hash"], json!("a".repeat(64)));
        assert_eq!(
            wire["origin"],
            json!({"kind": "pause", "spec_hash": "a".repeat(64), "step_id": "gate"})
        );
        let back: ApprovalRecord = serde_json::from_value(wire).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn a_request_has_no_spec_hash_and_names_who_asked() {
        let record = request();
        assert!(record.is_gate_request());
        assert_eq!(record.paused_under(), None);
        assert!(record.is_current_for(&"b".repeat(64)));
        let wire = serde_json::to_value(&record).unwrap();
        assert_eq!(wire["spec_hash"], Value::Null);
        assert_eq!(
            wire["origin"],
            json!({"kind": "request", "requested_by": "bot", "fingerprint": "f1"})
        );
        let back: ApprovalRecord = serde_json::from_value(wire).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn a_pause_without_a_spec_hash_is_refused() {
        let mut wire =
            serde_json::to_value(crate::domain::pending_approval::sample_record("k", "r")).unwrap();
        wire["spec_hash"] = Value::Null;
        let error = serde_json::from_value::<ApprovalRecord>(wire).unwrap_err();
        assert!(error.to_string().contains("needs its spec_hash"), "{error}");
    }

    #[test]
    fn stored_kinds_are_read_back_and_unknown_ones_refused() {
        let trigger = json!({"kind": "gate", "requested_by": "bot"});
        assert_eq!(
            ApprovalOrigin::from_stored("pause", &trigger),
            Some(ApprovalOrigin::Pause)
        );
        assert_eq!(
            ApprovalOrigin::from_stored("request", &trigger),
            Some(ApprovalOrigin::Request {
                requested_by: Some("bot".into()),
                fingerprint: None
            })
        );
        assert_eq!(ApprovalOrigin::from_stored("other", &trigger), None);
        for origin in [ApprovalOrigin::Pause, request().origin] {
            assert_eq!(
                ApprovalOrigin::from_stored(origin.kind(), &trigger).map(|o| o.kind()),
                Some(origin.kind())
            );
        }
    }
}
