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
        what: "a multi-stage image running the server as a non-root user, state in `/data`",
    },
    LayoutEntry {
        path: "README.md",
        role: Role::Generated,
        what: "this file: it describes the spec, so it is rewritten with it",
    },
    LayoutEntry {
        path: "agent.yaml",
        role: Role::Generated,
        what: "the spec, embedded in the binary at build time; change it where you export from",
    },
    LayoutEntry {
        path: "src/custom_tools.rs",
        role: Role::Yours,
        what: "your `rust:` tools, one type per tool",
    },
    LayoutEntry {
        path: "src/generated.rs",
        role: Role::Generated,
        what: "agent id, spec hash, the embedded spec and the registration of your `rust:` tools",
    },
    LayoutEntry {
        path: "src/main.rs",
        role: Role::Yours,
        what: "the entry point; add your own startup code here",
    },
    LayoutEntry {
        path: "tests/smoke.rs",
        role: Role::Yours,
        what: "starts the built server and checks `/healthz`, `validate` and `hash`",
    },
];
