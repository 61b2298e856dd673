//! The start-up preflight: before a server binds (and in `validate
//! --env`), every `${NAME}` the spec needs without a default must be set.
//! A missing one exits 2 naming each variable and where the spec needs
//! it, never a value: a deploy fails at once instead of the first run that
//! reaches the call failing hours later, perhaps after a person approved it.

use super::exit::ExitFailure;
use crate::spec::{MissingSecret, OnSpecChange, Spec};

/// `Ok` when every variable the spec needs is set in this process's
/// environment; otherwise the failure naming each missing one. `doing`
/// says what was refused ("cannot serve refund-desk").
pub fn require_env(spec: &Spec, doing: &str) -> Result<(), ExitFailure> {
    let missing = spec.missing_secrets(|name| std::env::var_os(name).is_some());
    match missing.as_slice() {
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

/// `pin` and `auto` are parsed and compared (`tollgate plan` will use
/// them) but this runtime cannot yet resume a pause on a stored older
/// version: until it can, a spec that asks for them is refused rather
/// than silently run under `refuse`, which its author did not choose.
pub fn require_available_policies(spec: &Spec) -> Result<(), ExitFailure> {
    let mut asking: Vec<String> = Vec::new();
    if spec.approvals.on_spec_change != OnSpecChange::Refuse {
        asking.push(format!(
            "approvals.on_spec_change: {}",
            spec.approvals.on_spec_change
        ));
    }
    for step in &spec.steps {
        let policy = spec.on_spec_change(step);
        if policy != spec.approvals.on_spec_change && policy != OnSpecChange::Refuse {
            asking.push(format!("step {:?}: on_spec_change: {policy}", step.id));
        }
    }
    if asking.is_empty() {
        return Ok(());
    }
    Err(ExitFailure::bad_input(format!(
        "{}: not available in this version of tollgate yet (only `refuse`, the default, \
         is); remove it to run with `refuse`",
        asking.join(", ")
    )))
}
