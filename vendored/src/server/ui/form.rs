//! Form bodies (`application/x-www-form-urlencoded`) of the inbox's POSTs.

use axum::extract::{FromRequest, Request};
use serde::Deserialize;

use crate::server::http::extract::RawBody;

/// Every field any inbox form sends; each handler reads its own.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Fields {
    pub csrf: Option<String>,
    pub token: Option<String>,
    pub next: Option<String>,
    pub decision: Option<String>,
    pub reason: Option<String>,
    pub payload: Option<String>,
    /// The digest of the payload the page showed: a decision on a payload
    /// edited since is refused (`payload_changed`).
    pub payload_digest: Option<String>,
    /// The typed fields of a gate's form (`input.<name>`), as sent, in
    /// order: read by `pages::approval::input_of` against the form.
    #[serde(skip)]
    pub input: Vec<(String, String)>,
}

/// The prefix of a form field's name in the page's forms.
pub(crate) const INPUT_PREFIX: &str = "input.";

impl Fields {
    /// The reason, `None` when left blank.
    pub fn reason(&self) -> Option<String> {
        self.reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_string)
    }
}

/// The parsed form; a body that is not a form reads as no fields (the CSRF
/// check then refuses it).
pub(crate) struct Form(pub Fields);

impl<S: Send + Sync> FromRequest<S> for Form {
    type Rejection = axum::response::Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let RawBody(bytes) = RawBody::from_request(request, state).await.map_err(|e| {
            super::pages::refusal::page(e.status(), "Request refused", &e.to_string(), None)
        })?;
        let mut fields: Fields = serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
        fields.input = pairs
            .into_iter()
            .filter_map(|(name, value)| Some((name.strip_prefix(INPUT_PREFIX)?.to_string(), value)))
            .collect();
        Ok(Form(fields))
    }
}
