//! Reading a chat-completions reply: the message content, the token usage,
//! and for `output: json` the JSON object inside the content.

use serde_json::{Map, Value, json};

use super::EXCERPT_CHARS;

/// The parts of a reply a step uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub content: String,
    /// `length` means the model hit its token limit mid-answer.
    pub finish_reason: Option<String>,
    /// `{prompt_tokens, completion_tokens, total_tokens}`, null where unreported.
    pub usage: Value,
}

/// Parse a 2xx reply body. The error describes the problem, with an excerpt.
pub fn parse(text: &str) -> Result<Reply, String> {
    let body: Value = serde_json::from_str(text)
        .map_err(|e| format!("the body is not JSON ({e}): {}", excerpt(text)))?;
    let choice = body.pointer("/choices/0");
    let message = choice.and_then(|c| c.get("message"));
    let Some(content) = message
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
    else {
        return Err(missing_content(&body, message, text));
    };
    Ok(Reply {
        content: content.to_string(),
        finish_reason: choice
            .and_then(|c| c.get("finish_reason"))
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: usage(&body),
    })
}

/// Why a reply has no text: a refusal, an error object, or an unknown shape.
fn missing_content(body: &Value, message: Option<&Value>, text: &str) -> String {
    if let Some(refusal) = message
        .and_then(|m| m.get("refusal"))
        .and_then(Value::as_str)
    {
        return format!("the model refused: {}", excerpt(refusal));
    }
    if let Some(error) = body.get("error") {
        let detail = error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| error.to_string());
        return format!("the reply is an error: {}", excerpt(&detail));
    }
    format!("no choices[0].message.content in {}", excerpt(text))
}

fn usage(body: &Value) -> Value {
    let count = |name: &str| {
        body.pointer(&format!("/usage/{name}"))
            .and_then(Value::as_u64)
            .map_or(Value::Null, Value::from)
    };
    json!({
        "prompt_tokens": count("prompt_tokens"),
        "completion_tokens": count("completion_tokens"),
        "total_tokens": count("total_tokens"),
    })
}

/// The JSON object an `output: json` step requires of the content; the
/// error says what the content is instead.
/// Surrounding whitespace and a Markdown code fence are tolerated, because
/// models add them even when asked not to.
pub fn json_object(reply: &Reply) -> Result<Value, String> {
    let cut_off = if reply.finish_reason.as_deref() == Some("length") {
        " (the reply was cut off at the model's token limit)"
    } else {
        ""
    };
    let inner = strip_fence(&reply.content);
    // The object becomes the step's output, stored and wrapped again.
    let limit = crate::support::json_depth::MAX_JSON_DEPTH;
    if crate::support::json_depth::text_depth(inner.as_bytes()) > limit {
        return Err(format!(
            "JSON nested deeper than {limit} levels of objects and arrays, the most a run accepts{cut_off}"
        ));
    }
    match serde_json::from_str::<Value>(inner) {
        Ok(Value::Object(map)) => Ok(Value::Object(map)),
        Ok(other) => Err(format!(
            "{}{cut_off}: {}",
            crate::support::json_kind::json_kind(&other),
            excerpt(&reply.content)
        )),
        Err(e) => Err(format!(
            "not JSON ({e}){cut_off}: {}",
            excerpt(&reply.content)
        )),
    }
}

/// The content of a ```json ... ``` fence, or the trimmed text.
fn strip_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(inner) = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
    else {
        return trimmed;
    };
    // The fence's info string (`json`) ends at the first newline.
    let body = match inner.split_once('\n') {
        Some((info, body)) if info.trim().chars().all(|c| c.is_ascii_alphanumeric()) => body,
        _ => inner.trim_start().strip_prefix("json").unwrap_or(inner),
    };
    body.trim()
}

/// A bounded, quoted excerpt of text for an error message.
pub fn excerpt(text: &str) -> String {
    let trimmed = text.trim();
    let total = trimmed.chars().count();
    if total <= EXCERPT_CHARS {
        return format!("{trimmed:?}");
    }
    let head: String = trimmed.chars().take(EXCERPT_CHARS).collect();
    format!("{head:?}… ({total} characters in all)")
}

/// Put the reserved `_usage` key on an object output.
pub fn with_usage(mut output: Value, usage: Value) -> Value {
    if let Value::Object(map) = &mut output {
        map.insert("_usage".to_string(), usage);
    }
    output
}

/// `{"text": content}`.
pub fn text_output(content: &str) -> Value {
    let mut map = Map::new();
    map.insert("text".to_string(), Value::String(content.to_string()));
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(content: &str) -> Reply {
        Reply {
            content: content.to_string(),
            finish_reason: Some("stop".into()),
            usage: Value::Null,
        }
    }

    #[test]
    fn content_and_usage_are_read() {
        let r = parse(
            r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
                "usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
        )
        .expect("valid reply");
        assert_eq!(r.content, "hi");
        assert_eq!(
            r.usage,
            json!({"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4})
        );
    }

    #[test]
    fn a_json_answer_nests_at_most_max_json_depth() {
        let limit = crate::support::json_depth::MAX_JSON_DEPTH;
        let object = |n: usize| format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
        assert!(json_object(&reply(&object(limit))).is_ok());
        for depth in [limit + 1, 127, 5_000] {
            let err = json_object(&reply(&format!("```json\n{}\n```", object(depth)))).unwrap_err();
            assert!(err.contains("deeper than 100 levels"), "{depth}: {err}");
        }
    }

    #[test]
    fn unreported_usage_is_null_not_missing() {
        let r = parse(r#"{"choices":[{"message":{"content":"hi"}}]}"#).expect("valid");
        assert_eq!(
            r.usage,
            json!({"prompt_tokens": null, "completion_tokens": null, "total_tokens": null})
        );
    }

    #[test]
    fn a_refusal_and_an_error_body_say_so() {
        let refused =
            parse(r#"{"choices":[{"message":{"content":null,"refusal":"no"}}]}"#).unwrap_err();
        assert!(refused.contains("refused"), "{refused}");
        let error = parse(r#"{"error":{"message":"quota exceeded"}}"#).unwrap_err();
        assert!(error.contains("quota exceeded"), "{error}");
    }

    #[test]
    fn fences_and_whitespace_around_json_are_tolerated() {
        for content in [
            "  {\"a\": 1}\n",
            "```json\n{\"a\": 1}\n```",
            "```\n{\"a\": 1}\n```",
            "```json {\"a\": 1}```",
        ] {
            assert_eq!(
                json_object(&reply(content)),
                Ok(json!({"a": 1})),
                "{content}"
            );
        }
    }

    #[test]
    fn non_objects_are_refused_with_an_excerpt() {
        let err = json_object(&reply("[1, 2]")).unwrap_err();
        assert!(err.contains("an array"), "{err}");
        let long = format!("Sure! {}", "x".repeat(1000));
        let err = json_object(&reply(&long)).unwrap_err();
        assert!(err.contains("not JSON"), "{err}");
        assert!(err.contains("1006 characters in all"), "{err}");
        assert!(err.len() < 400, "bounded: {}", err.len());
    }

    #[test]
    fn a_cut_off_reply_says_why_it_is_not_json() {
        let mut r = reply("{\"a\": ");
        r.finish_reason = Some("length".into());
        let err = json_object(&r).unwrap_err();
        assert!(err.contains("token limit"), "{err}");
    }
}
