//! Property test of expressions and templates: random and mutated
//! templates, checked (as `validate` does) and evaluated (as a run does)
//! against data up to the depth limit, never panic or overflow a 2 MiB
//! stack (a server worker's), and every refusal says what is wrong. A fixed
//! corpus holds the hostile expressions from review.
//! `TOLLGATE_FUZZ_CASES=100000 cargo test --test it spec::expr_fuzz` runs longer.

use crate::common::fuzz;

use fuzz::Rng;
use serde_json::{Value, json};
use tollgate_runtime::expr::{self, Context, MAX_CONTEXT_DEPTH};

fn nested(depth: usize) -> Value {
    let mut v = json!([1, "x"]);
    for i in 1..depth {
        v = if i % 2 == 0 {
            json!({ "a": v, "n": i })
        } else {
            json!([v, i])
        };
    }
    v
}

/// Built once: a deep value is slow to build in a debug build.
fn context() -> &'static Context {
    static CTX: std::sync::OnceLock<Context> = std::sync::OnceLock::new();
    CTX.get_or_init(|| Context::new()
        .with(
            "input",
            json!({"amount": 150, "items": [1, 2, 3], "text": "a\u{0}b\u{202e}", "deep": nested(MAX_CONTEXT_DEPTH - 3)}),
        )
        .with("steps", json!({"a": {"output": {"ok": true, "v": nested(50)}}}))
        .with("trigger", json!({"kind": "cli"}))
        .with("run", json!({"id": "r1"})))
}

/// Check and evaluate `template` on a 2 MiB stack. Errors must say
/// something; a check that passes must not make evaluation panic.
fn run_case(template: String, label: String) {
    let result = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            let ctx = context();
            if let Err(e) = expr::check(&template) {
                assert!(!e.message.trim().is_empty());
                assert!(
                    e.message.len() < 2_000,
                    "message too long: {}",
                    e.message.len()
                );
            }
            if let Err(e) = expr::evaluate_str(&template, ctx) {
                assert!(!e.message.trim().is_empty());
            }
        })
        .expect("spawn")
        .join();
    if result.is_err() {
        panic!("case {label} panicked");
    }
}

fn hostile_corpus() -> Vec<String> {
    let sum = |n: usize| format!("{{{{ {} }}}}", vec!["1"; n].join(" + "));
    vec![
        sum(30_000),
        sum(10_000),
        sum(249),
        format!("{{{{ {}1{} }}}}", "(".repeat(10_000), ")".repeat(10_000)),
        format!("{{{{ {}1{} }}}}", "[".repeat(10_000), "]".repeat(10_000)),
        format!("{{{{ {}1{} }}}}", "{'a': ".repeat(5_000), "}".repeat(5_000)),
        format!("{{{{ {}1 }}}}", "not ".repeat(10_000)),
        format!("{{{{ {}1 }}}}", "-".repeat(10_000)),
        format!("{{{{ input{} }}}}", ".a".repeat(10_000)),
        format!("{{{{ input{} }}}}", " | string".repeat(5_000)),
        format!(
            "{{% if false %}}{}{{% endif %}}",
            "{% elif false %}".repeat(5_000)
        ),
        format!("{}x{}", "{% if true %}".repeat(2_000), "{% endif %}".repeat(2_000)),
        "{{ input.amount | tofloat }}".into(),
        "{{ input.amount is nmber }}".into(),
        "{{ input.deep }}".into(),
        "{{ input.deep | tojson }}".into(),
        "x {{ input.deep }} {{ input.deep == input.deep }}".into(),
        "{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}".into(),
        "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}".into(),
        "{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}".into(),
        "{{ 'x' * 100000000000 }}".into(),
        "{{ input.text | fromjson }}".into(),
        "{{ '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]' | fromjson }}".into(),
        "{{".into(),
        "{{ }}".into(),
        "{% raw %}{{ x | nope".into(),
        "{# {{ x }}".into(),
        "{{ '\u{0}' ~ \"\u{202e}\" }}".into(),
        format!("{}{{{{ 1 }}}}", "x".repeat(70_000)),
    ]
}

#[test]
fn the_hostile_corpus_is_refused_or_evaluated_without_overflow() {
    for (i, template) in hostile_corpus().into_iter().enumerate() {
        run_case(template, format!("corpus {i}"));
    }
    // The review's cases are refused at check, which validate runs.
    for template in &hostile_corpus()[..2] {
        assert!(expr::check(template).is_err());
    }
}

#[test]
fn random_templates_never_panic_or_overflow() {
    let start = fuzz::seed();
    let seed = start ^ 0xe4e4;
    for case in 0..fuzz::cases(3_000) {
        let case_seed = seed.wrapping_add(case as u64);
        let mut rng = Rng::new(case_seed);
        let template = match rng.below(4) {
            // Big random expressions, up to past the token limit.
            0 => {
                let budget = rng.below(400);
                format!("{{{{ {} }}}}", fuzz::expression(&mut rng, budget))
            }
            // Token soup: any pieces in any order.
            1 => {
                let mut t = String::from("{{ ");
                for _ in 0..rng.below(60) {
                    let piece = match rng.below(5) {
                        0 => rng.pick(fuzz::EXPR_ATOMS).to_string(),
                        1 => rng.pick(fuzz::EXPR_BINOPS).to_string(),
                        2 => format!("| {}", rng.pick(fuzz::EXPR_FILTERS)),
                        3 => rng
                            .pick(&[
                                "(", ")", "[", "]", "{", "}", ",", ":", ".", "is", "not", "if",
                                "else",
                            ])
                            .to_string(),
                        _ => rng.pick(fuzz::ODD).to_string(),
                    };
                    t.push_str(&piece);
                    t.push(' ');
                }
                t.push_str("}}");
                t
            }
            2 => fuzz::template(&mut rng),
            _ => {
                let base = fuzz::template(&mut rng);
                fuzz::mutate_text(&mut rng, &base)
            }
        };
        run_case(
            template,
            format!("case {case} of TOLLGATE_FUZZ_SEED={start}"),
        );
    }
}
