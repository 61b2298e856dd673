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
//! here with `tollgate_runtime::App`: add your own routes (`.routes(router)`)
//! and tower layers (`.layer(layer)`), or mount the API in an axum app of
//! yours (`.mount(store, config)`). The `rust:` tools need no line here:
//! `tools::register` (src/tools/mod.rs, rewritten on every export with
//! generated.rs) registers every one of agent.yaml, each built by the
//! `tool` function of its file in src/tools/.

mod generated;
mod tools;

fn main() -> std::process::ExitCode {
    tollgate_runtime::App::new(generated::embedded())
        .tools(tools::register)
        .run()
}
