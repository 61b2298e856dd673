//! `.tollgate/export.json`: what the last export wrote. A re-export compares
//! the disk with it to tell a file the user edited from one it may replace.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::plan::{Plan, Role};
use super::{ExportError, MANIFEST_PATH};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `tollgate <version>` that wrote the export.
    pub generator: String,
    pub spec_hash: String,
    pub files: BTreeMap<String, ManifestEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    pub role: Role,
    /// Of the content the export generated. For a file of yours that was
    /// kept (with FILE.new beside it) this is FILE.new's hash, so copying
    /// FILE.new over FILE makes it "as exported" again.
    pub sha256: String,
}

impl Manifest {
    /// The manifest of `plan`: a function of the plan alone, so two exports
    /// of one spec write the same bytes.
    pub fn of(plan: &Plan) -> Manifest {
        Manifest {
            generator: format!("tollgate {}", env!("CARGO_PKG_VERSION")),
            spec_hash: plan.spec_hash.clone(),
            files: plan
                .files
                .iter()
                .map(|(path, file)| {
                    (
                        path.clone(),
                        ManifestEntry {
                            role: file.role,
                            sha256: file.sha256(),
                        },
                    )
                })
                .collect(),
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        // Serializing plain strings and maps cannot fail.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text.into_bytes()
    }

    /// The manifest in `dir`, or None when there is none (a first export).
    pub fn read(dir: &Path) -> Result<Option<Manifest>, ExportError> {
        let path = dir.join(MANIFEST_PATH);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ExportError::Read { path, source: e }),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ExportError::Manifest {
                path,
                reason: e.to_string(),
            })
    }

    pub fn sha256(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(|e| e.sha256.as_str())
    }
}
