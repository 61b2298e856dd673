//! Notifiers: telling people that a run waits for them, and letting them
//! answer where they already are: Slack (`approvals.notify.slack`),
//! signed outbound webhooks (`approvals.notify.webhooks`, [`webhook`]) and
//! mail (`approvals.notify.email`, [`email`]).
//!
//! A notifier never stands between a run and its pause: the pause is stored
//! first, messages are posted afterwards in the background and retried, and
//! everything a message needs later (where it is) is kept in the store, so
//! any process sharing the store can finish the job after a crash.

pub mod delivery;
#[cfg(feature = "email")]
pub mod email;
#[cfg(not(feature = "email"))]
#[path = "notify/email/left_out.rs"]
pub mod email;
pub mod hold;
pub mod lanes;
pub mod outbox;
pub mod sender;
pub mod slack;
pub mod wake;
pub mod webhook;

pub use slack::SlackNotifier;
