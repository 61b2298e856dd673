//! The spec hash: SHA-256 of the canonical JSON of the parsed YAML (keys
//! sorted, compact). Key order, comments and YAML styles do not change it;
//! `${NAME}` is hashed as written, so rotating a secret does not either.

use std::process::Command;

use tollgate_runtime::spec::Spec;

const SPEC: &str = r#"version: 1
agent: hash-me
tools:
  lookup:
    http:
      url: "https://shop.example/orders/{{ args.id }}"
      headers: { Authorization: "Bearer ${SHOP_TOKEN}" }
steps:
  - id: order
    tool: lookup
    with: { id: "{{ input.order_id }}" }
  - id: note
    set: { amount: 2.5, count: 3, ok: true, none: null, text: café }
"#;

/// Computed independently with Python:
/// `hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(',', ':'),
/// ensure_ascii=False).encode()).hexdigest()` over the same document.
const SPEC_SHA256: &str = "c5466dbf65b193a39632d0f01dca574e0e83d252fd6c83115924003ad9b5bed2";

fn hash(source: &str) -> String {
    match Spec::parse(source, "spec.yaml") {
        Ok(spec) => spec.hash.as_str().to_string(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_hash_is_the_sha256_of_the_canonical_json() {
    let spec = Spec::parse(SPEC, "spec.yaml").unwrap();
    assert_eq!(spec.hash.as_str(), SPEC_SHA256);
    assert_eq!(spec.hash.short(), &SPEC_SHA256[..12]);
    assert!(
        spec.hash
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
}

#[test]
fn key_order_comments_and_yaml_styles_do_not_change_it() {
    let reordered = r#"# the same spec, written differently
steps:
  - tool: lookup   # keys in another order
    id: order
    with:
      id: '{{ input.order_id }}'
  - set:
      text: "café"
      none: ~
      ok: true
      count: 3
      amount: 2.5
    id: note
agent: "hash-me"
tools:
  lookup:
    http:
      headers:
        Authorization: Bearer ${SHOP_TOKEN}
      url: https://shop.example/orders/{{ args.id }}
version: 1
"#;
    assert_eq!(hash(reordered), SPEC_SHA256);
}

#[test]
fn changing_a_step_changes_it() {
    let changed = SPEC.replace("count: 3", "count: 4");
    assert_ne!(hash(&changed), SPEC_SHA256);
    let renamed = SPEC.replace("id: note", "id: notes");
    assert_ne!(hash(&renamed), SPEC_SHA256);
    // A number and the same digits as a string are different documents.
    let quoted = SPEC.replace("count: 3", "count: \"3\"");
    assert_ne!(hash(&quoted), SPEC_SHA256);
}

#[test]
fn a_secret_reference_is_hashed_as_written() {
    // The constant above was computed over the text `${SHOP_TOKEN}`.
    assert_eq!(hash(SPEC), SPEC_SHA256);
    let renamed = SPEC.replace("${SHOP_TOKEN}", "${SHOP_API_TOKEN}");
    assert_ne!(hash(&renamed), SPEC_SHA256);
}

#[test]
fn rotating_a_secret_does_not_change_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.yaml");
    std::fs::write(&path, SPEC).unwrap();
    let hash_with = |token: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .arg("hash")
            .arg(&path)
            .env("SHOP_TOKEN", token)
            .output()
            .expect("run tollgate hash");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(hash_with("old-secret"), SPEC_SHA256);
    assert_eq!(hash_with("new-secret"), SPEC_SHA256);
}

/// The examples' hashes, pinned: a change to how specs are read must not
/// move the hash of a spec that already runs (a stored run records it).
/// Computed independently, as `SPEC_SHA256` above, with PyYAML loading the file.
#[test]
fn the_examples_hashes_do_not_move() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    for (file, expected) in [
        (
            "hello-approval.yaml",
            "ac2b6172d2163c8df7223ed3c17d7d04d1ec9f68ee8957994dce6e01e29ad3a1",
        ),
        (
            "no-gate.yaml",
            "7b3d9042c16b94ecb41a0d2b327ccc2ba8b4c1a1f1fb64c002f43737244e6e59",
        ),
        (
            "refund-desk.yaml",
            "3278ca3a69d5003dcc81347f821e04342abad54d0965813f457e96c533388c1a",
        ),
        (
            "with-rust-tools.yaml",
            "36d2942c50a34fada3062b3ff1d8f9de935a48f85a804bf872cc1406c91a5774",
        ),
    ] {
        let spec = Spec::load(&dir.join(file)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.hash.as_str(), expected, "{file}");
    }
}
