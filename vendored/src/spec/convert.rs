//! STUB: marked tree -> typed spec.
use super::{Spec, SpecError, marked::Tree};

pub fn to_spec(_tree: &Tree, origin: &str) -> Result<Spec, SpecError> {
    Err(SpecError::at(
        super::SpecErrorKind::Invalid,
        origin,
        1,
        1,
        "spec conversion is not built yet",
    ))
}
