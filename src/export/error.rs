//! Everything that can stop an export, each saying what was wrong and where.

use std::path::PathBuf;

use thiserror::Error;
use tollgate_runtime::SpecError;
use tollgate_runtime::cli::exit;

#[derive(Debug, Error)]
pub enum ExportError {
    /// Missing, unreadable or invalid spec: `SPEC:LINE:COL: message`, as
    /// `tollgate validate` prints it.
    #[error("{0}")]
    Spec(#[from] SpecError),

    #[error("--out {}: is a file, not a directory", .0.display())]
    OutIsFile(PathBuf),

    #[error("--out {}: cannot write there: {source}", .path.display())]
    Unwritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "{} edited since the last export: {}; restore {} or re-export with --force to overwrite {}",
        if .paths.len() == 1 { "this file was" } else { "these files were" },
        .paths.join(", "),
        if .paths.len() == 1 { "it" } else { "them" },
        if .paths.len() == 1 { "it" } else { "them" }
    )]
    EditedFiles { paths: Vec<String> },

    #[error(
        "--out {}: is not empty and is not a tollgate export (no {}; it holds {found}): export into a new or empty directory, or pass --force to export into it anyway (files the export generates are overwritten there, files of yours already there are kept, with the new version beside them as FILE.new)",
        .dir.display(),
        super::MANIFEST_PATH
    )]
    NotAnExport { dir: PathBuf, found: String },

    #[error(
        "--out {}: holds the export of agent {previous:?}, but this spec is agent {agent:?}: export it into another directory, or pass --force to turn this export into {agent:?}'s (files of yours are merged, never overwritten)",
        .dir.display()
    )]
    OtherAgent {
        dir: PathBuf,
        previous: String,
        agent: String,
    },

    #[error(
        "{}: is a symbolic link; an export writes only inside its own directory, never through a link: replace the link with a directory of its own (or remove it) and export again",
        .path.display()
    )]
    LinkInside { path: PathBuf },

    #[error("{path}: is a directory, but the export writes a file there")]
    DirectoryInTheWay { path: String },

    #[error("{}: not a valid export manifest ({reason}); delete it to export afresh", .path.display())]
    Manifest { path: PathBuf, reason: String },

    #[error("tools {first:?} and {second:?} would both be the Rust type {type_name}; rename one")]
    ToolTypeClash {
        first: String,
        second: String,
        type_name: String,
    },

    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A bug in a template or in the code generator, never the user's input.
    #[error("internal error while generating {file}: {message}")]
    Internal { file: String, message: String },
}

impl ExportError {
    /// The CLI exit status (DESIGN §6): bad input, conflict (edited files,
    /// someone else's directory or another agent's export in the way), else
    /// failed; the numbers are `cli::exit`'s, shared with
    /// every other command.
    pub fn exit_code(&self) -> i32 {
        match self {
            ExportError::Spec(_)
            | ExportError::OutIsFile(_)
            | ExportError::Unwritable { .. }
            | ExportError::DirectoryInTheWay { .. }
            | ExportError::LinkInside { .. }
            | ExportError::Manifest { .. }
            | ExportError::ToolTypeClash { .. } => exit::BAD_INPUT,
            ExportError::EditedFiles { .. }
            | ExportError::NotAnExport { .. }
            | ExportError::OtherAgent { .. } => exit::CONFLICT,
            ExportError::Read { .. } | ExportError::Write { .. } | ExportError::Internal { .. } => {
                exit::RUN_FAILED
            }
        }
    }

    pub(crate) fn internal(file: &str, message: impl std::fmt::Display) -> ExportError {
        ExportError::Internal {
            file: file.to_string(),
            message: message.to_string(),
        }
    }
}
