//! The spec-wide sections read before the tools and steps: `trigger`, `approvals` and `model`.

use serde_json::{Map, Value};

use super::super::marked::Node;
use super::super::{
    ApprovalDefaults, DEFAULT_APPROVAL_TTL, ModelConfig, NotifySpec, ScheduleTrigger, TriggerSpec,
    WebhookTrigger,
};
use super::reader::Place;
use super::{Cx, Result};

impl Cx<'_> {
    pub(super) fn trigger(&self, node: &Node) -> Result<TriggerSpec> {
        let place = Place::in_("trigger");
        let fields = self.mapping(node, &place, &TriggerSpec::SCHEMA, "\"trigger\"")?;
        let webhook = match fields.get("webhook") {
            Some(node) => {
                let place = Place::in_("trigger.webhook");
                let hook = self.mapping(
                    node,
                    &place,
                    &WebhookTrigger::SCHEMA,
                    &fields.label("webhook"),
                )?;
                let path_node = hook.required("path")?;
                let path = self.string(path_node, &hook.label("path"))?;
                if !path.starts_with('/') {
                    return Err(self.err(
                        path_node.pos,
                        format!("{} must start with '/', found {path:?}", hook.label("path")),
                    ));
                }
                if let Some(problem) = WebhookTrigger::path_problem(&path) {
                    return Err(self.err(
                        path_node.pos,
                        format!("bad {}: {problem}", hook.label("path")),
                    ));
                }
                Some(WebhookTrigger {
                    path,
                    secret: hook.opt_string("secret")?,
                })
            }
            None => None,
        };
        let mut schedule = Vec::new();
        if let Some(node) = fields.get("schedule") {
            let label = fields.label("schedule");
            let Some(items) = node.items() else {
                return Err(self.type_err(node, "a sequence", &label));
            };
            for (i, item) in items.iter().enumerate() {
                let place = Place::in_(format!("trigger.schedule entry {}", i + 1));
                let entry = self.mapping(
                    item,
                    &place,
                    &ScheduleTrigger::SCHEMA,
                    &format!("trigger.schedule entry {}", i + 1),
                )?;
                let cron_node = entry.required("cron")?;
                let cron = self.non_empty_string(cron_node, &entry.label("cron"))?;
                let input = entry
                    .get("input")
                    .map_or_else(|| Value::Object(Map::new()), Node::to_value);
                let entry = ScheduleTrigger { cron, input };
                if let Err(message) = entry.parse_cron() {
                    return Err(self.err(cron_node.pos, message));
                }
                schedule.push(entry);
            }
        }
        Ok(TriggerSpec { webhook, schedule })
    }

    pub(super) fn approvals(&self, node: &Node) -> Result<ApprovalDefaults> {
        let place = Place::in_("approvals");
        let fields = self.mapping(node, &place, &ApprovalDefaults::SCHEMA, "\"approvals\"")?;
        let ttl = fields.opt_duration("ttl")?.unwrap_or(DEFAULT_APPROVAL_TTL);
        let approvers = match fields.get("approvers") {
            Some(node) => {
                let label = fields.label("approvers");
                let Some(items) = node.items() else {
                    return Err(self.type_err(node, "a sequence", &label));
                };
                if items.is_empty() {
                    return Err(self.err(
                        node.pos,
                        format!("{label} is empty: nobody could decide (omit it to let any authenticated caller decide)"),
                    ));
                }
                let names = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        self.non_empty_string(item, &format!("entry {} of {label}", i + 1))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Some(names)
            }
            None => None,
        };
        let notify = match fields.get("notify") {
            Some(node) => self.spec_notify(node, &fields.label("notify"))?,
            None => NotifySpec::default(),
        };
        Ok(ApprovalDefaults {
            ttl,
            approvers,
            notify,
            on_spec_change: self.on_spec_change(&fields)?.unwrap_or_default(),
            groups: self.groups(&fields)?,
            allow_self_approval: fields
                .get("allow_self_approval")
                .map(|n| self.bool(n, &fields.label("allow_self_approval")))
                .transpose()?
                .unwrap_or(false),
            requests: self.request_limits(&fields)?,
        })
    }

    pub(super) fn model_config(&self, node: &Node) -> Result<ModelConfig> {
        let place = Place::in_("model");
        let fields = self.mapping(node, &place, &ModelConfig::SCHEMA, "\"model\"")?;
        Ok(ModelConfig {
            base_url: fields.opt_string("base_url")?,
            api_key: fields.opt_string("api_key")?,
            name: fields.opt_string("name")?,
            timeout: fields.opt_duration("timeout")?,
        })
    }
}
