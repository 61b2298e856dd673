//! errors.md, env.md, metrics.md and events.md: the runtime's registries,
//! each the one place its facts are written (tests hold the code to them).

use std::fmt::Write as _;

use serde_json::Value;
use tollgate_runtime::server::{ERROR_CODES, NOT_READY};

use super::cli::flags_reading;
use super::{header, one_line};

pub fn errors(document: &Value) -> String {
    let mut out = header(
        "Error codes",
        "Every failure's body is `{\"error\": {\"code\": \"...\", \"message\": \"...\"}}`. `code` is stable (clients branch on it); `message` says what was wrong and where, for people. A code can come with more than one status.",
    );
    out.push_str(&error_table(document));
    out
}

/// Every error code with its statuses and meaning, as a table: an
/// `ApiError`'s statuses from `ApiError::status`, `not_ready`'s from the
/// document's `GET /readyz` (its only non-2xx answer).
pub fn error_table(document: &Value) -> String {
    let statuses = tollgate_runtime::server::openapi::statuses_by_code();
    let readyz: Vec<String> = document["paths"]["/readyz"]["get"]["responses"]
        .as_object()
        .map(|responses| {
            responses
                .keys()
                .filter(|s| !s.starts_with('2') && *s != "default")
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut out = String::new();
    out.push_str("\n| code | HTTP status | meaning |\n|---|---|---|\n");
    let mut codes: Vec<_> = ERROR_CODES.iter().collect();
    codes.sort_by_key(|c| c.code);
    for code in codes {
        let status = if code.code == NOT_READY {
            readyz.join(", ")
        } else {
            statuses
                .get(code.code)
                .map(|list| {
                    list.iter()
                        .map(u16::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        let _ = writeln!(
            out,
            "| `{}` | {status} | {} |",
            code.code,
            one_line(code.meaning)
        );
    }
    out
}

/// Each variable, with the flags that read it and its default (clap's
/// when a flag has one, else the registry's).
pub fn env(tollgate: &clap::Command) -> String {
    let mut out = header(
        "Environment variables",
        "Every environment variable `tollgate` and exported servers read. A variable that is also a flag is the flag's value when the flag is not given. A spec's own `${NAME}` references (secrets, URLs) are the spec's, not listed here; `tollgate export` writes them to `.env.example`.",
    );
    out.push_str(&env_table(tollgate));
    out
}

/// Every variable of the runtime's registry as a table, with the flags of
/// `command` that read it.
pub fn env_table(command: &clap::Command) -> String {
    let mut out = String::new();
    let mut variables: Vec<_> = tollgate_runtime::env::ALL.iter().collect();
    variables.sort_by_key(|v| v.name);
    out.push_str("\n| variable | what it does | flag | default |\n|---|---|---|---|\n");
    for variable in variables {
        let name = if variable.name == tollgate_runtime::env::GROUP_PREFIX {
            format!("{}<NAME>", variable.name)
        } else {
            variable.name.to_string()
        };
        let (flags, clap_default) = flags_reading(command, variable.name);
        let default = match clap_default {
            Some(value) => format!("`{value}`"),
            None if variable.default.is_empty() => "unset".to_string(),
            None => one_line(variable.default),
        };
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} | {default} |",
            one_line(variable.what),
            flags_cell(&flags)
        );
    }
    out
}

/// `tollgate serve --listen` for one or two commands; `--database-url`
/// (19 commands) for a flag every store-reading command has.
fn flags_cell(flags: &[(String, String)]) -> String {
    if flags.len() <= 2 {
        return flags
            .iter()
            .map(|(command, flag)| format!("`{command} {flag}`"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    let mut names: Vec<&str> = flags.iter().map(|(_, flag)| flag.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    format!("{} ({} commands)", names.join(", "), flags.len())
}

pub fn metrics() -> String {
    let mut out = header(
        "Metrics",
        "Every metric family `GET /metrics` writes (Prometheus text format 0.0.4). Gauges are read from the shared store at each scrape; counters and the histogram are this process's own.",
    );
    let mut families: Vec<_> = tollgate_runtime::metrics::FAMILIES.iter().collect();
    families.sort_by_key(|f| f.name);
    out.push_str("\n| metric | type | labels | help |\n|---|---|---|---|\n");
    for family in families {
        let labels: Vec<String> = family.labels.iter().map(|l| format!("`{l}`")).collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            family.name,
            family.kind,
            labels.join(", "),
            one_line(family.help)
        );
    }
    out
}

pub fn events() -> String {
    let mut out = header(
        "Run events",
        "What a run did, in order: stored per run and sent live by `GET /runs/{id}/events` (Server-Sent Events) and `--json`. Every event has `run_id`, `seq` (from 1 within its run), `at` (RFC 3339) and `type`, beside the fields of its type.",
    );
    let mut types: Vec<_> = tollgate_runtime::events::EVENT_TYPES.iter().collect();
    types.sort_by_key(|t| t.name);
    for event in types {
        let _ = writeln!(out, "\n## `{}`\n\n{}\n", event.name, one_line(event.about));
        for (field, about) in event.fields {
            let _ = writeln!(out, "- `{field}`: {}", one_line(about));
        }
    }
    out
}
