//! Spec errors: what is wrong and where (file:line:column).

use std::fmt;

/// The broad class of a spec error, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecErrorKind {
    /// The file could not be read.
    Io,
    /// Not valid YAML.
    Syntax,
    /// Valid YAML, but not a valid spec (wrong type, unknown key, ...).
    Invalid,
}

/// A spec error with its position. Displays as `FILE:LINE:COL: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub kind: SpecErrorKind,
    pub origin: String,
    /// 1-based; 0 when the error has no position (I/O).
    pub line: usize,
    /// 1-based; 0 when the error has no position.
    pub column: usize,
    pub message: String,
}

impl SpecError {
    pub fn at(
        kind: SpecErrorKind,
        origin: &str,
        line: usize,
        column: usize,
        message: impl Into<String>,
    ) -> SpecError {
        SpecError {
            kind,
            origin: origin.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    pub fn io(origin: &str, err: std::io::Error) -> SpecError {
        SpecError {
            kind: SpecErrorKind::Io,
            origin: origin.to_string(),
            line: 0,
            column: 0,
            message: format!("cannot read spec: {err}"),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.origin, self.line, self.column, self.message
            )
        }
    }
}

impl std::error::Error for SpecError {}
