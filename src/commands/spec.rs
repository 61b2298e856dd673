//! `tollgate validate` and `tollgate hash`.

use std::path::Path;

use crate::exit::Failure;

pub fn validate(path: &Path) -> Result<i32, Failure> {
    let spec = super::load_spec(path)?;
    println!(
        "{}: ok (agent {}, {} steps, spec {})",
        path.display(),
        spec.agent,
        spec.steps.len(),
        spec.hash.short()
    );
    Ok(crate::exit::OK)
}

pub fn hash(path: &Path) -> Result<i32, Failure> {
    let spec = super::load_spec(path)?;
    println!("{}", spec.hash);
    Ok(crate::exit::OK)
}
