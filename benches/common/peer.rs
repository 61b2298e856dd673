//! The LangGraph peer (bench/peer_langgraph.py) run from a bench: one
//! process per sample on a fresh file in a temp dir (the same disk as
//! tollgate's); it times itself, so interpreter start-up is not counted, and
//! prints one `key=value` line.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const PEER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/peer_langgraph.py");

/// One run of the peer: its `key=value` line.
pub struct PeerSample(HashMap<String, String>);

impl PeerSample {
    pub fn field(&self, key: &str) -> &str {
        self.0.get(key).map_or("?", String::as_str)
    }

    pub fn cycles_per_s(&self) -> f64 {
        let value = self.field("cycles_per_s");
        value
            .parse()
            .unwrap_or_else(|_| panic!("the LangGraph peer printed cycles_per_s={value}"))
    }
}

/// `cycles` cycles of the peer: one stream when `concurrency` is 1, else
/// that many concurrent runs (its `--concurrency`). The peer checks that
/// every cycle completed; this checks it said so.
pub fn langgraph_cycles(python: &Path, cycles: usize, concurrency: usize) -> PeerSample {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = Command::new(python);
    command.arg(PEER_SCRIPT);
    if concurrency > 1 {
        command.args(["--concurrency", &concurrency.to_string()]);
    }
    let output = command
        .arg(cycles.to_string())
        .arg(dir.path().join("langgraph.db"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run TOLLGATE_BENCH_PYTHON={}: {e} (make one with bench/langgraph-venv)",
                python.display()
            )
        });
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the LangGraph peer failed: {} {PEER_SCRIPT} {cycles} ({}); does TOLLGATE_BENCH_PYTHON have the packages of bench/requirements-langgraph.txt?\n{stdout}{}",
        python.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    let sample = PeerSample(
        line.split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    // A line without the figure fails here, at the sample that printed it.
    sample.cycles_per_s();
    assert_eq!(
        sample.field("completed"),
        cycles.to_string(),
        "the LangGraph peer completed fewer cycles than it ran: {line}"
    );
    sample
}
