//! The builder an exported server's `src/main.rs` starts from: its spec,
//! its `rust:` tools as values (built by each tool's `tool` function, which
//! the generated `tools::register` hands to [`App::build_tool`]), routes and
//! tower layers of its own, and then
//! either the whole command line ([`App::run`]) or the API's router to
//! mount in an axum app of its own ([`App::mount`]).
//!
//! ```no_run
//! use tollgate_runtime::App;
//! use tollgate_runtime::axum::{Router, routing::get};
//! # use tollgate_runtime::serde_json::{Value, json};
//! # use tollgate_runtime::tools::{CallContext, CustomTool, ToolError};
//! # struct ScoreRisk { threshold: f64 }
//! # #[tollgate_runtime::async_trait]
//! # impl CustomTool for ScoreRisk {
//! #     async fn call(&self, args: Value, _: &CallContext) -> Result<Value, ToolError> {
//! #         Ok(json!({ "risky": args["amount"].as_f64() > Some(self.threshold) }))
//! #     }
//! # }
//! # mod generated {
//! #     pub fn embedded() -> tollgate_runtime::cli::Embedded {
//! #         tollgate_runtime::cli::Embedded { agent: "a", spec_hash: "", spec_yaml: "", spec_file: "agent.yaml" }
//! #     }
//! # }
//!
//! fn main() -> std::process::ExitCode {
//!     App::new(generated::embedded())
//!         // A value: it holds its configuration (and clients, pools).
//!         .tool("score_risk", ScoreRisk { threshold: 100.0 })
//!         // Served on the same listener as the API.
//!         .routes(Router::new().route("/version", get(|| async { "1.0.0" })))
//!         // Any tower layer; wraps the API's routes and yours.
//!         .layer(tollgate_runtime::axum::middleware::map_response(
//!             |mut response: tollgate_runtime::axum::response::Response| async move {
//!                 response.headers_mut().insert("x-served-by", "risk-review".parse().unwrap());
//!                 response
//!             },
//!         ))
//!         .run()
//! }
//! ```

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::ffi::OsString;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::response::IntoResponse;
use axum::routing::Route;
use thiserror::Error;
use tower_layer::Layer;
use tower_service::Service;

use crate::cli::SpecSource;
use crate::engine::tools::{
    CustomTool, CustomTools, CustomToolsError, ToolEnv, ToolError, Toolbox,
};
use crate::server::{self, Mounted, RouterHook, ServerConfig, ServerError};
use crate::store::SharedStore;
use crate::support::embedded::Embedded;
use crate::{AgentRun, Spec};

/// A layer added with [`App::layer`], kept until the router exists.
type AddLayer = Box<dyn FnOnce(Router) -> Router + Send>;

/// A tool's constructor given to [`App::build_tool`], kept until a command
/// that runs the spec starts.
type BuildTool = Box<dyn FnOnce(&ToolEnv) -> Result<Arc<dyn CustomTool>, ToolError> + Send>;

/// How a tool was registered, for the message when one is registered twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Registered {
    /// [`App::tool`] or [`App::shared_tool`]: a line in main.rs.
    Value,
    /// [`App::build_tool`]: the generated registry.
    Built,
}

/// An exported server, being put together. See the [module](self) docs.
pub struct App {
    embedded: Embedded,
    tools: CustomTools,
    builders: Vec<(String, BuildTool)>,
    registered: BTreeMap<String, Registered>,
    /// Every tool registered more than once, explained: refused at start.
    twice: Vec<String>,
    routes: Vec<Router>,
    layers: Vec<AddLayer>,
}

/// Why [`App::mount`] could not start the API.
#[derive(Debug, Error)]
pub enum AppError {
    /// The embedded spec does not parse, or not to the hash it was exported with.
    #[error("{0}")]
    Spec(String),
    /// The registered tools are not the spec's `rust:` tools.
    #[error(transparent)]
    Tools(#[from] CustomToolsError),
    /// The HTTP client of the spec's HTTP tools could not be built.
    #[error("cannot set up the HTTP tools: {0}")]
    Toolbox(String),
    /// A tool was registered twice, or its constructor failed.
    #[error("{0}")]
    ToolSetup(String),
    #[error(transparent)]
    Server(#[from] ServerError),
}

impl App {
    /// An app for the spec built into this program (`generated::embedded()`
    /// in an exported crate), with no tools, routes or layers yet.
    pub fn new(embedded: Embedded) -> App {
        App {
            embedded,
            tools: CustomTools::new().in_exported_crate(),
            builders: Vec::new(),
            registered: BTreeMap::new(),
            twice: Vec::new(),
            routes: Vec::new(),
            layers: Vec::new(),
        }
    }

    /// Register the implementation of the spec's `rust:` tool `name`: a
    /// value, so it can hold configuration, clients and pools. Every
    /// `rust:` tool of the spec must be registered, and only those: any
    /// command that runs the spec refuses to start otherwise (exit 2), as
    /// it does a name registered twice (here, or here and by the generated
    /// registry): two values for one tool would leave which one runs to the
    /// order of the lines. In an exported crate the generated
    /// `tools::register` registers every `rust:` tool already ([`App::tools`]).
    pub fn tool(mut self, name: &str, tool: impl CustomTool + 'static) -> App {
        self.note(name, Registered::Value);
        self.tools.register(name, Arc::new(tool));
        self
    }

    /// [`App::tool`] for a tool already shared (one value registered under
    /// two names, or kept by the caller too).
    pub fn shared_tool(mut self, name: &str, tool: Arc<dyn CustomTool>) -> App {
        self.note(name, Registered::Value);
        self.tools.register(name, tool);
        self
    }

    /// Register the spec's `rust:` tool `name` as what `build` returns: the
    /// `tool` function of its file, `src/tools/NAME.rs`, called by the
    /// generated `tools::register`. It is called once, with the tool's
    /// [`ToolEnv`], when a command that runs the spec starts (inside the
    /// async runtime, after the command line is parsed, so `--help` and
    /// `hash` need no configuration); the value serves every call. An error
    /// stops the command with its message (exit 2).
    pub fn build_tool<T, F>(mut self, name: &str, build: F) -> App
    where
        T: CustomTool + 'static,
        F: FnOnce(&ToolEnv) -> Result<T, ToolError> + Send + 'static,
    {
        self.note(name, Registered::Built);
        let build: BuildTool =
            Box::new(move |env| build(env).map(|tool| Arc::new(tool) as Arc<dyn CustomTool>));
        self.builders.push((name.to_string(), build));
        self
    }

    /// Hand the app to `register`: `.tools(tools::register)` in an exported
    /// crate's main.rs, where the generated `src/tools/mod.rs` registers
    /// every `rust:` tool of agent.yaml with [`App::build_tool`].
    pub fn tools(self, register: impl FnOnce(App) -> App) -> App {
        register(self)
    }

    /// Remember how `name` was registered; a second registration is kept,
    /// explained, to refuse at start.
    fn note(&mut self, name: &str, how: Registered) {
        let Some(&first) = self.registered.get(name) else {
            self.registered.insert(name.to_string(), how);
            return;
        };
        self.twice.push(match (first, how) {
            (Registered::Value, Registered::Value) => format!(
                "tool {name:?} is registered twice with `.tool({name:?}, ...)`: keep one"
            ),
            (Registered::Built, Registered::Built) => format!(
                "tool {name:?} is registered twice by the generated registry: call `.tools(tools::register)` once in src/main.rs"
            ),
            _ => format!(
                "tool {name:?} is registered twice: by the generated registry (`.tools(tools::register)` registers every `rust:` tool of agent.yaml, built by `tool` in src/tools/{}) and by `.tool({name:?}, ...)` in src/main.rs: remove the `.tool({name:?}, ...)` line",
                crate::engine::tools::custom::tool_file(name)
            ),
        });
    }

    /// Serve `routes` on the API's listener. Give them your own state first
    /// (`Router::with_state`), so they arrive as a `Router<()>`. They may
    /// not repeat a route of the API (`/runs`, `/approvals`, `/healthz`,
    /// `/slack/actions`, ...) nor have a fallback: the API's is the spec's
    /// webhook. A clash is refused at start-up as a configuration error
    /// (axum's own message names the route; its panic hook prints it too).
    /// A route on the spec's webhook path takes the webhook's place.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate_runtime::axum::{Router, extract::State, routing::get};
    ///
    /// struct Build { commit: &'static str }
    ///
    /// async fn version(State(build): State<Arc<Build>>) -> String {
    ///     build.commit.to_string()
    /// }
    ///
    /// let routes = Router::new()
    ///     .route("/version", get(version))
    ///     .with_state(Arc::new(Build { commit: "4f2a9c1" }));
    /// # let embedded = tollgate_runtime::cli::Embedded { agent: "a", spec_hash: "", spec_yaml: "", spec_file: "agent.yaml" };
    /// let app = tollgate_runtime::App::new(embedded).routes(routes);
    /// ```
    pub fn routes(mut self, routes: Router) -> App {
        self.routes.push(routes);
        self
    }

    /// Wrap every route (the API's and yours, and the webhook) in a tower
    /// layer: CORS, request ids, tracing, compression. Layers added later
    /// wrap the earlier ones. The connection limits (header, body and idle
    /// timeouts, the connection cap) stay outside every layer.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use tollgate_runtime::axum::{middleware, response::Response};
    ///
    /// static SERVED: AtomicU64 = AtomicU64::new(0);
    ///
    /// async fn add_response_number(mut response: Response) -> Response {
    ///     let n = SERVED.fetch_add(1, Ordering::Relaxed) + 1;
    ///     response.headers_mut().insert("x-response-number", n.into());
    ///     response
    /// }
    /// # let embedded = tollgate_runtime::cli::Embedded { agent: "a", spec_hash: "", spec_yaml: "", spec_file: "agent.yaml" };
    /// let app = tollgate_runtime::App::new(embedded)
    ///     .layer(middleware::map_response(add_response_number));
    /// ```
    pub fn layer<L>(mut self, layer: L) -> App
    where
        L: Layer<Route> + Clone + Send + Sync + 'static,
        L::Service: Service<Request> + Clone + Send + Sync + 'static,
        <L::Service as Service<Request>>::Response: IntoResponse + 'static,
        <L::Service as Service<Request>>::Error: Into<Infallible> + 'static,
        <L::Service as Service<Request>>::Future: Send + 'static,
    {
        self.layers
            .push(Box::new(move |router: Router| router.layer(layer)));
        self
    }

    /// Run the command line (`serve`, `approvals`, `runs`, `validate`,
    /// `hash`) with this process's arguments; `serve` serves the API with
    /// your routes and layers. The exit status follows DESIGN §6.
    pub fn run(self) -> ExitCode {
        self.run_with_args(std::env::args_os())
    }

    /// [`App::run`] with the given arguments (the first is the program name).
    pub fn run_with_args<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let App {
            embedded,
            tools,
            builders,
            twice,
            routes,
            layers,
            ..
        } = self;
        let extend = router_hook(routes, layers);
        let agent = embedded.agent;
        let setup = Box::new(move || setup_tools(agent, tools, builders, twice));
        crate::cli::run_exported(embedded, setup, extend, args)
    }

    /// Start the API without a listener, for an axum app of your own: the
    /// embedded spec on `store`, with your tools, and the returned router
    /// carries your routes and layers. Its background work (the expiry
    /// sweeper, the recovery of orphaned runs, schedules, Slack) runs
    /// until [`server::BackgroundTasks::shutdown`], which also waits up to
    /// `config.shutdown_grace` for running steps: call it when your server
    /// stops. `config.listen` and `config.limits` are not used: the listener
    /// and the connection layer are yours. Signed approval links are on when
    /// `config.links` is set, e.g. from `links::LinkSigner::from_env()` (the
    /// `serve` command reads it so; `ServerConfig::default()` has them off).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use tollgate_runtime::axum::{Router, routing::get};
    /// use tollgate_runtime::server::ServerConfig;
    /// use tollgate_runtime::store::{self, SqliteOptions};
    /// # let yaml = "version: 1\nagent: hello\nsteps:\n  - id: greet\n    set:\n      greeting: hi\n";
    /// # let hash = tollgate_runtime::Spec::parse(yaml, "agent.yaml")?.hash.to_string();
    /// # let embedded = tollgate_runtime::cli::Embedded {
    /// #     agent: "hello", spec_hash: Box::leak(hash.into_boxed_str()), spec_yaml: yaml, spec_file: "agent.yaml",
    /// # };
    ///
    /// let store = store::open("memory:", SqliteOptions::default())?;
    /// let mounted = tollgate_runtime::App::new(embedded)
    ///     .mount(store, ServerConfig::default())
    ///     .await?;
    /// // Under /agent in an app of yours (`nest` keeps the API's fallback,
    /// // the spec's webhook, inside the nest).
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "my app" }))
    ///     .nest("/agent", mounted.router);
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let serving = tokio::spawn(async move {
    ///     tollgate_runtime::axum::serve(listener, app).await
    /// });
    /// // ... and when your server stops:
    /// serving.abort();
    /// mounted.tasks.shutdown().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn mount(
        self,
        store: SharedStore,
        config: ServerConfig,
    ) -> Result<Mounted, AppError> {
        let App {
            embedded,
            tools,
            builders,
            twice,
            routes,
            layers,
            ..
        } = self;
        let tools =
            setup_tools(embedded.agent, tools, builders, twice).map_err(AppError::ToolSetup)?;
        let spec = SpecSource::Embedded(embedded)
            .load()
            .map_err(|failure| AppError::Spec(failure.message))?;
        let agent = agent(spec, store, tools)?;
        let mounted = server::mount(agent, config).await?;
        let Mounted { router, tasks } = mounted;
        let router = match router_hook(routes, layers) {
            Some(extend) => match extend(router) {
                Ok(router) => router,
                Err(e) => {
                    let _ = tasks.shutdown().await;
                    return Err(e.into());
                }
            },
            None => router,
        };
        Ok(Mounted { router, tasks })
    }
}

/// The tools registered by value plus those `builders` build, or why not:
/// every tool registered twice (before anything is built, so no
/// constructor connects anywhere for a server that will not start), or
/// every constructor that failed, its message redacted like a call's.
pub(crate) fn setup_tools(
    agent: &str,
    mut tools: CustomTools,
    builders: Vec<(String, BuildTool)>,
    twice: Vec<String>,
) -> Result<CustomTools, String> {
    if !twice.is_empty() {
        return Err(twice.join("; "));
    }
    let redactor = crate::support::secrets::known();
    let mut failures = Vec::new();
    for (name, build) in builders {
        match build(&ToolEnv::new(&name, agent)) {
            Ok(tool) => {
                tools.register(&name, tool);
            }
            Err(e) => failures.push(format!(
                "tool {name:?} could not be built by `tool` in src/tools/{}: {}",
                crate::engine::tools::custom::tool_file(&name),
                redactor.text(&e.message)
            )),
        }
    }
    if failures.is_empty() {
        Ok(tools)
    } else {
        Err(failures.join("; "))
    }
}

/// The agent with `tools`, refusing tools that are not the spec's.
fn agent(spec: Arc<Spec>, store: SharedStore, tools: CustomTools) -> Result<AgentRun, AppError> {
    spec.check_features()
        .map_err(|e| AppError::Spec(e.to_string()))?;
    let toolbox = Toolbox::new()
        .map_err(|e| AppError::Toolbox(e.message))?
        .with_custom_tools(tools);
    toolbox.check(&spec)?;
    let lease = crate::domain::durable::lease_from_env().map_err(AppError::Spec)?;
    Ok(AgentRun::new(spec, store)
        .with_tools(Arc::new(toolbox))
        .with_lease(lease))
}

/// What the server does to the API's router: merge `routes`, then wrap
/// the whole in `layers`, first added innermost. `None` when there is
/// nothing to do.
fn router_hook(routes: Vec<Router>, layers: Vec<AddLayer>) -> Option<RouterHook> {
    if routes.is_empty() && layers.is_empty() {
        return None;
    }
    Some(Box::new(move |api: Router| {
        let mut router = api;
        for extra in routes {
            router = merge(router, extra)?;
        }
        for add in layers {
            router = add(router);
        }
        Ok(router)
    }))
}

/// `api.merge(extra)`, with axum's panic on a clash (a route both have,
/// two fallbacks) turned into a configuration error naming it.
fn merge(api: Router, extra: Router) -> Result<Router, ServerError> {
    std::panic::catch_unwind(AssertUnwindSafe(|| api.merge(extra))).map_err(|panic| {
        let detail = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("axum refused to merge them");
        ServerError::Config(format!(
            "the routes given to App::routes clash with the API's own routes: {detail}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{self, SqliteOptions};
    use axum::routing::get;

    const SPEC: &str = "version: 1\nagent: hello\ntools:\n  shout:\n    rust: {}\nsteps:\n  - id: loud\n    tool: shout\n    with:\n      text: \"{{ input.text }}\"\n";

    fn embedded() -> Embedded {
        let hash = Spec::parse(SPEC, "agent.yaml").unwrap().hash.to_string();
        Embedded {
            agent: "hello",
            spec_hash: Box::leak(hash.into_boxed_str()),
            spec_yaml: SPEC,
            spec_file: "agent.yaml",
        }
    }

    /// A tool holding state: its suffix, and how many calls it served.
    struct Shout {
        suffix: String,
        calls: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl CustomTool for Shout {
        async fn call(
            &self,
            args: serde_json::Value,
            _call: &crate::engine::tools::CallContext,
        ) -> Result<serde_json::Value, crate::engine::tools::ToolError> {
            let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let text = args["text"].as_str().unwrap_or_default().to_uppercase();
            Ok(serde_json::json!({ "text": format!("{text}{}", self.suffix), "call": n }))
        }
    }

    fn shout() -> Shout {
        Shout {
            suffix: "!".into(),
            calls: 0.into(),
        }
    }

    #[cfg(feature = "http-client")]
    async fn add_header(mut response: axum::response::Response) -> axum::response::Response {
        response
            .headers_mut()
            .insert("x-layer", axum::http::HeaderValue::from_static("on"));
        response
    }

    fn memory() -> SharedStore {
        store::open("memory:", SqliteOptions::default()).unwrap()
    }

    /// Serve `router` on a loopback port; the address to call.
    #[cfg(feature = "http-client")]
    async fn serve(router: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        format!("http://{address}")
    }

    // Calls the mounted API with the HTTP client.
    #[cfg(feature = "http-client")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_mounted_api_serves_its_routes_yours_and_your_layer_and_runs_your_tool() {
        let mounted = App::new(embedded())
            .tool("shout", shout())
            .routes(Router::new().route("/version", get(|| async { "1.2.3" })))
            .layer(axum::middleware::map_response(add_header))
            .mount(memory(), ServerConfig::default())
            .await
            .unwrap();
        let base = serve(mounted.router).await;
        let http = reqwest::Client::new();

        let version = http.get(format!("{base}/version")).send().await.unwrap();
        assert_eq!(version.headers()["x-layer"], "on");
        assert_eq!(version.text().await.unwrap(), "1.2.3");

        let health = http.get(format!("{base}/healthz")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        assert_eq!(
            health.headers()["x-layer"],
            "on",
            "the layer wraps the API too"
        );

        let started = http
            .post(format!("{base}/runs"))
            .header("content-type", "application/json")
            .body(r#"{"input": {"text": "hi"}}"#)
            .send()
            .await
            .unwrap();
        let started: serde_json::Value =
            serde_json::from_str(&started.text().await.unwrap()).unwrap();
        let run_id = started["run_id"].as_str().unwrap().to_string();
        let run = loop {
            let run = http
                .get(format!("{base}/runs/{run_id}"))
                .send()
                .await
                .unwrap();
            let run: serde_json::Value = serde_json::from_str(&run.text().await.unwrap()).unwrap();
            if run["status"] != "running" {
                break run;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(run["outputs"]["loud"]["text"], "HI!", "{run}");
        assert_eq!(run["outputs"]["loud"]["call"], 1, "{run}");
        mounted.tasks.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn routes_that_clash_with_the_api_are_a_configuration_error() {
        let err = App::new(embedded())
            .tool("shout", shout())
            .routes(Router::new().route("/healthz", get(|| async { "mine" })))
            .mount(memory(), ServerConfig::default())
            .await
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(
            text.starts_with("the routes given to App::routes clash with the API's own routes: "),
            "{text}"
        );
        assert!(text.contains("/healthz"), "{text}");
    }

    #[test]
    fn serve_refuses_clashing_routes_with_exit_2() {
        let dir = std::env::temp_dir().join(format!("tollgate-app-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let state = dir.join("state.db");
        let code = App::new(embedded())
            .tool("shout", shout())
            .routes(Router::new().route("/runs", get(|| async { "mine" })))
            .run_with_args([
                "hello".as_ref(),
                "serve".as_ref(),
                "--listen".as_ref(),
                "127.0.0.1:0".as_ref(),
                "--state".as_ref(),
                state.as_os_str(),
            ]);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::from(2)));
    }

    #[test]
    fn validate_checks_the_registered_tools_too() {
        let ok = App::new(embedded())
            .tool("shout", shout())
            .run_with_args(["hello", "validate"]);
        assert_eq!(format!("{ok:?}"), format!("{:?}", ExitCode::SUCCESS));
        let missing = App::new(embedded()).run_with_args(["hello", "validate"]);
        assert_eq!(format!("{missing:?}"), format!("{:?}", ExitCode::from(2)));
    }

    /// What the generated registry of an export does: `tool` builds the
    /// value from its `ToolEnv`.
    fn register(app: App) -> App {
        app.build_tool("shout", |env: &ToolEnv| {
            assert_eq!((env.name(), env.agent()), ("shout", "hello"));
            Ok(shout())
        })
    }

    #[tokio::test]
    async fn a_built_tool_is_registered_and_runs() {
        let mounted = App::new(embedded())
            .tools(register)
            .mount(memory(), ServerConfig::default())
            .await
            .unwrap();
        mounted.tasks.shutdown().await.unwrap();
    }

    // `run_with_args` starts its own runtime: plain tests.
    #[test]
    fn commands_build_the_tools_they_run_and_only_those() {
        let ok = App::new(embedded())
            .tools(register)
            .run_with_args(["hello", "validate"]);
        assert_eq!(format!("{ok:?}"), format!("{:?}", ExitCode::SUCCESS));
        let twice = App::new(embedded())
            .tools(register)
            .tools(register)
            .run_with_args(["hello", "validate"]);
        assert_eq!(format!("{twice:?}"), format!("{:?}", ExitCode::from(2)));
        // `hash` needs no tool: its constructor is not called.
        let code = App::new(embedded())
            .build_tool("shout", |_: &ToolEnv| -> Result<Shout, ToolError> {
                panic!("built for `hash`")
            })
            .run_with_args(["hello", "hash"]);
        assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::SUCCESS));
    }

    #[tokio::test]
    async fn a_tool_registered_twice_is_refused_naming_both_ways() {
        let err = App::new(embedded())
            .tools(register)
            .tool("shout", shout())
            .mount(memory(), ServerConfig::default())
            .await
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "tool \"shout\" is registered twice: by the generated registry (`.tools(tools::register)` registers every `rust:` tool of agent.yaml, built by `tool` in src/tools/shout.rs) and by `.tool(\"shout\", ...)` in src/main.rs: remove the `.tool(\"shout\", ...)` line"
        );
        let by_value = App::new(embedded())
            .tool("shout", shout())
            .tool("shout", shout())
            .mount(memory(), ServerConfig::default())
            .await
            .err()
            .unwrap();
        assert!(
            by_value
                .to_string()
                .contains("registered twice with `.tool(\"shout\", ...)`"),
            "{by_value}"
        );
    }

    #[tokio::test]
    async fn a_failing_constructor_stops_the_start_with_its_message_redacted() {
        let secret = "app-build-tool-secret-81c2";
        crate::support::secrets::remember(secret);
        let err = App::new(embedded())
            .build_tool("shout", move |env: &ToolEnv| -> Result<Shout, ToolError> {
                env.var("SHOUT_SUFFIX")?;
                Err(ToolError::new(format!("bad key {secret}")))
            })
            .mount(memory(), ServerConfig::default())
            .await
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(
            text.starts_with("tool \"shout\" could not be built by `tool` in src/tools/shout.rs: tool \"shout\" needs the environment variable SHOUT_SUFFIX"),
            "{text}"
        );
        let err = App::new(embedded())
            .build_tool("shout", move |_: &ToolEnv| -> Result<Shout, ToolError> {
                Err(ToolError::new(format!("bad key {secret}")))
            })
            .mount(memory(), ServerConfig::default())
            .await
            .err()
            .unwrap();
        assert!(!err.to_string().contains(secret), "{err}");
    }

    #[tokio::test]
    async fn tools_must_be_the_specs_rust_tools() {
        let missing = App::new(embedded())
            .mount(memory(), ServerConfig::default())
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&missing, AppError::Tools(CustomToolsError::MissingInExport(names)) if names == &["shout"]),
            "{missing}"
        );
        let unknown = App::new(embedded())
            .tool("shout", shout())
            .tool("whisper", shout())
            .mount(memory(), ServerConfig::default())
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&unknown, AppError::Tools(CustomToolsError::NotInSpec { unknown, .. }) if unknown == &["whisper"]),
            "{unknown}"
        );
    }
}
