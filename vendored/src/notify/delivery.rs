//! What one attempt to send a notice came to, the same for every channel:
//! the delivery worker turns it into the notice's next state (sent, a
//! retry after a backoff, or dead).

use std::time::Duration;

/// The result of one attempt to send one notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The receiver took it: a webhook's 2xx, the SMTP server's acceptance
    /// of every recipient, Slack's `ok`.
    Sent,
    /// The receiver refuses it for good and asks not to be sent more (a
    /// webhook's 410 Gone): the endpoint is disabled, the notice is dead.
    Gone { reason: String },
    /// It failed for now: retried with backoff until the retry window
    /// closes. `retry_after` is the receiver's own wait when it gave one.
    Failed {
        error: String,
        retry_after: Option<Duration>,
    },
    /// It can never be sent as configured (an unset `${NAME}`, a malformed
    /// secret or address): retried like a failure, since an operator may fix
    /// the environment, but said plainly.
    Misconfigured { error: String },
}
