//! GET/POST /ui/login and POST /ui/logout.

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use super::refusal;
use crate::server::http::auth::ApiTokens;
use crate::server::http::state::AppState;
use crate::server::http::throttle::ClientAddr;
use crate::server::ui::auth::csrf::{self, Binding};
use crate::server::ui::auth::session;
use crate::server::ui::auth::viewer::safe_next;
use crate::server::ui::form::Form;
use crate::server::ui::render::templates::{self, Chrome, Page};
use crate::server::ui::{SharedUi, Ui};

#[derive(Debug, Deserialize)]
pub(crate) struct LoginQuery {
    next: Option<String>,
}

/// GET /ui/login, and the form again after a wrong token.
#[derive(Debug, Serialize)]
pub(crate) struct LoginPage<'a> {
    /// The form's CSRF token (bound to the pre-session cookie).
    csrf: String,
    /// Where to go once signed in.
    next: &'a str,
    error: Option<&'a str>,
}

impl Page for LoginPage<'_> {
    const TEMPLATE: &'static str = "login.html";
}

impl<'a> LoginPage<'a> {
    pub fn new(csrf: String, next: &'a str, error: Option<&'a str>) -> LoginPage<'a> {
        LoginPage { csrf, next, error }
    }
}

/// GET /ui/login: the form (with a pre-session cookie for its CSRF token).
/// Without API tokens there is nothing to sign in with: on to the inbox.
pub(crate) async fn form(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    Query(query): Query<LoginQuery>,
    headers: HeaderMap,
) -> Response {
    let next = safe_next(query.next.as_deref());
    if state.tokens.is_empty() {
        return Redirect::to(&next).into_response();
    }
    render(&ui, &headers, &next, None, StatusCode::OK)
}

fn render(
    ui: &Ui,
    headers: &HeaderMap,
    next: &str,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let (pre, fresh) = match session::cookie(headers, csrf::PRE_COOKIE) {
        Some(value) if !value.is_empty() => (value.to_string(), false),
        _ => (csrf::fresh_pre_cookie(), true),
    };
    let token = csrf::token(&ui.key, &Binding::Pre(pre.clone()));
    let chrome = Chrome {
        title: "Sign in".into(),
        ..Chrome::default()
    };
    let mut response = templates::page(status, &LoginPage::new(token, next, error), &chrome);
    if fresh {
        let secure = session::is_tls(headers, ui.public_https);
        let cookie = session::set_cookie(csrf::PRE_COOKIE, &pre, 12 * 3600, secure);
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// POST /ui/login `token, csrf, next`: a session cookie and 303 to `next`.
/// Throttled per client address (server/http/throttle.rs): after 5 wrong
/// tokens in a row, 429 with `Retry-After` for a lockout that doubles with
/// each further wrong token; the right token too is refused meanwhile
/// (else a lockout would still tell a guesser which guess was right).
pub(crate) async fn submit(
    State(state): State<AppState>,
    Extension(ui): Extension<SharedUi>,
    client: ClientAddr,
    headers: HeaderMap,
    Form(fields): Form,
) -> Response {
    let next = safe_next(fields.next.as_deref());
    if state.tokens.is_empty() {
        return Redirect::to(&next).into_response();
    }
    let pre = session::cookie(&headers, csrf::PRE_COOKIE).unwrap_or("");
    if pre.is_empty() || !csrf::check(&ui.key, &Binding::Pre(pre.into()), fields.csrf.as_deref()) {
        return refusal::csrf();
    }
    let client = client.key();
    let now = state.agent.clock().now();
    if let Err(lockout) = ui.sign_in.check(client, now) {
        return refusal::too_many("sign-in attempts", lockout);
    }
    let token = fields.token.as_deref().map(str::trim).unwrap_or("");
    // `identify` compares digests in constant time, as for the API.
    let Some(name) = state.tokens.identify(token).map(str::to_string) else {
        tracing::info!("inbox sign-in refused: the token matches no configured token");
        if let Some(lockout) = ui.sign_in.fail(client, now) {
            tracing::warn!(
                client = %client,
                retry_after_secs = lockout.retry_after_secs(),
                "inbox sign-in locked out for a client: too many wrong tokens"
            );
        }
        return render(
            &ui,
            &headers,
            &next,
            Some("That token is not valid here."),
            StatusCode::UNAUTHORIZED,
        );
    };
    ui.sign_in.succeed(client);
    // The inbox decides: a token that may only ask for approvals may not
    // sign in (a right token, so no lockout count).
    if state.tokens.scope_of(&name) != crate::server::Scope::Full {
        tracing::info!(name = %name, "inbox sign-in refused: a requester token");
        return render(
            &ui,
            &headers,
            &next,
            Some("That token may only ask for approvals; it cannot sign in to the inbox."),
            StatusCode::FORBIDDEN,
        );
    }
    let value = session::issue(&ui.key, &name, &ApiTokens::digest_token(token), now);
    tracing::info!(name = %name, "signed in to the approvals inbox");
    let secure = session::is_tls(&headers, ui.public_https);
    let cookie = session::set_cookie(session::COOKIE, &value, session::MAX_AGE.as_secs(), secure);
    let mut response = Redirect::to(&next).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// POST /ui/logout `csrf`: the session cookie cleared, 303 to the login
/// page. The token must match the session being ended (a page of another
/// site cannot sign anyone out); without a session there is nothing to end.
pub(crate) async fn logout(
    Extension(ui): Extension<SharedUi>,
    headers: HeaderMap,
    Form(fields): Form,
) -> Response {
    let secure = session::is_tls(&headers, ui.public_https);
    if let Some(value) = session::cookie(&headers, session::COOKIE) {
        let binding = Binding::Session(value.to_string());
        if !csrf::check(&ui.key, &binding, fields.csrf.as_deref()) {
            return refusal::csrf();
        }
    }
    let mut response = Redirect::to("/ui/login").into_response();
    let cookie = session::set_cookie(session::COOKIE, "", 0, secure);
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}
