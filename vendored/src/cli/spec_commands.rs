//! `tollgate validate` and `tollgate hash`.

use super::common::SpecSource;
use super::exit::ExitFailure;

pub fn validate(source: &SpecSource) -> Result<i32, ExitFailure> {
    let spec = source.load()?;
    let name = match source {
        SpecSource::File(path) => path.display().to_string(),
        SpecSource::Embedded(e) => e.spec_file.to_string(),
    };
    say!(
        "{}: ok (agent {}, {} steps, spec {})",
        name,
        spec.agent,
        spec.steps.len(),
        spec.hash.short()
    );
    Ok(super::exit::OK)
}

pub fn hash(source: &SpecSource) -> Result<i32, ExitFailure> {
    let spec = source.load()?;
    say!("{}", spec.hash);
    Ok(super::exit::OK)
}
