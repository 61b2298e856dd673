//! After a re-export: the pending approvals in the exported server's state
//! that wait on another version of its spec, and what the new spec's
//! `on_spec_change` will do with them (DESIGN §12). Deploying the new
//! build strands them under `refuse`, so the export says so before anyone
//! deploys; `tollgate plan` gives the details.
//!
//! Reads only: no state file, nothing to say (nothing is created); a state
//! that cannot be read is a warning, never a failed export. The counts are
//! the engine's deploy preview ([`plan_deploy`]), the same report `plan`
//! prints.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tollgate_runtime::Spec;
use tollgate_runtime::cli::ExitFailure;
use tollgate_runtime::cli::args::StoreArgs;
use tollgate_runtime::cli::store_location::open_existing;
use tollgate_runtime::engine::deploy_plan::{DeployPlan, PlanSummary, plan_deploy};
use tollgate_runtime::spec::SpecHash;
use tollgate_runtime::store::StoreError;

/// Where an exported server keeps its state by default: `.tollgate/state.db`
/// in its working directory, the crate's root when it is run from there
/// (the runtime's `default_state_path` for an embedded spec).
pub fn default_state(out: &Path) -> PathBuf {
    out.join(".tollgate").join("state.db")
}

/// Why the state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WaitingError {
    #[error("{0}")]
    Open(ExitFailure),
    #[error("{0}")]
    Read(#[from] StoreError),
}

/// The notice for the state file `state` after exporting `spec` (read from
/// `spec_path`), or `None` when no pending approval waits on another
/// version (or there is no state file).
pub async fn notice(
    spec: &Spec,
    spec_path: &Path,
    state: &Path,
) -> Result<Option<String>, WaitingError> {
    if !state.exists() {
        return Ok(None);
    }
    let args = StoreArgs {
        state: Some(state.to_path_buf()),
        database_url: None,
    };
    let store = open_existing(&args, None).map_err(WaitingError::Open)?;
    let plan = plan_deploy(&*store, spec, tollgate_runtime::time::now()).await?;
    Ok(describe(&plan, spec_path, state))
}

/// `3 pending approvals in STATE wait on other spec versions (a1b2c3d4e5f6:
/// 3); on_spec_change: refuse — approve will answer spec_changed for them;
/// see ...`.
fn describe(plan: &DeployPlan, spec_path: &Path, state: &Path) -> Option<String> {
    let per_version: Vec<String> = plan
        .versions
        .iter()
        .filter(|v| v.pending_approvals > 0)
        .map(|v| format!("{}: {}", SpecHash::short_of(&v.hash), v.pending_approvals))
        .collect();
    let waiting = plan.summary.pending.saturating_sub(plan.summary.current);
    if waiting == 0 || per_version.is_empty() {
        return None;
    }
    let (noun, verb) = if waiting == 1 {
        ("approval", "waits")
    } else {
        ("approvals", "wait")
    };
    Some(format!(
        "{waiting} pending {noun} in {state} {verb} on other spec versions ({}); on_spec_change: {} — {}; see README \"Deploying a changed spec\", or run: tollgate plan {} --state {state}",
        per_version.join(", "),
        policy_label(plan),
        outcomes(&plan.summary, waiting),
        spec_path.display(),
        state = state.display(),
    ))
}

/// The spec's `approvals.on_spec_change`, and the gates of these approvals
/// that set another.
fn policy_label(plan: &DeployPlan) -> String {
    let overrides: BTreeSet<String> = plan
        .approvals
        .iter()
        .filter(|a| a.policy != plan.policy)
        .map(|a| {
            format!(
                "{} at `{}`",
                a.policy,
                a.new_step.as_deref().unwrap_or(&a.step)
            )
        })
        .collect();
    if overrides.is_empty() {
        plan.policy.to_string()
    } else {
        format!(
            "{} ({})",
            plan.policy,
            overrides.into_iter().collect::<Vec<_>>().join(", ")
        )
    }
}

/// What approving them will do, by outcome; "them" (or "it") when they
/// all share one.
fn outcomes(s: &PlanSummary, waiting: u64) -> String {
    // Pinned ones whose version cannot be read are stranded too.
    let unreadable = s.stranded.saturating_sub(s.refused);
    let pinned = s.pinned.saturating_sub(unreadable);
    let parts: Vec<(u64, &str)> = [
        (
            s.refused,
            "approve will answer spec_changed for {} (reject works)",
        ),
        (
            pinned,
            "approve resumes {} on the version each paused under (keep the variables those versions need set)",
        ),
        (s.moves_to_new, "approve moves {} to the new version"),
        (
            unreadable,
            "approve cannot resume {}: the version each paused under is not stored or does not parse here (stranded)",
        ),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .collect();
    let all_alike = parts.len() == 1 && parts[0].0 == waiting;
    parts
        .iter()
        .map(|(n, phrase)| {
            let who = if all_alike && waiting == 1 {
                "it".to_string()
            } else if all_alike {
                "them".to_string()
            } else {
                format!("{n} of them")
            };
            phrase.replacen("{}", &who, 1)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(pending: u64, current: u64, refused: u64, pinned: u64, moves: u64) -> PlanSummary {
        PlanSummary {
            pending,
            current,
            pinned,
            moves_to_new: moves,
            refused,
            stranded: refused,
        }
    }

    #[test]
    fn one_outcome_for_all_of_them_says_them() {
        assert_eq!(
            outcomes(&summary(3, 0, 0, 0, 3), 3),
            "approve moves them to the new version"
        );
        assert_eq!(
            outcomes(&summary(2, 0, 2, 0, 0), 2),
            "approve will answer spec_changed for them (reject works)"
        );
    }

    #[test]
    fn mixed_outcomes_are_counted_each() {
        // auto: a gate unchanged moves, a changed one stays on its version;
        // a gate overridden to refuse is refused.
        assert_eq!(
            outcomes(&summary(5, 1, 1, 2, 1), 4),
            "approve will answer spec_changed for 1 of them (reject works); \
             approve resumes 2 of them on the version each paused under (keep the variables those versions need set); \
             approve moves 1 of them to the new version"
        );
    }

    #[test]
    fn a_pinned_approval_on_an_unreadable_version_is_stranded() {
        let mut s = summary(2, 0, 0, 2, 0);
        s.stranded = 1;
        assert_eq!(
            outcomes(&s, 2),
            "approve resumes 1 of them on the version each paused under (keep the variables those versions need set); \
             approve cannot resume 1 of them: the version each paused under is not stored or does not parse here (stranded)"
        );
    }
}
