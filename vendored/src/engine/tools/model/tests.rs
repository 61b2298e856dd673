//! The parts of the model client that need no endpoint: settings, the
//! request body, redaction. Calls over HTTP are tested end to end in the
//! workspace's `tests/it/runs/model_step.rs` against a loopback stub.

use std::time::Duration;

use serde_json::json;

use super::endpoint::Endpoint;
use super::*;
use crate::domain::spec::{ModelConfig, ModelStep};

fn step() -> ModelStep {
    ModelStep {
        prompt: "p".into(),
        system: None,
        output: ModelOutput::Text,
        name: None,
        base_url: None,
        api_key: None,
        timeout: None,
        guardrail: None,
        on_crash: None,
    }
}

fn table() -> CallSecrets {
    CallSecrets::with_lookup(|name| match name {
        "KEY" => Some("sk-secret-123".into()),
        "BASE" => Some("http://127.0.0.1:9/v1/".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    })
}

fn resolve(step: &ModelStep, defaults: Option<&ModelConfig>) -> Result<Endpoint, String> {
    Endpoint::resolve(step, defaults, &mut table()).map_err(|e| e.to_string())
}

#[test]
fn the_step_overrides_the_spec_block_and_references_resolve() {
    let defaults = ModelConfig {
        base_url: Some("${BASE}".into()),
        api_key: Some("${KEY}".into()),
        name: Some("spec-model".into()),
        timeout: Some(Duration::from_secs(5)),
    };
    let mut own = step();
    own.name = Some("step-model".into());
    let endpoint = resolve(&own, Some(&defaults)).expect("resolves");
    assert_eq!(endpoint.model, "step-model");
    assert_eq!(endpoint.api_key.as_deref(), Some("sk-secret-123"));
    assert_eq!(
        endpoint.url.as_str(),
        "http://127.0.0.1:9/v1/chat/completions"
    );
    assert_eq!(endpoint.host, "127.0.0.1:9");
    assert_eq!(endpoint.timeout, Duration::from_secs(5));
    assert_eq!(endpoint.redactor.text("k=sk-secret-123"), "k=[redacted]");

    own.timeout = Some(Duration::from_secs(1));
    assert_eq!(
        resolve(&own, Some(&defaults)).expect("ok").timeout,
        Duration::from_secs(1)
    );
}

#[test]
fn defaults_apply_when_nothing_is_configured() {
    let mut own = step();
    own.name = Some("m".into());
    own.api_key = Some("${EMPTY}".into());
    let endpoint = resolve(&own, None).expect("resolves");
    assert_eq!(
        endpoint.url.as_str(),
        "https://api.openai.com/v1/chat/completions"
    );
    assert_eq!(endpoint.timeout, DEFAULT_TIMEOUT);
    assert!(endpoint.api_key.is_none(), "an empty key sends no header");
}

#[test]
fn a_missing_name_or_variable_is_a_clear_error() {
    let err = resolve(&step(), Some(&ModelConfig::default()))
        .err()
        .expect("no name");
    assert!(err.contains("no model name"), "{err}");
    let mut own = step();
    own.name = Some("m".into());
    own.api_key = Some("${NOPE}".into());
    let err = resolve(&own, None).err().expect("unset variable");
    assert_eq!(
        err,
        "model api_key: environment variable NOPE is not set (referenced as ${NOPE})"
    );
}

#[test]
fn the_body_has_system_then_user_and_json_mode_when_asked() {
    let mut own = step();
    own.output = ModelOutput::Json;
    let request = ModelRequest {
        step: &own,
        defaults: None,
        system: Some("be brief".into()),
        prompt: "hello".into(),
    };
    assert_eq!(
        request_body("m", &request, ModelOutput::Json),
        json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hello"},
            ],
            "response_format": {"type": "json_object"},
        })
    );
    let request = ModelRequest {
        system: None,
        ..request
    };
    assert_eq!(
        request_body("m", &request, ModelOutput::Text),
        json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]})
    );
}

#[test]
fn durations_in_errors_read_naturally() {
    assert_eq!(secs(Duration::from_secs(60)), "60s");
    assert_eq!(secs(Duration::from_millis(1500)), "1500ms");
}
