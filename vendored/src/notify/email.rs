//! Email notices (`approvals.notify.email`, DESIGN §14): a mail per
//! decider for each notice the outbox holds for them, over SMTP.
//!
//! ```yaml
//! approvals:
//!   notify:
//!     email:
//!       smtp_url: ${SMTP_URL}          # smtp://user:pass@host:587, smtps://..., ?tls=none
//!       from: "Tollgate <tollgate@example.com>"
//!       to: { alice: alice@example.com, bob: "${BOB_MAIL}" }
//!       events: [approval.requested, approval.reminded, approval.escalated]
//! ```
//!
//! Split by job: [`settings`] reads a resolved `smtp_url`; [`compose`]
//! writes the mail from a notice's body; [`resolve`] turns a stored route,
//! as written, into what one send needs; [`send`] talks SMTP (lettre over
//! tokio-rustls) and says what the attempt came to. The outbox worker
//! calls [`EmailSender::deliver`] once per notice: it owns the retries,
//! the backoff and the dead letters, so a send here is one attempt.

pub mod compose;
pub mod resolve;
pub mod send;
pub mod settings;

pub use compose::{ComposeError, NOTICE_HEADER, compose};
pub use lettre::message::Mailbox;
pub use lettre::{Address, Message};
pub use send::{DEFAULT_TIMEOUT, EmailSender, RootCertificateError};
pub use settings::{EmailConfigError, SmtpCredentials, SmtpSettings, TlsMode};
