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
static TLS_CLUSTER: OnceLock<Result<TlsCluster, String>> = OnceLock::new();

/// A cluster that speaks TLS only: `ssl=on` with a server certificate for
/// `localhost` and `127.0.0.1` signed by a throwaway CA (made with the
/// `openssl` CLI), and a pg_hba that accepts TCP only over TLS (`hostssl`
/// trust, `hostnossl` reject). A connection that gets in was encrypted.
pub struct TlsCluster {
    pub cluster: &'static Cluster,
    /// The CA that signed the server's certificate (PEM).
    pub ca: PathBuf,
    /// A CA that signed nothing the server has: for a failed verification.
    pub wrong_ca: PathBuf,
}

/// A superuser of the TLS cluster that must log in with its password
/// (SCRAM-SHA-256), where every other user is trusted.
pub const SCRAM_USER: &str = "tollgate_scram";
pub const SCRAM_PASSWORD: &str = "scram-pw-9f3a";

/// The TLS cluster of this test binary, started on first use.
pub fn tls_cluster() -> &'static TlsCluster {
    match TLS_CLUSTER.get_or_init(TlsCluster::start) {
        Ok(cluster) => cluster,
        Err(why) => panic!("{why}"),
    }
}

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
        let cluster = Cluster::init()?;
        cluster.pg_ctl_start()?;
        Ok(cluster)
    }

    /// A new cluster, its data directory made and not yet started.
    fn init() -> Result<Cluster, String> {
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

impl TlsCluster {
    fn start() -> Result<TlsCluster, String> {
        let cluster: &'static Cluster = Box::leak(Box::new(Cluster::init()?));
        let dir = &cluster.dir;
        let ca = make_ca(dir, "ca")?;
        let wrong_ca = make_ca(dir, "wrong-ca")?;
        let (cert, key) = make_server_cert(dir)?;
        if cluster.as_postgres {
            // The server reads its key as the postgres user, and refuses a
            // key others can read.
            let key_file = key.display().to_string();
            let cert_file = cert.display().to_string();
            for args in [
                vec![
                    "chown",
                    "postgres:postgres",
                    key_file.as_str(),
                    cert_file.as_str(),
                ],
                vec!["chmod", "600", key_file.as_str()],
            ] {
                sh(Command::new(args[0]).args(&args[1..]))?;
            }
        } else {
            sh(Command::new("chmod").args(["600", &key.display().to_string()]))?;
        }
        let data = dir.join("data");
        append(
            &data.join("postgresql.conf"),
            &format!(
                "\nssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\n",
                cert.display(),
                key.display()
            ),
        )?;
        // Replaces initdb's rules: sockets trusted (psql from the helpers
        // goes over TCP and so over TLS), TCP over TLS only.
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostssl all tollgate_scram 127.0.0.1/32 scram-sha-256\n\
             hostssl all all 127.0.0.1/32 trust\n\
             hostssl all all ::1/128 trust\n\
             hostnossl all all 0.0.0.0/0 reject\n\
             hostnossl all all ::/0 reject\n",
        )
        .map_err(|e| format!("write pg_hba.conf: {e}"))?;
        cluster.pg_ctl_start()?;
        cluster.psql(
            "postgres",
            &format!("CREATE ROLE {SCRAM_USER} LOGIN SUPERUSER PASSWORD '{SCRAM_PASSWORD}'"),
        );
        Ok(TlsCluster {
            cluster,
            ca,
            wrong_ca,
        })
    }
}

fn append(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("append to {}: {e}", path.display()))
}

/// Run a command; its stderr in the error when it fails.
fn sh(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e} (is the `openssl` CLI installed?)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A self-signed CA, `NAME.pem` and `NAME.key` in `dir`; returns the PEM.
fn make_ca(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let pem = dir.join(format!("{name}.pem"));
    sh(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=tollgate test {name}"),
        ])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        .arg("-keyout")
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(&pem))?;
    Ok(pem)
}

/// The server's certificate, for `localhost` and `127.0.0.1`, signed by `ca`.
fn make_server_cert(dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let (key, csr, cert, ext) = (
        dir.join("server.key"),
        dir.join("server.csr"),
        dir.join("server.crt"),
        dir.join("server.ext"),
    );
    sh(Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&csr))?;
    std::fs::write(
        &ext,
        "subjectAltName = DNS:localhost, IP:127.0.0.1\n\
         basicConstraints = critical, CA:FALSE\n\
         keyUsage = critical, digitalSignature, keyEncipherment\n\
         extendedKeyUsage = serverAuth\n",
    )
    .map_err(|e| format!("write {}: {e}", ext.display()))?;
    sh(Command::new("openssl")
        .args(["x509", "-req", "-days", "2", "-set_serial", "1"])
        .arg("-in")
        .arg(&csr)
        .arg("-CA")
        .arg(dir.join("ca.pem"))
        .arg("-CAkey")
        .arg(dir.join("ca.key"))
        .arg("-extfile")
        .arg(&ext)
        .arg("-out")
        .arg(&cert))?;
    Ok((cert, key))
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
