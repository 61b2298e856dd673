//! GET /metrics: Prometheus text (format 0.0.4). The store's gauges
//! (pending approvals by step, those on other spec versions, runs by
//! status, stuck runs, the outbox's notices by status and the age of the
//! oldest undelivered one, its lanes by channel and endpoint) are read from
//! the store on each scrape, so every server sharing it reports the same
//! truth; the counters and step durations are this process's own
//! ([`crate::engine::metrics::Metrics`]); and build info names what runs.
//!
//! Behind the same bearer token as the API when tokens are configured:
//! the numbers are business data (how many refunds wait, how many were
//! rejected), and a Prometheus scrape sends a token as easily as any
//! client (`authorization: { credentials_file: ... }`). Without tokens the
//! server listens on loopback only, and so does this.
//!
//! A store that does not answer fails the scrape (503 `store_unavailable`)
//! rather than leave its gauges out: Prometheus marks the target down
//! (`up == 0`), which is what should page someone.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::domain::notices::NoticeStatus;
use crate::domain::run_state::RunStatus;
use crate::engine::metrics::{self as registry, CONTENT_TYPE, Exposition, MetricFamily};
use crate::server::http::state::AppState;
use crate::service::views::{Health, HealthError};
use crate::store::{LaneStats, OutboxStats, Queries, StoreError, WriterStats};

pub(super) async fn render(State(state): State<AppState>) -> Response {
    match exposition(&state).await {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "metrics: the store did not answer; failing the scrape");
            // The shape and code of /healthz's answer for the same cause.
            let body = Health {
                status: "unavailable",
                error: Some(HealthError {
                    code: "store_unavailable",
                    message: e.to_string(),
                }),
            };
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

async fn exposition(state: &AppState) -> Result<String, StoreError> {
    let agent = &state.agent;
    let spec = agent.spec();
    let mut out = Exposition::new();

    out.family(&registry::BUILD_INFO);
    out.sample(
        registry::BUILD_INFO.name,
        &[
            ("agent", &spec.agent),
            ("spec_hash", spec.hash.as_str()),
            ("version", crate::support::embedded::GENERATOR_VERSION),
        ],
        1.0,
    );

    let Gauges {
        mut pending,
        by_spec,
        runs,
    } = read_gauges(state.queries(), &spec.agent, agent.clock().now()).await?;
    out.family(&registry::PENDING_APPROVALS);
    // Every step that can pause has a series, zero or not, so an alert on
    // it never sees the series vanish; then steps only older specs had.
    for step in spec.steps.iter().filter(|s| spec.step_can_pause(s)) {
        let n = pending.remove(&step.id).unwrap_or(0);
        out.sample(
            registry::PENDING_APPROVALS.name,
            &[("step", &step.id)],
            n as f64,
        );
    }
    for (step, n) in pending {
        out.sample(
            registry::PENDING_APPROVALS.name,
            &[("step", &step)],
            n as f64,
        );
    }

    out.family(&registry::STALE_PENDING_APPROVALS);
    out.sample(
        registry::STALE_PENDING_APPROVALS.name,
        &[],
        stale_count(&by_spec, spec.hash.as_str()) as f64,
    );

    out.family(&registry::RUNS);
    let mut stuck = 0;
    for (status, n) in runs {
        if status == RunStatus::Stuck {
            stuck = n;
        }
        out.sample(
            registry::RUNS.name,
            &[("status", status.as_str())],
            n as f64,
        );
    }
    out.family(&registry::STUCK_RUNS);
    out.sample(registry::STUCK_RUNS.name, &[], stuck as f64);

    let outbox = agent.store().outbox_stats().await?;
    write_outbox(&mut out, &outbox, agent.clock().now());
    let now = agent.clock().now();
    write_lanes(&mut out, &agent.store().lane_stats(now).await?, now);
    if let Some(writer) = agent.store().writer_stats() {
        write_writer(&mut out, &writer);
    }

    agent.metrics().write(&mut out);
    Ok(out.into_text())
}

/// The outbox's gauges: notices by status (every status, zero or not),
/// and how long the oldest undelivered one (pending or failed) has
/// waited, 0 when none does: an alert on it catches a stalled worker.
fn write_outbox(out: &mut Exposition, stats: &OutboxStats, now: chrono::DateTime<chrono::Utc>) {
    out.family(&registry::NOTIFICATIONS);
    for &status in NoticeStatus::ALL {
        let n = match status {
            NoticeStatus::Pending => stats.pending,
            NoticeStatus::Failed => stats.failed,
            NoticeStatus::Dead => stats.dead,
            NoticeStatus::Sent => stats.sent,
        };
        out.sample(
            registry::NOTIFICATIONS.name,
            &[("status", status.as_str())],
            n as f64,
        );
    }
    out.family(&registry::NOTIFICATIONS_OLDEST_UNDELIVERED);
    let age = stats
        .oldest_undelivered
        .map(|created| (now - created).num_milliseconds().max(0) as f64 / 1000.0)
        .unwrap_or(0.0);
    out.sample(registry::NOTIFICATIONS_OLDEST_UNDELIVERED.name, &[], age);
}

/// The outbox's lanes (one per channel and endpoint with notices still to
/// deliver), labelled by channel and endpoint: a webhook's
/// `scheme://host:port`, an SMTP server's `host:port`, the Slack API's
/// `host:port`; never a path, a query or a credential. A stuck endpoint
/// shows as a lane whose in-flight count stays at its share while its
/// oldest waiting notice ages, or whose failing count grows.
fn write_lanes(out: &mut Exposition, lanes: &[LaneStats], now: chrono::DateTime<chrono::Utc>) {
    type Gauge = (&'static MetricFamily, fn(&LaneStats, DateTimeUtc) -> f64);
    type DateTimeUtc = chrono::DateTime<chrono::Utc>;
    const GAUGES: [Gauge; 4] = [
        (&registry::LANE_WAITING, |lane, _| lane.waiting as f64),
        (&registry::LANE_IN_FLIGHT, |lane, _| lane.in_flight as f64),
        (&registry::LANE_FAILING, |lane, _| lane.failing as f64),
        (&registry::LANE_OLDEST_WAITING, |lane, now| {
            lane.oldest_waiting
                .map(|due| (now - due).num_milliseconds().max(0) as f64 / 1000.0)
                .unwrap_or(0.0)
        }),
    ];
    for (family, value) in GAUGES {
        out.family(family);
        for lane in lanes {
            out.sample(
                family.name,
                &[
                    ("channel", lane.channel.as_str()),
                    ("endpoint", &lane.endpoint),
                ],
                value(lane, now),
            );
        }
    }
}

/// This process's SQLite writer: how many writes shared each commit and
/// how busy the one writer connection was. `rate(busy)` near 1 says writes
/// queue for it; `rate(writes) / rate(commits)` how many share an fsync.
fn write_writer(out: &mut Exposition, stats: &WriterStats) {
    let counters = [
        (&registry::STORE_COMMITS, stats.commits as f64),
        (&registry::STORE_WRITES, stats.writes as f64),
        (&registry::STORE_WRITER_BUSY, stats.busy.as_secs_f64()),
        (
            &registry::STORE_COMMIT_SECONDS,
            stats.committing.as_secs_f64(),
        ),
    ];
    for (family, value) in counters {
        out.family(family);
        out.sample(family.name, &[], value);
    }
}

/// What the gauges read from the store.
struct Gauges {
    /// This agent's unexpired pending approvals by step.
    pending: BTreeMap<String, u64>,
    /// The same, by the spec hash they paused under.
    by_spec: BTreeMap<String, u64>,
    /// This agent's runs by status.
    runs: Vec<(RunStatus, u64)>,
}

/// The gauges, through the read model only.
async fn read_gauges<Q: Queries + ?Sized>(
    store: &Q,
    agent: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Gauges, StoreError> {
    Ok(Gauges {
        pending: store.count_pending_by_step(agent, now).await?,
        by_spec: store.count_pending_by_spec(agent, now).await?,
        runs: store.count_runs_by_status(agent).await?,
    })
}

/// The pending approvals of `by_spec` on a version other than `served`
/// (gate requests belong to none: `by_spec` never counts them).
fn stale_count(by_spec: &BTreeMap<String, u64>, served: &str) -> u64 {
    by_spec
        .iter()
        .filter(|(hash, _)| hash.as_str() != served)
        .map(|(_, n)| n)
        .sum()
}
