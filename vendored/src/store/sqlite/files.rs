//! The database's files on disk (`state.db`, `-wal`, `-shm`), looked at
//! without ever opening them.
//!
//! Why never open: on Linux (and every POSIX system), closing *any*
//! descriptor of a file drops every POSIX advisory lock the process holds
//! on that file, including the locks SQLite took through its own
//! descriptors. SQLite's "How To Corrupt An SQLite Database File" (2.2)
//! warns of exactly this. A process that lost its locks looks to other
//! processes as if it had no connection: one of them then truncates and
//! rebuilds the `-shm` index under it (SIGBUS in the process still mapping
//! it) or checkpoints pages it is still reading, and the file is damaged.
//! So code beside a live connection may only ask the file system about
//! these files by path (`stat`, `access`, `chmod`), never `open` them; the
//! runtime's `clippy.toml` forbids `std::fs` opens, and a test checks that
//! the health paths leave the process's locks in place.

use std::io;
use std::path::{Path, PathBuf};

use crate::store::StoreError;

/// The companion files SQLite keeps beside the database in WAL mode.
const COMPANIONS: [&str; 2] = ["-wal", "-shm"];

/// The path of `path`'s companion with `suffix` (`-wal`, `-shm`).
pub(super) fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether this process may write `file`, asked by path (`faccessat(2)`
/// with the effective ids, as an open for writing would be checked): no
/// descriptor is opened, so no lock of this process is dropped.
#[cfg(unix)]
pub(super) fn writable(file: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(file.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the
    // call; faccessat only reads it.
    let answer = unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            libc::W_OK,
            libc::AT_EACCESS,
        )
    };
    if answer == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Elsewhere: the permission bits only (no descriptor opened either).
#[cfg(not(unix))]
pub(super) fn writable(file: &Path) -> io::Result<()> {
    if std::fs::metadata(file)?.permissions().readonly() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the file is read-only",
        ));
    }
    Ok(())
}

/// Refuse a file that cannot be written, before SQLite opens it (which
/// would open it read-only and create its `-wal` and `-shm` read-only too),
/// and give a `-wal`/`-shm` left read-only by such an earlier open the main
/// file's permissions back. Safe beside a live connection: nothing here
/// opens a file.
pub(super) fn check_writable(path: &Path) -> Result<(), StoreError> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(()); // a new file: SQLite creates it, or says why not
    };
    let shown = path.display().to_string();
    if let Err(e) = writable(path) {
        return Err(StoreError::NotWritable {
            path: shown,
            detail: format!(
                "it cannot be written ({e}). Make it writable (chmod u+w, or mount its \
                 filesystem read-write) and start again; nothing was opened, so nothing else \
                 needs fixing"
            ),
        });
    }
    for suffix in COMPANIONS {
        let companion = companion(path, suffix);
        if !companion.exists() || writable(&companion).is_ok() {
            continue;
        }
        // SQLite creates these with the main file's permissions: one that is
        // read-only while the file is not is left from a read-only episode.
        let _ = std::fs::set_permissions(&companion, meta.permissions());
        if let Err(e) = writable(&companion) {
            return Err(StoreError::NotWritable {
                path: companion.display().to_string(),
                detail: format!(
                    "it cannot be written ({e}) although {shown} can: it was left read-only by \
                     an earlier open of a read-only {shown}. Make it writable (chmod u+w {c}) \
                     or, while no process uses the database, remove it",
                    c = companion.display()
                ),
            });
        }
        tracing::warn!(
            file = %companion.display(),
            "gave a read-only SQLite companion file the database's permissions back"
        );
    }
    Ok(())
}

/// Create the directory the database goes in.
pub(super) fn create_parent_dir(path: &Path) -> Result<(), StoreError> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    if parent.as_os_str().is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(parent).map_err(|e| StoreError::InvalidLocation {
        location: path.display().to_string(),
        reason: format!("cannot create directory {}: {e}", parent.display()),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;
    use crate::store::prelude::*;
    use crate::store::sqlite::{SqliteOptions, SqliteStore};

    /// The POSIX locks this process holds on `file`, from /proc/locks (a
    /// lock names its holder's pid and the file's device and inode).
    #[expect(
        clippy::disallowed_methods,
        reason = "reads a /proc file, never a database file"
    )]
    fn locks_held_on(file: &Path) -> Vec<String> {
        let meta = std::fs::metadata(file).expect("stat");
        let inode = format!(":{} ", meta.ino());
        let pid = format!(" {} ", std::process::id());
        std::fs::read_to_string("/proc/locks")
            .expect("/proc/locks")
            .lines()
            .filter(|line| line.contains("POSIX") && line.contains(&pid))
            .filter(|line| line.contains(&inode))
            .map(str::to_string)
            .collect()
    }

    /// A connection holds a shared lock on its `-shm` for as long as it is
    /// open (SQLite's "DMS" lock): other processes read it as "someone
    /// still uses this index, do not rebuild it". The health paths and a
    /// second open of the same file must leave it in place.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn health_checks_and_a_second_open_keep_sqlites_locks() {
        let dir = std::env::temp_dir().join(format!("tollgate-locks-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let db = dir.join("state.db");
        let store = SqliteStore::open(&db, SqliteOptions::default()).expect("open");
        store.verify_writable().await.expect("a first write");
        let shm = companion(&db, "-shm");
        let before = locks_held_on(&shm);
        assert!(
            !before.is_empty(),
            "an open connection holds a lock on {shm:?}"
        );

        store.check_writable().await.expect("/healthz's check");
        store.verify_writable().await.expect("/readyz's check");
        let second = SqliteStore::open(&db, SqliteOptions::default()).expect("a second open");
        second.check_writable().await.expect("its health check");
        drop(second);

        assert_eq!(
            locks_held_on(&shm).len(),
            before.len(),
            "the first store's locks on {shm:?} are still held"
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_read_only_file_is_refused_by_path() {
        let dir = std::env::temp_dir().join(format!("tollgate-ro-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let missing = dir.join("none.db");
        assert!(
            check_writable(&missing).is_ok(),
            "a new file is SQLite's to create"
        );
        assert!(writable(&dir).is_ok());
        assert!(writable(&dir.join("no/such")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
