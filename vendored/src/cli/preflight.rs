//! The start-up preflight: before a server binds (and in `validate
//! --env`), every `${NAME}` the spec needs without a default must be set.
//! A missing one exits 2 naming each variable and where the spec needs
//! it, never a value: a deploy fails at once instead of the first run that
//! reaches the call failing hours later, perhaps after a person approved it.

use super::exit::ExitFailure;
use crate::spec::{MissingSecret, Spec};

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
