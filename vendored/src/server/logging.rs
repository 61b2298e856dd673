//! Logs: `tracing` to stderr, filtered by `RUST_LOG` (default `info`).
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

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const VARIABLE: &str = crate::env::LOG_FILTER;

/// Install the subscriber once; later calls (or one installed by an
/// embedding program) are left alone. A `RUST_LOG` that does not parse is
/// not fatal: the server logs at `info` and says what was wrong.
pub fn init_logging() {
    let (filter, problem) = match filter_from(std::env::var(VARIABLE).ok().as_deref()) {
        Ok(filter) => (filter, None),
        Err(problem) => (default_filter(), Some(problem)),
    };
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(|| RedactedStderr)
                .with_ansi(false),
        )
        .try_init()
        .is_ok();
    if let Some(problem) = problem {
        if installed {
            tracing::warn!("{problem}; logging at info");
        } else {
            eprintln!("warning: {problem}");
        }
    }
}

/// Stderr, through `secrets::known()`. The formatter writes one whole
/// event per `write` call, so a secret is never split across two writes.
struct RedactedStderr;

impl std::io::Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let redactor = crate::secrets::known();
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

    #[test]
    fn a_bad_value_is_an_error_that_names_it() {
        let err = filter_from(Some("tollgate=loud")).unwrap_err();
        assert!(err.contains("RUST_LOG=\"tollgate=loud\""), "{err}");
        assert!(err.contains("TARGET=LEVEL, comma-separated"), "{err}");
        assert!(filter_from(Some("a=b=c")).is_err());
    }
}
