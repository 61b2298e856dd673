//! {{ m.agent }}: a tollgate server.
//!
{%- if let Some(description) = m.description %}
//! {{ description|comment }}
//!
{%- endif %}
//! It serves the HTTP API of `tollgate serve` for the spec in agent.yaml
//! (embedded at build time) and offers `serve`, `approvals`, `validate` and
//! `hash`; run it with `--help`.
//!
//! This file is yours: `tollgate export` writes it once and never overwrites
//! your edits. Implement the spec's `rust:` tools in custom_tools.rs; the
//! code in generated.rs registers them and is rewritten on every export.

mod custom_tools;
mod generated;

fn main() -> std::process::ExitCode {
    tollgate_runtime::cli::run_exported(generated::embedded(), generated::register_custom_tools)
}
