//! The page templates: minijinja with HTML auto-escaping (every template
//! name ends in `.html`), embedded with `include_str!` and loaded once.
//!
//! Everything a page shows from a record (messages, payloads, step ids,
//! reasons, names) is untrusted and goes through `{{ }}`, escaped; no
//! template uses `|safe`. The one value marked safe is the body of a page
//! handed to `base.html`: the output of another template of this set, and
//! so already escaped.

use std::sync::OnceLock;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use minijinja::{Environment, Value};
use serde::Serialize;

use super::assets;

const TEMPLATES: [(&str, &str); 10] = [
    ("base.html", include_str!("templates/base.html")),
    ("login.html", include_str!("templates/login.html")),
    ("inbox.html", include_str!("templates/inbox.html")),
    ("inbox_rows.html", include_str!("templates/inbox_rows.html")),
    ("approval.html", include_str!("templates/approval.html")),
    ("history.html", include_str!("templates/history.html")),
    ("runs.html", include_str!("templates/runs.html")),
    ("run.html", include_str!("templates/run.html")),
    ("refusal.html", include_str!("templates/refusal.html")),
    ("timeline.html", include_str!("templates/timeline.html")),
];

/// The loaded templates.
pub(crate) struct Pages {
    env: Environment<'static>,
}

/// The templates, loaded at the first call.
pub(crate) fn pages() -> &'static Pages {
    static PAGES: OnceLock<Pages> = OnceLock::new();
    PAGES.get_or_init(Pages::load)
}

impl Pages {
    fn load() -> Pages {
        let mut env = Environment::new();
        // `.html`: auto-escaping on (minijinja's default callback), and the
        // same for every template here.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .unwrap_or_else(|e| panic!("inbox template {name} does not parse: {e:#}"));
        }
        Pages { env }
    }

    /// `name` rendered with `context`; a failure (a bug, never data) is
    /// logged and shown as a plain error page.
    pub fn render(&self, name: &str, context: impl Serialize) -> Result<String, RenderFailed> {
        let rendered = self
            .env
            .get_template(name)
            .and_then(|t| t.render(Value::from_serialize(&context)));
        rendered.map_err(|e| {
            tracing::error!(template = name, error = %format!("{e:#}"), "cannot render an inbox page");
            RenderFailed
        })
    }
}

/// A template failed to render (a bug, never the data: the error is
/// logged where it happened). Answers as a plain 500 page.
#[derive(Debug)]
pub(crate) struct RenderFailed;

impl IntoResponse for RenderFailed {
    fn into_response(self) -> Response {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            Html("<!doctype html><title>Error</title><main><h1>Internal error</h1><p>The page could not be rendered; the server log says why.</p></main>"),
        )
            .into_response()
    }
}

/// What `base.html` needs besides the body.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Chrome {
    pub title: String,
    /// The signed-in name (`local` in loopback mode); `None` on pages for
    /// people who are not signed in (login, signed links).
    pub whoami: Option<String>,
    /// Show the sign-out form (signed in with a session).
    pub signed_in: bool,
    /// The CSRF token of the sign-out form.
    pub csrf: Option<String>,
    /// Which navigation entry is current: inbox, history, runs.
    pub nav: &'static str,
    /// `id` of `<main>` (`forbidden`, `not-found`, `bad-link` for
    /// refusals); `content` when `None`.
    pub main_id: Option<&'static str>,
    /// `data-reason` of `<main>` (`csrf` for a refused CSRF token).
    pub reason: Option<&'static str>,
    /// What the page's script keeps live: `inbox` or `timeline`.
    pub live: Option<&'static str>,
    /// The event stream the script listens to.
    pub stream: Option<String>,
}

#[derive(Serialize)]
struct BaseContext<'a> {
    chrome: &'a Chrome,
    css: &'a str,
    js: &'a str,
    body: Value,
}

/// A whole page: `template` rendered with `context`, inside `base.html`.
pub(crate) fn page(
    status: StatusCode,
    template: &str,
    context: impl Serialize,
    chrome: &Chrome,
) -> Response {
    let pages = pages();
    let body = match pages.render(template, context) {
        Ok(body) => body,
        Err(failed) => return failed.into_response(),
    };
    let whole = pages.render(
        "base.html",
        BaseContext {
            chrome,
            css: assets::css_url(),
            js: assets::js_url(),
            body: Value::from_safe_string(body),
        },
    );
    match whole {
        Ok(html) => (status, Html(html)).into_response(),
        Err(failed) => failed.into_response(),
    }
}

/// `context` with `name` set to the rendered `partial` (another template
/// of this set, rendered with `partial_context`; escaped already, so it is
/// marked safe).
pub(crate) fn with_partial(
    context: impl Serialize,
    name: &str,
    partial: &str,
    partial_context: impl Serialize,
) -> Result<Value, RenderFailed> {
    let html = pages().render(partial, partial_context)?;
    let mut merged: std::collections::BTreeMap<String, Value> = std::collections::BTreeMap::new();
    let base = Value::from_serialize(&context);
    if let Ok(keys) = base.try_iter() {
        for key in keys {
            if let Ok(value) = base.get_item(&key) {
                merged.insert(key.to_string(), value);
            }
        }
    }
    merged.insert(name.to_string(), Value::from_safe_string(html));
    Ok(Value::from(merged))
}

/// `context` with `timeline_html`: its `timeline` rendered by
/// `timeline.html` (the approval and run pages share it).
pub(crate) fn with_timeline(context: &serde_json::Value) -> Result<Value, RenderFailed> {
    with_partial(
        context,
        "timeline_html",
        "timeline.html",
        serde_json::json!({"timeline": context["timeline"]}),
    )
}

/// A fragment (no `base.html`): the inbox rows the live script swaps in.
pub(crate) fn fragment(template: &str, context: impl Serialize) -> Response {
    match pages().render(template, context) {
        Ok(html) => Html(html).into_response(),
        Err(failed) => failed.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_loads_and_escapes() {
        let html = pages()
            .render(
                "refusal.html",
                serde_json::json!({"id": "forbidden", "heading": "<b>x</b>", "message": "\"><img src=x onerror=alert(1)>"}),
            )
            .unwrap();
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;b&gt;"), "{html}");
    }
}
