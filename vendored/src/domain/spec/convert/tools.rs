//! The `tools:` section: each tool's kind, its HTTP request, and the gate on its calls.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::marked::{Node, Resolved};
use super::super::request;
use super::super::{HttpToolSpec, IdempotencySpec, RetrySpec, ToolKind, ToolSpec};
use super::reader::{Fields, Place};
use super::{Cx, MAX_ID_LEN, Result, is_identifier};
use crate::domain::expr::{self, Shape};
use crate::domain::policy::GatePolicy;

const HTTP_METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];
const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(1);
const MAX_RETRY_ATTEMPTS: i128 = 10;

impl Cx<'_> {
    pub(super) fn tools(&self, node: &Node) -> Result<BTreeMap<String, ToolSpec>> {
        let Some(entries) = node.entries() else {
            return Err(self.type_err(node, "a mapping of tool names to tools", "\"tools\""));
        };
        let mut tools = BTreeMap::new();
        for e in entries {
            if !is_identifier(&e.key) {
                return Err(self.err(
                    e.key_pos,
                    format!(
                        "invalid tool name {:?}: use lowercase letters, digits and '_', starting with a letter or '_', at most {MAX_ID_LEN} characters",
                        e.key
                    ),
                ));
            }
            tools.insert(e.key.clone(), self.tool(&e.key, &e.value)?);
        }
        Ok(tools)
    }

    fn tool(&self, name: &str, node: &Node) -> Result<ToolSpec> {
        let place = Place::in_(format!("tool {name:?}"));
        let fields = self.mapping(node, &place, &ToolSpec::SCHEMA, &format!("tool {name:?}"))?;
        if let Some(second) = fields.later_of("http", "rust") {
            return Err(self.err(
                second.key_pos,
                format!("tool {name:?} has two kinds: a tool is either http or rust, not both"),
            ));
        }
        let kind = if let Some(e) = fields.entry("http") {
            ToolKind::Http(self.http(name, &e.value, &place)?)
        } else if let Some(e) = fields.entry("rust") {
            let empty = e.value.is_null() || e.value.entries().is_some_and(|m| m.is_empty());
            if !empty {
                return Err(self.err(
                    e.value.pos,
                    format!(
                        "\"rust\" in tool {name:?} takes no options: write rust: {{}} and implement the tool in the exported crate"
                    ),
                ));
            }
            ToolKind::Rust
        } else {
            return Err(self.err(
                node.pos,
                format!("tool {name:?} has no kind: add http: {{...}} or rust: {{}}"),
            ));
        };
        // An empty `approval:` is an error, not "no gate": a gate someone
        // meant to write must not vanish silently.
        // `approval: required`, or the gate's policy as a mapping.
        let (approval_required, gate_mapping) = match fields.entry("approval").map(|e| &e.value) {
            Some(node) if node.entries().is_some() => (true, Some(node)),
            Some(node) => {
                if node.as_str() != Some("required") {
                    let found = match node.as_str() {
                        Some(s) => format!("{s:?}"),
                        None => node.type_name().to_string(),
                    };
                    return Err(self.err(
                        node.pos,
                        format!(
                            "{} must be \"required\" or a mapping of the gate's policy (omit it for a tool that runs without a gate), found {found}",
                            fields.label("approval")
                        ),
                    ));
                }
                (true, None)
            }
            None => (false, None),
        };
        let mut message = fields.opt_string("message")?;
        let mut ttl = fields.opt_duration("ttl")?;
        if !approval_required {
            for key in ["message", "ttl", "on_spec_change"] {
                if let Some(e) = fields.entry(key) {
                    return Err(self.err(
                        e.key_pos,
                        format!(
                            "{} applies only to a gate: add approval: required or remove it",
                            fields.label(key)
                        ),
                    ));
                }
            }
        }
        let idempotent = match fields.get("idempotent") {
            Some(node) => self.bool(node, &fields.label("idempotent"))?,
            None => false,
        };
        let on_crash = self.on_crash(&fields)?;
        let mut on_spec_change = self.on_spec_change(&fields)?;
        let mut when = None;
        let mut policy = GatePolicy::plain();
        if let Some(node) = gate_mapping {
            let place = Place::in_(format!("the approval of tool {name:?}"));
            let approval = self.mapping(
                node,
                &place,
                &ToolSpec::APPROVAL_SCHEMA,
                &fields.label("approval"),
            )?;
            // Said once: beside `approval:` or inside it.
            for key in ["message", "ttl", "on_spec_change"] {
                if let (Some(outer), Some(inner)) = (fields.entry(key), approval.entry(key)) {
                    let later = if outer.key_pos > inner.key_pos {
                        outer
                    } else {
                        inner
                    };
                    return Err(self.err(
                        later.key_pos,
                        format!(
                            "tool {name:?} gives {key:?} twice, beside approval: and inside it: keep one"
                        ),
                    ));
                }
            }
            message = message.or(approval.opt_string("message")?);
            ttl = ttl.or(approval.opt_duration("ttl")?);
            on_spec_change = on_spec_change.or(self.on_spec_change(&approval)?);
            when = self.when(&approval)?;
            policy = self.gate_policy(&approval, ttl.unwrap_or(self.default_ttl))?;
            self.no_form(&approval, "a tool's output is what the tool returns")?;
        }
        Ok(ToolSpec {
            name: name.to_string(),
            kind,
            approval_required,
            when,
            policy,
            message,
            ttl,
            idempotent,
            on_crash,
            on_spec_change,
        })
    }

    /// `when:` of a tool's gate: one `{{ expr }}` over the call, whose
    /// truth decides whether the gate fires. Text around it would render
    /// to a string, which is always true.
    fn when(&self, fields: &Fields<'_>) -> Result<Option<String>> {
        let Some(node) = fields.get("when") else {
            return Ok(None);
        };
        let label = fields.label("when");
        let text = self.string(node, &label)?;
        if !matches!(expr::shape(&text), Shape::Lone(_)) {
            return Err(self.err(
                node.pos,
                format!(
                    "{label} must be one expression in {{{{ }}}} over the call's arguments, e.g. \"{{{{ args.amount > 100 }}}}\", found {text:?}"
                ),
            ));
        }
        Ok(Some(text))
    }

    fn http(&self, name: &str, node: &Node, place: &Place) -> Result<HttpToolSpec> {
        let fields = self.mapping(
            node,
            place,
            &HttpToolSpec::SCHEMA,
            &format!("\"http\" in tool {name:?}"),
        )?;
        let method = match fields.get("method") {
            Some(node) => {
                let label = fields.label("method");
                let text = self.string(node, &label)?.to_ascii_uppercase();
                if !HTTP_METHODS.contains(&text.as_str()) {
                    return Err(self.err(
                        node.pos,
                        format!(
                            "{label} must be one of {}, found {:?}",
                            HTTP_METHODS.join(", "),
                            node.as_str().unwrap_or_default()
                        ),
                    ));
                }
                text
            }
            None => "GET".to_string(),
        };
        let url_node = fields.required("url")?;
        let url = self.non_empty_string(url_node, &fields.label("url"))?;
        if let Some(problem) = request::url_problem(&url) {
            return Err(self.err(
                url_node.pos,
                format!("bad {}: {problem}", fields.label("url")),
            ));
        }
        if let Some(second) = fields.later_of("json", "body") {
            return Err(self.err(
                second.key_pos,
                format!(
                    "tool {name:?} sets both \"json\" and \"body\": use json for a JSON body or body for raw text, not both"
                ),
            ));
        }
        let json = fields.get("json").map(Node::to_value);
        let body = fields.opt_string("body")?;
        let ok_status = match fields.get("ok_status") {
            Some(node) => {
                let label = fields.label("ok_status");
                let Some(items) = node.items() else {
                    return Err(self.type_err(node, "a sequence of status codes", &label));
                };
                items
                    .iter()
                    .map(|item| {
                        let code = self.int(item, &format!("an entry of {label}"))?;
                        u16::try_from(code)
                            .ok()
                            .filter(|c| (100..=599).contains(c))
                            .ok_or_else(|| {
                                self.err(
                                    item.pos,
                                    format!("{label}: {code} is not an HTTP status (100 to 599)"),
                                )
                            })
                    })
                    .collect::<Result<Vec<_>>>()?
            }
            None => Vec::new(),
        };
        let retry = match fields.get("retry") {
            Some(node) => {
                let place = Place::in_(format!("the retry of tool {name:?}"));
                let retry =
                    self.mapping(node, &place, &RetrySpec::SCHEMA, &fields.label("retry"))?;
                let attempts_node = retry.required("attempts")?;
                let attempts = self.int(attempts_node, &retry.label("attempts"))?;
                if !(1..=MAX_RETRY_ATTEMPTS).contains(&attempts) {
                    return Err(self.err(
                        attempts_node.pos,
                        format!(
                            "{} must be from 1 to {MAX_RETRY_ATTEMPTS}, found {attempts}",
                            retry.label("attempts")
                        ),
                    ));
                }
                Some(RetrySpec {
                    attempts: u32::try_from(attempts).unwrap_or(1),
                    backoff: retry
                        .opt_duration("backoff")?
                        .unwrap_or(DEFAULT_RETRY_BACKOFF),
                })
            }
            None => None,
        };
        let idempotency = match fields.get("idempotency") {
            None => IdempotencySpec::default(),
            Some(node) => match node.scalar().map(|s| s.resolved) {
                Some(Resolved::Bool(false)) => IdempotencySpec::Off,
                Some(Resolved::Bool(true)) => IdempotencySpec::default(),
                _ if node.entries().is_some() => {
                    let place = Place::in_(format!("the idempotency of tool {name:?}"));
                    let idem = self.mapping(
                        node,
                        &place,
                        &IdempotencySpec::SCHEMA,
                        &fields.label("idempotency"),
                    )?;
                    match idem.get("header") {
                        Some(h) => {
                            let label = idem.label("header");
                            let name = self.non_empty_string(h, &label)?;
                            if let Some(problem) = request::header_name_problem(&name) {
                                return Err(self.err(h.pos, format!("bad {label}: {problem}")));
                            }
                            IdempotencySpec::Header(name)
                        }
                        None => IdempotencySpec::default(),
                    }
                }
                _ => {
                    return Err(self.type_err(
                        node,
                        "false or {header: NAME}",
                        &fields.label("idempotency"),
                    ));
                }
            },
        };
        let headers = fields.string_map("headers")?;
        self.check_headers(&fields)?;
        Ok(HttpToolSpec {
            method,
            url,
            headers,
            query: fields.string_map("query")?,
            json,
            body,
            timeout: fields.opt_duration("timeout")?,
            ok_status,
            retry,
            idempotency,
        })
    }

    /// Header names are HTTP tokens, and the fixed text of a value is one
    /// line: a CR or LF there could never be sent (and must never split
    /// the request). `headers` has been read as a mapping of strings.
    fn check_headers(&self, fields: &Fields<'_>) -> Result<()> {
        let Some(entries) = fields.get("headers").and_then(Node::entries) else {
            return Ok(());
        };
        let label = fields.label("headers");
        for e in entries {
            if let Some(problem) = request::header_name_problem(&e.key) {
                return Err(self.err(e.key_pos, format!("bad header name in {label}: {problem}")));
            }
            let value = e.value.as_str().unwrap_or_default();
            if let Some(problem) = request::header_value_problem(value) {
                return Err(self.err(
                    e.value.pos,
                    format!("bad header {:?} in {label}: {problem}", e.key),
                ));
            }
        }
        Ok(())
    }
}
