//! The plan is a pure function of the spec: deterministic, and the README
//! says exactly what the spec does (a Pending approvals section iff it has a
//! gate).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tollgate::export::{self, ExportOptions, Role};
use tollgate_runtime::Spec;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}.yaml"))
}

fn all_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .map(Result::unwrap)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn two_exports_of_one_spec_are_byte_identical() {
    for name in [
        "refund-desk",
        "no-gate",
        "with-rust-tools",
        "hello-approval",
    ] {
        let first = export::command::plan_for(&example(name)).unwrap();
        let second = export::command::plan_for(&example(name)).unwrap();
        assert_eq!(first, second, "{name}: plans differ");

        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        export::export(&first, &a, &ExportOptions::default()).unwrap();
        export::export(&second, &b, &ExportOptions::default()).unwrap();
        let (files_a, files_b) = (all_files(&a), all_files(&b));
        assert_eq!(
            files_a.keys().collect::<Vec<_>>(),
            files_b.keys().collect::<Vec<_>>()
        );
        assert!(files_a == files_b, "{name}: exports differ");
        // Every planned file, the pristine copy of each file of yours, the
        // manifest, nothing else.
        let yours = first.files.values().filter(|f| f.role.is_yours()).count();
        assert_eq!(files_a.len(), first.files.len() + yours + 1);
    }
}

#[test]
fn plan_has_every_documented_file_with_its_role() {
    let plan = export::command::plan_for(&example("refund-desk")).unwrap();
    let roles: Vec<(&str, Role)> = plan
        .files
        .iter()
        .filter(|(_, f)| f.role != Role::Vendored)
        .map(|(p, f)| (p.as_str(), f.role))
        .collect();
    assert_eq!(
        roles,
        vec![
            (".dockerignore", Role::Yours),
            (".env.example", Role::Generated),
            (".gitattributes", Role::Generated),
            (".gitignore", Role::Yours),
            ("Cargo.lock", Role::Yours),
            ("Cargo.toml", Role::Yours),
            ("Dockerfile", Role::Yours),
            ("README.md", Role::Yours),
            ("TOLLGATE.md", Role::Generated),
            ("agent.yaml", Role::Generated),
            ("openapi.json", Role::Generated),
            ("src/generated.rs", Role::Generated),
            ("src/main.rs", Role::Yours),
            ("src/tools/mod.rs", Role::Generated),
            ("src/tools/score_risk.rs", Role::Yours),
            ("tests/smoke.rs", Role::Yours),
            ("tests/workflow.rs", Role::Yours),
        ]
    );
    assert!(plan.files.contains_key("vendored/Cargo.toml"));
    assert_eq!(
        plan.get("agent.yaml").unwrap().bytes.as_ref(),
        std::fs::read(example("refund-desk")).unwrap().as_slice(),
        "the spec is copied as written, comments and all"
    );
}

const BASE: &str = r#"
version: 1
agent: gates
tools:
  plain:
    http: { url: "https://x.example/" }
  guarded:
    http: { url: "https://x.example/" }
    approval: required
steps:
"#;

fn readme_of(steps: &str) -> (bool, String) {
    let source = format!("{BASE}{steps}");
    let spec = Spec::parse(&source, "gates.yaml").unwrap();
    let plan = export::plan(&spec, source.as_bytes()).unwrap();
    (spec.has_gate(), plan.text("README.md").unwrap().to_string())
}

#[test]
fn readme_has_pending_approvals_exactly_when_the_spec_has_a_gate() {
    let gated = [
        (
            "approval step",
            "  - id: a\n    approval: { message: ok? }\n",
        ),
        ("tool approval", "  - id: a\n    tool: guarded\n"),
        (
            "if gate",
            "  - id: a\n    if: \"{{ true }}\"\n    then: request_human_approval\n",
        ),
        (
            "guardrail",
            "  - id: a\n    model: { prompt: hi, output: json }\n    guardrail: { min_confidence: 0.5 }\n",
        ),
    ];
    for (kind, steps) in gated {
        let (has_gate, readme) = readme_of(steps);
        assert!(has_gate, "{kind}");
        assert!(
            readme.contains("\n## Pending approvals\n"),
            "{kind}: no section"
        );
        assert!(
            readme.contains("approvals approve $KEY"),
            "{kind}: no CLI example"
        );
        assert!(
            readme.contains("spec_changed"),
            "{kind}: no spec-change note"
        );
    }

    let ungated = "  - id: a\n    tool: plain\n  - id: b\n    set: { x: 1 }\n";
    let (has_gate, readme) = readme_of(ungated);
    assert!(!has_gate);
    assert!(!readme.contains("Pending approvals"));
    assert!(!readme.contains("approvals approve"));

    for name in [
        "refund-desk",
        "no-gate",
        "with-rust-tools",
        "hello-approval",
    ] {
        let spec = Spec::load(&example(name)).unwrap();
        let plan = export::command::plan_for(&example(name)).unwrap();
        let readme = plan.text("README.md").unwrap();
        assert_eq!(
            readme.contains("## Pending approvals"),
            spec.has_gate(),
            "{name}"
        );
    }
}

#[test]
fn readme_lists_each_gate_with_phase_message_and_ttl() {
    let plan = export::command::plan_for(&example("refund-desk")).unwrap();
    let readme = plan.text("README.md").unwrap();
    for row in [
        "| `assess` | guardrail (`min_confidence: 0.8`) | after |",
        "| `large` | `if: {{ steps.assess.output.amount > 100 }}` then request_human_approval | before | `Large refund: {{ steps.assess.output.amount }}` | 7d (`approvals.ttl`) |",
        "| `refund` | tool approval (`issue_refund`, `approval: required`) | before | `Refund {{ args.amount }} on order {{ args.order_id }}?` | 7d (`approvals.ttl`) |",
        "| `close` | approval step | before | `Close the ticket?` | 2d |",
    ] {
        assert!(readme.contains(row), "missing row {row}\n{readme}");
    }
}

#[test]
fn env_example_names_every_secret_and_where_it_is_used() {
    let spec = Spec::load(&example("refund-desk")).unwrap();
    let plan = export::command::plan_for(&example("refund-desk")).unwrap();
    let env = plan.text(".env.example").unwrap();
    // Commented out: a blank TOLLGATE_API_TOKENS stops the server, and an
    // .env copied unchanged must still start one.
    assert!(env.contains("\n# TOLLGATE_API_TOKENS=\n"));
    assert!(!env.contains("\nTOLLGATE_API_TOKENS="));
    for name in spec.secret_names() {
        assert!(env.contains(&format!("\n{name}=\n")), "{name}");
    }
    assert!(env.contains(
        "# ${SHOP_TOKEN}, used at:\n#   tools.lookup_order.http.headers.Authorization\n"
    ));
}
