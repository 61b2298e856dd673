//! The limits on a spec, checked through the real `tollgate validate`
//! binary: a hostile spec gets a positioned error that names the limit and a
//! clean exit (status 2), never a signal (a stack overflow is SIGABRT), and
//! parsing it stays small in memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_tollgate");

/// Write `source` as `spec.yaml` in a fresh directory.
fn spec_file(source: impl AsRef<[u8]>) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, source).expect("write spec");
    (dir, path)
}

fn validate(path: &Path) -> Output {
    Command::new(BIN)
        .arg("validate")
        .arg(path)
        .output()
        .expect("run tollgate validate")
}

/// Validate `source`, require a refusal with exit status 2 (not a signal),
/// and return the error line.
#[track_caller]
fn refused(source: impl AsRef<[u8]>) -> String {
    let (_dir, path) = spec_file(source);
    let out = validate(&path);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected a clean refusal (exit 2), got {:?}: {stderr}",
        out.status
    );
    let prefix = format!("error: {}:", path.display());
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no positioned error in: {stderr}"));
    line[prefix.len() - 1..].to_string()
}

#[track_caller]
fn accepted(source: impl AsRef<[u8]>) {
    let (_dir, path) = spec_file(source);
    let out = validate(&path);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn with_step(step: &str) -> String {
    format!("version: 1\nagent: desk\nsteps:\n{step}")
}

// ---- durations -----------------------------------------------------------

#[test]
fn every_duration_is_bounded_at_3650_days() {
    let huge = "99999999999999999ms";
    let cases = [
        (
            format!(
                "version: 1\nagent: desk\napprovals: {{ ttl: {huge} }}\nsteps:\n  - id: a\n    approval:\n"
            ),
            ":3:19: bad \"ttl\" in approvals",
        ),
        (
            with_step(&format!(
                "  - id: a\n    approval: {{ message: ok, ttl: {huge} }}\n"
            )),
            ":5:35: bad \"ttl\" in the approval of step \"a\"",
        ),
        (
            with_step(&format!(
                "  - id: a\n    if: \"{{{{ true }}}}\"\n    then: request_human_approval\n    ttl: {huge}\n"
            )),
            ":7:10: bad \"ttl\" in step \"a\"",
        ),
        (
            with_step(&format!(
                "  - id: a\n    dedupe: {{ key: k, ttl: {huge} }}\n"
            )),
            ":5:28: bad \"ttl\" in the dedupe of step \"a\"",
        ),
        (
            "version: 1\nagent: desk\ntools:\n  t:\n    http: { url: https://x.example, timeout: 3651d }\nsteps:\n  - id: a\n    tool: t\n".to_string(),
            ":5:46: bad \"timeout\" in tool \"t\"",
        ),
        (
            "version: 1\nagent: desk\ntools:\n  t:\n    http: { url: https://x.example, retry: { attempts: 2, backoff: 522w } }\nsteps:\n  - id: a\n    tool: t\n".to_string(),
            ":5:68: bad \"backoff\"",
        ),
        (
            "version: 1\nagent: desk\ntools:\n  t:\n    rust: {}\n    approval: required\n    ttl: 87601h\nsteps:\n  - id: a\n    tool: t\n".to_string(),
            ":7:10: bad \"ttl\" in tool \"t\"",
        ),
    ];
    let errors: Vec<String> = cases.iter().map(|(source, _)| refused(source)).collect();
    for (err, (_, expected)) in errors.iter().zip(&cases) {
        assert!(
            err.starts_with(expected),
            "{errors:#?}\n  expected {expected}"
        );
        assert!(err.contains("longer than the limit of 3650d"), "{err}");
    }
    // The limit itself is fine; digits beyond u64 are a clean error too.
    accepted(with_step("  - id: a\n    approval: { ttl: 3650d }\n"));
    accepted(with_step("  - id: a\n    approval: { ttl: 520w10d }\n"));
    let err = refused(with_step(
        "  - id: a\n    approval: { ttl: 99999999999999999999999d }\n",
    ));
    assert!(err.starts_with(":5:22: "), "{err}");
}

// ---- expressions ---------------------------------------------------------

fn long_sum(terms: usize) -> String {
    vec!["1"; terms].join(" + ")
}

#[test]
fn a_30000_term_expression_is_an_error_not_an_abort() {
    let spec = with_step(&format!(
        "  - id: a\n    set: {{ x: \"{{{{ {} }}}}\" }}\n",
        long_sum(30_000)
    ));
    let err = refused(spec);
    assert!(
        err.starts_with(":5:15: bad template in step \"a\": "),
        "{err}"
    );
    assert!(err.contains("more than the limit of 65536"), "{err}");
}

#[test]
fn a_10000_term_expression_is_refused_at_validate() {
    for field in [
        "set: { x: \"{{ EXPR }}\" }",
        "approval: { message: \"Sum: {{ EXPR }}\" }",
    ] {
        let step = field.replace("EXPR", &long_sum(10_000));
        let err = refused(with_step(&format!("  - id: a\n    {step}\n")));
        assert!(err.starts_with(":5:"), "{err}");
        assert!(err.contains("more than 500 tokens"), "{err}");
        assert!(
            err.len() < 500,
            "the message cuts the template short: {err}"
        );
    }
    accepted(with_step(&format!(
        "  - id: a\n    set: {{ x: \"{{{{ {} }}}}\" }}\n",
        long_sum(200)
    )));
}

#[test]
fn deep_nesting_is_refused_with_the_limit() {
    for (open, close) in [("(", ")"), ("[", "]"), ("{'a': ", "}")] {
        let expr = format!("{}1{}", open.repeat(2_000), close.repeat(2_000));
        let err = refused(with_step(&format!(
            "  - id: a\n    set: {{ x: \"{{{{ {expr} }}}}\" }}\n"
        )));
        assert!(err.starts_with(":5:15: "), "{err}");
        assert!(err.contains("brackets nest deeper than 32 levels"), "{err}");
    }
    let elifs = "{% elif false %}".repeat(1_000);
    let err = refused(with_step(&format!(
        "  - id: a\n    set: {{ x: \"{{% if false %}}{elifs}{{% endif %}}\" }}\n"
    )));
    assert!(err.contains("more than 250 {% %} tags"), "{err}");
    let nots = "not ".repeat(5_000);
    let err = refused(with_step(&format!(
        "  - id: a\n    set: {{ x: \"{{{{ {nots}true }}}}\" }}\n"
    )));
    assert!(err.contains("more than 500 tokens"), "{err}");
    // YAML nesting has its own limit.
    let yaml = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let err = refused(with_step(&format!("  - id: a\n    set: {{ x: {yaml} }}\n")));
    assert!(err.contains("deeper than 64 levels"), "{err}");
}

// ---- unknown filters, tests and functions --------------------------------

#[test]
fn unknown_filters_tests_and_functions_are_refused_by_name() {
    let err = refused(with_step(
        "  - id: a\n    set: { x: \"{{ input.amount | tofloat }}\" }\n",
    ));
    assert_eq!(
        err,
        ":5:15: bad template in step \"a\": unknown filter \"tofloat\" (did you mean \"float\"?)"
    );
    let err = refused(with_step(
        "  - id: a\n    approval: { message: \"{% if input.x is nmber %}n{% endif %}\" }\n",
    ));
    assert_eq!(
        err,
        ":5:26: bad template in step \"a\": unknown test \"nmber\" (did you mean \"number\"?)"
    );
    let err = refused(with_step(
        "  - id: a\n    set: { x: \"{{ rang(3) | list }}\" }\n",
    ));
    assert!(
        err.starts_with(":5:15: step \"a\" reads \"rang\": unknown name \"rang\""),
        "{err}"
    );
    assert!(
        err.contains("did you mean the function \"range\"?"),
        "{err}"
    );
    accepted(with_step(
        "  - id: a\n    set: { x: \"{{ range(3) | list | length | float }}\", y: \"{{ input.x is defined }}\", z: \"{{ '{\\\"a\\\": 1}' | fromjson }}\" }\n",
    ));
}

// ---- encoding and size ---------------------------------------------------

#[test]
fn invalid_utf8_gets_a_line_and_column() {
    let mut source = b"version: 1\nagent: desk\nsteps:\n  - id: a\n    set: { x: \"caf".to_vec();
    source.extend_from_slice(&[0xe9, b'"', b' ', b'}', b'\n']);
    let err = refused(&source);
    assert_eq!(
        err,
        ":5:19: the spec is not valid UTF-8: 0xe9 at byte offset 58 (save the file as UTF-8)"
    );
}

/// `export` reads the spec exactly as `validate` does: a spec that is not
/// UTF-8 is refused with the same positioned error, and nothing is written.
#[test]
fn export_refuses_a_non_utf8_spec_like_validate() {
    let mut source =
        b"version: 1\nagent: desk\n# \xff\nsteps:\n  - id: a\n    set: { x: 1 }\n".to_vec();
    source.push(b'\n');
    let (dir, path) = spec_file(&source);
    let validate_err = String::from_utf8_lossy(&validate(&path).stderr).into_owned();
    let out_dir = dir.path().join("out");
    let export = Command::new(BIN)
        .arg("export")
        .arg(&path)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("run tollgate export");
    let export_err = String::from_utf8_lossy(&export.stderr).into_owned();
    assert_eq!(export.status.code(), Some(2), "{export_err}");
    let expected = format!(
        "error: {}:3:3: the spec is not valid UTF-8: 0xff at byte offset 25 (save the file as UTF-8)",
        path.display()
    );
    assert!(validate_err.contains(&expected), "{validate_err}");
    assert!(export_err.contains(&expected), "{export_err}");
    assert!(!out_dir.join("Cargo.toml").exists());
}

#[test]
fn a_spec_over_1_mib_is_refused() {
    let mut source = with_step("  - id: a\n    set: { x: 1 }\n");
    source.push_str(&format!("# {}\n", "x".repeat(1024 * 1024)));
    let err = refused(&source);
    assert!(err.starts_with(":6:"), "{err}");
    assert!(
        err.contains("more than the limit of 1048576 bytes (1 MiB)"),
        "{err}"
    );
}

// ---- YAML aliases and memory ---------------------------------------------

/// Alias bombs of several shapes and sizes (up to just under 1 MiB).
fn alias_bombs() -> Vec<(&'static str, String)> {
    let head = "version: 1\nagent: desk\nsteps:\n  - id: a\n    set:\n";
    let mut bombs = Vec::new();

    // Billion laughs: each level repeats the one before ten times.
    let mut laughs =
        format!("{head}      l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*l{}", i - 1); 10].join(", ");
        laughs.push_str(&format!("      l{i}: &l{i} [{refs}]\n"));
    }
    bombs.push(("billion laughs", laughs));

    // Wide: one big anchored list, aliased many times.
    let items = vec!["x"; 5_000].join(", ");
    let mut wide = format!("{head}      w: &w [{items}]\n      ws: [");
    wide.push_str(&vec!["*w"; 20_000].join(", "));
    wide.push_str("]\n");
    bombs.push(("wide", wide));

    // Long strings repeated through aliases: few nodes, many bytes.
    for (name, string_len, aliases) in [
        ("long string, 202 KB", 100 * 1024, 34_000),
        ("long string, ~1 MiB", 500 * 1024, 170_000),
    ] {
        let mut s = format!(
            "{head}      s: &s \"{}\"\n      ss: [",
            "y".repeat(string_len)
        );
        s.push_str(&vec!["*s"; aliases].join(","));
        s.push_str("]\n");
        bombs.push((name, s));
    }

    // Deep: an anchored tower, aliased at every level.
    let mut deep = format!("{head}      d0: &d0 {{ v: \"{}\" }}\n", "z".repeat(4_000));
    for i in 1..40 {
        deep.push_str(&format!(
            "      d{i}: &d{i} {{ a: *d{}, b: *d{} }}\n",
            i - 1,
            i - 1
        ));
    }
    bombs.push(("deep", deep));

    // Many small anchors, each aliased a lot, filling ~1 MiB of spec.
    let mut many = head.to_string();
    let mut i = 0;
    while many.len() < 1_000_000 - 6_000 {
        many.push_str(&format!(
            "      m{i}: &m{i} \"{}\"\n      n{i}: [{}]\n",
            "q".repeat(2_000),
            vec![format!("*m{i}"); 500].join(",")
        ));
        i += 1;
    }
    bombs.push(("many anchors, ~1 MiB", many));

    // Just under both limits (nodes and expanded bytes): accepted, and
    // the largest document a spec can expand to.
    let entries: Vec<String> = (0..490)
        .map(|i| format!("k{i}: \"{}\"", "v".repeat(28)))
        .collect();
    let mut edge = format!("{head}      e: &e {{ {} }}\n", entries.join(", "));
    for i in 0..95 {
        edge.push_str(&format!("      e{i}: *e\n"));
    }
    bombs.push(("at the limits (accepted)", edge));

    // Not a bomb: ~1 MiB of ordinary text, accepted.
    let mut plain = format!("{head}      p: \"");
    plain.push_str(&"plain text ".repeat(90_000));
    plain.push_str("\"\n");
    bombs.push(("plain ~1 MiB (accepted)", plain));
    bombs
}

/// Peak memory of `tollgate validate` on each bomb stays under 64 MiB.
///
/// The child's peak RSS is read without a new dependency: `/usr/bin/time
/// -f %M` reports the child's `ru_maxrss` from wait4(2), exact and race-free
/// (polling /proc/PID/status would miss a short peak or the exit). Where
/// GNU time is missing, the child runs under `prlimit --data=64MiB` instead:
/// an allocation past the cap fails, which Rust turns into an abort, so a
/// clean exit status proves the bound just as well. Where neither tool
/// exists the test says so and checks only the clean exit.
#[test]
fn alias_bombs_stay_under_64_mib() {
    const LIMIT_KB: u64 = 64 * 1024;
    let time = Path::new("/usr/bin/time");
    let prlimit = ["/usr/bin/prlimit", "/bin/prlimit"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists());
    for (name, source) in alias_bombs() {
        assert!(source.len() < 1024 * 1024, "{name}: {} bytes", source.len());
        let (_dir, path) = spec_file(&source);
        let mut cmd;
        if time.exists() {
            cmd = Command::new(time);
            cmd.args(["-f", "maxrss_kb=%M", BIN]);
        } else if let Some(prlimit) = prlimit {
            cmd = Command::new(prlimit);
            cmd.arg(format!("--data={}", LIMIT_KB * 1024)).arg(BIN);
        } else {
            eprintln!("{name}: neither /usr/bin/time nor prlimit: checking the exit only");
            cmd = Command::new(BIN);
        }
        let out = cmd.arg("validate").arg(&path).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        if name.contains("accepted") {
            assert_eq!(code, Some(0), "{name}: {stderr}");
        } else {
            assert_eq!(code, Some(2), "{name}: {stderr}");
            let prefix = format!("error: {}:", path.display());
            let line = stderr
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("{name}: no positioned error: {stderr}"));
            assert!(line.contains("the spec is too large"), "{name}: {line}");
        }
        if let Some(kb) = stderr
            .lines()
            .find_map(|l| l.strip_prefix("maxrss_kb="))
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            eprintln!("{name}: {} bytes of spec, peak RSS {kb} KiB", source.len());
            assert!(kb < LIMIT_KB, "{name}: peak RSS {kb} KiB");
        }
    }
}

// ---- run time -------------------------------------------------------------

/// Deeply nested input reaches every kind of template (lone expression,
/// filter, interpolation, comparison) in a real run without overflowing
/// the stack: as deep as JSON input may be (`MAX_JSON_DEPTH`) runs, one
/// level more is refused as bad input. Either way, an exit code.
#[test]
fn deep_input_cannot_overflow_a_run() {
    let (dir, path) = spec_file(with_step(
        "  - id: a\n    set: { a: \"{{ input }}\", b: \"{{ input | tojson }}\", c: \"x {{ input }}\", d: \"{{ input == input }}\" }\n",
    ));
    let limit = tollgate_runtime::MAX_JSON_DEPTH;
    for (depth, code) in [(limit, 0), (limit + 1, 2), (127, 2), (5_000, 2)] {
        let input = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let input_path = dir.path().join("input.json");
        std::fs::write(&input_path, input).expect("write input");
        let out = Command::new(BIN)
            .current_dir(dir.path())
            .arg("run")
            .arg(&path)
            .arg("--input")
            .arg(format!("@{}", input_path.display()))
            .output()
            .expect("run tollgate run");
        assert_eq!(
            out.status.code(),
            Some(code),
            "depth {depth}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
