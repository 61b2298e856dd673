//! Where the state lives: --state, --database-url / TOLLGATE_DATABASE_URL,
//! or `.tollgate/state.db` next to the spec.

use std::path::{Path, PathBuf};

use super::args::StoreArgs;
use super::common::SpecSource;
use super::exit::ExitFailure;
use crate::store::{self, SharedStore, SqliteOptions, Synchronous};
use crate::support::env;

/// The default state file of a spec.
pub fn default_state_path(spec: &Path) -> PathBuf {
    let dir = spec.parent().filter(|p| !p.as_os_str().is_empty());
    dir.unwrap_or(Path::new("."))
        .join(".tollgate")
        .join("state.db")
}

/// Resolve and open the store named by the flags, falling back to the spec's
/// default state file. Creates a SQLite file that is not there yet: for the
/// commands that write (`run --persist`, `serve`).
pub fn open(args: &StoreArgs, spec: Option<&SpecSource>) -> Result<SharedStore, ExitFailure> {
    let (location, _) = locate(args, spec)?;
    store::open(&location, sqlite_options()?).map_err(|e| ExitFailure::bad_input(e.to_string()))
}

/// [`open`] for commands that read or decide what is already stored
/// (`approvals list|show|approve|reject`): a SQLite file that does not exist
/// is not created (an empty new store would only answer "nothing pending"
/// from the wrong place); it is exit 3, naming the path and why it was
/// looked at. A PostgreSQL database must exist to be connected to at all.
pub fn open_existing(
    args: &StoreArgs,
    spec: Option<&SpecSource>,
) -> Result<SharedStore, ExitFailure> {
    let (location, why) = locate(args, spec)?;
    if let Some(path) = sqlite_path(&location) {
        if !path.exists() {
            return Err(ExitFailure::new(
                super::exit::NOT_FOUND,
                format!(
                    "no state store at {} ({why}); nothing was created. Point at the store with --state PATH or --database-url URL",
                    path.display()
                ),
            ));
        }
    }
    store::open(&location, sqlite_options()?).map_err(|e| ExitFailure::bad_input(e.to_string()))
}

/// [`open`] for a command that joins a store others use (`mcp`): a new
/// SQLite file may be created, but one named with `--state` only in a
/// directory that exists, so a mistyped directory is refused (exit 3,
/// naming it) instead of quietly starting an empty store that nobody else
/// reads. The default next to the spec is made as for `serve`.
pub fn open_in_existing_dir(
    args: &StoreArgs,
    spec: Option<&SpecSource>,
) -> Result<SharedStore, ExitFailure> {
    let (location, why) = locate(args, spec)?;
    if let Some(dir) = args
        .state
        .as_ref()
        .and_then(|_| sqlite_path(&location))
        .and_then(Path::parent)
        .filter(|dir| !dir.as_os_str().is_empty() && !dir.is_dir())
    {
        return Err(ExitFailure::new(
            super::exit::NOT_FOUND,
            format!(
                "no directory {} for the state store {location} ({why}); nothing was created. Point at the store with --state PATH or --database-url URL",
                dir.display()
            ),
        ));
    }
    store::open(&location, sqlite_options()?).map_err(|e| ExitFailure::bad_input(e.to_string()))
}

/// The store location and which flag (or default) named it.
fn locate(
    args: &StoreArgs,
    spec: Option<&SpecSource>,
) -> Result<(String, &'static str), ExitFailure> {
    if let Some(path) = &args.state {
        Ok((path.display().to_string(), "from --state"))
    } else if let Some(url) = &args.database_url {
        Ok((url.clone(), "from --database-url or TOLLGATE_DATABASE_URL"))
    } else if let Some(spec) = spec {
        let why = match spec {
            SpecSource::File(_) => "the default next to the spec",
            SpecSource::Embedded(_) => "the default in the working directory",
        };
        Ok((spec.default_state_path().display().to_string(), why))
    } else {
        Err(ExitFailure::bad_input(
            "say where the state is: --spec SPEC, --state PATH or --database-url URL",
        ))
    }
}

/// The file of a SQLite location, as `store::open` reads it; `None` for
/// memory and PostgreSQL locations.
fn sqlite_path(location: &str) -> Option<&Path> {
    let is_other = location == "memory:"
        || location == "memory://"
        || location.starts_with("postgres://")
        || location.starts_with("postgresql://");
    let path = location.strip_prefix("sqlite://").unwrap_or(location);
    (!is_other && !path.is_empty()).then(|| Path::new(path))
}

/// `TOLLGATE_SQLITE_SYNCHRONOUS=normal` trades the last commits before a
/// power loss for speed; FULL is the default. `TOLLGATE_SQLITE_BUSY_TIMEOUT`
/// (a duration) is how long a write waits for another process's lock before
/// it fails as busy (`serve` then answers 503 with Retry-After).
fn sqlite_options() -> Result<SqliteOptions, ExitFailure> {
    let synchronous = match std::env::var(env::SQLITE_SYNCHRONOUS) {
        Ok(v) if v.eq_ignore_ascii_case("normal") => Synchronous::Normal,
        _ => Synchronous::Full,
    };
    let defaults = SqliteOptions::default();
    let busy_timeout = match std::env::var(env::SQLITE_BUSY_TIMEOUT) {
        Ok(text) => crate::support::time::parse_duration(&text)
            .map_err(|e| ExitFailure::bad_input(format!("{}: {e}", env::SQLITE_BUSY_TIMEOUT)))?,
        Err(_) => defaults.busy_timeout,
    };
    Ok(SqliteOptions {
        synchronous,
        busy_timeout,
        ..defaults
    })
}
