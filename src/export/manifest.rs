//! `.tollgate/export.json`: what the last export wrote. A re-export compares
//! the disk with it to tell a file the user edited from one it may replace,
//! finds the pristine copy of each file of yours to merge from, and refuses
//! to turn one agent's export into another's.
//!
//! Fields added since the first manifest are optional (`serde(default)`):
//! an export made before them is still read, and re-exported.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::plan::{Plan, Role};
use super::{ExportError, MANIFEST_PATH, PRISTINE_DIR};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `tollgate <version>` that wrote the export.
    pub generator: String,
    /// The agent id of the spec exported; absent in exports made before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
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
    /// For a file of yours: where the export keeps the content it
    /// generated (`.tollgate/pristine/PATH`, whose sha256 is the one
    /// above), the base of the next re-export's three-way merge. Absent for
    /// other roles and in exports made before pristine copies were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pristine: Option<String>,
}

/// Where the pristine copy of the file of yours at `path` is kept.
pub fn pristine_path(path: &str) -> String {
    format!("{PRISTINE_DIR}/{path}")
}

/// Whether `path` names a place inside the export: '/'-separated, relative,
/// each component a plain name (no `..`, `.`, empty or Windows-style parts).
/// Every path a manifest names is checked, so a crafted manifest cannot make
/// an export remove or read a file outside its directory.
pub fn is_inside(path: &str) -> bool {
    !path.is_empty()
        && path.split('/').all(|part| {
            !part.is_empty() && part != "." && part != ".." && !part.contains(['\\', ':', '\0'])
        })
}

impl Manifest {
    /// The manifest of `plan`: a function of the plan alone, so two exports
    /// of one spec write the same bytes.
    pub fn of(plan: &Plan) -> Manifest {
        Manifest {
            generator: format!("tollgate {}", env!("CARGO_PKG_VERSION")),
            agent: Some(plan.agent.clone()),
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
                            pristine: file.role.is_yours().then(|| pristine_path(path)),
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
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| ExportError::Manifest {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        for (file, entry) in &manifest.files {
            let pristine_ok = entry
                .pristine
                .as_deref()
                .is_none_or(|p| is_inside(p) && p.starts_with(&format!("{PRISTINE_DIR}/")));
            if !is_inside(file) || !pristine_ok {
                return Err(ExportError::Manifest {
                    path,
                    reason: format!(
                        "it lists {:?}, which is not a path inside the export",
                        if pristine_ok {
                            file.as_str()
                        } else {
                            entry.pristine.as_deref().unwrap_or_default()
                        }
                    ),
                });
            }
        }
        Ok(Some(manifest))
    }

    pub fn sha256(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(|e| e.sha256.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_inside() {
        for inside in [
            "a",
            "src/main.rs",
            ".tollgate/pristine/src/main.rs",
            "a..b/c",
        ] {
            assert!(is_inside(inside), "{inside}");
        }
        for outside in [
            "",
            "/etc/passwd",
            "../x",
            "src/../../x",
            "a//b",
            "./a",
            "a/",
            "a\\..\\b",
            "C:x",
        ] {
            assert!(!is_inside(outside), "{outside}");
        }
    }

    fn read_back(json: &str) -> Result<Option<Manifest>, ExportError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".tollgate")).unwrap();
        std::fs::write(dir.path().join(MANIFEST_PATH), json).unwrap();
        Manifest::read(dir.path())
    }

    #[test]
    fn a_manifest_from_before_agent_and_pristine_copies_is_read() {
        let old = r#"{"generator": "tollgate 0.1.0", "spec_hash": "ab",
            "files": {"src/main.rs": {"role": "yours", "sha256": "cd"}}}"#;
        let manifest = read_back(old).unwrap().unwrap();
        assert_eq!(manifest.agent, None);
        assert_eq!(manifest.files["src/main.rs"].pristine, None);
    }

    #[test]
    fn a_manifest_naming_a_path_outside_the_export_is_refused() {
        for (file, pristine) in [
            ("../outside.rs", None),
            ("/etc/passwd", None),
            ("src/main.rs", Some("../../main.rs")),
            ("src/main.rs", Some("src/main.rs")),
        ] {
            let entry = serde_json::json!({"role": "yours", "sha256": "cd", "pristine": pristine});
            let json =
                serde_json::json!({"generator": "g", "spec_hash": "ab", "files": {file: entry}});
            let err = read_back(&json.to_string()).unwrap_err();
            assert!(matches!(err, ExportError::Manifest { .. }), "{err}");
            assert!(
                err.to_string().contains("not a path inside the export"),
                "{err}"
            );
        }
    }
}
