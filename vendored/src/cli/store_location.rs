//! Where the state lives: --state, --database-url / TOLLGATE_DATABASE_URL,
//! or `.tollgate/state.db` next to the spec.

use std::path::{Path, PathBuf};

use super::args::StoreArgs;
use super::common::SpecSource;
use super::exit::Failure;
use crate::store::{self, SharedStore, SqliteOptions, Synchronous};

/// The default state file of a spec.
pub fn default_state_path(spec: &Path) -> PathBuf {
    let dir = spec.parent().filter(|p| !p.as_os_str().is_empty());
    dir.unwrap_or(Path::new("."))
        .join(".tollgate")
        .join("state.db")
}

/// Resolve and open the store named by the flags, falling back to the spec's
/// default state file.
pub fn open(args: &StoreArgs, spec: Option<&SpecSource>) -> Result<SharedStore, Failure> {
    let location = if let Some(path) = &args.state {
        path.display().to_string()
    } else if let Some(url) = &args.database_url {
        url.clone()
    } else if let Some(spec) = spec {
        spec.default_state_path().display().to_string()
    } else {
        return Err(Failure::bad_input(
            "say where the state is: --spec SPEC, --state PATH or --database-url URL",
        ));
    };
    store::open(&location, sqlite_options()).map_err(|e| Failure::bad_input(e.to_string()))
}

/// `TOLLGATE_SQLITE_SYNCHRONOUS=normal` trades the last commits before a
/// power loss for speed; FULL is the default.
fn sqlite_options() -> SqliteOptions {
    let synchronous = match std::env::var("TOLLGATE_SQLITE_SYNCHRONOUS") {
        Ok(v) if v.eq_ignore_ascii_case("normal") => Synchronous::Normal,
        _ => Synchronous::Full,
    };
    SqliteOptions {
        synchronous,
        ..SqliteOptions::default()
    }
}
