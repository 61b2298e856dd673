//! Logs: `tracing` to stderr, filtered by `RUST_LOG` (default `info`), as
//! text lines or, on request (`TOLLGATE_LOG_FORMAT=json`, `serve
//! --log-format json`), one JSON object per line (see [`JsonLines`]).
//! Nothing logged carries a secret or a token: handlers log ids, keys,
//! step names and who decided, never headers or bodies; and every line
//! passes the process's redactor on its way out (an error may quote what a
//! downstream sent, in any encoding).
//!
//! `RUST_LOG` takes a default level and per-target levels, comma-separated:
//! `debug`, `warn,tollgate_runtime=debug`, `tollgate_runtime::server=trace`,
//! `off`. It is parsed by `tracing_subscriber::filter::Targets` rather than
//! `EnvFilter`: the span and field-value forms EnvFilter adds
//! (`[span{field=value}]`) cost every exported server a regex engine at
//! build time, and a server's operator filters by level and module.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

const VARIABLE: &str = crate::support::env::LOG_FILTER;
const FORMAT_VARIABLE: &str = crate::support::env::LOG_FORMAT;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// tracing's own text lines, for people.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// A log format name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown log format {0:?} (--log-format or {FORMAT_VARIABLE}): the formats are `text` and `json`"
)]
pub struct UnknownLogFormat(pub String);

impl LogFormat {
    /// `text` or `json` (any case; blank means text).
    pub fn parse(value: &str) -> Result<LogFormat, UnknownLogFormat> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(UnknownLogFormat(value.to_string())),
        }
    }

    /// From `TOLLGATE_LOG_FORMAT`; unset means text.
    pub fn from_env() -> Result<LogFormat, UnknownLogFormat> {
        match std::env::var(FORMAT_VARIABLE) {
            Ok(value) => LogFormat::parse(&value),
            Err(_) => Ok(LogFormat::Text),
        }
    }
}

/// Install the subscriber once, in the format `TOLLGATE_LOG_FORMAT` asks
/// for; later calls (or one installed by an embedding program) are left
/// alone. A format or a `RUST_LOG` that does not parse is not fatal here
/// (`serve` refuses a bad format before it gets this far): the server
/// logs text at `info` and says what was wrong.
pub fn init_logging() {
    let (format, problem) = match LogFormat::from_env() {
        Ok(format) => (format, None),
        Err(e) => (LogFormat::Text, Some(e.to_string())),
    };
    init_logging_as(format);
    if let Some(problem) = problem {
        tracing::warn!("{problem}; logging text");
    }
}

/// [`init_logging`] in `format`, whatever the environment says.
pub fn init_logging_as(format: LogFormat) {
    let (filter, problem) = match filter_from(std::env::var(VARIABLE).ok().as_deref()) {
        Ok(filter) => (filter, None),
        Err(problem) => (default_filter(), Some(problem)),
    };
    let text = tracing_subscriber::fmt::layer()
        .with_writer(|| RedactedStderr)
        .with_ansi(false);
    #[cfg(unix)]
    crate::support::fatal::log_as_json(matches!(format, LogFormat::Json));
    let installed = match format {
        LogFormat::Text => tracing_subscriber::registry()
            .with(filter)
            .with(text)
            .try_init(),
        LogFormat::Json => tracing_subscriber::registry()
            .with(filter)
            .with(text.event_format(JsonLines))
            .try_init(),
    }
    .is_ok();
    if let Some(problem) = problem {
        if installed {
            tracing::warn!("{problem}; logging at info");
        } else {
            eprintln!("warning: {problem}");
        }
    }
}

/// One JSON object per event, on one line: `timestamp` (RFC 3339, UTC),
/// `level`, `target`, `message`, `fields` (the event's other fields, by
/// name) and, inside spans, `spans` (outermost first, each with its
/// fields as the text format writes them).
///
/// A small formatter rather than tracing-subscriber's `json` feature,
/// because that formatter (0.3) cannot write the documented line that
/// collectors and the tests parse (docs/serving.md "Serving over HTTP"):
/// - its keys are fixed: without `flatten_event` the message is inside
///   `fields` (`fields.message`, no top-level `message`); with
///   `flatten_event(true)` every field is top-level and there is no
///   `fields` object. Nothing renames or splits them, so a top-level
///   `message` beside `fields` (the other fields) is out of reach;
/// - its `spans` are objects with each span field as a key (and need
///   the JSON field formatter for spans), not `{name, fields}`;
/// - it adds a crate, tracing-serde, to every exported server.
///
/// The line passes the same redactor as text lines, which knows each
/// secret's JSON-escaped form, and redaction writes only letters and
/// brackets, so the line stays valid JSON.
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = JsonFields::default();
        event.record(&mut fields);
        let mut line = serde_json::Map::new();
        line.insert(
            "timestamp".into(),
            chrono::Utc::now()
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                .into(),
        );
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        line.insert("message".into(), fields.message.unwrap_or_default().into());
        line.insert("fields".into(), serde_json::Value::Object(fields.values));
        if let Some(scope) = ctx.event_scope() {
            let spans: Vec<serde_json::Value> = scope
                .from_root()
                .map(|span| {
                    let extensions = span.extensions();
                    let fields = extensions
                        .get::<FormattedFields<N>>()
                        .map(|f| f.fields.as_str())
                        .unwrap_or_default();
                    serde_json::json!({ "name": span.name(), "fields": fields })
                })
                .collect();
            line.insert("spans".into(), spans.into());
        }
        writeln!(writer, "{}", serde_json::Value::Object(line))
    }
}

/// An event's fields as JSON values: numbers and booleans as themselves,
/// everything else (`%display`, `?debug`, errors) as its text.
#[derive(Default)]
struct JsonFields {
    message: Option<String>,
    values: serde_json::Map<String, serde_json::Value>,
}

impl JsonFields {
    fn put(&mut self, field: &Field, value: serde_json::Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                serde_json::Value::String(text) => text,
                other => other.to_string(),
            });
        } else {
            self.values.insert(field.name().to_string(), value);
        }
    }
}

impl Visit for JsonFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and infinities have no JSON number: null, as serde_json has it.
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }
}

/// Stderr, through `secrets::known()`. The formatter writes one whole
/// event per `write` call, so a secret is never split across two writes.
struct RedactedStderr;

impl std::io::Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let redactor = crate::support::secrets::known();
        if redactor.is_empty() {
            return std::io::stderr().write(buf);
        }
        let text = redactor.text(&String::from_utf8_lossy(buf));
        std::io::stderr().write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn default_filter() -> Targets {
    Targets::new().with_default(LevelFilter::INFO)
}

/// The filter `value` (the variable's content) asks for; unset or blank
/// means the default, `info`.
fn filter_from(value: Option<&str>) -> Result<Targets, String> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(default_filter());
    };
    value.parse::<Targets>().map_err(|e| {
        format!(
            "{VARIABLE}={value:?} is not a log filter: {e} \
             (the forms are LEVEL and TARGET=LEVEL, comma-separated)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    fn enabled(filter: &Targets, target: &str, level: Level) -> bool {
        filter.would_enable(target, &level)
    }

    #[test]
    fn unset_or_blank_means_info() {
        for value in [None, Some(""), Some("  ")] {
            let filter = filter_from(value).unwrap();
            assert!(enabled(&filter, "tollgate_runtime::server", Level::INFO));
            assert!(!enabled(&filter, "tollgate_runtime::server", Level::DEBUG));
        }
    }

    #[test]
    fn levels_and_targets() {
        let filter = filter_from(Some("warn,tollgate_runtime::server=debug")).unwrap();
        assert!(enabled(
            &filter,
            "tollgate_runtime::server::tasks",
            Level::DEBUG
        ));
        assert!(!enabled(&filter, "tollgate_runtime::store", Level::INFO));
        assert!(enabled(&filter, "hyper", Level::WARN));

        let filter = filter_from(Some("DEBUG")).unwrap();
        assert!(enabled(&filter, "anything", Level::DEBUG));

        let filter = filter_from(Some("off")).unwrap();
        assert!(!enabled(&filter, "tollgate_runtime", Level::ERROR));
    }

    /// What `JsonLines` writes for the events `emit` logs, one line each.
    fn json_lines(emit: impl FnOnce()) -> Vec<serde_json::Value> {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || sink.clone())
                .with_ansi(false)
                .event_format(JsonLines),
        );
        tracing::subscriber::with_default(subscriber, emit);
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }

    #[test]
    fn json_lines_carry_level_target_message_and_typed_fields() {
        let lines = json_lines(|| {
            tracing::info!(run_id = %"r-1", attempt = 3u64, late = true, "resumed \"quoted\"\nrun");
            let span = tracing::info_span!("request", path = "/runs");
            let _entered = span.enter();
            tracing::warn!(error = ?std::io::ErrorKind::NotFound, "inside");
        });
        assert_eq!(lines.len(), 2, "{lines:?}");
        let first = &lines[0];
        assert_eq!(first["level"], "INFO");
        assert_eq!(first["target"], module_path!());
        assert_eq!(first["message"], "resumed \"quoted\"\nrun");
        assert_eq!(
            first["fields"],
            serde_json::json!({"run_id": "r-1", "attempt": 3, "late": true})
        );
        let at = first["timestamp"].as_str().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(at).is_ok(), "{at}");
        assert!(at.ends_with('Z'), "{at}");
        assert!(first.get("spans").is_none(), "{first}");
        let second = &lines[1];
        assert_eq!(second["level"], "WARN");
        assert_eq!(second["fields"]["error"], "NotFound");
        assert_eq!(second["spans"][0]["name"], "request");
    }

    #[test]
    fn log_formats_parse_and_a_bad_one_names_the_choices() {
        assert_eq!(LogFormat::parse("json"), Ok(LogFormat::Json));
        assert_eq!(LogFormat::parse(" JSON "), Ok(LogFormat::Json));
        assert_eq!(LogFormat::parse("text"), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(""), Ok(LogFormat::Text));
        let err = LogFormat::parse("xml").unwrap_err().to_string();
        assert!(err.contains("\"xml\""), "{err}");
        assert!(err.contains("TOLLGATE_LOG_FORMAT"), "{err}");
        assert!(err.contains("`text` and `json`"), "{err}");
    }

    #[test]
    fn a_bad_value_is_an_error_that_names_it() {
        let err = filter_from(Some("tollgate=loud")).unwrap_err();
        assert!(err.contains("RUST_LOG=\"tollgate=loud\""), "{err}");
        assert!(err.contains("TARGET=LEVEL, comma-separated"), "{err}");
        assert!(filter_from(Some("a=b=c")).is_err());
    }
}
