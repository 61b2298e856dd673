//! Where notices go, as the spec writes it (DESIGN §14): the spec-wide
//! `approvals.notify` (`slack`, `webhooks`, `email`) and a gate's own
//! `notify:` (`webhooks`, `email`), which replaces the spec's value of
//! each key it writes.
//!
//! Every value is kept as written: a `${NAME}` reference stays one, and is
//! resolved when a notice is sent. What could put a secret in the spec's
//! text is refused here, because that text is stored with every version
//! of the spec: a webhook's signing secret must be a reference, and a URL
//! may not carry a literal password.

use std::collections::BTreeMap;

use super::super::marked::Node;
use super::super::{EmailSpec, GateNotify, NotifySpec, SlackNotifySpec, WebhookSpec};
use super::reader::{Fields, Place};
use super::{Cx, Result};
use crate::domain::notices::{NoticeEvent, is_address};
use crate::support::secrets;

impl Cx<'_> {
    /// `approvals.notify`. `label` names the key for a type error.
    pub(super) fn spec_notify(&self, node: &Node, label: &str) -> Result<NotifySpec> {
        let place = Place::in_("approvals.notify");
        let notify = self.mapping(node, &place, &NotifySpec::SCHEMA, label)?;
        let slack = match notify.get("slack") {
            Some(node) => {
                let place = Place::in_("approvals.notify.slack");
                let slack = self.mapping(
                    node,
                    &place,
                    &SlackNotifySpec::SCHEMA,
                    &notify.label("slack"),
                )?;
                Some(SlackNotifySpec {
                    bot_token: slack.required_string("bot_token")?,
                    channel: slack.required_string("channel")?,
                    signing_secret: slack.required_string("signing_secret")?,
                })
            }
            None => None,
        };
        let webhooks = match notify.get("webhooks") {
            Some(node) => self.webhooks(node, &notify, "approvals.notify.webhooks")?,
            None => Vec::new(),
        };
        let email = match notify.get("email") {
            Some(node) => Some(self.email(node, &notify, "approvals.notify.email")?),
            None => None,
        };
        Ok(NotifySpec {
            slack,
            webhooks,
            email,
        })
    }

    /// A gate's `notify:` (in `fields`, the gate's mapping).
    pub(super) fn gate_notify(&self, fields: &Fields<'_>) -> Result<GateNotify> {
        let Some(node) = fields.get("notify") else {
            return Ok(GateNotify::default());
        };
        let label = fields.label("notify");
        let gate = fields.place.name();
        if let Some(slack) = node.entry("slack") {
            return Err(self.err(
                slack.key_pos,
                format!(
                    "\"slack\" is not accepted in {label}: Slack is configured once per spec, in approvals.notify.slack (its signing secret is the server's); a gate may set its own webhooks and email"
                ),
            ));
        }
        let place = Place::in_(format!("the notify of {gate}"));
        let notify = self.mapping(node, &place, &GateNotify::SCHEMA, &label)?;
        let webhooks = match notify.get("webhooks") {
            Some(node) => Some(self.webhooks(node, &notify, &format!("the webhooks of {gate}"))?),
            None => None,
        };
        let email = match notify.get("email") {
            Some(node) if node.entries().is_some() => Some(Some(self.email(
                node,
                &notify,
                &format!("the email of {gate}"),
            )?)),
            Some(node) => {
                if !matches!(self.bool(node, ""), Ok(false)) {
                    return Err(self.type_err(
                        node,
                        "a mapping (this gate's email), or false (no mail for this gate)",
                        &notify.label("email"),
                    ));
                }
                Some(None)
            }
            None => None,
        };
        Ok(GateNotify { webhooks, email })
    }

    /// `webhooks: [{url, secret, events?}, ...]`; `[]` is none. `what`
    /// names the sequence in messages (`approvals.notify.webhooks`).
    fn webhooks(&self, node: &Node, fields: &Fields<'_>, what: &str) -> Result<Vec<WebhookSpec>> {
        let label = fields.label("webhooks");
        let Some(items) = node.items() else {
            return Err(self.type_err(node, "a sequence of {url, secret, events?}", &label));
        };
        let mut hooks: Vec<WebhookSpec> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let entry_name = format!("webhook {} in {what}", i + 1);
            let entry = self.mapping(
                item,
                &Place::in_(entry_name.clone()),
                &WebhookSpec::SCHEMA,
                &entry_name,
            )?;
            let url_node = entry.required("url")?;
            let url = self.non_empty_string(url_node, &entry.label("url"))?;
            if let Some(problem) = webhook_url_problem(&url) {
                return Err(self.err(
                    url_node.pos,
                    format!("bad {}: {problem}", entry.label("url")),
                ));
            }
            if hooks.iter().any(|h| h.url == url) {
                return Err(self.err(
                    url_node.pos,
                    format!("{what} lists the url {url:?} twice: list each endpoint once"),
                ));
            }
            let secret_node = entry.required("secret")?;
            let secret = self.string(secret_node, &entry.label("secret"))?;
            if let Some(problem) = secret_problem(&secret) {
                return Err(self.err(
                    secret_node.pos,
                    format!("{} {problem}", entry.label("secret")),
                ));
            }
            hooks.push(WebhookSpec {
                url,
                secret,
                events: self.events(&entry)?,
            });
        }
        Ok(hooks)
    }

    /// `email: {smtp_url, from, to?, events?}`. `what` names it in messages.
    fn email(&self, node: &Node, fields: &Fields<'_>, what: &str) -> Result<EmailSpec> {
        let email = self.mapping(
            node,
            &Place::in_(what),
            &EmailSpec::SCHEMA,
            &fields.label("email"),
        )?;
        let smtp_node = email.required("smtp_url")?;
        let smtp_url = self.non_empty_string(smtp_node, &email.label("smtp_url"))?;
        if let Some(problem) = smtp_url_problem(&smtp_url) {
            return Err(self.err(
                smtp_node.pos,
                format!("bad {}: {problem}", email.label("smtp_url")),
            ));
        }
        let from_node = email.required("from")?;
        let from = self.non_empty_string(from_node, &email.label("from"))?;
        if let Some(problem) = address_problem(&from) {
            return Err(self.err(
                from_node.pos,
                format!("bad {}: {problem}", email.label("from")),
            ));
        }
        let mut to = BTreeMap::new();
        if let Some(node) = email.get("to") {
            let label = email.label("to");
            let Some(entries) = node.entries() else {
                return Err(self.type_err(node, "a mapping of decider names to addresses", &label));
            };
            for e in entries {
                if !is_decider_name(&e.key) {
                    return Err(self.err(
                        e.key_pos,
                        format!(
                            "{:?} in {label} is not a decider's name: write the API-token name the decider approves with (letters, digits, '-', '_', '.', '@')",
                            e.key
                        ),
                    ));
                }
                let entry_label = format!("{:?} in {label}", e.key);
                let address = self.non_empty_string(&e.value, &entry_label)?;
                if let Some(problem) = address_problem(&address) {
                    return Err(self.err(e.value.pos, format!("bad {entry_label}: {problem}")));
                }
                to.insert(e.key.clone(), address);
            }
        }
        Ok(EmailSpec {
            smtp_url,
            from,
            to,
            events: self.events(&email)?,
        })
    }

    /// `events: [approval.requested, ...]` of a webhook or an email: each
    /// a known event, once; `None` when left out (every event).
    fn events(&self, fields: &Fields<'_>) -> Result<Option<Vec<NoticeEvent>>> {
        let Some(node) = fields.get("events") else {
            return Ok(None);
        };
        let label = fields.label("events");
        let known = || {
            NoticeEvent::ALL
                .iter()
                .map(|e| e.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some(items) = node.items() else {
            return Err(self.type_err(node, "a sequence of event names", &label));
        };
        if items.is_empty() {
            return Err(self.err(
                node.pos,
                format!("{label} is empty: nothing would be sent (omit it for every event)"),
            ));
        }
        let mut events: Vec<NoticeEvent> = Vec::with_capacity(items.len());
        for item in items {
            let name = self.string(item, &format!("an entry of {label}"))?;
            let Some(event) = NoticeEvent::parse(&name) else {
                return Err(self.err(
                    item.pos,
                    format!(
                        "unknown event {name:?} in {label} (the events are: {})",
                        known()
                    ),
                ));
            };
            if events.contains(&event) {
                return Err(self.err(item.pos, format!("{label} lists {name:?} twice")));
            }
            events.push(event);
        }
        Ok(Some(events))
    }
}

/// The whole of `text` is one `${NAME}` reference (with or without a
/// default).
fn whole_reference(text: &str) -> Option<secrets::SecretRef<'_>> {
    match secrets::references(text).as_slice() {
        [one] if one.start == 0 && one.end == text.len() => Some(one.clone()),
        _ => None,
    }
}

/// Why a webhook's `secret` cannot be written so, or None.
fn secret_problem(secret: &str) -> Option<String> {
    // The value itself is never quoted back: it may be the secret.
    const WHY: &str = "the spec's text is stored with every version of it, so a secret written here would be kept in the store; set it in the server's environment";
    match whole_reference(secret) {
        Some(r) if r.default.is_some() => Some(format!(
            "has a default (${{{}:-...}}): the default would be a secret written in the spec ({WHY}); write ${{{}}}",
            r.name, r.name
        )),
        Some(_) => None,
        None => Some(format!(
            "must be a ${{NAME}} reference, such as ${{ORDERS_WEBHOOK_SECRET}}, not a literal: {WHY}"
        )),
    }
}

/// Why a webhook's `url` can never be an absolute http(s) URL without
/// credentials, or None. A reference at its start supplies the scheme and
/// the origin; the rest is checked as far as it is written.
fn webhook_url_problem(url: &str) -> Option<String> {
    url_problem(
        url,
        &["http", "https"],
        "https://hooks.example/tollgate",
        |_| {
            Some("it carries a user name or password: credentials in a URL would be stored with the spec's text; write the whole URL as a ${NAME} reference".to_string())
        },
    )
}

/// Why `smtp_url` cannot be written so, or None: `smtp://` or `smtps://`,
/// a host, an optional port and `?tls=required|opportunistic|none`, and
/// a password (if any) that is a reference.
fn smtp_url_problem(url: &str) -> Option<String> {
    let userinfo_problem = |userinfo: &str| {
        let password = userinfo.split_once(':').map_or("", |(_, p)| p);
        (!password.is_empty() && whole_reference(password).is_none()).then(|| {
            "it holds a literal password: the spec's text is stored with every version of it, so the password would be kept in the store; write the whole URL as a ${NAME} reference (smtp_url: ${SMTP_URL}), or the password as one (smtp://user:${SMTP_PASSWORD}@host)".to_string()
        })
    };
    if let Some(problem) = url_problem(
        url,
        &["smtp", "smtps"],
        "smtps://mail.example:465",
        userinfo_problem,
    ) {
        return Some(problem);
    }
    if whole_reference(url).is_some() || !secrets::references(url).is_empty() {
        return None;
    }
    // Fully literal: the rest of its shape is known now.
    let parsed = url::Url::parse(url).ok()?;
    if !matches!(parsed.path(), "" | "/") {
        return Some(format!(
            "{url:?} has a path ({:?}): an SMTP URL is smtp[s]://host[:port][?tls=required|opportunistic|none]",
            parsed.path()
        ));
    }
    if parsed.fragment().is_some() {
        return Some(format!(
            "{url:?} has a fragment ('#'), which an SMTP URL cannot use"
        ));
    }
    for (key, value) in parsed.query_pairs() {
        if key != "tls" || !matches!(value.as_ref(), "required" | "opportunistic" | "none") {
            return Some(format!(
                "{url:?} has the query {key}={value}: the only one allowed is tls=required, tls=opportunistic or tls=none"
            ));
        }
    }
    None
}

/// The checks both kinds of URL share: the scheme (one of `schemes`), a
/// host when the text fixes it, and what `userinfo` says of a
/// `user:password@` part (None: allowed).
fn url_problem(
    url: &str,
    schemes: &[&str],
    example: &str,
    userinfo: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    if whole_reference(url).is_some() {
        return None;
    }
    let refs = secrets::references(url);
    // The text before the first reference, which no value changes.
    let fixed = refs.first().map_or(url, |r| &url[..r.start]);
    if fixed.is_empty() {
        // A reference supplies the scheme and the origin.
        return None;
    }
    let wanted = schemes
        .iter()
        .map(|s| format!("{s}://"))
        .collect::<Vec<_>>()
        .join(" or ");
    let Some((scheme, after)) = url
        .split_once("://")
        .filter(|(s, _)| s.len() <= fixed.len())
    else {
        let could_start = !refs.is_empty()
            && schemes
                .iter()
                .any(|s| format!("{s}://").starts_with(&fixed.to_ascii_lowercase()));
        return (!could_start).then(|| {
            format!("{url:?} is not a URL starting with {wanted} (or a ${{NAME}} reference that supplies it), e.g. {example}")
        });
    };
    if !schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme)) {
        return Some(format!(
            "the scheme of {url:?} is {:?}: write a URL starting with {wanted}, e.g. {example}",
            scheme.to_ascii_lowercase()
        ));
    }
    // The authority: up to the path, query or fragment.
    let authority = &after[..after.find(['/', '?', '#']).unwrap_or(after.len())];
    if let Some((info, _host)) = authority.rsplit_once('@')
        && let Some(problem) = userinfo(info)
    {
        return Some(problem);
    }
    if refs.is_empty() {
        match url::Url::parse(url) {
            Ok(parsed) if parsed.host_str().is_some_and(|h| !h.is_empty()) => {}
            Ok(_) => return Some(format!("{url:?} has no host, e.g. {example}")),
            Err(e) => return Some(format!("{url:?} is not a valid URL ({e}), e.g. {example}")),
        }
    }
    None
}

/// Why `text` is not a mail address (`addr` or `Name <addr>`) nor a
/// `${NAME}` reference, or None. Text with a reference is checked when
/// the mail is sent.
fn address_problem(text: &str) -> Option<String> {
    if text.chars().any(char::is_control) {
        return Some(format!(
            "{text:?} holds a control character, which a mail header cannot carry"
        ));
    }
    if !secrets::references(text).is_empty() {
        return None;
    }
    let address = match text
        .trim()
        .strip_suffix('>')
        .and_then(|t| t.rsplit_once('<'))
    {
        Some((_name, address)) => address.trim(),
        None => text.trim(),
    };
    (address.contains(char::is_whitespace) || !is_address(address)).then(|| {
        format!("{text:?} is not a mail address: write one such as tollgate@example.com or \"Tollgate <tollgate@example.com>\", or a ${{NAME}} reference")
    })
}

/// A decider's name as approvers are written: an API-token name.
fn is_decider_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

#[cfg(test)]
mod tests;
