//! Who is looking at a page: the signed-in name (a session cookie), or
//! `local` without API tokens; and what their forms' CSRF tokens are bound to.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::csrf::{self, Binding};
use super::session;
use crate::server::http::auth::LOCAL_CALLER;
use crate::server::http::state::AppState;
use crate::server::ui::render::headers;
use crate::server::ui::render::templates::Chrome;
use crate::server::ui::{SharedUi, Ui};

/// The person a page is for.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    pub name: String,
    /// Signed in with a session (false in loopback mode).
    pub signed_in: bool,
    pub binding: Binding,
    /// A pre-session cookie to set with the answer (loopback mode, first visit).
    pub set_cookie: Option<String>,
    pub secure: bool,
}

impl Viewer {
    /// The CSRF token for this viewer's forms.
    pub fn csrf(&self, ui: &Ui) -> String {
        csrf::token(&ui.key, &self.binding)
    }

    /// Whether a form's token is this viewer's.
    pub fn csrf_ok(&self, ui: &Ui, presented: Option<&str>) -> bool {
        // A freshly minted pre-session cookie was never sent with a form.
        self.set_cookie.is_none() && csrf::check(&ui.key, &self.binding, presented)
    }

    /// The frame of a page for this viewer: their name, the sign-out form
    /// and its CSRF token, `nav` marked current.
    pub fn chrome(&self, ui: &Ui, title: impl Into<String>, nav: &'static str) -> Chrome {
        Chrome {
            title: title.into(),
            whoami: Some(self.name.clone()),
            signed_in: self.signed_in,
            csrf: Some(self.csrf(ui)),
            nav,
            ..Chrome::default()
        }
    }

    /// `response` with the pre-session cookie set, when there is one.
    pub fn finish(&self, mut response: Response) -> Response {
        if let Some(value) = &self.set_cookie {
            let cookie = session::set_cookie(csrf::PRE_COOKIE, value, 12 * 3600, self.secure);
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
        }
        response
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let ui = parts
            .extensions
            .get::<SharedUi>()
            .cloned()
            .expect("the inbox's routes carry the Ui extension");
        let secure = session::is_tls(&parts.headers, ui.public_https);
        if state.tokens.is_empty() {
            let (value, set_cookie) = match session::cookie(&parts.headers, csrf::PRE_COOKIE) {
                Some(value) if !value.is_empty() => (value.to_string(), None),
                _ => {
                    let value = csrf::fresh_pre_cookie();
                    (value.clone(), Some(value))
                }
            };
            return Ok(Viewer {
                name: LOCAL_CALLER.to_string(),
                signed_in: false,
                binding: Binding::Pre(value),
                set_cookie,
                secure,
            });
        }
        let now = state.agent.clock().now();
        if let Some(value) = session::cookie(&parts.headers, session::COOKIE) {
            match session::verify(&ui.key, value, &state.tokens, now) {
                Ok(name) => {
                    return Ok(Viewer {
                        name,
                        signed_in: true,
                        binding: Binding::Session(value.to_string()),
                        set_cookie: None,
                        secure,
                    });
                }
                Err(why) => tracing::debug!(?why, "session cookie refused"),
            }
        }
        Err(sign_in_first(parts))
    }
}

/// 303 to the login page, coming back here afterwards.
fn sign_in_first(parts: &Parts) -> Response {
    let here = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("/ui");
    // A POST or a stream comes back to the page, not to itself.
    let next = if parts.method == axum::http::Method::GET && !here.contains("/stream") {
        here
    } else {
        "/ui"
    };
    let encoded = percent_encoding::utf8_percent_encode(next, percent_encoding::NON_ALPHANUMERIC);
    headers::with_headers(Redirect::to(&format!("/ui/login?next={encoded}")).into_response())
}

/// `next` if it is a path of this server's inbox (no open redirect):
/// starts with one `/`, no `//` or `\`, no scheme, no control characters;
/// else `/ui`.
pub(crate) fn safe_next(next: Option<&str>) -> String {
    let Some(next) = next.map(str::trim) else {
        return "/ui".into();
    };
    let ok = (next == "/ui" || next.starts_with("/ui/") || next.starts_with("/ui?"))
        && !next.contains("//")
        && !next.contains('\\')
        && !next.chars().any(|c| c.is_control())
        && !next.starts_with("/ui/login")
        && !next.starts_with("/ui/logout");
    if ok { next.to_string() } else { "/ui".into() }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_stays_on_this_server() {
        assert_eq!(
            safe_next(Some("/ui/approvals/k?x=1")),
            "/ui/approvals/k?x=1"
        );
        assert_eq!(safe_next(Some("/ui")), "/ui");
        for bad in [
            "https://evil.example",
            "//evil.example",
            "/\\evil.example",
            "/ui//evil",
            "/uiX",
            "/runs",
            "javascript:alert(1)",
            "/ui/login",
            "/ui/\nx",
            "",
        ] {
            assert_eq!(safe_next(Some(bad)), "/ui", "{bad}");
        }
        assert_eq!(safe_next(None), "/ui");
    }
}
