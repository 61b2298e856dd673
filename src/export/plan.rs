//! The file plan: spec -> ordered map of path -> (role, bytes).
//!
//! Pure: no disk, no clock, no environment, so the same spec always gives
//! the same bytes. Writing a plan is [`super::apply`]'s job.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tollgate_runtime::Spec;

use super::model::Model;
use super::templates;
use super::{ExportError, SPEC_FILE, codegen, layout, lockfile, markers, vendored};

tollgate_runtime::named_enum! {
    /// Whose a file is, which decides what a re-export may do to it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Role {
        /// A copy of the runtime: replaced on every export.
        Vendored = "vendored",
        /// Derived from the spec: replaced on every export.
        Generated = "generated",
        /// The user's after the first export: written only when absent or
        /// unchanged since the last export.
        Yours = "yours",
    }
}

impl Role {
    pub fn is_yours(self) -> bool {
        self == Role::Yours
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub role: Role,
    /// Vendored files borrow the bytes embedded in the binary.
    pub bytes: Cow<'static, [u8]>,
}

impl PlannedFile {
    pub fn sha256(&self) -> String {
        sha256_hex(&self.bytes)
    }
}

/// Everything an export writes, by '/'-separated path relative to the
/// export's root, sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub agent: String,
    /// The Cargo package and binary name.
    pub package: String,
    pub spec_hash: String,
    pub files: BTreeMap<String, PlannedFile>,
}

impl Plan {
    pub fn get(&self, path: &str) -> Option<&PlannedFile> {
        self.files.get(path)
    }

    /// A file's text (every non-vendored file is UTF-8).
    pub fn text(&self, path: &str) -> Option<&str> {
        self.get(path)
            .and_then(|f| std::str::from_utf8(&f.bytes).ok())
    }
}

/// Build the plan for `spec`, whose source text is `spec_source` (copied as
/// agent.yaml byte for byte, comments and all).
pub fn plan(spec: &Spec, spec_source: &[u8]) -> Result<Plan, ExportError> {
    let model = Model::new(spec)?;
    let mut files = BTreeMap::new();
    for entry in layout::FILES {
        if entry.path == markers::GITATTRIBUTES {
            // Lists the generated files, so it is made once they all are.
            continue;
        }
        let mut bytes = render(entry.path, &model, spec_source)?;
        if entry.role == Role::Generated {
            bytes = with_generated_header(entry.path, bytes);
        }
        files.insert(
            entry.path.to_string(),
            PlannedFile {
                role: entry.role,
                bytes,
            },
        );
    }
    for (path, text) in templates::tool_files(&model)? {
        files.insert(
            path,
            PlannedFile {
                role: layout::TOOL_FILE.role,
                bytes: Cow::Owned(text.into_bytes()),
            },
        );
    }
    for (path, bytes) in vendored::FILES {
        files.insert(
            format!("vendored/{path}"),
            PlannedFile {
                role: Role::Vendored,
                bytes: Cow::Borrowed(bytes),
            },
        );
    }
    let generated = files
        .iter()
        .filter(|(_, file)| file.role == Role::Generated)
        .map(|(path, _)| path.as_str());
    let attributes = markers::gitattributes(generated);
    files.insert(
        markers::GITATTRIBUTES.to_string(),
        PlannedFile {
            role: Role::Generated,
            bytes: Cow::Owned(attributes.into_bytes()),
        },
    );
    Ok(Plan {
        agent: spec.agent.clone(),
        package: model.package.clone(),
        spec_hash: spec.hash.to_string(),
        files,
    })
}

fn render(
    path: &str,
    m: &Model<'_>,
    spec_source: &[u8],
) -> Result<Cow<'static, [u8]>, ExportError> {
    use templates::*;
    let template: &dyn DynRender = match path {
        ".dockerignore" => return Ok(Cow::Borrowed(DOCKERIGNORE.as_bytes())),
        ".env.example" => &EnvExample { m },
        ".gitignore" => return Ok(Cow::Borrowed(GITIGNORE.as_bytes())),
        "Cargo.toml" => &CargoToml { m },
        "Dockerfile" => &Dockerfile { m },
        "README.md" => &Readme { m },
        "src/main.rs" => &MainRs { m },
        "tests/smoke.rs" => &SmokeRs { m },
        "tests/workflow.rs" => &WorkflowRs { m },
        "Cargo.lock" => return Ok(Cow::Owned(lockfile::render(&m.package).into_bytes())),
        "TOLLGATE.md" => {
            return Ok(Cow::Owned(
                super::server_reference::tollgate_md(m).into_bytes(),
            ));
        }
        "src/generated.rs" => return Ok(Cow::Owned(codegen::generated_rs(m)?.into_bytes())),
        "src/tools/mod.rs" => return Ok(Cow::Owned(codegen::tools_mod_rs(m)?.into_bytes())),
        SPEC_FILE => return Ok(Cow::Owned(spec_source.to_vec())),
        super::openapi::OPENAPI_FILE => {
            return Ok(Cow::Owned(super::openapi::openapi_file(m.spec)));
        }
        other => return Err(ExportError::internal(other, "no template for this file")),
    };
    let mut text = templates::render(path, template)?;
    // Every text file ends with exactly one newline, whatever the template's
    // last line did.
    while text.ends_with('\n') {
        text.pop();
    }
    text.push('\n');
    Ok(Cow::Owned(text.into_bytes()))
}

/// A generated file with the "do not edit" marker as its first line, in its
/// format's comment form. Files of yours and vendored ones are left as they
/// are, and so is agent.yaml: it is the user's spec byte for byte, so that a
/// `LINE:COL` in an error about the embedded spec is the line in the spec
/// they wrote (`.gitattributes` still marks it).
fn with_generated_header(path: &str, bytes: Cow<'static, [u8]>) -> Cow<'static, [u8]> {
    match markers::generated_header(path) {
        Some(header) if path != SPEC_FILE => {
            let mut marked = header.into_bytes();
            marked.extend_from_slice(&bytes);
            Cow::Owned(marked)
        }
        _ => bytes,
    }
}

/// Lower-case hex SHA-256, with the runtime's one hex encoder.
pub fn sha256_hex(bytes: &[u8]) -> String {
    tollgate_runtime::hex::encode(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_lower_case_hex_sha256() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn every_generated_file_starts_with_the_marker_unless_json_or_the_spec() {
        let source =
            "version: 1\nagent: marked\nsteps:\n  - id: ask\n    approval: { message: ok? }\n";
        let spec = Spec::parse(source, "agent.yaml").unwrap();
        let plan = plan(&spec, source.as_bytes()).unwrap();
        let mut generated = 0;
        for (path, file) in &plan.files {
            let text = String::from_utf8_lossy(&file.bytes);
            let first = text.lines().next().unwrap_or_default();
            let marked = first.contains(markers::GENERATED);
            match file.role {
                Role::Generated if path == SPEC_FILE => {
                    assert_eq!(file.bytes.as_ref(), source.as_bytes())
                }
                Role::Generated if path.ends_with(".json") => assert!(!marked, "{path}"),
                Role::Generated => {
                    generated += 1;
                    assert!(marked, "{path} starts with {first:?}");
                }
                Role::Yours | Role::Vendored => assert!(!marked, "{path}"),
            }
        }
        assert!(
            generated >= 4,
            "TOLLGATE.md, .env.example, generated.rs, .gitattributes"
        );
        let attributes = plan.text(markers::GITATTRIBUTES).unwrap();
        for (path, file) in &plan.files {
            let listed = attributes.contains(&format!("\n/{path} linguist-generated\n"));
            assert_eq!(listed, file.role == Role::Generated, "{path}");
        }
    }

    #[test]
    fn role_names_are_the_manifest_names() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(*role));
            assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
        }
        assert_eq!(
            Role::ALL.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
            ["vendored", "generated", "yours"]
        );
    }
}
