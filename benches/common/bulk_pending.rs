//! Many pending approvals in bulk, not through the API: a few hundred real
//! pauses made by the runtime (the templates), then their rows cloned with
//! `INSERT ... SELECT` under new run ids and keys, on SQLite or PostgreSQL.
//!
//! A clone is a pause as the runtime writes it: its run row, its five
//! events and its approval row, every column copied from its template with
//! the template's run id, key and expiry replaced inside text and JSON
//! (events, payloads) by the clone's. Run ids are UUID v7s of the clone's
//! creation time (as `AgentRun::start` makes them), keys UUID v4s (as
//! `new_key`); creation times are spread over the day before the seed,
//! expiries over the 2..14 days after creation. The times inside a clone's
//! events (`at`) and its trigger stay its template's: nothing reads them to
//! list, claim or sweep.
//!
//! Every tenth clone is made overdue later (`make_overdue`), for the
//! sweeper: until then it expires at [`OVERDUE_PLACEHOLDER`].
#![allow(dead_code)] // each bench uses part of it

use std::fmt::Write as _;
use std::path::Path;

use chrono::{DateTime, Duration, Utc};

/// Where the overdue tenth waits until `make_overdue` brings it due.
pub const OVERDUE_PLACEHOLDER: &str = "2999-01-01T00:00:00.000000Z";
/// The tables one pause writes (the spec's row is shared by all).
pub const PAUSE_TABLES: [&str; 3] = ["tollgate_runs", "tollgate_run_events", "tollgate_approvals"];

/// `count` real pauses of the workload through the runtime: the templates
/// the clones copy (run ids and keys as the runtime makes them).
pub async fn make_templates(agent: &tollgate_runtime::AgentRun, count: usize) {
    for i in 0..count {
        let paused = agent
            .start(
                serde_json::json!({"order_id": format!("T-{i}"), "amount": 100 + i}),
                serde_json::json!({"kind": "bench"}),
            )
            .await
            .expect("start");
        paused.pending.expect("paused at the gate");
    }
}

/// One clone: which template, its ids and times (in the runtime's text form).
pub struct Clone {
    pub template: usize,
    pub run_id: String,
    pub key: String,
    pub created_at: String,
    pub expires_at: String,
}

impl Clone {
    pub fn overdue(&self) -> bool {
        self.expires_at == OVERDUE_PLACEHOLDER
    }
}

/// `count` clones of `templates` templates, oldest first.
pub fn clones(count: usize, templates: usize) -> Vec<Clone> {
    let mut random = SplitMix(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos() as u64,
    );
    let now = Utc::now();
    let day_us = 86_400_000_000i64;
    (0..count)
        .map(|i| {
            let created = now - Duration::microseconds(day_us - day_us * i as i64 / count as i64);
            let expires = if i % 10 == 0 {
                OVERDUE_PLACEHOLDER.to_string()
            } else {
                let after = 2 * day_us + (random.next() % (12 * day_us as u64)) as i64;
                format_utc(created + Duration::microseconds(after))
            };
            Clone {
                template: i % templates,
                run_id: uuid_v7(created, &mut random),
                key: uuid_v4(&mut random),
                created_at: format_utc(created),
                expires_at: expires,
            }
        })
        .collect()
}

/// The runtime's stored time form (`time::format_utc`).
pub fn format_utc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// How one column of a pause table is filled for a clone.
fn column_expr(table: &str, column: &str, kind: ColumnKind, postgres: bool) -> String {
    let clone_col = match (table, column) {
        ("tollgate_runs", "id") | (_, "run_id") => Some("k.run_id"),
        ("tollgate_approvals", "key") => Some("k.key"),
        (_, "created_at") | ("tollgate_runs", "updated_at") => Some("k.created_at"),
        ("tollgate_approvals", "expires_at") => Some("k.expires_at"),
        _ => None,
    };
    if let Some(value) = clone_col {
        return match kind {
            ColumnKind::Time if postgres => format!("{value}::timestamptz"),
            _ => value.to_string(),
        };
    }
    let replaced = |text: &str| {
        format!(
            "replace(replace(replace({text}, t.run_id, k.run_id), t.key, k.key), t.expires_at, k.expires_at)"
        )
    };
    match kind {
        ColumnKind::Text => replaced(&format!("s.\"{column}\"")),
        ColumnKind::Json if postgres => {
            format!("{}::json", replaced(&format!("s.\"{column}\"::text")))
        }
        ColumnKind::Jsonb => format!("{}::jsonb", replaced(&format!("s.\"{column}\"::text"))),
        _ => format!("s.\"{column}\""),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ColumnKind {
    Text,
    Json,
    Jsonb,
    Time,
    Other,
}

/// `INSERT ... SELECT` of `table`'s template rows once per clone, in the
/// clones' order (the pending index and the run ids grow at their end, as
/// when the runtime writes them). `bench_clones k` and `bench_templates t`
/// must exist.
fn clone_sql(table: &str, columns: &[(String, ColumnKind)], postgres: bool) -> String {
    let names: Vec<String> = columns.iter().map(|(c, _)| format!("\"{c}\"")).collect();
    let exprs: Vec<String> = columns
        .iter()
        .map(|(c, kind)| column_expr(table, c, *kind, postgres))
        .collect();
    let (join, order) = match table {
        "tollgate_runs" => ("s.id = t.run_id", "k.n"),
        "tollgate_run_events" => ("s.run_id = t.run_id", "k.n, s.seq"),
        _ => ("s.key = t.key", "k.n"),
    };
    format!(
        "INSERT INTO {table} ({}) SELECT {} FROM bench_clones k \
         JOIN bench_templates t ON t.n = k.template JOIN {table} s ON {join} ORDER BY {order}",
        names.join(", "),
        exprs.join(", ")
    )
}

/// Clone the pauses already in the SQLite file at `state` (the templates)
/// into `clones`; the file stays in WAL mode, checkpointed.
pub fn seed_sqlite(state: &Path, clones: &[Clone]) {
    let mut conn = rusqlite::Connection::open(state).expect("open state");
    // Only the seed: the server later opens the file at its own settings.
    conn.execute_batch(
        "PRAGMA synchronous = OFF; PRAGMA cache_size = -1000000; PRAGMA temp_store = MEMORY;",
    )
    .expect("pragmas");
    let tx = conn.transaction().expect("begin");
    tx.execute_batch(
        "CREATE TEMP TABLE bench_templates AS \
           SELECT row_number() OVER (ORDER BY created_at, key) - 1 AS n, run_id, key, expires_at \
           FROM tollgate_approvals; \
         CREATE TEMP TABLE bench_clones (n INTEGER PRIMARY KEY, template INTEGER, run_id TEXT, \
           key TEXT, created_at TEXT, expires_at TEXT);",
    )
    .expect("temp tables");
    {
        let mut insert = tx
            .prepare("INSERT INTO bench_clones VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .expect("prepare");
        for (n, c) in clones.iter().enumerate() {
            insert
                .execute(rusqlite::params![
                    n as i64,
                    c.template as i64,
                    c.run_id,
                    c.key,
                    c.created_at,
                    c.expires_at
                ])
                .expect("clone row");
        }
    }
    for table in PAUSE_TABLES {
        let columns: Vec<(String, ColumnKind)> = tx
            .prepare(&format!(
                "SELECT name, type FROM pragma_table_info('{table}')"
            ))
            .expect("columns")
            .query_map([], |r| {
                let (name, kind): (String, String) = (r.get(0)?, r.get(1)?);
                Ok((
                    name,
                    if kind == "TEXT" {
                        ColumnKind::Text
                    } else {
                        ColumnKind::Other
                    },
                ))
            })
            .expect("columns")
            .collect::<Result<_, _>>()
            .expect("columns");
        tx.execute(&clone_sql(table, &columns, false), [])
            .unwrap_or_else(|e| panic!("cloning {table}: {e}"));
    }
    tx.execute_batch("DROP TABLE bench_clones; DROP TABLE bench_templates;")
        .expect("drop temp tables");
    tx.commit().expect("commit");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
}

/// The same on PostgreSQL through `psql` (a closure running SQL in the
/// database, returning `psql -At`'s output): the clones are loaded with
/// `\copy` from a CSV file in `scratch`, then cloned in one transaction and
/// the tables analyzed (as autovacuum would).
pub fn seed_postgres(psql: &dyn Fn(&str) -> String, scratch: &Path, clones: &[Clone]) {
    let csv = scratch.join("clones.csv");
    let mut text = String::with_capacity(clones.len() * 160);
    for (n, c) in clones.iter().enumerate() {
        let _ = writeln!(
            text,
            "{n},{},{},{},{},{}",
            c.template, c.run_id, c.key, c.created_at, c.expires_at
        );
    }
    std::fs::write(&csv, text).expect("write clones.csv");
    // psql reads the file as the user running the bench (\copy, not COPY).
    psql(
        "CREATE UNLOGGED TABLE bench_clones (n bigint PRIMARY KEY, template bigint, run_id text, \
           key text, created_at text, expires_at text)",
    );
    psql(&format!(
        "\\copy bench_clones FROM '{}' WITH (FORMAT csv)",
        csv.display()
    ));
    let mut sql = String::from(
        "BEGIN; CREATE TEMP TABLE bench_templates AS \
           SELECT row_number() OVER (ORDER BY created_at, key) - 1 AS n, run_id, key, \
             to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS expires_at \
           FROM tollgate_approvals;",
    );
    for table in PAUSE_TABLES {
        let columns: Vec<(String, ColumnKind)> = psql(&format!(
            "SELECT column_name, data_type FROM information_schema.columns \
             WHERE table_name = '{table}' ORDER BY ordinal_position"
        ))
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(name, kind)| {
            let kind = match kind {
                "text" => ColumnKind::Text,
                "json" => ColumnKind::Json,
                "jsonb" => ColumnKind::Jsonb,
                "timestamp with time zone" => ColumnKind::Time,
                _ => ColumnKind::Other,
            };
            (name.to_string(), kind)
        })
        .collect();
        sql.push_str(&clone_sql(table, &columns, true));
        sql.push(';');
    }
    sql.push_str(" COMMIT; DROP TABLE bench_clones;");
    psql(&sql);
    psql("ANALYZE tollgate_runs; ANALYZE tollgate_run_events; ANALYZE tollgate_approvals;");
}

/// A small, fast generator for ids (not for secrets).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn bytes(&mut self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.next().to_be_bytes());
        b[8..].copy_from_slice(&self.next().to_be_bytes());
        b
    }
}

fn uuid_v4(random: &mut SplitMix) -> String {
    let mut b = random.bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    uuid_text(&b)
}

/// Time-ordered: the creation time's milliseconds first, as UUID v7.
fn uuid_v7(at: DateTime<Utc>, random: &mut SplitMix) -> String {
    let mut b = random.bytes();
    b[..6].copy_from_slice(&(at.timestamp_millis() as u64).to_be_bytes()[2..]);
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    uuid_text(&b)
}

fn uuid_text(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}
