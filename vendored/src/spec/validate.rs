//! STUB: semantic checks.
use super::{Spec, SpecError, marked::Tree};

pub fn check(_spec: &Spec, _tree: &Tree, _origin: &str) -> Result<(), SpecError> {
    Ok(())
}
