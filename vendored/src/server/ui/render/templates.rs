//! The page templates: minijinja with HTML auto-escaping, embedded with
//! `include_str!` and loaded once.
//!
//! Pages extend `base.html` (the layout: head, navigation, sign-out,
//! `<main>`) and fill its `content` block; `inbox_rows.html` and
//! `timeline.html` are the parts pages share (`{% include %}`), and
//! `macros.html` the markup they repeat. Each page's context is one typed
//! struct ([`Page`]), and an undefined name fails rendering (strict
//! undefined behaviour): a typo in a template is an error page and a
//! failing test (`pages/tests.rs` renders every page), never a blank.
//!
//! Everything a page shows from a record (messages, payloads, step ids,
//! reasons, names) is untrusted and goes through `{{ }}`, escaped; no
//! template uses `|safe`, and no HTML is put together outside a template.

use std::sync::OnceLock;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use minijinja::{Environment, UndefinedBehavior, Value};
use serde::Serialize;

use super::super::assets;

const TEMPLATES: [(&str, &str); 12] = [
    ("base.html", include_str!("../templates/base.html")),
    ("macros.html", include_str!("../templates/macros.html")),
    ("login.html", include_str!("../templates/login.html")),
    ("inbox.html", include_str!("../templates/inbox.html")),
    (
        "inbox_rows.html",
        include_str!("../templates/inbox_rows.html"),
    ),
    ("approval.html", include_str!("../templates/approval.html")),
    ("history.html", include_str!("../templates/history.html")),
    ("runs.html", include_str!("../templates/runs.html")),
    ("run.html", include_str!("../templates/run.html")),
    (
        "notifications.html",
        include_str!("../templates/notifications.html"),
    ),
    ("refusal.html", include_str!("../templates/refusal.html")),
    ("timeline.html", include_str!("../templates/timeline.html")),
];

/// A page's context: what its template shows besides the layout's
/// [`Chrome`].
pub(crate) trait Page: Serialize {
    /// The template that renders it (it extends `base.html`).
    const TEMPLATE: &'static str;
}

/// The loaded templates.
pub(crate) struct Templates {
    env: Environment<'static>,
}

/// The templates, loaded at the first call.
pub(crate) fn templates() -> &'static Templates {
    static TEMPLATES_CELL: OnceLock<Templates> = OnceLock::new();
    TEMPLATES_CELL.get_or_init(Templates::load)
}

impl Templates {
    fn load() -> Templates {
        let mut env = Environment::new();
        // Every template here is HTML, whatever its name.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .unwrap_or_else(|e| panic!("inbox template {name} does not parse: {e:#}"));
        }
        Templates { env }
    }

    /// `name` rendered with `context`; a failure (a bug, never data) is
    /// logged.
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

/// What `base.html` needs besides the page.
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
    /// Which navigation entry is current: inbox, history, runs,
    /// notifications; `""` for
    /// no navigation.
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

/// A whole page's context: the layout's and the page's own (flattened, so
/// the page's template reads its fields by their names).
#[derive(Serialize)]
struct Whole<'a, P: Page> {
    chrome: &'a Chrome,
    css: &'static str,
    js: &'static str,
    #[serde(flatten)]
    page: &'a P,
}

/// The HTML of a whole page.
pub(crate) fn render_page<P: Page>(page: &P, chrome: &Chrome) -> Result<String, RenderFailed> {
    templates().render(
        P::TEMPLATE,
        Whole {
            chrome,
            css: assets::css_url(),
            js: assets::js_url(),
            page,
        },
    )
}

/// A whole page as the answer, with `status`.
pub(crate) fn page<P: Page>(status: StatusCode, page: &P, chrome: &Chrome) -> Response {
    match render_page(page, chrome) {
        Ok(html) => (status, Html(html)).into_response(),
        Err(failed) => failed.into_response(),
    }
}

/// A part of a page on its own (no layout): the inbox rows the live
/// script swaps in.
pub(crate) fn fragment(template: &str, context: impl Serialize) -> Response {
    match templates().render(template, context) {
        Ok(html) => Html(html).into_response(),
        Err(failed) => failed.into_response(),
    }
}
