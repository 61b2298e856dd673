//! Property test of the spec parser and validator: random and mutated YAML
//! (mutations of every examples/*.yaml spec, plus a fixed corpus of the
//! hostile specs from review) never panics or overflows the stack, and
//! every error is positioned `fuzz.yaml:LINE:COL:` inside the file.
//!
//! Cases run on a thread with a 2 MiB stack (a server worker's), so a
//! recursion that would abort a server aborts this test. Memory is bounded
//! by the parser's limits; `alias_bombs_stay_under_64_mib` in
//! tests/spec_limits.rs measures it through the binary.
//! `TOLLGATE_FUZZ_CASES=100000 cargo test --test it spec::fuzz` runs longer.

use crate::common::fuzz;

use fuzz::Rng;
use tollgate_runtime::spec::{Spec, SpecError, SpecErrorKind};

const ORIGIN: &str = "fuzz.yaml";

/// The lines of `text` as YAML counts them (LF, CRLF or a lone CR).
fn yaml_lines(text: &str) -> Vec<String> {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .split('\n')
        .map(str::to_string)
        .collect()
}

/// The error names a line and column inside the file, as its text says.
#[track_caller]
fn assert_positioned(source: &[u8], err: &SpecError) {
    let shown = err.to_string();
    assert_ne!(err.kind, SpecErrorKind::Io, "{shown}");
    assert!(err.line >= 1 && err.column >= 1, "unpositioned: {shown}");
    assert!(
        shown.starts_with(&format!("{ORIGIN}:{}:{}: ", err.line, err.column)),
        "{shown}"
    );
    let text = String::from_utf8_lossy(source);
    let lines = yaml_lines(&text);
    assert!(
        err.line <= lines.len(),
        "line {} of {}: {shown}",
        err.line,
        lines.len()
    );
    let line = &lines[err.line - 1];
    // A byte-order mark starting the file is not a column; elsewhere it is.
    let line = match err.line {
        1 => line.strip_prefix('\u{feff}').unwrap_or(line),
        _ => line,
    };
    let width = line.chars().count();
    assert!(
        err.column <= width + 1,
        "column {} past the end of line {} ({width} characters): {shown}",
        err.column,
        err.line
    );
}

/// Parse on a 2 MiB stack; any error must be positioned.
fn parse_case(source: Vec<u8>, label: String) {
    let result = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            if let Err(err) = Spec::parse_bytes(&source, ORIGIN) {
                assert_positioned(&source, &err);
            }
        })
        .expect("spawn")
        .join();
    if result.is_err() {
        panic!("case {label} panicked");
    }
}

fn examples() -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read example");
            (p.display().to_string(), bytes)
        })
        .collect();
    out.sort();
    assert!(out.len() >= 3, "examples/*.yaml");
    out
}

fn with_step(step: &str) -> String {
    format!("version: 1\nagent: desk\nsteps:\n  - id: a\n{step}\n")
}

/// Every hostile spec from review, each a whole file.
fn hostile_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let sum = |n: usize| vec!["1"; n].join(" + ");
    let mut laughs = String::from(
        "version: 1\nagent: desk\nsteps:\n  - id: a\n    set:\n      l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..12 {
        let refs = vec![format!("*l{}", i - 1); 10].join(", ");
        laughs.push_str(&format!("      l{i}: &l{i} [{refs}]\n"));
    }
    let mut long = format!(
        "version: 1\nagent: desk\nsteps:\n  - id: a\n    set:\n      s: &s \"{}\"\n      t: [",
        "y".repeat(100_000)
    );
    long.push_str(&vec!["*s"; 30_000].join(","));
    long.push_str("]\n");
    let mut non_utf8 = with_step("    set: { x: \"caf").into_bytes();
    non_utf8.truncate(non_utf8.len() - 1);
    non_utf8.extend_from_slice(b"\xe9\" }\n");
    vec![
        (
            "huge approvals ttl",
            "version: 1\nagent: desk\napprovals: { ttl: 99999999999999999ms }\nsteps:\n  - id: a\n    approval:\n"
                .into(),
        ),
        (
            "huge gate ttl",
            with_step("    if: \"{{ true }}\"\n    then: request_human_approval\n    ttl: 99999999999999999999d").into(),
        ),
        (
            "huge dedupe ttl",
            with_step("    dedupe: { key: k, ttl: 18446744073709551615s }").into(),
        ),
        (
            "30000-term expression",
            with_step(&format!("    set: {{ x: \"{{{{ {} }}}}\" }}", sum(30_000))).into(),
        ),
        (
            "10000-term expression",
            with_step(&format!("    set: {{ x: \"{{{{ {} }}}}\" }}", sum(10_000))).into(),
        ),
        (
            "deep brackets in an expression",
            with_step(&format!(
                "    set: {{ x: \"{{{{ {}1{} }}}}\" }}",
                "(".repeat(10_000),
                ")".repeat(10_000)
            ))
            .into(),
        ),
        (
            "deep YAML flow nesting",
            with_step(&format!(
                "    set: {{ x: {}1{} }}",
                "[".repeat(50_000),
                "]".repeat(50_000)
            ))
            .into(),
        ),
        ("billion laughs", laughs.into()),
        ("long string through aliases", long.into()),
        ("recursive alias", with_step("    set: &r { x: *r }").into()),
        ("invalid UTF-8", non_utf8),
        ("lone continuation byte", b"version: 1\n\x80agent: desk\n".to_vec()),
        (
            "unknown filter",
            with_step("    set: { x: \"{{ input.amount | tofloat }}\" }").into(),
        ),
        (
            "unknown test",
            with_step("    set: { x: \"{{ input.amount is nmber }}\" }").into(),
        ),
        (
            "namespace loop",
            with_step("    set: { x: \"{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}\" }").into(),
        ),
        (
            "elif chain",
            with_step(&format!(
                "    set: {{ x: \"{{% if false %}}{}{{% endif %}}\" }}",
                "{% elif false %}".repeat(3_000)
            ))
            .into(),
        ),
        ("NUL byte", b"version: 1\nagent: de\0sk\nsteps: []\n".to_vec()),
        ("only a BOM", "\u{feff}".into()),
        ("CR line ends", b"version: 1\ragent: desk\rsteps:\r  - id: a\r    set: {x: [}\r".to_vec()),
        (
            "over 1 MiB",
            format!("{}# {}\n", with_step("    set: { x: 1 }"), "x".repeat(1 << 20)).into(),
        ),
    ]
}

#[test]
fn the_hostile_corpus_gets_positioned_errors() {
    for (name, source) in hostile_corpus() {
        let err = Spec::parse_bytes(&source, ORIGIN)
            .err()
            .unwrap_or_else(|| panic!("{name}: accepted"));
        assert_positioned(&source, &err);
    }
}

#[test]
fn the_examples_parse() {
    for (name, source) in examples() {
        if let Err(e) = Spec::parse_bytes(&source, ORIGIN) {
            panic!("{name}: {e}");
        }
    }
}

#[test]
fn mutated_specs_never_panic_and_errors_are_positioned() {
    let mut corpus: Vec<Vec<u8>> = examples().into_iter().map(|(_, b)| b).collect();
    corpus.extend(
        hostile_corpus()
            .into_iter()
            .filter(|(_, b)| b.len() < 64 * 1024)
            .map(|(_, b)| b),
    );
    let start = fuzz::seed();
    let seed = start;
    let cases = fuzz::cases(1_500);
    for case in 0..cases {
        let case_seed = seed.wrapping_add(case as u64);
        let mut rng = Rng::new(case_seed);
        let base = rng.pick(&corpus).clone();
        let source = fuzz::mutate_spec(&mut rng, &base);
        parse_case(source, format!("case {case} of TOLLGATE_FUZZ_SEED={start}"));
    }
}

#[test]
fn random_yaml_never_panics_and_errors_are_positioned() {
    let start = fuzz::seed();
    let seed = start ^ 0x5eed;
    for case in 0..fuzz::cases(1_500) {
        let case_seed = seed.wrapping_add(case as u64);
        let mut rng = Rng::new(case_seed);
        let mut text = String::new();
        for _ in 0..rng.below(30) {
            let indent = " ".repeat(rng.below(4) * 2);
            let piece = match rng.below(6) {
                0 => format!("{indent}k{}: {}", rng.below(5), rng.pick(fuzz::HUGE)),
                1 => format!("{indent}- {}", fuzz::template(&mut rng)),
                2 => format!("{indent}{}", rng.pick(fuzz::ODD)),
                3 => format!(
                    "{indent}k{}: &a{} [x, *a{}]",
                    rng.below(5),
                    rng.below(3),
                    rng.below(3)
                ),
                4 => format!(
                    "{indent}{}:",
                    rng.pick(&[
                        "version", "agent", "steps", "tools", "id", "set", "approval", "ttl"
                    ])
                ),
                _ => format!("{indent}\"{}\": {{ a: [1, {{b: *a0}}] }}", rng.below(9)),
            };
            text.push_str(&piece);
            text.push('\n');
        }
        parse_case(
            text.into_bytes(),
            format!("case {case} of TOLLGATE_FUZZ_SEED={start}"),
        );
    }
}
