//! {{ m.agent }}: a tollgate server.
//!
{%- if let Some(description) = m.description %}
//! {{ description|comment }}
//!
{%- endif %}
//! It serves the HTTP API of `tollgate serve` for the spec in agent.yaml
//! (embedded at build time) and offers `serve`, `approvals`, `runs`,
//! `validate` and `hash`; run it with `--help`.
//!
//! This file is yours: `tollgate export` writes it once. Build the server
//! here with `tollgate_runtime::App`: register each `rust:` tool as a value
//! (give it its configuration, clients and pools), add your own routes
//! (`.routes(router)`) and tower layers (`.layer(layer)`), or mount the API
//! in an axum app of yours (`.mount(store, config)`). The tools' code is in
//! src/tools/; generated.rs and tools/mod.rs are rewritten on every export.

mod generated;
mod tools;

fn main() -> std::process::ExitCode {
{%- if m.rust_tools.is_empty() %}
    tollgate_runtime::App::new(generated::embedded()).run()
{%- else %}
    tollgate_runtime::App::new(generated::embedded())
{%- for tool in m.rust_tools %}
{%- if tool.registration_fits %}
        .tool("{{ tool.name }}", tools::{{ tool.type_name }}::new())
{%- else %}
        .tool(
            "{{ tool.name }}",
            tools::{{ tool.type_name }}::new(),
        )
{%- endif %}
{%- endfor %}
        .run()
{%- endif %}
}
