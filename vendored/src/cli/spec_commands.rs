//! `tollgate validate` and `tollgate hash`.

use super::common::SpecSource;
use super::exit::ExitFailure;

/// Check the spec; with `env`, also that every `${NAME}` it needs is set
/// here (the preflight `serve` runs before it binds).
pub fn validate(source: &SpecSource, env: bool) -> Result<i32, ExitFailure> {
    let spec = source.load()?;
    let name = match source {
        SpecSource::File(path) => path.display().to_string(),
        SpecSource::Embedded(e) => e.spec_file.to_string(),
    };
    if env {
        super::preflight::require_env(&spec, &name)?;
    }
    say!(
        "{}: ok (agent {}, {} steps, spec {})",
        name,
        spec.agent,
        spec.steps.len(),
        spec.hash.short()
    );
    if env {
        say!(
            "{}: environment ok ({} variables the spec needs are set)",
            name,
            spec.required_secrets().len()
        );
    }
    Ok(super::exit::OK)
}

pub fn hash(source: &SpecSource) -> Result<i32, ExitFailure> {
    let spec = source.load()?;
    say!("{}", spec.hash);
    Ok(super::exit::OK)
}
