//! Slack interactivity requests: a form-encoded body whose `payload` field
//! is JSON. Only `block_actions` on tollgate's own buttons mean anything
//! here; everything else is acknowledged and ignored.

use serde::Deserialize;

use super::message::{APPROVE_ACTION, REJECT_ACTION, is_slack_id};
use crate::domain::pending_approval::Decision;

/// What a click asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClickAction {
    Approve,
    Reject,
}

/// A click on one of tollgate's buttons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    /// Slack's user id of the person who clicked.
    pub user_id: String,
    pub action: ClickAction,
    /// The approval key (the button's value).
    pub key: String,
    /// The digest of the payload the message showed (after the key in the
    /// button's value; absent from buttons posted before digests were).
    pub payload_digest: Option<String>,
    /// Where to reply to the clicker (valid for 30 minutes).
    pub response_url: Option<String>,
}

impl Click {
    /// Who decides, as recorded: `slack:<user id>`.
    pub fn decided_by(&self) -> String {
        format!("slack:{}", self.user_id)
    }

    pub fn decision(&self) -> Decision {
        match self.action {
            ClickAction::Approve => Decision::Approve { reason: None },
            ClickAction::Reject => Decision::Reject { reason: None },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interaction {
    Click(Click),
    /// Acknowledge and do nothing (another kind of interaction, or an
    /// action that is not tollgate's).
    Ignored(String),
}

/// Why a signed body still makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a Slack interaction: {0}")]
pub struct InteractionError(String);

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: String,
    user: Option<User>,
    #[serde(default)]
    actions: Vec<Action>,
    response_url: Option<String>,
}

#[derive(Deserialize)]
struct User {
    id: String,
}

#[derive(Deserialize)]
struct Action {
    action_id: String,
    value: Option<String>,
}

/// Parse a verified request body.
pub fn parse(body: &[u8]) -> Result<Interaction, InteractionError> {
    std::str::from_utf8(body).map_err(|_| InteractionError("the body is not UTF-8".into()))?;
    let form: Form = serde_urlencoded::from_bytes(body)
        .map_err(|e| InteractionError(format!("the body is not a form: {e}")))?;
    let payload = form
        .payload
        .ok_or_else(|| InteractionError("no payload field in the form".into()))?;
    let payload: Payload = serde_json::from_str(&payload)
        .map_err(|e| InteractionError(format!("the payload is not what Slack sends: {e}")))?;
    if payload.kind != "block_actions" {
        return Ok(Interaction::Ignored(format!(
            "interaction type {:?}",
            payload.kind
        )));
    }
    let Some(action) = payload
        .actions
        .iter()
        .find(|a| a.action_id == APPROVE_ACTION || a.action_id == REJECT_ACTION)
    else {
        return Ok(Interaction::Ignored(
            "no tollgate action in the payload".into(),
        ));
    };
    let user_id = payload
        .user
        .map(|u| u.id)
        .filter(|id| is_slack_id(id))
        .ok_or_else(|| InteractionError("the payload names no valid user.id".into()))?;
    let value = action.value.clone().unwrap_or_default();
    let (key, payload_digest) = match value.split_once(' ') {
        Some((key, digest)) => (key.to_string(), Some(digest.to_string())),
        None => (value, None),
    };
    if key.is_empty() || key.len() > 64 {
        return Err(InteractionError(
            "the button carries no approval key".into(),
        ));
    }
    if payload_digest
        .as_deref()
        .is_some_and(|d| !d.starts_with("sha256:") || d.len() > 80)
    {
        return Err(InteractionError(
            "the button carries a malformed payload digest".into(),
        ));
    }
    let action = if action.action_id == APPROVE_ACTION {
        ClickAction::Approve
    } else {
        ClickAction::Reject
    };
    let response_url = payload
        .response_url
        .filter(|u| u.starts_with("https://") || u.starts_with("http://"));
    Ok(Interaction::Click(Click {
        user_id,
        action,
        key,
        payload_digest,
        response_url,
    }))
}

/// A decision button's value: the approval key, then the digest of the
/// payload the message shows.
pub fn button_value(key: &str, payload_digest: &str) -> String {
    format!("{key} {payload_digest}")
}

/// The fields of the `application/x-www-form-urlencoded` body tollgate
/// reads; Slack's others are ignored.
#[derive(Deserialize)]
struct Form {
    payload: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(payload: &str) -> Vec<u8> {
        serde_urlencoded::to_string([("payload", payload)])
            .unwrap()
            .into_bytes()
    }

    #[test]
    fn a_click_on_approve_is_read() {
        let body = form(
            r#"{"type":"block_actions","user":{"id":"U024BE7LH","username":"ana"},
               "response_url":"https://hooks.slack.com/actions/T1/2/x",
               "actions":[{"action_id":"tollgate_approve","value":"k-1","type":"button"}]}"#,
        );
        assert_eq!(
            parse(&body).unwrap(),
            Interaction::Click(Click {
                user_id: "U024BE7LH".into(),
                action: ClickAction::Approve,
                key: "k-1".into(),
                payload_digest: None,
                response_url: Some("https://hooks.slack.com/actions/T1/2/x".into()),
            })
        );
    }

    #[test]
    fn a_button_carries_the_digest_of_the_payload_it_showed() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let value = button_value("k-1", &digest);
        let body = form(&format!(
            r#"{{"type":"block_actions","user":{{"id":"U024BE7LH"}},
               "actions":[{{"action_id":"tollgate_reject","value":"{value}","type":"button"}}]}}"#
        ));
        let Interaction::Click(click) = parse(&body).unwrap() else {
            panic!("a click")
        };
        assert_eq!(click.key, "k-1");
        assert_eq!(click.payload_digest.as_deref(), Some(digest.as_str()));
        let forged = form(
            r#"{"type":"block_actions","user":{"id":"U024BE7LH"},
               "actions":[{"action_id":"tollgate_reject","value":"k-1 md5:00","type":"button"}]}"#,
        );
        assert!(parse(&forged).is_err());
    }

    #[test]
    fn other_interactions_are_ignored_and_nonsense_refused() {
        let other = form(r#"{"type":"view_submission","user":{"id":"U1"}}"#);
        assert!(matches!(parse(&other).unwrap(), Interaction::Ignored(_)));
        let foreign = form(
            r#"{"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"x","value":"k"}]}"#,
        );
        assert!(matches!(parse(&foreign).unwrap(), Interaction::Ignored(_)));
        // The "Open in browser" url button opens the signed link; the click
        // Slack reports for it decides nothing.
        let open = form(
            r#"{"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"tollgate_open","url":"https://x/a/k/s","type":"button"}]}"#,
        );
        assert!(matches!(parse(&open).unwrap(), Interaction::Ignored(_)));
        let bad_user = form(
            r#"{"type":"block_actions","user":{"id":"u<1>"},"actions":[{"action_id":"tollgate_reject","value":"k"}]}"#,
        );
        assert!(parse(&bad_user).is_err());
        assert!(parse(b"payload=%ZZ").is_err());
        assert!(parse(b"token=x").is_err());
        assert!(parse(b"payload=not-json").is_err());
    }

    #[test]
    fn the_payload_is_found_among_other_fields_and_fully_decoded() {
        let json = r#"{"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"tollgate_reject","value":"k+1&=%"}]}"#;
        let body =
            serde_urlencoded::to_string([("token", "x"), ("payload", json), ("z", "1")]).unwrap();
        let Interaction::Click(click) = parse(body.as_bytes()).unwrap() else {
            panic!("a click");
        };
        assert_eq!(click.key, "k+1&=%");
        assert_eq!(click.action, ClickAction::Reject);
        // `+` is a space in a form body.
        let plus = br#"payload={"type":"x+y"}"#;
        assert_eq!(
            parse(plus).unwrap(),
            Interaction::Ignored("interaction type \"x y\"".into())
        );
    }
}
