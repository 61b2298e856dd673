//! The schemas of `POST /approvals/migrate`'s answer: the engine's
//! [`MigrateReport`], stated field by field as the deploy plan's are (see
//! `plan.rs`, whose helpers these use).

use serde_json::Value;

use super::plan::{SKIPPED_WHEN_NONE, field, named, names};
use super::schema::{Components, Schema};
use crate::domain::pending_approval::Phase;
use crate::domain::spec::Classification;
use crate::engine::run::{MigrateOutcome, MigrateReport, MigrateResult};

impl Schema for MigrateReport {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "MigrateReport",
            "Pending approvals moved onto a spec version (`tollgate approvals migrate --json`): the version and each selected approval's result.",
            |c| {
                vec![
                    field::<String>("to", &[], c),
                    field::<bool>("dry_run", &[], c),
                    field::<Vec<MigrateResult>>("results", &[], c),
                ]
            },
        )
    }
}

impl Schema for MigrateResult {
    fn schema(components: &mut Components) -> Value {
        named(
            components,
            "MigrateResult",
            "One approval's result: where it was, the step it has in the new version, its classification, and the message and payload as the new version renders them. `refused` says why in `reason`; nothing of it changed.",
            |c| {
                vec![
                    field::<String>("key", &[], c),
                    field::<String>("run_id", &[], c),
                    field::<String>("from", &[], c),
                    field::<String>("step", &[], c),
                    field::<Phase>("phase", &[], c),
                    field::<Option<String>>("to_step", &[], c),
                    field::<Option<Classification>>("classification", &[], c),
                    field::<MigrateOutcome>("outcome", &[], c),
                    field::<Option<String>>("reason", SKIPPED_WHEN_NONE, c),
                    field::<Option<String>>("message_before", &[], c),
                    field::<Option<String>>("message_after", SKIPPED_WHEN_NONE, c),
                    field::<Value>("payload_before", &[], c),
                    field::<Option<Value>>("payload_after", SKIPPED_WHEN_NONE, c),
                ]
            },
        )
    }
}

impl Schema for MigrateOutcome {
    fn schema(components: &mut Components) -> Value {
        names(
            components,
            "MigrateOutcome",
            "`moved`, `would_move` (a dry run), `refused` (see `reason`), `current` (already on the version).",
            MigrateOutcome::ALL.iter().map(|o| o.as_str()).collect(),
        )
    }
}
