//! The approval-gate API from Rust code (`tollgate_runtime::gate`), in a
//! loop: request an approval, and decide every other one, printing each
//! step on stdout as it is stored.
//!
//! ```text
//! cargo run --example gate_requests -- STATE.db [AGENT]
//! ```
//!
//! The crash tests run it and SIGKILL it mid-request and mid-decision
//! (tests/it/runs/gate_crash.rs): each request and each decision is one
//! write, so whatever the moment of the kill, the store holds whole
//! requests and whole decisions only.

use std::io::Write;
use std::time::Duration;

use serde_json::json;
use tollgate_runtime::gate::Gate;
use tollgate_runtime::pending_approval::Decision;
use tollgate_runtime::store::{self, SqliteOptions};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: gate_requests STATE.db [AGENT]");
        return std::process::ExitCode::from(2);
    };
    let agent = args.next().unwrap_or_else(|| "payouts".to_string());
    let store = match store::open(&path, SqliteOptions::default()) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("cannot open {path}: {e}");
            return std::process::ExitCode::from(3);
        }
    };
    let gate = Gate::new(store);
    let mut stdout = std::io::stdout().lock();
    for n in 0u64.. {
        let payload = json!({"payout": n, "amount_cents": 100 + n});
        let key = match gate
            .request(&agent, "send_payout", &payload, Duration::from_secs(3600))
            .await
        {
            Ok(key) => key,
            Err(e) => {
                eprintln!("request {n}: {e}");
                return std::process::ExitCode::from(1);
            }
        };
        let _ = writeln!(stdout, "requested {key}");
        if n % 2 == 1 {
            let decision = Decision::Approve { reason: None };
            if let Err(e) = gate.decide(&key, decision, "finance").await {
                eprintln!("decide {key}: {e}");
                return std::process::ExitCode::from(1);
            }
            let _ = writeln!(stdout, "approved {key}");
        }
        let _ = stdout.flush();
    }
    std::process::ExitCode::SUCCESS
}
