//! serde_yaml as a differential oracle for the spec reader.
//!
//! The runtime reads YAML with its own span-aware front end (yaml-rust2
//! events, the YAML 1.2 core schema), never with serde_yaml: serde_yaml is
//! deprecated upstream and has no positions for semantic errors. Here it
//! earns its place as a second, independent reading: for every example,
//! every spec the tests use and a corpus of edge scalars, the document the
//! spec hash is computed over (`Spec::document`) must equal serde_yaml's
//! reading as a `serde_json::Value`, or the difference is one of the named,
//! explained ones below, asserted exactly (both sides), so none can drift.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tollgate_runtime::spec::{Spec, SpecHash};

/// The value the spec hash is computed over, or the spec error.
fn ours(source: &str) -> Result<Value, String> {
    let spec = Spec::parse(source, "o.yaml").map_err(|e| e.to_string())?;
    assert_eq!(spec.hash, SpecHash::of_document(&spec.document));
    Ok(spec.document)
}

fn theirs(source: &str) -> Result<Value, String> {
    serde_yaml::from_str::<Value>(source).map_err(|e| e.to_string())
}

/// A spec whose one `set:` step holds `snippet` (YAML for the mapping).
fn wrapped(snippet: &str) -> String {
    let body: Vec<String> = snippet.lines().map(|l| format!("      {l}")).collect();
    format!(
        "version: 1\nagent: oracle\nsteps:\n  - id: s\n    set:\n{}\n",
        body.join("\n")
    )
}

#[track_caller]
fn assert_same(what: &str, source: &str) {
    let (a, b) = (ours(source), theirs(source));
    let a = a.unwrap_or_else(|e| panic!("{what}: our reader rejects it: {e}\n{source}"));
    let b = b.unwrap_or_else(|e| panic!("{what}: serde_yaml rejects it: {e}\n{source}"));
    assert_eq!(a, b, "{what}: the readings differ\n{source}");
}

#[test]
fn every_example_reads_as_serde_yaml_reads_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let source = std::fs::read_to_string(&path).unwrap();
            assert_same(&path.display().to_string(), &source);
            seen += 1;
        }
    }
    assert!(seen >= 4, "only {seen} examples found in {}", dir.display());
}

/// Every spec the tests use: each string literal in tests/ that starts with
/// `version: 1` and parses as a spec (the error cases do not, and have no
/// hash). Found by scanning the sources, so a new fixture is covered
/// without being listed here.
#[test]
fn every_spec_the_tests_use_reads_as_serde_yaml_reads_it() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        &mut files,
    );
    let mut compared = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, literal) in spec_literals(&text) {
            if ours(&literal).is_ok() {
                assert_same(&format!("{}:{line}", file.display()), &literal);
                compared += 1;
            }
        }
    }
    println!("{compared} spec fixtures compared");
    // Guards the scan itself: a broken extractor must not pass by finding nothing.
    assert!(compared >= 30, "only {compared} spec fixtures found");
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(line, text)` of each Rust string literal, raw or not, whose text
/// starts with `version: 1`.
fn spec_literals(source: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (at, _) in source.match_indices("\"version: 1") {
        let line = source[..at].matches('\n').count() + 1;
        let before = &source[..at];
        let hashes = before.len() - before.trim_end_matches('#').len();
        let raw = before[..before.len() - hashes].ends_with('r');
        let rest = &source[at + 1..];
        let text = if raw {
            let end = format!("\"{}", "#".repeat(hashes));
            rest.find(&end).map(|e| rest[..e].to_string())
        } else {
            unescape(rest)
        };
        let in_format = before[before.len().saturating_sub(40)..].contains("format!(");
        match text {
            Some(text) if in_format => out.push((line, format_text(&text))),
            Some(text) => out.push((line, text)),
            None => {}
        }
    }
    out
}

/// A `format!` string as it would print with every argument `x`: `{{` and
/// `}}` are braces, `{name}` is an argument. Any text is a fair input for
/// the oracle; one that is no spec is skipped.
fn format_text(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                out.push('x');
            }
            c => out.push(c),
        }
    }
    out
}

/// The text of a plain Rust string literal up to its closing quote.
fn unescape(rest: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                '0' => out.push('\0'),
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                '\'' => out.push('\''),
                'u' => {
                    let hex: String = chars.by_ref().skip(1).take_while(|c| *c != '}').collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                '\n' => {
                    while chars.peek().is_some_and(|c| c.is_whitespace()) {
                        chars.next();
                    }
                }
                _ => return None,
            },
            c => out.push(c),
        }
    }
    None
}

/// Edge scalars and structures on which both readings agree. Several are
/// where YAML 1.1 and 1.2 part ways, and both readers take 1.2's side.
const AGREED: &[&str] = &[
    // `_` separators are YAML 1.1: a string in 1.2.
    "v: 1_000",
    "v: 1__0",
    "v: 0o17",
    "v: 0x1F",
    "v: 0x",
    "v: 0o",
    "v: 0o8",
    "v: .5",
    "v: +.5",
    "v: -.5e2",
    "v: 1.",
    "v: 3.",
    "v: 1.10",
    "v: 0.0",
    "v: -0.0",
    "v: 0e0",
    "v: 1e3",
    "v: 1E3",
    "v: 1.5e+3",
    "v: 1e",
    "v: .",
    "v: +12",
    "v: -0",
    // Every integer a JSON number holds exactly: i64 and u64.
    "v: 9223372036854775807",
    "v: -9223372036854775808",
    "v: 9223372036854775808",
    "v: 18446744073709551615",
    "v: 0xFFFFFFFFFFFFFFFF",
    "v: 0o1777777777777777777777",
    "v: ~",
    "v:",
    "v: null",
    "v: Null",
    "v: NULL",
    "v: '~'",
    "v: true",
    "v: True",
    "v: TRUE",
    "v: false",
    // The YAML 1.1 booleans are strings in 1.2.
    "v: yes",
    "v: no",
    "v: Yes",
    "v: NO",
    "v: on",
    "v: off",
    "v: y",
    "v: n",
    "v: Y",
    // YAML 1.1 timestamps and sexagesimals: strings in 1.2.
    "v: 2024-01-15",
    "v: 2024-01-15T10:00:00Z",
    "v: 2024-01-15 10:00:00 +02:00",
    "v: 12:30",
    "v: 190:20:30",
    // Quoted and block scalars are strings whatever they look like.
    "v: '1'",
    "v: \"1\"",
    "v: \"true\"",
    "v: 'null'",
    "v: \"caf\\u00e9 \\t tab\"",
    "v: 'it''s'",
    "v: |\n  text\n  more\n",
    "v: |-\n  kept\n",
    "v: >\n  folded\n  text\n",
    "v: \"multi\n  line\"",
    // Core-schema tags.
    "v: !!str 1",
    "v: !!str true",
    "v: !!str",
    "v: !!int 1",
    "v: !!int 0x1F",
    "v: !!float 1",
    "v: !!float 1.5",
    "v: !!bool true",
    "v: !!null ~",
    "v: !!map {b: 1}",
    "v: !!seq [1]",
    "v: !<tag:yaml.org,2002:str> 12",
    // Anchors and aliases are copies.
    "a: &x {b: [1, 2]}\nc: *x",
    "a: &s text\nb: *s",
    "a: &l [1, {b: 2}]\nb: [*l, *l]",
    // Merge keys are YAML 1.1: neither reader merges, `<<` is a plain key
    // (serde_yaml merges only when asked, with `Value::apply_merge`).
    "base: &b {x: 1, y: 2}\nm: {<<: *b, y: 3}",
    "m:\n  <<: [{a: 1}, {b: 2}]\n  c: 3",
    // Structure.
    "v: []",
    "v: {}",
    "v: [a, 'b', 1, 1.5, true, ~, {c: d}]",
    "\"quoted key\": 1\n'single': 2\nplain key: 3",
    "v: ${SECRET}",
    "v: \"{{ input.x }}\"",
    "v: a # comment\nw: \"# not a comment\"",
];

#[test]
fn edge_scalars_read_as_serde_yaml_reads_them() {
    for snippet in AGREED {
        assert_same(snippet, &wrapped(snippet));
    }
}

/// One side's reading of a snippet: the `set:` value as JSON text, or the
/// whole error message.
#[derive(Debug)]
enum Reading {
    Value(&'static str),
    Error(&'static str),
}

/// A deliberate difference between the two readers.
struct Difference {
    name: &'static str,
    /// Why ours reads it so.
    why: &'static str,
    snippet: &'static str,
    ours: Reading,
    serde_yaml: Reading,
}

const DIFFERENCES: &[Difference] = &[
    Difference {
        name: "binary integers",
        why: "0b is a YAML 1.1 form, not in the 1.2 core schema: a string",
        snippet: "v: 0b101",
        ours: Reading::Value(r#"{"v": "0b101"}"#),
        serde_yaml: Reading::Value(r#"{"v": 5}"#),
    },
    Difference {
        name: "decimal with a leading zero",
        why: "the core schema's int is [-+]?[0-9]+, so 017 is seventeen; serde_yaml keeps it a string to dodge YAML 1.1's octal",
        snippet: "v: 017",
        ours: Reading::Value(r#"{"v": 17}"#),
        serde_yaml: Reading::Value(r#"{"v": "017"}"#),
    },
    Difference {
        name: "zero with a leading zero",
        why: "as 017",
        snippet: "v: 00",
        ours: Reading::Value(r#"{"v": 0}"#),
        serde_yaml: Reading::Value(r#"{"v": "00"}"#),
    },
    Difference {
        name: "signed hexadecimal",
        why: "the core schema's hex int has no sign: a string",
        snippet: "v: -0x1",
        ours: Reading::Value(r#"{"v": "-0x1"}"#),
        serde_yaml: Reading::Value(r#"{"v": -1}"#),
    },
    Difference {
        name: "decimal above u64",
        why: "past what a JSON number holds exactly, it keeps its magnitude as a float (as JSON readers do); serde_yaml's reading fails",
        snippet: "v: 18446744073709551616",
        ours: Reading::Value(r#"{"v": 1.8446744073709552e19}"#),
        serde_yaml: Reading::Error("steps[0].set.v: JSON number out of range at line 6 column 10"),
    },
    Difference {
        name: "decimal below i64",
        why: "as above u64",
        snippet: "v: -9223372036854775809",
        ours: Reading::Value(r#"{"v": -9.223372036854776e18}"#),
        serde_yaml: Reading::Error("steps[0].set.v: JSON number out of range at line 6 column 10"),
    },
    Difference {
        name: "infinity",
        why: "a spec is hashed and exported as JSON, which has no infinity: an error at its place, not a silent null",
        snippet: "v: .inf",
        ours: Reading::Error(
            "o.yaml:6:10: \".inf\" has no JSON form (infinity and NaN are not allowed; quote it for a string)",
        ),
        serde_yaml: Reading::Value(r#"{"v": null}"#),
    },
    Difference {
        name: "not a number",
        why: "as infinity",
        snippet: "v: .nan",
        ours: Reading::Error(
            "o.yaml:6:10: \".nan\" has no JSON form (infinity and NaN are not allowed; quote it for a string)",
        ),
        serde_yaml: Reading::Value(r#"{"v": null}"#),
    },
    Difference {
        name: "a float too large for f64",
        why: "it matches the core float pattern, so it is a number, and it overflows to infinity; serde_yaml falls back to a string",
        snippet: "v: 1e400",
        ours: Reading::Error(
            "o.yaml:6:10: \"1e400\" has no JSON form (infinity and NaN are not allowed; quote it for a string)",
        ),
        serde_yaml: Reading::Value(r#"{"v": "1e400"}"#),
    },
    Difference {
        name: "an empty scalar tagged null",
        why: "the core schema's null includes the empty scalar, tagged or not",
        snippet: "v: !!null ''",
        ours: Reading::Value(r#"{"v": null}"#),
        serde_yaml: Reading::Error(
            "steps[0].set.v: invalid value: string \"\", expected null at line 6 column 10",
        ),
    },
    Difference {
        name: "tags beyond the core schema",
        why: "a spec has no use for them, and dropping one silently would change what was meant",
        snippet: "v: !!binary aGVsbG8=",
        ours: Reading::Error(
            "o.yaml:6:19: unsupported tag !!binary (a spec may use only !!str, !!int, !!float, !!bool, !!null, !!map and !!seq)",
        ),
        serde_yaml: Reading::Value(r#"{"v": "aGVsbG8="}"#),
    },
    Difference {
        name: "a local tag",
        why: "both reject it; ours says where and why",
        snippet: "v: !custom x",
        ours: Reading::Error(
            "o.yaml:6:18: unsupported tag !custom (a spec may use only !!str, !!int, !!float, !!bool, !!null, !!map and !!seq)",
        ),
        serde_yaml: Reading::Error(
            "steps[0].set.v: invalid type: enum, expected any valid JSON value at line 6 column 10",
        ),
    },
    Difference {
        name: "an integer key",
        why: "JSON keys are strings; turning 1 into \"1\" silently would make two spellings one key",
        snippet: "1: x",
        ours: Reading::Error(
            "o.yaml:6:7: mapping keys must be strings, found an integer (quote it to use it as a key)",
        ),
        serde_yaml: Reading::Value(r#"{"1": "x"}"#),
    },
    Difference {
        name: "a boolean key",
        why: "as an integer key",
        snippet: "true: x",
        ours: Reading::Error(
            "o.yaml:6:7: mapping keys must be strings, found a boolean (quote it to use it as a key)",
        ),
        serde_yaml: Reading::Value(r#"{"true": "x"}"#),
    },
    Difference {
        name: "a null key",
        why: "as an integer key",
        snippet: "~: x",
        ours: Reading::Error(
            "o.yaml:6:7: mapping keys must be strings, found null (quote it to use it as a key)",
        ),
        serde_yaml: Reading::Value(r#"{"~": "x"}"#),
    },
    Difference {
        name: "a duplicate key",
        why: "a second value for a key is a mistake, not an override; serde_yaml (into JSON) keeps the last",
        snippet: "a: 1\na: 2",
        ours: Reading::Error("o.yaml:7:7: duplicate key \"a\" (first defined at line 6)"),
        serde_yaml: Reading::Value(r#"{"a": 2}"#),
    },
];

#[test]
fn the_differences_are_exactly_the_named_ones() {
    let mut names: Vec<&str> = DIFFERENCES.iter().map(|d| d.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), DIFFERENCES.len(), "difference names repeat");
    for d in DIFFERENCES {
        assert!(!d.why.is_empty(), "{}: say why", d.name);
        let source = wrapped(d.snippet);
        let set = |doc: Value| doc["steps"][0]["set"].clone();
        check(d, "ours", ours(&source).map(set), &d.ours);
        check(d, "serde_yaml", theirs(&source).map(set), &d.serde_yaml);
    }
}

#[track_caller]
fn check(d: &Difference, side: &str, got: Result<Value, String>, expected: &Reading) {
    match (got, expected) {
        (Ok(value), Reading::Value(json)) => {
            let json: Value = serde_json::from_str(json).unwrap();
            assert_eq!(value, json, "{}: {side}'s reading drifted", d.name);
        }
        (Err(e), Reading::Error(message)) => {
            assert_eq!(e, *message, "{}: {side}'s error drifted", d.name);
        }
        (got, expected) => {
            panic!("{}: {side} read {:?}, expected {expected:?}", d.name, got)
        }
    }
}

/// The few whole-document differences: what ours rejects at the top.
#[test]
fn several_documents_are_rejected_by_both() {
    let source = "version: 1\nagent: a\nsteps: [{id: s, set: {}}]\n---\nversion: 1\n";
    assert_eq!(
        ours(source),
        Err(
            "o.yaml:4:1: a spec is one YAML document, found a second one (remove the '---')"
                .to_string()
        )
    );
    assert_eq!(
        theirs(source),
        Err(
            "deserializing from YAML containing more than one document is not supported"
                .to_string()
        )
    );
}
