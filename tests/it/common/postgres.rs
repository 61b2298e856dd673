//! A throwaway PostgreSQL cluster per test binary, and a fresh database per
//! test. A test that stops the database (an outage) takes a cluster of its
//! own ([`private_cluster`]), so the other tests of the binary never see it.
//!
//! The cluster is made on first use: `initdb` (as the `postgres` user when
//! running as root: initdb refuses root) in a new directory under the temp
//! dir, `pg_ctl start` on a free loopback port with its socket in that
//! directory and trust authentication. Binaries come from `pg_config
//! --bindir`, then `/usr/lib/postgresql/*/bin` (newest first), then PATH;
//! without them every test using this fails, saying to install
//! `postgresql`: never a silent skip.
//!
//! Stopping it: a test binary's statics are never dropped, and a binary can
//! die by a panic in a helper thread or a signal. So the cluster gets a
//! watchdog process when it starts: it waits for this process to end (for
//! any reason) and then stops the cluster (`pg_ctl stop -m immediate`) and
//! removes its directory. No stray clusters pile up.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
    next_db: AtomicUsize,
}

/// A database of its own for one test.
pub struct TestDb {
    pub name: String,
    pub url: String,
    cluster: &'static Cluster,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The cluster of this test binary, started on first use.
pub fn cluster() -> &'static Cluster {
    match CLUSTER.get_or_init(Cluster::start) {
        Ok(cluster) => cluster,
        Err(why) => panic!("{why}"),
    }
}

/// A new, empty database on the shared cluster.
pub fn database() -> TestDb {
    cluster().database()
}

/// A cluster for one test alone, started now: for a test that stops and
/// restarts its database, which must not take the shared cluster down
/// under every other test of the binary. It lives, like the shared one,
/// until its watchdog sees this process end.
pub fn private_cluster() -> &'static Cluster {
    let cluster = Cluster::start().unwrap_or_else(|why| panic!("{why}"));
    Box::leak(Box::new(cluster))
}

impl TestDb {
    /// Run SQL in this database with psql; returns its unaligned output.
    pub fn psql(&self, sql: &str) -> String {
        self.cluster.psql(&self.name, sql)
    }
}

impl Cluster {
    /// A new, empty database on this cluster.
    pub fn database(&'static self) -> TestDb {
        let n = self.next_db.fetch_add(1, Ordering::SeqCst);
        let name = format!("t_{n}");
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        TestDb {
            url: self.url(&name),
            name,
            cluster: self,
        }
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn bin(&self, tool: &str) -> PathBuf {
        self.bin.join(tool)
    }

    /// `psql -At` against `db`; panics with psql's message on an error.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin("psql"))
            .args(["-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-d", db])
            .args(["-c", sql])
            .stdin(Stdio::null())
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql failed on {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn start() -> Result<Cluster, String> {
        let bin = find_bindir().ok_or(
            "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found via \
             `pg_config --bindir`, /usr/lib/postgresql/*/bin or PATH: install `postgresql` \
             (e.g. `apt-get install postgresql`) to run the PostgreSQL tests",
        )?;
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!(
            "tollgate-pg-{}-{}",
            std::process::id(),
            uuid_like()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        if as_postgres {
            let status = Command::new("chown")
                .args(["postgres:postgres", &dir.display().to_string()])
                .status()
                .map_err(|e| format!("chown: {e}"))?;
            if !status.success() {
                return Err(format!(
                    "cannot hand {} to the postgres user",
                    dir.display()
                ));
            }
        }
        let port = free_port()?;
        let cluster = Cluster {
            bin,
            dir,
            port,
            as_postgres,
            next_db: AtomicUsize::new(0),
        };
        cluster.watchdog()?;
        let data = cluster.dir.join("data");
        cluster.run(
            "initdb",
            &[
                "-D",
                &data.display().to_string(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
        )?;
        cluster.pg_ctl_start()?;
        Ok(cluster)
    }

    fn data_dir(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={dir} \
             -c max_connections=200 -c fsync=off -c full_page_writes=off",
            port = self.port,
            dir = self.dir.display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data_dir(),
                "-l",
                &self.dir.join("server.log").display().to_string(),
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                "start",
            ],
        )
    }

    /// Stop the whole cluster at once (`-m immediate`: connections drop as
    /// in a crash), for an outage: only on a [`private_cluster`].
    pub fn stop(&self) {
        self.run(
            "pg_ctl",
            &["-D", &self.data_dir(), "-w", "stop", "-m", "immediate"],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Start the cluster again after [`Cluster::stop`], on the same port.
    pub fn start_again(&self) {
        self.pg_ctl_start().unwrap_or_else(|e| panic!("{e}"));
    }

    /// A tool of the cluster, as the postgres user when we are root.
    fn command(&self, tool: &str) -> Command {
        let path = self.bin(tool);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let out: Output = self
            .command(tool)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {tool}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        Err(format!(
            "{tool} failed: {}\n{}\n{log}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }

    /// Stop the cluster and remove its directory once this process ends.
    fn watchdog(&self) -> Result<(), String> {
        let pg_ctl = self.bin("pg_ctl").display().to_string();
        let data = self.dir.join("data").display().to_string();
        let stop = if self.as_postgres {
            format!("runuser -u postgres -- '{pg_ctl}' -D '{data}' stop -m immediate")
        } else {
            format!("'{pg_ctl}' -D '{data}' stop -m immediate")
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.2; done; \
             [ -f '{data}/postmaster.pid' ] && {stop}; rm -rf '{dir}'",
            pid = std::process::id(),
            dir = self.dir.display(),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(drop)
            .map_err(|e| format!("cannot start the cluster's watchdog: {e}"))
    }
}

fn find_bindir() -> Option<PathBuf> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_server(&dir) {
            return Some(dir);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| has_server(p))
        .collect();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(newest) = versions.pop() {
        return Some(newest);
    }
    std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|dir| has_server(dir)))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("no free loopback port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{nanos:08x}")
}
