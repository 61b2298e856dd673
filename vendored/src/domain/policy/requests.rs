//! What a gate request (`POST /gates`, MCP `request_approval`) may set of
//! its own policy: the served spec's `approvals.requests` (DESIGN §13).
//! Whoever asks may make the decision harder to reach (fewer deciders,
//! more votes, a reason required), never easier: a request never widens
//! who decides, never approves itself by waiting, and never turns its own
//! separation of duties off. The request's body is checked against these
//! limits where it is read (`service/gates/policy.rs`); anything outside
//! them is refused, naming the field, never ignored.

use super::OnTimeout;

crate::named_enum! {
    /// A field of a gate request that the spec may let requests set.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RequestField {
        /// `policy.rules`: groups (within the approvers) and their minimums.
        Rules = "rules",
        /// `policy.require_reason`.
        RequireReason = "require_reason",
        /// The request's own `ttl`.
        Ttl = "ttl",
        /// `policy.reject` (`when_unreachable` lets rejections be outvoted).
        Reject = "reject",
        /// `policy.voter_counts_once` (`false` lets one person fill two rules).
        VoterCountsOnce = "voter_counts_once",
        /// `policy.escalate`, to groups within the approvers.
        Escalate = "escalate",
    }
}

/// `approvals.requests`: what a gate request may set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLimits {
    /// The fields a request may set (default `rules`, `require_reason`,
    /// `ttl`). `policy.on_timeout` and `policy.remind` have limits of
    /// their own below; `allow_self_approval` is never a request's.
    pub may_set: Vec<RequestField>,
    /// The `policy.on_timeout` values a request may ask for (default
    /// `expire`, `reject`, `continue`; never `approve`, which would let a
    /// requester approve its own request by waiting).
    pub on_timeout: Vec<OnTimeout>,
    /// The most reminders (`policy.remind` entries) a request may ask for.
    pub max_reminders: u32,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            may_set: vec![
                RequestField::Rules,
                RequestField::RequireReason,
                RequestField::Ttl,
            ],
            on_timeout: vec![OnTimeout::Expire, OnTimeout::Reject, OnTimeout::Continue],
            max_reminders: 3,
        }
    }
}

impl RequestLimits {
    /// Whether a request may set `field`.
    pub fn may_set(&self, field: RequestField) -> bool {
        self.may_set.contains(&field)
    }

    /// `rules, require_reason, ttl`: for a refusal's message.
    pub fn may_set_list(&self) -> String {
        if self.may_set.is_empty() {
            return "nothing".into();
        }
        let names: Vec<&str> = self.may_set.iter().map(|f| f.as_str()).collect();
        names.join(", ")
    }

    /// `expire, reject, continue`: for a refusal's message.
    pub fn on_timeout_list(&self) -> String {
        let names: Vec<&str> = self.on_timeout.iter().map(|t| t.as_str()).collect();
        names.join(", ")
    }
}
