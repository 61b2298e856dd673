//! The start-up preflight: before a server binds (and in `validate
//! --env`), every `${NAME}` the spec needs without a default must be set,
//! and `TOLLGATE_GROUP_<NAME>` overrides must leave every gate's rules met.
//! A missing one exits 2 naming each variable and where the spec needs
//! it, never a value: a deploy fails at once instead of the first run that
//! reaches the call failing hours later, perhaps after a person approved it.

use super::exit::ExitFailure;
use crate::domain::spec::{MissingSecret, Spec};
use crate::{AgentRun, VersionMissingEnv};

/// `Ok` when every variable the spec needs is set in this process's
/// environment; otherwise the failure naming each missing one. `doing`
/// says what was refused ("cannot serve refund-desk").
pub fn require_env(spec: &Spec, doing: &str) -> Result<(), ExitFailure> {
    require_groups(spec, doing)?;
    let missing = spec.missing_secrets(|name| std::env::var_os(name).is_some());
    refuse_missing(&missing, doing)
}

/// `Ok` when every variable the spec's steps need is set here (what a
/// process that resumes a run after a decision needs, see
/// [`Spec::missing_secrets_to_run`]); the trigger's and the notifiers'
/// are a server's business. `run --persist` checks it before the run
/// starts: else the run would pause, a person would approve it, and only
/// then would it fail, at the call that needs the variable.
pub fn require_env_to_run(spec: &Spec, doing: &str) -> Result<(), ExitFailure> {
    let missing = spec.missing_secrets_to_run(|name| std::env::var_os(name).is_some());
    refuse_missing(&missing, doing)
}

/// The failure naming each of `missing` (exit 2), or `Ok` when none is.
fn refuse_missing(missing: &[MissingSecret], doing: &str) -> Result<(), ExitFailure> {
    match missing {
        [] => Ok(()),
        [one] => Err(ExitFailure::bad_input(format!("{doing}: {one}"))),
        several => Err(ExitFailure::bad_input(format!(
            "{doing}: {} environment variables the spec needs are not set:\n{}",
            several.len(),
            several
                .iter()
                .map(|MissingSecret { name, at }| format!("  {name} (needed at {at})"))
                .collect::<Vec<_>>()
                .join("\n")
        ))),
    }
}

/// `TOLLGATE_GROUP_<NAME>` overrides of the spec's approval groups: one
/// set but empty, or leaving a gate's rules unmet, exits 2 naming the
/// variable (and the gate and rule), never a silently smaller group. A
/// value that is not UTF-8 is refused too rather than read as unset.
pub fn require_groups(spec: &Spec, doing: &str) -> Result<(), ExitFailure> {
    for group in spec.approvals.groups.keys() {
        let variable = crate::support::env::group_members(group);
        if std::env::var_os(&variable).is_some_and(|v| v.to_str().is_none()) {
            return Err(ExitFailure::bad_input(format!(
                "{doing}: {variable} is not valid UTF-8 (expected members separated by commas)"
            )));
        }
    }
    spec.resolve_groups(|name| std::env::var(name).ok())
        .map(|_| ())
        .map_err(|e| ExitFailure::bad_input(format!("{doing}: {e}")))
}

/// Under `pin` or `auto`, the variables of the older versions that pending
/// approvals and live runs are on must be set too: approving one resumes
/// it on its version. `Ok` when they are (or nothing waits on an older
/// version); otherwise the failure naming each version and variable, never
/// a value. Needs the store, so it runs once the store is open, still
/// before the server binds.
pub async fn require_older_versions_env(agent: &AgentRun, doing: &str) -> Result<(), ExitFailure> {
    let missing = agent
        .older_versions_missing_env()
        .await
        .map_err(|e| ExitFailure::new(super::exit::RUN_FAILED, format!("{doing}: {e}")))?;
    if missing.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = missing
        .iter()
        .flat_map(|VersionMissingEnv { version, missing }| {
            missing.iter().map(move |m| {
                format!(
                    "  {} (spec version {}, which {} pending approvals and {} live runs wait on, \
                     needs it at {})",
                    m.name,
                    crate::SpecHash::short_of(&version.hash),
                    version.pending_approvals,
                    version.live_runs,
                    m.at
                )
            })
        })
        .collect();
    Err(ExitFailure::bad_input(format!(
        "{doing}: on_spec_change keeps waiting approvals on the spec version they paused under, \
         and these environment variables those versions need are not set:\n{}\n\
         Set them, or move the approvals to the new version (`tollgate approvals migrate`), \
         or reject them",
        lines.join("\n")
    )))
}
