//! Email notices in a build without the `email` feature (no lettre): the
//! outbox keeps its one mail sender, and every mail notice comes back
//! misconfigured, naming the feature. Start-up refuses a spec with
//! `notify.email` first (`Spec::check_features`), so a notice reaches this
//! only when another build of the server, sharing the store, queued it.

use crate::domain::notices::{EmailRoute, NoticeBody};
use crate::notify::delivery::Attempt;

/// Sends no mail: this build was compiled without the `email` feature.
#[derive(Debug, Default)]
pub struct EmailSender;

impl EmailSender {
    pub fn new() -> EmailSender {
        EmailSender
    }

    pub async fn deliver(
        &self,
        _route: &EmailRoute,
        _recipient_name: &str,
        _body: &NoticeBody,
        _id: &str,
        _link: Option<&str>,
    ) -> Attempt {
        Attempt::Misconfigured {
            error: crate::domain::spec::MissingFeature {
                feature: crate::domain::spec::Feature::Email,
                at: "approvals.notify.email".to_string(),
            }
            .to_string(),
        }
    }
}
