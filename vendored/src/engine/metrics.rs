//! What this process counted, for `GET /metrics`: decisions by outcome,
//! claim conflicts and step durations. Plus the Prometheus text format
//! (0.0.4) those and the store's gauges are written in.
//!
//! Counters are per process, as Prometheus expects of a counter: each
//! server counts what it did, and a query sums the servers. What is true
//! of the shared store (pending approvals, runs by status) is read from
//! the store when scraped, not counted here.
//!
//! Written by hand, without a metrics crate: a few atomics and a text
//! writer cost an exported server nothing at build time, and one
//! [`Metrics`] per [`crate::AgentRun`] (shared by its clones) keeps the
//! counts out of globals, so two agents in one process never mix.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::domain::notices::NoticeChannel;
use crate::domain::pending_approval::ApprovalStatus;
use crate::domain::spec::{Spec, StepKind};

/// One metric family as `GET /metrics` writes it and the reference
/// (docs/reference/metrics.md) lists it: [`Exposition::family`] takes one
/// of these, so a family's help and type are written from here alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricFamily {
    pub name: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// The labels of its samples (a histogram's `le` left out).
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn family(
    name: &'static str,
    kind: &'static str,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricFamily {
    MetricFamily {
        name,
        kind,
        labels,
        help,
    }
}

pub const BUILD_INFO: MetricFamily = family(
    "tollgate_build_info",
    "gauge",
    &["agent", "spec_hash", "version"],
    "The agent served, its spec's hash and the tollgate runtime version; always 1.",
);
pub const PENDING_APPROVALS: MetricFamily = family(
    "tollgate_pending_approvals",
    "gauge",
    &["step"],
    "Approvals waiting for a decision (unexpired), by step, in the shared store.",
);
pub const STALE_PENDING_APPROVALS: MetricFamily = family(
    "tollgate_stale_pending_approvals",
    "gauge",
    &[],
    "Approvals waiting for a decision (unexpired) that paused under another version of the spec than the one served: approve does what approvals.on_spec_change says (refuse, the default: spec_changed).",
);
pub const RUNS: MetricFamily = family(
    "tollgate_runs",
    "gauge",
    &["status"],
    "This agent's runs in the shared store, by status.",
);
pub const STUCK_RUNS: MetricFamily = family(
    "tollgate_stuck_runs",
    "gauge",
    &[],
    "Runs waiting for an operator (`runs retry` or `runs fail`): alert when above 0.",
);
pub const NOTIFICATIONS: MetricFamily = family(
    "tollgate_notifications",
    "gauge",
    &["status"],
    "Notices in the shared store's outbox, by status: dead ones wait for `tollgate notifications retry`.",
);
pub const NOTIFICATIONS_OLDEST_UNDELIVERED: MetricFamily = family(
    "tollgate_notifications_oldest_undelivered_seconds",
    "gauge",
    &[],
    "Age of the oldest notice not delivered yet (pending or failed); 0 when there is none.",
);
pub const LANE_WAITING: MetricFamily = family(
    "tollgate_notifications_lane_waiting",
    "gauge",
    &["channel", "endpoint"],
    "Notices due to one endpoint and waiting for a free slot of its lane.",
);
pub const LANE_IN_FLIGHT: MetricFamily = family(
    "tollgate_notifications_lane_in_flight",
    "gauge",
    &["channel", "endpoint"],
    "Notices being sent to one endpoint now, by any worker sharing the store.",
);
pub const LANE_FAILING: MetricFamily = family(
    "tollgate_notifications_lane_failing",
    "gauge",
    &["channel", "endpoint"],
    "Notices to one endpoint whose last attempt failed (retried with backoff).",
);
pub const LANE_OLDEST_WAITING: MetricFamily = family(
    "tollgate_notifications_lane_oldest_waiting_seconds",
    "gauge",
    &["channel", "endpoint"],
    "How long the longest-waiting due notice of one endpoint has been due; 0 when none waits.",
);
pub const STORE_COMMITS: MetricFamily = family(
    "tollgate_store_commits_total",
    "counter",
    &[],
    "Write transactions this process committed to the SQLite file: one fsync each at synchronous=FULL.",
);
pub const STORE_WRITES: MetricFamily = family(
    "tollgate_store_writes_total",
    "counter",
    &[],
    "Write operations run in those transactions: concurrent writes share one commit.",
);
pub const STORE_WRITER_BUSY: MetricFamily = family(
    "tollgate_store_writer_busy_seconds_total",
    "counter",
    &[],
    "Time this process's one SQLite writer connection spent in write transactions: a rate near 1 means writes queue for it.",
);
pub const STORE_COMMIT_SECONDS: MetricFamily = family(
    "tollgate_store_commit_seconds_total",
    "counter",
    &[],
    "Of the writer's busy time, the time in COMMIT: the WAL's writes, its fsync and any checkpoint.",
);
pub const DECISIONS: MetricFamily = family(
    "tollgate_decisions_total",
    "counter",
    &["outcome"],
    "Pending approvals this process ended, by outcome.",
);
pub const CLAIM_CONFLICTS: MetricFamily = family(
    "tollgate_claim_conflicts_total",
    "counter",
    &[],
    "Decisions this process refused because another decision had already won.",
);
pub const STEP_DURATION: MetricFamily = family(
    "tollgate_step_duration_seconds",
    "histogram",
    &["step", "kind"],
    "How long each step took to run in this process (pauses excluded).",
);
pub const NOTIFICATIONS_SENT: MetricFamily = family(
    "tollgate_notifications_sent_total",
    "counter",
    &["channel"],
    "Notices this process delivered, by channel.",
);
pub const NOTIFICATIONS_RETRIED: MetricFamily = family(
    "tollgate_notifications_retried_total",
    "counter",
    &["channel"],
    "Sends this process tried that failed and will be retried, by channel.",
);
pub const NOTIFICATIONS_DEAD: MetricFamily = family(
    "tollgate_notifications_dead_total",
    "counter",
    &["channel"],
    "Notices this process gave up on (dead: held for `tollgate notifications retry`), by channel.",
);

/// Every family `GET /metrics` can write, in the order it writes them: the
/// registry docs/reference/metrics.md is generated from. A test requires
/// each metric name in a file that writes an [`Exposition`] to be
/// one of these.
pub const FAMILIES: &[MetricFamily] = &[
    BUILD_INFO,
    PENDING_APPROVALS,
    STALE_PENDING_APPROVALS,
    RUNS,
    STUCK_RUNS,
    NOTIFICATIONS,
    NOTIFICATIONS_OLDEST_UNDELIVERED,
    LANE_WAITING,
    LANE_IN_FLIGHT,
    LANE_FAILING,
    LANE_OLDEST_WAITING,
    STORE_COMMITS,
    STORE_WRITES,
    STORE_WRITER_BUSY,
    STORE_COMMIT_SECONDS,
    DECISIONS,
    CLAIM_CONFLICTS,
    STEP_DURATION,
    NOTIFICATIONS_SENT,
    NOTIFICATIONS_RETRIED,
    NOTIFICATIONS_DEAD,
];

/// Upper bounds of the step duration buckets, in seconds: from a pure
/// step (microseconds) to a slow model call (minutes).
pub const DURATION_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

crate::named_enum! {
    /// How a pending approval ended (`tollgate_decisions_total{outcome}`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ApprovalEnd {
        Approved = "approved",
        Rejected = "rejected",
        Modified = "modified",
        Expired = "expired",
        Cancelled = "cancelled",
    }
}

impl ApprovalEnd {
    /// The outcome a decided record's status stands for.
    pub fn of(status: ApprovalStatus) -> Option<ApprovalEnd> {
        match status {
            ApprovalStatus::Approved => Some(ApprovalEnd::Approved),
            ApprovalStatus::Rejected => Some(ApprovalEnd::Rejected),
            ApprovalStatus::Modified => Some(ApprovalEnd::Modified),
            ApprovalStatus::Expired => Some(ApprovalEnd::Expired),
            ApprovalStatus::Cancelled => Some(ApprovalEnd::Cancelled),
            ApprovalStatus::Pending => None,
        }
    }

    fn index(self) -> usize {
        ApprovalEnd::ALL
            .iter()
            .position(|o| *o == self)
            .unwrap_or(0)
    }
}

/// One agent's process counters. Cheap to update from any task: every
/// field is an atomic, and the per-step histograms are laid out when the
/// agent is built, one per step of its spec, so no update takes a lock.
#[derive(Debug)]
pub struct Metrics {
    decisions: [AtomicU64; ApprovalEnd::ALL.len()],
    claim_conflicts: AtomicU64,
    steps: Vec<StepHistogram>,
    /// What this process's delivery worker did with notices, by channel.
    notices: NoticeCounters,
}

/// Per channel (in [`NoticeChannel::ALL`]'s order): notices sent, failed
/// attempts that will be retried, notices given up on (dead).
#[derive(Debug, Default)]
struct NoticeCounters {
    sent: [AtomicU64; NoticeChannel::ALL.len()],
    retried: [AtomicU64; NoticeChannel::ALL.len()],
    dead: [AtomicU64; NoticeChannel::ALL.len()],
}

fn channel_index(channel: NoticeChannel) -> usize {
    NoticeChannel::ALL
        .iter()
        .position(|c| *c == channel)
        .unwrap_or(0)
}

/// The durations of one step's executions.
#[derive(Debug)]
struct StepHistogram {
    step: String,
    kind: &'static str,
    /// Executions per bucket, not cumulative: `buckets[i]` counts those in
    /// (bound i-1, bound i], the last one those above every bound. The
    /// count is their sum, so `+Inf` and `_count` always agree.
    buckets: [AtomicU64; DURATION_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

/// The `kind` label of a step: the key that decides its kind in the spec.
pub fn step_kind(kind: &StepKind) -> &'static str {
    match kind {
        StepKind::Tool { .. } => "tool",
        StepKind::Model(_) => "model",
        StepKind::Approval(_) => "approval",
        StepKind::Gate(_) => "gate",
        StepKind::Dedupe(_) => "dedupe",
        StepKind::Set { .. } => "set",
    }
}

impl Metrics {
    /// Counters for `spec`'s agent, all zero.
    pub fn for_spec(spec: &Spec) -> Metrics {
        Metrics {
            decisions: Default::default(),
            claim_conflicts: AtomicU64::new(0),
            notices: NoticeCounters::default(),
            steps: spec
                .steps
                .iter()
                .map(|step| StepHistogram {
                    step: step.id.clone(),
                    kind: step_kind(&step.kind),
                    buckets: Default::default(),
                    sum_nanos: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// A pending approval ended this way, by this process.
    pub fn decided(&self, outcome: ApprovalEnd, n: u64) {
        self.decisions[outcome.index()].fetch_add(n, Ordering::Relaxed);
    }

    /// A decider lost the claim: the approval was already decided.
    pub fn claim_conflict(&self) {
        self.claim_conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// Step `index` of the spec ran for `took` (to completion or failure).
    pub fn step_finished(&self, index: usize, took: Duration) {
        let Some(histogram) = self.steps.get(index) else {
            return;
        };
        let seconds = took.as_secs_f64();
        let bucket = DURATION_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(DURATION_BUCKETS.len());
        histogram.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        histogram.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The delivery worker delivered a notice on `channel`.
    pub fn notice_sent(&self, channel: NoticeChannel) {
        self.notices.sent[channel_index(channel)].fetch_add(1, Ordering::Relaxed);
    }

    /// A send on `channel` failed and the notice will be tried again.
    pub fn notice_retried(&self, channel: NoticeChannel) {
        self.notices.retried[channel_index(channel)].fetch_add(1, Ordering::Relaxed);
    }

    /// A notice on `channel` was given up on: dead, held for an operator.
    pub fn notice_dead(&self, channel: NoticeChannel) {
        self.notices.dead[channel_index(channel)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn decisions(&self, outcome: ApprovalEnd) -> u64 {
        self.decisions[outcome.index()].load(Ordering::Relaxed)
    }

    pub fn claim_conflicts(&self) -> u64 {
        self.claim_conflicts.load(Ordering::Relaxed)
    }

    /// Write the process counters' families into `out`.
    pub fn write(&self, out: &mut Exposition) {
        out.family(&DECISIONS);
        for &outcome in ApprovalEnd::ALL {
            out.sample(
                DECISIONS.name,
                &[("outcome", outcome.as_str())],
                self.decisions(outcome) as f64,
            );
        }
        out.family(&CLAIM_CONFLICTS);
        out.sample(CLAIM_CONFLICTS.name, &[], self.claim_conflicts() as f64);
        out.family(&STEP_DURATION);
        for histogram in &self.steps {
            histogram.write(out);
        }
        self.notices.write(out);
    }
}

impl NoticeCounters {
    fn write(&self, out: &mut Exposition) {
        let families: [(&MetricFamily, &[AtomicU64]); 3] = [
            (&NOTIFICATIONS_SENT, &self.sent),
            (&NOTIFICATIONS_RETRIED, &self.retried),
            (&NOTIFICATIONS_DEAD, &self.dead),
        ];
        for (family, counts) in families {
            out.family(family);
            for (channel, count) in NoticeChannel::ALL.iter().zip(counts) {
                out.sample(
                    family.name,
                    &[("channel", channel.as_str())],
                    count.load(Ordering::Relaxed) as f64,
                );
            }
        }
    }
}

impl StepHistogram {
    fn write(&self, out: &mut Exposition) {
        const NAME: &str = STEP_DURATION.name;
        let labels = [("step", self.step.as_str()), ("kind", self.kind)];
        let mut cumulative = 0u64;
        for (i, bound) in DURATION_BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let le = format_value(*bound);
            out.sample(
                &format!("{NAME}_bucket"),
                &[labels[0], labels[1], ("le", &le)],
                cumulative as f64,
            );
        }
        cumulative += self.buckets[DURATION_BUCKETS.len()].load(Ordering::Relaxed);
        out.sample(
            &format!("{NAME}_bucket"),
            &[labels[0], labels[1], ("le", "+Inf")],
            cumulative as f64,
        );
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        out.sample(&format!("{NAME}_sum"), &labels, sum);
        out.sample(&format!("{NAME}_count"), &labels, cumulative as f64);
    }
}

/// The media type of what [`Exposition`] writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A Prometheus text exposition (format 0.0.4) being written: each family
/// once, its `# HELP` and `# TYPE` lines, then its samples.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Start a family: its `# HELP` and `# TYPE` lines, from the registry.
    pub fn family(&mut self, family: &MetricFamily) {
        let name = family.name;
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(family.help));
        let _ = writeln!(self.text, "# TYPE {name} {}", family.kind);
    }

    /// One sample line of the current family.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", escape_label_value(value));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", format_value(value));
    }

    pub fn into_text(self) -> String {
        self.text
    }
}

/// A label value as the format quotes it: backslash, double quote and
/// line feed escaped (step names come from the spec, which may hold any).
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text escapes backslash and line feed (not quotes).
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value in the format's float syntax: integers without a
/// fraction, and the format's spellings of infinity and NaN.
fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        // `{}` of an f64 is the shortest text that reads back the same
        // value, and never uses an exponent the format would not accept.
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec::parse(
            r#"version: 1
agent: metered
steps:
  - id: draft
    set: { a: 1 }
  - id: confirm
    approval: { message: "Go?" }
"#,
            "metered.yaml",
        )
        .expect("spec")
    }

    #[test]
    fn label_values_are_escaped_per_the_format() {
        assert_eq!(escape_label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label_value("line\nbreak"), "line\\nbreak");
        assert_eq!(escape_label_value("plain-step_1"), "plain-step_1");
        let mut out = Exposition::new();
        out.family(&family(
            "x",
            "gauge",
            &["step"],
            "Help with \\ and\nnewline.",
        ));
        out.sample("x", &[("step", "q\"\n")], 2.0);
        assert_eq!(
            out.into_text(),
            "# HELP x Help with \\\\ and\\nnewline.\n# TYPE x gauge\nx{step=\"q\\\"\\n\"} 2\n"
        );
    }

    #[test]
    fn values_use_the_format_spelling() {
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.025), "0.025");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(1e-9), "0.000000001");
    }

    #[test]
    fn notice_counters_are_exposed_by_channel_every_channel_from_zero() {
        let metrics = Metrics::for_spec(&spec());
        metrics.notice_sent(NoticeChannel::Webhook);
        metrics.notice_sent(NoticeChannel::Webhook);
        metrics.notice_retried(NoticeChannel::Email);
        metrics.notice_dead(NoticeChannel::Slack);
        let mut out = Exposition::new();
        metrics.write(&mut out);
        let text = out.into_text();
        for line in [
            "# TYPE tollgate_notifications_sent_total counter",
            "tollgate_notifications_sent_total{channel=\"webhook\"} 2",
            "tollgate_notifications_sent_total{channel=\"email\"} 0",
            "tollgate_notifications_sent_total{channel=\"slack\"} 0",
            "# TYPE tollgate_notifications_retried_total counter",
            "tollgate_notifications_retried_total{channel=\"email\"} 1",
            "tollgate_notifications_retried_total{channel=\"webhook\"} 0",
            "# TYPE tollgate_notifications_dead_total counter",
            "tollgate_notifications_dead_total{channel=\"slack\"} 1",
            "tollgate_notifications_dead_total{channel=\"email\"} 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
    }

    #[test]
    fn durations_land_in_cumulative_buckets_and_inf_is_the_count() {
        let metrics = Metrics::for_spec(&spec());
        metrics.step_finished(0, Duration::from_millis(3));
        metrics.step_finished(0, Duration::from_millis(40));
        metrics.step_finished(0, Duration::from_secs(1000));
        metrics.step_finished(0, Duration::from_millis(5)); // on a bound: in it
        metrics.step_finished(9, Duration::from_secs(1)); // no such step: ignored
        let mut out = Exposition::new();
        metrics.write(&mut out);
        let text = out.into_text();
        let line = |needle: &str| {
            text.lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no {needle} in\n{text}"))
                .to_string()
        };
        let step = r#"step="draft",kind="set""#;
        assert!(line(&format!("{step},le=\"0.005\"}}")).ends_with(" 2"));
        assert!(line(&format!("{step},le=\"0.05\"}}")).ends_with(" 3"));
        assert!(line(&format!("{step},le=\"300\"}}")).ends_with(" 3"));
        assert!(line(&format!("{step},le=\"+Inf\"}}")).ends_with(" 4"));
        assert!(line(&format!("_count{{{step}}}")).ends_with(" 4"));
        let sum: f64 = line(&format!("_sum{{{step}}}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((sum - 1000.048).abs() < 1e-6, "{sum}");
        assert!(line("step=\"confirm\",kind=\"approval\",le=\"+Inf\"}").ends_with(" 0"));
    }

    #[test]
    fn decisions_count_by_outcome() {
        let metrics = Metrics::for_spec(&spec());
        metrics.decided(ApprovalEnd::Approved, 1);
        metrics.decided(ApprovalEnd::Expired, 3);
        metrics.claim_conflict();
        assert_eq!(metrics.decisions(ApprovalEnd::Approved), 1);
        assert_eq!(metrics.decisions(ApprovalEnd::Expired), 3);
        assert_eq!(metrics.decisions(ApprovalEnd::Rejected), 0);
        assert_eq!(metrics.claim_conflicts(), 1);
        assert_eq!(
            ApprovalEnd::of(ApprovalStatus::Modified),
            Some(ApprovalEnd::Modified)
        );
        assert_eq!(ApprovalEnd::of(ApprovalStatus::Pending), None);
        let mut out = Exposition::new();
        metrics.write(&mut out);
        let text = out.into_text();
        assert!(text.contains("tollgate_decisions_total{outcome=\"expired\"} 3\n"));
        assert!(text.contains("tollgate_claim_conflicts_total 1\n"));
    }
}
