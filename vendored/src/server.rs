//! The HTTP server shared by `tollgate serve` and every exported server
//! (DESIGN §5): the router, auth, the webhook trigger, schedules, the
//! expiry sweeper and graceful shutdown.
//!
//! An exported server adds its own routes and layers through
//! [`crate::App`], which hands them to [`Server::with_router`], or mounts
//! the API in an axum app of its own with [`mount`] (through
//! [`crate::App::mount`]): the router, and the background tasks to stop.
//!
//! `tollgate serve` and an exported server's `serve` command (both
//! `cli/serve.rs`) read the configuration from flags and the environment
//! through clap, then, in essence:
//!
//! ```no_run
//! # async fn example(agent: tollgate_runtime::AgentRun) -> Result<(), tollgate_runtime::server::ServerError> {
//! use tollgate_runtime::server::{self, ApiTokens, ServerConfig};
//! server::init_logging();
//! let config = ServerConfig {
//!     listen: "127.0.0.1:8080".into(),
//!     tokens: ApiTokens::from_env()?,
//!     links: tollgate_runtime::links::LinkSigner::from_env()?,
//!     ..ServerConfig::default()
//! };
//! server::serve(agent, config).await
//! # }
//! ```

// By kind: the HTTP plumbing every adapter shares, the adapters (the
// API's routes, the inbox, MCP), the OpenAPI document, and the work that
// runs beside the requests. The use cases they share are `crate::service`.
mod deciders_check;
mod http;
mod mcp;
pub mod openapi;
mod router;
mod routes;
mod ui;
mod workers;

pub use crate::support::webhook_signature as signature;
pub use workers::schedule;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use crate::service::{ApiError, CODES as ERROR_CODES, Caller, ErrorCode, NOT_READY, Scope};
pub use http::auth::{ApiTokens, TOKENS_ENV, TokenConfigError, is_token_name, reserved_name};
pub use http::conn::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    Limits, MAX_HEAD_BYTES, MAX_HEADERS,
};
pub use http::logging::{JsonLines, LogFormat, UnknownLogFormat, init_logging, init_logging_as};

use crate::domain::links::{LINK_SECRET_ENV, LinkSigner, PUBLIC_URL_ENV};
use crate::engine::run::AgentRun;
use crate::notify::SlackNotifier;
use crate::service::Services;
use crate::service::tasks::{self, Background};
use http::state::AppState;
use http::{auth, conn, origin};
pub(crate) use mcp::serve_stdio as serve_mcp_stdio;
use workers::{supervisor, sweeper};

/// Default `--listen`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default request body limit: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Default time running steps get to finish after a shutdown signal.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `HOST:PORT`; port 0 picks a free port.
    pub listen: String,
    pub tokens: ApiTokens,
    pub max_body_bytes: usize,
    /// After SIGTERM or ctrl-c: how long running steps may take to finish.
    pub shutdown_grace: Duration,
    pub sweep_every: Duration,
    /// Connection timeouts and the connection cap.
    pub limits: Limits,
    /// Signs approval links (`/a/{key}/{signature}`, DESIGN §11); `None`
    /// (the default) turns links off. The CLI reads it with
    /// [`LinkSigner::from_env`].
    pub links: Option<LinkSigner>,
    /// How long a failing notice is retried before it is dead.
    pub notify_retry_window: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: DEFAULT_LISTEN.to_string(),
            tokens: ApiTokens::none(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            sweep_every: sweeper::DEFAULT_SWEEP_EVERY,
            limits: Limits::default(),
            links: None,
            notify_retry_window: crate::notify::outbox::DEFAULT_RETRY_WINDOW,
        }
    }
}

/// Why the server did not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration or the spec cannot be served as given.
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Tokens(#[from] TokenConfigError),
    #[error(transparent)]
    Links(#[from] crate::domain::links::LinkConfigError),
    #[error("cannot listen on {listen}: {}", bind_failure(.source))]
    Bind {
        listen: String,
        source: std::io::Error,
    },
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

/// Why a bind failed, with what to do when another process holds the
/// address (the usual case: a second `serve`, or another program on the
/// default port).
fn bind_failure(source: &std::io::Error) -> String {
    if source.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "address already in use ({source}): another process listens there; stop it, or \
             serve on another address with --listen ADDR (or {}; port 0 picks a free one)",
            crate::support::env::LISTEN
        )
    } else {
        source.to_string()
    }
}

impl ServerError {
    /// True when the operator must change the configuration (CLI exit 2).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            ServerError::Config(_) | ServerError::Tokens(_) | ServerError::Links(_)
        )
    }
}

/// A bound server, ready to run.
pub struct Server {
    agent: AgentRun,
    config: ServerConfig,
    listener: TcpListener,
    schedule: Vec<schedule::Entry>,
    /// What the program adds to the API's router before serving it (its
    /// own routes and layers: [`crate::App`]).
    extend: Option<RouterHook>,
}

/// Changes the API's router before it is served: merges routes, adds layers.
pub type RouterHook = Box<dyn FnOnce(Router) -> Result<Router, ServerError> + Send>;

impl Server {
    /// Check the configuration against the spec and bind the address.
    pub async fn bind(agent: AgentRun, config: ServerConfig) -> Result<Server, ServerError> {
        check_webhook_path(&agent)?;
        let schedule = schedule::entries(agent.spec()).map_err(ServerError::Config)?;
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(&config.listen)
            .await
            .map_err(|e| {
                ServerError::Config(format!(
                    "--listen {:?} is not an address (HOST:PORT): {e}",
                    config.listen
                ))
            })?
            .collect();
        if addrs.is_empty() {
            return Err(ServerError::Config(format!(
                "--listen {:?} resolves to no address",
                config.listen
            )));
        }
        if config.tokens.is_empty() && addrs.iter().any(|a| !a.ip().is_loopback()) {
            return Err(ServerError::Config(format!(
                "refusing to listen on {} without API tokens: set {TOKENS_ENV}=name:token,... \
                 or listen on a loopback address such as 127.0.0.1:8080",
                config.listen
            )));
        }
        if config.max_body_bytes == 0 {
            return Err(ServerError::Config(
                "the body limit must be at least 1 byte".into(),
            ));
        }
        let problems = config.limits.problems();
        if !problems.is_empty() {
            return Err(ServerError::Config(problems.join("; ")));
        }
        let listener = TcpListener::bind(addrs.as_slice())
            .await
            .map_err(|source| ServerError::Bind {
                listen: config.listen.clone(),
                source,
            })?;
        Ok(Server {
            agent,
            config,
            listener,
            schedule,
            extend: None,
        })
    }

    /// Serve the router `extend` makes of the API's router (the API's
    /// routes come first: `extend` merges others and adds layers).
    pub fn with_router(mut self, extend: RouterHook) -> Server {
        self.extend = Some(extend);
        self
    }

    pub fn local_addr(&self) -> Result<SocketAddr, ServerError> {
        Ok(self.listener.local_addr()?)
    }

    /// Serve until SIGTERM or ctrl-c, then shut down gracefully.
    pub async fn run(self) -> Result<(), ServerError> {
        let signal = shutdown_signal()?;
        self.run_until(signal).await
    }

    /// Serve until `stop` resolves: stop accepting, end event streams, give
    /// running steps up to `shutdown_grace` to finish. Paused runs stay in
    /// the store; nothing about them is in memory.
    pub async fn run_until(
        self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let Server {
            agent,
            config,
            listener,
            schedule,
            extend,
        } = self;
        let limits = config.limits;
        // The Host check without tokens compares with the bound address.
        let bound = listener.local_addr().ok();
        let Mounted { router, tasks } =
            mount_with_schedule(agent.clone(), config, schedule, bound).await?;
        let app = match extend {
            Some(extend) => match extend(router) {
                Ok(app) => app,
                // Refused (routes that clash with the API's): stop what
                // the mount started, recovered runs included, first.
                Err(e) => {
                    let _ = tasks.stop(None).await;
                    return Err(e);
                }
            },
            None => router,
        };
        let serving = tokio::spawn(conn::serve(listener, app, limits, tasks.stop_rx.clone()));
        tracing::info!(agent = %agent.spec().agent, spec = %agent.spec().hash.short(), store = %agent.store().describe(), "serving");
        stop.await;
        tasks.stop(Some(serving)).await
    }
}

/// The API's router with its background work started, to serve on a
/// listener of your own (see [`mount`]).
pub struct Mounted {
    /// Every route of the API (runs, approvals, health, Slack, the spec's
    /// webhook as the fallback). It has a fallback, so merge it into your
    /// router with `your_router.merge(router)` only if yours has none, or
    /// nest your routes into it.
    pub router: Router,
    /// The expiry sweeper, the recovery of orphaned runs, the schedules and
    /// the runs in flight: stop them with [`BackgroundTasks::shutdown`]
    /// when your server stops.
    pub tasks: BackgroundTasks,
}

/// The work a mounted API does besides answering requests. Dropping it
/// leaves the tasks running until the runtime ends; call
/// [`BackgroundTasks::shutdown`] for a graceful stop.
pub struct BackgroundTasks {
    stop_tx: watch::Sender<bool>,
    stop_rx: watch::Receiver<bool>,
    background: Background,
    supervisor: supervisor::Supervisor,
    shutdown_grace: Duration,
}

/// How long the background tasks get to end after the stop signal (each
/// ends at its next look at the signal; a send in flight is dropped and
/// its lease runs out, see `notify/outbox.rs`).
const TASKS_STOP_BOUND: Duration = Duration::from_secs(5);

impl BackgroundTasks {
    /// Runs being driven by this process now.
    pub fn running(&self) -> usize {
        self.background.running()
    }

    /// End event streams, stop the sweeper, recovery and schedules, and
    /// give running steps up to the configured `shutdown_grace` to finish
    /// (stop accepting requests first). Paused runs stay in the store.
    pub async fn shutdown(self) -> Result<(), ServerError> {
        self.stop(None).await
    }

    async fn stop(
        self,
        serving: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    ) -> Result<(), ServerError> {
        let BackgroundTasks {
            stop_tx,
            stop_rx: _,
            background,
            supervisor,
            shutdown_grace,
        } = self;
        tracing::info!(
            grace = ?shutdown_grace,
            running = background.running(),
            "shutting down: no new requests; waiting for running steps"
        );
        let _ = stop_tx.send(true);
        let finished = tokio::time::timeout(shutdown_grace, async {
            let served = match serving {
                Some(serving) => serving.await,
                None => Ok(Ok(())),
            };
            background.wait_idle().await;
            served
        })
        .await;
        supervisor.join(TASKS_STOP_BOUND).await;
        match finished {
            Ok(Ok(Ok(()))) => {
                tracing::info!("stopped; paused runs stay in the store");
                Ok(())
            }
            Ok(Ok(Err(e))) => Err(ServerError::Io(e)),
            Ok(Err(join)) => Err(ServerError::Io(std::io::Error::other(join.to_string()))),
            Err(_) => {
                tracing::warn!(
                    running = background.running(),
                    "stopped before every running step finished; their claims show in `tollgate approvals list --stuck`"
                );
                Ok(())
            }
        }
    }
}

/// Start the API without a listener: check the spec against `config`,
/// sweep expired approvals, recover orphaned runs, start the background
/// tasks, and hand back the router to serve (`config.listen` is not used;
/// `config.limits` are the connection layer's, which yours replaces).
/// Without API tokens the router does not know the address it is served
/// on, so its `Host` check takes `localhost`, `127.0.0.1` and `[::1]` on
/// any port (a bound [`Server`] takes its own address and port only).
///
/// ```no_run
/// # async fn example(agent: tollgate_runtime::AgentRun) -> Result<(), Box<dyn std::error::Error>> {
/// use tollgate_runtime::server::{self, ServerConfig};
/// let mounted = server::mount(agent, ServerConfig::default()).await?;
/// let app = axum::Router::new()
///     .route("/hello", axum::routing::get(|| async { "hello" }))
///     .merge(mounted.router);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(listener, app).await?;
/// mounted.tasks.shutdown().await?;
/// # Ok(())
/// # }
/// ```
pub async fn mount(agent: AgentRun, config: ServerConfig) -> Result<Mounted, ServerError> {
    check_webhook_path(&agent)?;
    let schedule = schedule::entries(agent.spec()).map_err(ServerError::Config)?;
    mount_with_schedule(agent, config, schedule, None).await
}

/// How often a store without push is re-read for the gate requests
/// someone waits on (`GET /gates/{key}?wait=`, MCP `wait_for_approval`):
/// a waiter hears of a decision made by another process within this.
/// Only keys being waited on are read, in one query.
const GATE_POLL: Duration = Duration::from_millis(200);

/// The gate API behind `/gates` and `/mcp`: requests stored as `agent`'s
/// approvals, their notices sent where the spec's `approvals.notify`
/// says. On a pushing store it shares `watcher`; otherwise it polls for
/// the keys waited on every [`GATE_POLL`].
fn gate_requests(
    agent: &AgentRun,
    watcher: Option<crate::store::watch::ApprovalWatcher>,
) -> crate::engine::gate::Gate {
    let watcher = watcher.unwrap_or_else(|| {
        crate::store::watch::ApprovalWatcher::start(
            agent.store().clone(),
            crate::store::watch::WatchOptions {
                poll_interval: GATE_POLL,
                ..crate::store::watch::WatchOptions::default()
            },
        )
        .with_clock(agent.clock().clone())
    });
    crate::engine::gate::Gate::with_watcher(agent.store().clone(), watcher)
        .with_notify(agent.spec().approvals_notice_routes())
}

/// A watcher on the store's push feed (PostgreSQL NOTIFY), when it has
/// one. Only a pushing store adds anything: event streams poll anyway.
fn push_watcher(agent: &AgentRun) -> Option<crate::store::watch::ApprovalWatcher> {
    agent.store().change_feed().map(|_| {
        crate::store::watch::ApprovalWatcher::start(
            agent.store().clone(),
            crate::store::watch::WatchOptions::default(),
        )
        .with_clock(agent.clock().clone())
    })
}

/// What handlers share, for a process that answers gate requests without
/// serving HTTP (`tollgate mcp` on stdio): no tokens, no Slack, no links,
/// no sweeper or outbox worker (a serving process on the store delivers
/// the notices this one writes with each request). `shutdown` ends the
/// waits under way.
pub(crate) fn standalone_state(agent: AgentRun, shutdown: watch::Receiver<bool>) -> AppState {
    let watcher = push_watcher(&agent);
    AppState {
        services: Services {
            gates: gate_requests(&agent, watcher.clone()),
            agent,
            background: Background::default(),
            shutdown,
        },
        tokens: Arc::new(ApiTokens::none()),
        slack: None,
        links: None,
        watcher,
        tasks: Arc::default(),
    }
}

/// `bound`: the address the listener serving the router is bound to, when
/// known (see `origin::Policy`).
async fn mount_with_schedule(
    agent: AgentRun,
    config: ServerConfig,
    schedule: Vec<schedule::Entry>,
    bound: Option<SocketAddr>,
) -> Result<Mounted, ServerError> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let background = Background::default();
    let mut supervisor = supervisor::Supervisor::new(stop_rx.clone());
    let slack = start_slack(&agent, config.links.as_ref())?;
    let watcher = push_watcher(&agent);
    let gates = gate_requests(&agent, watcher.clone());
    let state = AppState {
        services: Services {
            agent: agent.clone(),
            background: background.clone(),
            shutdown: stop_rx.clone(),
            gates,
        },
        tokens: Arc::new(config.tokens.clone()),
        slack,
        links: config.links.clone(),
        watcher,
        tasks: supervisor.health(),
    };
    if config.tokens.is_empty() {
        tracing::warn!(
            "no API tokens ({TOKENS_ENV} is not set): serving loopback only, every caller is \"{}\"",
            auth::LOCAL_CALLER
        );
    } else {
        let names: Vec<&str> = config.tokens.names().collect();
        tracing::info!(tokens = %names.join(","), "bearer tokens required");
    }
    log_links(config.links.as_ref());
    warn_of_unreachable_deciders(&agent, &config);
    let swept = sweeper::sweep_once(&agent).await;
    // The version served is stored now, so `specs list` shows it (its
    // `last_seen` is when it was last served) before any run starts. Not
    // fatal: a refused write is logged, and the first run tries again.
    if agent.record_spec().await.is_ok() {
        tracing::debug!(spec_hash = %agent.spec().hash.short(), "spec version stored");
    }
    // Approvals paused under other versions (a deploy changed the spec):
    // said once, with what approving them will do.
    crate::service::stale::log_at_start(&agent).await;
    // Runs whose driver died (this process's predecessor, or another
    // node): claimed now and resumed in the background.
    let mut recovered = tasks::recover(&agent, &background).await.unwrap_or(0);
    while recovered > 0 && recovered % crate::domain::durable::RECOVER_BATCH == 0 {
        match tasks::recover(&agent, &background).await {
            Some(more) if more > 0 => recovered += more,
            _ => break,
        }
    }
    let stuck = agent
        .store()
        .count_runs(
            &agent.spec().agent,
            crate::domain::run_state::RunStatus::Stuck,
        )
        .await;
    tracing::info!(
        recovered,
        stuck = stuck.map_or_else(|e| format!("unknown ({e})"), |n| n.to_string()),
        lease = ?agent.lease(),
        "durable runs: recovered orphaned runs at start-up; stuck runs wait for `runs retry` or `runs fail`"
    );
    let (recovering, running) = (agent.clone(), background.clone());
    supervisor.spawn("recovery".into(), move |stop| {
        tasks::recover_periodically(recovering.clone(), running.clone(), stop)
    });
    let (sweeping, every) = (agent.clone(), config.sweep_every);
    let sweeps = swept != sweeper::Swept::Stop;
    supervisor.spawn("sweeper".into(), move |stop| {
        sweeper::run(sweeping.clone(), every, stop, sweeps)
    });
    // The outbox's notices (Slack, webhooks, mail), whichever process
    // wrote them: the only trigger of every notification.
    let outbox =
        crate::notify::outbox::OutboxWorker::new(agent.store().clone(), agent.clock().clone())
            .map_err(|e| ServerError::Config(e.to_string()))?
            .with_links(config.links.clone())
            .with_retry_window(config.notify_retry_window)
            .with_slack(state.slack.clone())
            .with_metrics(agent.metrics().clone());
    // Woken right after this process's commits that wrote notices, and
    // after other processes' (the store's change feed, when it has one).
    let wake = outbox.waker();
    let (events, woken) = (agent.clone(), Arc::clone(&wake));
    supervisor.spawn("outbox wake-up (run events)".into(), move |stop| {
        crate::notify::wake::on_events(events.subscribe(), Arc::clone(&woken), stop)
    });
    if let Some(watcher) = state.watcher.clone() {
        supervisor.spawn("outbox wake-up (store changes)".into(), move |stop| {
            crate::notify::wake::on_changes(watcher.changes(), Arc::clone(&wake), stop)
        });
    }
    let outbox = Arc::new(outbox);
    supervisor.spawn("outbox".into(), move |stop| Arc::clone(&outbox).run(stop));
    for entry in schedule {
        tracing::info!(schedule = entry.index + 1, cron = %entry.expression, "schedule active");
        let (served, name) = (state.clone(), format!("schedule {}", entry.index + 1));
        supervisor.spawn(name, move |stop| {
            schedule::run(served.clone(), entry.clone(), stop)
        });
    }

    let app = origin::guard(
        router::router(state, config.max_body_bytes),
        origin::Policy {
            loopback_hosts_only: config.tokens.is_empty(),
            bound,
        },
    );
    Ok(Mounted {
        router: app,
        tasks: BackgroundTasks {
            stop_tx,
            stop_rx,
            background,
            supervisor,
            shutdown_grace: config.shutdown_grace,
        },
    })
}

/// One warning for each gate whose deciders cannot act on this server
/// (see `deciders_check.rs`).
fn warn_of_unreachable_deciders(agent: &AgentRun, config: &ServerConfig) {
    let spec = agent.spec();
    let groups = match spec.resolve_groups(|name| std::env::var(name).ok()) {
        Ok(groups) => groups,
        // Refused again, naming it, when a gate pauses.
        Err(_) => spec.approvals.groups.clone(),
    };
    let channels = deciders_check::Channels {
        tokens: &config.tokens,
        links: config.links.as_ref(),
    };
    for warning in deciders_check::unreachable_deciders(spec, &groups, &channels) {
        tracing::warn!("{warning}");
    }
}

/// Bind, print `listening on http://ADDR` (one line on stdout, so scripts
/// and tests can read the port), and serve until SIGTERM or ctrl-c.
pub async fn serve(agent: AgentRun, config: ServerConfig) -> Result<(), ServerError> {
    let server = Server::bind(agent, config).await?;
    announce(server.local_addr()?);
    server.run().await
}

/// The one line on stdout.
pub fn announce(addr: SocketAddr) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on http://{addr}");
    let _ = out.flush();
}

/// With `approvals.notify.slack`: the notifier the outbox's worker sends
/// Slack notices through, and `POST /slack/actions` answers clicks with.
fn start_slack(
    agent: &AgentRun,
    links: Option<&LinkSigner>,
) -> Result<Option<Arc<SlackNotifier>>, ServerError> {
    let slack = SlackNotifier::for_spec_with_links(
        agent.spec(),
        agent.store().clone(),
        agent.clock().clone(),
        links.cloned(),
    )
    .map_err(|e| ServerError::Config(e.to_string()))?;
    if let Some(slack) = &slack {
        // Checked now so a missing variable shows at startup, not at the
        // first pause. Not fatal: the API still decides without Slack.
        for problem in slack.check_credentials() {
            tracing::warn!(error = %problem, "Slack approvals will not work until this is fixed");
        }
        tracing::info!(
            "Slack approvals on: pauses are posted, clicks arrive at POST /slack/actions"
        );
    }
    Ok(slack)
}

/// Whether approval links are on, and where they point. Never the secret.
fn log_links(links: Option<&LinkSigner>) {
    match links {
        Some(links) => match links.public_url() {
            Some(url) => tracing::info!(
                public_url = %url,
                unbound_links = links.unbound(),
                "signed links on"
            ),
            None => tracing::info!(
                unbound_links = links.unbound(),
                "signed links on: links are paths (/a/...) until {PUBLIC_URL_ENV} is set; Slack shows none"
            ),
        },
        None => tracing::info!("signed links off: set {LINK_SECRET_ENV}"),
    }
}

/// The webhook path must not shadow an API route.
fn check_webhook_path(agent: &AgentRun) -> Result<(), ServerError> {
    let Some(hook) = &agent.spec().trigger.webhook else {
        return Ok(());
    };
    let clashes = routes::RESERVED_PREFIXES
        .iter()
        .any(|prefix| hook.path == *prefix || hook.path.starts_with(&format!("{prefix}/")));
    if clashes || hook.path == "/" {
        return Err(ServerError::Config(format!(
            "trigger.webhook.path {:?} clashes with the API's routes ({}); choose another path such as /hooks/{}",
            hook.path,
            routes::RESERVED_PREFIXES.join(", "),
            agent.spec().agent
        )));
    }
    Ok(())
}

/// Resolves at SIGTERM or ctrl-c. The handlers are installed now, so a
/// signal that arrives while starting is not lost.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send + 'static, ServerError>
{
    #[cfg(unix)]
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    })
}
