//! The files of an export besides `vendored/`: their paths, whose they are
//! and what they are for. The plan and the export's README both read this
//! table, so the README's list of files is always the real one.

use super::Role;

pub struct LayoutEntry {
    pub path: &'static str,
    pub role: Role,
    pub what: &'static str,
}

/// Sorted by path, like the plan.
pub const FILES: &[LayoutEntry] = &[
    LayoutEntry {
        path: ".dockerignore",
        role: Role::Yours,
        what: "keeps `target/` and local state out of the Docker build context",
    },
    LayoutEntry {
        path: ".env.example",
        role: Role::Generated,
        what: "every environment variable the spec reads, and where; copy it to `.env` for your values",
    },
    LayoutEntry {
        path: ".gitattributes",
        role: Role::Generated,
        what: "marks the regenerated files and `vendored/` `linguist-generated`, so code review folds them",
    },
    LayoutEntry {
        path: ".gitignore",
        role: Role::Yours,
        what: "ignores `target/`, `.env` and the local state file",
    },
    LayoutEntry {
        path: "Cargo.lock",
        role: Role::Yours,
        what: "pinned dependency versions, so `cargo build --locked` builds what was tested; cargo updates it when you add dependencies",
    },
    LayoutEntry {
        path: "Cargo.toml",
        role: Role::Yours,
        what: "the package; add the dependencies your tools need here",
    },
    LayoutEntry {
        path: "Dockerfile",
        role: Role::Yours,
        what: "a multi-stage image (dependencies cached in their own layer, toolchain pinned to `rust-version`) running the server as a non-root user, state in `/data`, with a HEALTHCHECK",
    },
    LayoutEntry {
        path: "README.md",
        role: Role::Yours,
        what: "this file: what the server does and how to run it, with your team's notes; a re-export merges what changed in the spec into it",
    },
    LayoutEntry {
        path: "TOLLGATE.md",
        role: Role::Generated,
        what: "the server's reference: every route of `openapi.json`, every error code, command, flag and environment variable",
    },
    LayoutEntry {
        path: "agent.yaml",
        role: Role::Generated,
        what: "the spec, embedded in the binary at build time; change it where you export from",
    },
    LayoutEntry {
        path: "openapi.json",
        role: Role::Generated,
        what: "the OpenAPI 3.1 description of the API, as the server serves it at `/openapi.json`",
    },
    LayoutEntry {
        path: "src/generated.rs",
        role: Role::Generated,
        what: "agent id, spec hash and the embedded spec",
    },
    LayoutEntry {
        path: "src/main.rs",
        role: Role::Yours,
        what: "the entry point: builds the server with `tollgate_runtime::App` (the generated tool registry, your routes and layers)",
    },
    LayoutEntry {
        path: "src/tools/mod.rs",
        role: Role::Generated,
        what: "declares one module per `rust:` tool, registers each (`tools::register`, called by main.rs) and checks at compile time that each is implemented",
    },
    LayoutEntry {
        path: "tests/smoke.rs",
        role: Role::Yours,
        what: "starts the built server and checks `/healthz`, `validate` and `hash`",
    },
    LayoutEntry {
        path: "tests/workflow.rs",
        role: Role::Yours,
        what: "runs the spec's workflow in-process with stubbed tools and scripted decisions (`tollgate_runtime::testing`)",
    },
];

/// One file per `rust:` tool of the spec, written when the tool first
/// appears (the plan adds one per tool: `names::tool_module` names it).
pub const TOOL_FILE: LayoutEntry = LayoutEntry {
    path: "src/tools/<name>.rs",
    role: Role::Yours,
    what: "one per `rust:` tool: its `tool` function, which builds it from its configuration, its type, holding what it needs, and its `CustomTool` implementation",
};

/// Every file as the README lists them: [`FILES`] and [`TOOL_FILE`], by path.
pub fn listed() -> Vec<&'static LayoutEntry> {
    let mut files: Vec<&'static LayoutEntry> = FILES.iter().chain([&TOOL_FILE]).collect();
    files.sort_by_key(|entry| entry.path);
    files
}
