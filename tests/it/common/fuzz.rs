//! A small deterministic generator for the property tests (no proptest:
//! no new dependency, and a failing case is reproduced by its seed).
//!
//! `TOLLGATE_FUZZ_CASES` sets how many random cases each test runs (the
//! default keeps CI to a few seconds); `TOLLGATE_FUZZ_SEED` picks another
//! starting seed.

#![allow(dead_code)]

pub use super::rng::Rng;

/// How many random cases to run: `TOLLGATE_FUZZ_CASES`, else `default`.
pub fn cases(default: usize) -> usize {
    std::env::var("TOLLGATE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The starting seed: `TOLLGATE_FUZZ_SEED`, else a fixed one.
pub fn seed() -> u64 {
    std::env::var("TOLLGATE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0x7011_6a7e)
}

/// Odd text to splice in: controls, byte-order marks, bidi overrides,
/// combining marks, astral characters, YAML indicators.
pub const ODD: &[&str] = &[
    "\u{feff}",
    "\u{202e}",
    "\u{0}",
    "\u{7}",
    "\r",
    "\r\n",
    "\t",
    "é",
    "e\u{301}",
    "😀",
    "\u{10ffff}",
    "\u{2028}",
    "&",
    "*",
    "!",
    "!!",
    "%",
    "@",
    "`",
    "|",
    ">",
    "?",
    ":",
    "- ",
    "#",
    "{",
    "}",
    "[",
    "]",
    "'",
    "\"",
    "\\",
    "---",
    "...",
    "<<: ",
    "${",
    "$${",
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
];

/// Numbers a parser might choke on.
pub const HUGE: &[&str] = &[
    "99999999999999999999",
    "99999999999999999ms",
    "18446744073709551616s",
    "9223372036854775808",
    "-9223372036854775809",
    "1e400",
    "-0",
    "0x",
    "0xFFFFFFFFFFFFFFFFFF",
    "0o",
    ".inf",
    ".nan",
    "3650d",
    "3651d",
    "1h1h1h1h1h1h1h1h",
];

/// Expression pieces for random templates.
pub const EXPR_ATOMS: &[&str] = &[
    "input",
    "input.amount",
    "input.items",
    "input.deep",
    "steps.a.output",
    "trigger",
    "run",
    "1",
    "0",
    "-1",
    "2.5",
    "'x'",
    "\"y\"",
    "true",
    "none",
    "[]",
    "{}",
    "[1, 2, 3]",
    "{'a': 1}",
    "range(3)",
    "dict(a=1)",
    "undefined_name",
    "loop",
];
pub const EXPR_BINOPS: &[&str] = &[
    " + ", " - ", " * ", " / ", " // ", " % ", " ** ", " ~ ", " == ", " != ", " < ", " >= ",
    " and ", " or ", " in ", " not in ",
];
pub const EXPR_FILTERS: &[&str] = &[
    "tojson",
    "length",
    "default(0)",
    "d('x')",
    "upper",
    "string",
    "int",
    "float",
    "list",
    "first",
    "join(',')",
    "fromjson",
    "tofloat",
    "round",
    "abs",
    "sort",
    "unique",
    "items",
];
pub const EXPR_TESTS: &[&str] = &[
    "defined", "none", "number", "string", "odd", "nmber", "mapping",
];

/// A random expression of about `budget` pieces, nesting freely.
pub fn expression(rng: &mut Rng, budget: usize) -> String {
    if budget <= 1 {
        return rng.pick(EXPR_ATOMS).to_string();
    }
    match rng.below(8) {
        0 | 1 => {
            let left = rng.below(budget);
            format!(
                "{}{}{}",
                expression(rng, left),
                rng.pick(EXPR_BINOPS),
                expression(rng, budget - left - 1)
            )
        }
        2 => format!("({})", expression(rng, budget - 1)),
        3 => format!(
            "{} | {}",
            expression(rng, budget - 1),
            rng.pick(EXPR_FILTERS)
        ),
        4 => format!(
            "{} is {}",
            expression(rng, budget - 1),
            rng.pick(EXPR_TESTS)
        ),
        5 => format!("not {}", expression(rng, budget - 1)),
        6 => format!(
            "[{}, {}]",
            expression(rng, budget / 2),
            expression(rng, budget / 2)
        ),
        _ => format!(
            "{} if {} else {}",
            expression(rng, budget / 3),
            expression(rng, budget / 3),
            expression(rng, budget / 3)
        ),
    }
}

/// A random template: text, `{{ }}`, `{% if %}` and `{% for %}` blocks.
pub fn template(rng: &mut Rng) -> String {
    let budget = 1 + rng.below(12);
    match rng.below(6) {
        0 => format!("{{{{ {} }}}}", expression(rng, budget)),
        1 => format!("Total: {{{{ {} }}}} now", expression(rng, budget)),
        2 => format!(
            "{{% if {} %}}yes{{% else %}}{{{{ {} }}}}{{% endif %}}",
            expression(rng, budget),
            expression(rng, budget)
        ),
        3 => format!(
            "{{% for x in {} %}}{{{{ x }}}},{{% endfor %}}",
            expression(rng, budget)
        ),
        4 => format!("{{{{- {} -}}}}", expression(rng, budget)),
        _ => {
            let text = format!("{{{{ {} }}}}", expression(rng, budget));
            mutate_text(rng, &text)
        }
    }
}

/// Small random edits of any text: byte-level, kept valid UTF-8 by
/// working on chars.
pub fn mutate_text(rng: &mut Rng, text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(chars.len() + 1);
        match rng.below(4) {
            0 if !chars.is_empty() => {
                chars.remove(at.min(chars.len() - 1));
            }
            1 => chars.splice(at..at, rng.pick(ODD).chars()).for_each(drop),
            2 => chars.truncate(at),
            _ => {
                let piece: Vec<char> = rng.pick(EXPR_BINOPS).chars().collect();
                chars.splice(at..at, piece).for_each(drop);
            }
        }
    }
    chars.into_iter().collect()
}

/// Apply one to four random mutations to spec bytes.
pub fn mutate_spec(rng: &mut Rng, source: &[u8]) -> Vec<u8> {
    let mut bytes = source.to_vec();
    for _ in 0..1 + rng.below(4) {
        bytes = mutate_once(rng, bytes);
    }
    bytes
}

fn lines_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn join(lines: Vec<Vec<u8>>) -> Vec<u8> {
    lines.join(&b'\n')
}

fn mutate_once(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.is_empty() {
        return rng.pick(ODD).as_bytes().to_vec();
    }
    let at = rng.below(bytes.len());
    match rng.below(11) {
        // Flip a byte (may leave invalid UTF-8).
        0 => {
            bytes[at] ^= 1 << rng.below(8);
            bytes
        }
        // Truncate.
        1 => {
            bytes.truncate(at);
            bytes
        }
        // Duplicate a line.
        2 => {
            let mut lines = lines_of(&bytes);
            let i = rng.below(lines.len());
            let line = lines[i].clone();
            lines.insert(i, line);
            join(lines)
        }
        // Delete a line.
        3 => {
            let mut lines = lines_of(&bytes);
            lines.remove(rng.below(lines.len()));
            join(lines)
        }
        // Re-indent a line.
        4 => {
            let mut lines = lines_of(&bytes);
            let i = rng.below(lines.len());
            let indent = match rng.below(3) {
                0 => b" ".repeat(rng.below(9)),
                1 => b"\t".to_vec(),
                _ => Vec::new(),
            };
            let body: Vec<u8> = lines[i]
                .iter()
                .copied()
                .skip_while(|&b| b == b' ')
                .collect();
            lines[i] = [indent, body].concat();
            join(lines)
        }
        // Anchor a value, then alias it from later lines.
        5 => {
            let mut lines = lines_of(&bytes);
            let i = rng.below(lines.len());
            let name = format!("a{}", rng.below(4));
            if let Some(colon) = lines[i].windows(2).position(|w| w == b": ") {
                let mut line = lines[i].clone();
                line.splice(colon + 2..colon + 2, format!("&{name} ").into_bytes());
                lines[i] = line;
            }
            for _ in 0..rng.below(4) {
                let j = rng.below(lines.len());
                if let Some(colon) = lines[j].windows(2).position(|w| w == b": ") {
                    let mut line = lines[j][..colon + 2].to_vec();
                    line.extend_from_slice(format!("*{name}").as_bytes());
                    lines[j] = line;
                }
            }
            join(lines)
        }
        // A huge or odd number in place of a value.
        6 => {
            let mut lines = lines_of(&bytes);
            let i = rng.below(lines.len());
            if let Some(colon) = lines[i].windows(2).position(|w| w == b": ") {
                let mut line = lines[i][..colon + 2].to_vec();
                line.extend_from_slice(rng.pick(HUGE).as_bytes());
                lines[i] = line;
            }
            join(lines)
        }
        // Odd unicode or a YAML indicator.
        7 => {
            let piece = rng.pick(ODD).as_bytes();
            let at = (at..bytes.len())
                .find(|&i| is_boundary(&bytes, i))
                .unwrap_or(bytes.len());
            bytes.splice(at..at, piece.iter().copied());
            bytes
        }
        // A random template in place of a value.
        8 => {
            let mut lines = lines_of(&bytes);
            let i = rng.below(lines.len());
            if let Some(colon) = lines[i].windows(2).position(|w| w == b": ") {
                let mut line = lines[i][..colon + 2].to_vec();
                let t = template(rng).replace('\\', "\\\\").replace('"', "\\\"");
                line.extend_from_slice(format!("\"{t}\"").as_bytes());
                lines[i] = line;
            }
            join(lines)
        }
        // Wrap a value in deep flow nesting.
        9 => {
            let mut lines = lines_of(&bytes);
            let i = rng.below(lines.len());
            let depth = rng.below(200);
            if let Some(colon) = lines[i].windows(2).position(|w| w == b": ") {
                let mut line = lines[i][..colon + 2].to_vec();
                line.extend(std::iter::repeat_n(b'[', depth));
                line.push(b'1');
                line.extend(std::iter::repeat_n(b']', depth));
                lines[i] = line;
            }
            join(lines)
        }
        // A random byte anywhere.
        _ => {
            bytes.insert(at, rng.next_u64() as u8);
            bytes
        }
    }
}

fn is_boundary(bytes: &[u8], i: usize) -> bool {
    bytes.get(i).is_none_or(|&b| (b as i8) >= -0x40)
}
