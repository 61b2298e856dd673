//! The schemas of the deploy preview (`GET|POST /specs/plan`): the
//! engine's [`DeployPlan`] and the domain's comparison types it holds,
//! answered as serde writes them. Those types live below the server, so
//! they cannot be written inside `response_type!`; their schemas are
//! stated here field by field, as `ApprovalRecord`'s is, and the
//! round-trip test in `openapi/tests.rs` serializes a plan with every
//! field set and holds it to them (response objects are closed, so a
//! field added to a type and not here fails it).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::schema::{Components, Direction, Field, Schema, object};
use crate::domain::pending_approval::Phase;
use crate::domain::spec::{
    Change, ChangedStep, Classification, OnSpecChange, Outcome, RenamedStep, SpecDiff, StepRef,
    TopLevel,
};
use crate::engine::deploy_plan::{
    ApprovalPlan, DeployPlan, LiveRunOutcome, LiveRuns, PlanSummary, VersionPlan,
};

/// A field of a response object; `attributes` as `stringify!` writes them
/// (a doc comment, `serde(skip_serializing_if = ...)`).
pub(super) fn field<T: Schema>(
    name: &'static str,
    attributes: &'static [&'static str],
    components: &mut Components,
) -> Field {
    Field {
        name,
        attributes,
        optional_type: T::OPTIONAL,
        schema: T::schema(components),
    }
}

/// A named response object with a description.
pub(super) fn named(
    components: &mut Components,
    name: &str,
    description: &'static str,
    fields: impl FnOnce(&mut Components) -> Vec<Field>,
) -> Value {
    components.named(name, |c| {
        let fields = fields(c);
        let mut schema = object(Direction::Response, &[], fields);
        schema["description"] = json!(description);
        schema
    })
}

/// The names of an enum, as serde writes them.
pub(super) fn names(
    components: &mut Components,
    name: &str,
    description: &str,
    names: Vec<&'static str>,
) -> Value {
    components.named(
        name,
        |_| json!({ "type": "string", "enum": names, "description": description }),
    )
}

pub(super) const SKIPPED_WHEN_NONE: &[&str] =
    &[r#"serde(skip_serializing_if = "Option::is_none")"#];

impl Schema for DeployPlan {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "DeployPlan",
            "What deploying a spec does to the pending approvals and live runs on other versions of its agent (`tollgate plan --json`).",
            |c| {
                vec![
                    field::<String>("agent", &[], c),
                    field::<String>("spec_hash", &[], c),
                    field::<OnSpecChange>("policy", &[], c),
                    field::<usize>("stored_versions", &[], c),
                    field::<Vec<VersionPlan>>("versions", &[], c),
                    field::<Vec<ApprovalPlan>>("approvals", &[], c),
                    field::<LiveRuns>("live_runs", &[], c),
                    field::<PlanSummary>("summary", &[], c),
                ]
            },
        )
    }
}

impl Schema for VersionPlan {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "VersionPlan",
            "Another version of the agent that pending approvals or live runs are on: its use, its diff to the deployed spec (`null` with a `problem`), and the variables it needs to run on (names only).",
            |c| {
                vec![
                    field::<String>("hash", &[], c),
                    field::<Option<DateTime<Utc>>>("first_seen", &[], c),
                    field::<Option<DateTime<Utc>>>("last_seen", &[], c),
                    field::<u64>("pending_approvals", &[], c),
                    field::<u64>("running_runs", &[], c),
                    field::<u64>("stuck_runs", &[], c),
                    field::<Option<String>>("problem", SKIPPED_WHEN_NONE, c),
                    field::<Option<SpecDiff>>("diff", &[], c),
                    field::<Vec<String>>("required_env", &[], c),
                ]
            },
        )
    }
}

impl Schema for ApprovalPlan {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "ApprovalPlan",
            "A pending approval on another version and what approving it will do after the deploy. `stranded`: approve cannot resume it.",
            |c| {
                vec![
                    field::<String>("key", &[], c),
                    field::<String>("run_id", &[], c),
                    field::<String>("spec_hash", &[], c),
                    field::<String>("step", &[], c),
                    field::<Phase>("phase", &[], c),
                    field::<Option<String>>("new_step", &[], c),
                    field::<Option<Classification>>("classification", &[], c),
                    field::<OnSpecChange>("policy", &[], c),
                    field::<Outcome>("outcome", &[], c),
                    field::<bool>("stranded", &[], c),
                    field::<DateTime<Utc>>("created_at", &[], c),
                    field::<DateTime<Utc>>("expires_at", &[], c),
                ]
            },
        )
    }
}

impl Schema for LiveRuns {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "LiveRuns",
            "Runs on other versions that are running or stuck, and what a process serving the deployed spec does with them.",
            |c| {
                vec![
                    field::<u64>("running", &[], c),
                    field::<u64>("stuck", &[], c),
                    field::<LiveRunOutcome>("outcome", &[], c),
                ]
            },
        )
    }
}

impl Schema for PlanSummary {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "PlanSummary",
            "The agent's pending approvals counted by outcome; `stranded` counts the refused ones and those pinned to a version this build cannot load.",
            |c| {
                vec![
                    field::<u64>("pending", &[], c),
                    field::<u64>("current", &[], c),
                    field::<u64>("pinned", &[], c),
                    field::<u64>("moves_to_new", &[], c),
                    field::<u64>("refused", &[], c),
                    field::<u64>("stranded", &[], c),
                ]
            },
        )
    }
}

impl Schema for SpecDiff {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "SpecDiff",
            "The step-level difference from an older version to the deployed one.",
            |c| {
                vec![
                    field::<Vec<StepRef>>("added", &[], c),
                    field::<Vec<StepRef>>("removed", &[], c),
                    field::<Vec<RenamedStep>>("renamed", &[], c),
                    field::<Vec<ChangedStep>>("changed", &[], c),
                    field::<Vec<TopLevel>>("top_level", &[], c),
                ]
            },
        )
    }
}

impl Schema for StepRef {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "StepRef",
            "A step: its id, kind, and position (from 1) in its version.",
            |c| {
                vec![
                    field::<String>("id", &[], c),
                    field::<String>("kind", &[], c),
                    field::<usize>("number", &[], c),
                ]
            },
        )
    }
}

impl Schema for RenamedStep {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "RenamedStep",
            "A removed and an added step equal but for the id: a guess; a pause at `from` counts as removed until a migration maps it.",
            |c| {
                vec![
                    field::<String>("from", &[], c),
                    field::<String>("to", &[], c),
                    field::<String>("kind", &[], c),
                ]
            },
        )
    }
}

impl Schema for ChangedStep {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "ChangedStep",
            "A step in both versions that differs, with what differs.",
            |c| {
                vec![
                    field::<String>("id", &[], c),
                    field::<String>("kind", &[], c),
                    field::<Option<String>>(
                        "old_kind",
                        &[r#"serde(default, skip_serializing_if = "Option::is_none")"#],
                        c,
                    ),
                    field::<Vec<Change>>("changes", &[], c),
                ]
            },
        )
    }
}

impl Schema for OnSpecChange {
    fn schema(components: &mut Components) -> Value {
        names(
            components,
            "OnSpecChange",
            "What approving a pause does once its spec is no longer the one deployed.",
            OnSpecChange::ALL.iter().map(|p| p.as_str()).collect(),
        )
    }
}

impl Schema for Classification {
    fn schema(components: &mut Components) -> Value {
        names(
            components,
            "Classification",
            "A pause's gate under the deployed version: `identical_gate`, `message_changed`, `payload_changed`, `policy_changed`, `step_removed` (the first that applies, from the last).",
            Classification::ALL.iter().map(|c| c.as_str()).collect(),
        )
    }
}

impl Schema for Outcome {
    fn schema(components: &mut Components) -> Value {
        names(
            components,
            "Outcome",
            "What approving the pause will do after the deploy: `current` (same version), `refused` (409 `spec_changed`), `pinned` (resumes on its version), `moves_to_new` (resumes on the deployed version).",
            Outcome::ALL.iter().map(|o| o.as_str()).collect(),
        )
    }
}

impl Schema for Change {
    fn schema(components: &mut Components) -> Value {
        names(
            components,
            "Change",
            "What differs in a step.",
            Change::ALL.iter().map(|c| c.as_str()).collect(),
        )
    }
}

impl Schema for TopLevel {
    fn schema(components: &mut Components) -> Value {
        names(
            components,
            "TopLevel",
            "A top-level section of the spec.",
            TopLevel::ALL.iter().map(|t| t.as_str()).collect(),
        )
    }
}

impl Schema for LiveRunOutcome {
    fn schema(components: &mut Components) -> Value {
        names(
            components,
            "LiveRunOutcome",
            "`ends_stuck` (refuse: a recovered run of another version ends stuck) or `continues_on_its_version` (pin, auto).",
            LiveRunOutcome::ALL.iter().map(|o| o.as_str()).collect(),
        )
    }
}
