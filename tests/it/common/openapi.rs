//! openapi-spec-validator, the OpenAPI validator the tests hold documents
//! to: Python's, run from a venv at `target/openapi-venv`, or from the
//! interpreter in `TOLLGATE_OPENAPI_PYTHON`. Without it a test fails (it
//! never skips) and says how to install it:
//!
//! ```sh
//! python3 -m venv target/openapi-venv
//! target/openapi-venv/bin/pip install openapi-spec-validator==0.9.0
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

/// Validate the OpenAPI 3.1 document in `file`; panics with the
/// validator's report when it refuses it.
pub fn validate(file: &Path) {
    let python = std::env::var_os("TOLLGATE_OPENAPI_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/openapi-venv/bin/python")
        });
    let output = Command::new(&python)
        .args(["-m", "openapi_spec_validator", "--schema", "3.1"])
        .arg(file)
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => panic!(
            "cannot run {} ({e}): install the validator with\n  \
             python3 -m venv target/openapi-venv && \
             target/openapi-venv/bin/pip install openapi-spec-validator==0.9.0\n\
             or set TOLLGATE_OPENAPI_PYTHON to a Python that has it",
            python.display()
        ),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(": OK"),
        "openapi-spec-validator refused {} ({}):\n{stdout}\n{stderr}",
        file.display(),
        output.status
    );
}
