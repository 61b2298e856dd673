//! The Python the tests hold tollgate to published implementations with:
//! openapi-spec-validator (OpenAPI documents; Python's `jsonschema` comes
//! with it), `standardwebhooks` (the Standard Webhooks verifier a webhook
//! receiver uses), `aiosmtpd` (a real SMTP server), `httpx` (the HTTP
//! client examples/clients/http_client.py is written with) and `mcp` (the
//! official MCP client, for the MCP server's tests and example). From
//! `TOLLGATE_OPENAPI_PYTHON` when set, otherwise from a venv at
//! `target/openapi-venv` that the first test needing it creates (python3
//! with its venv module, and PyPI, once per checkout):
//!
//! ```sh
//! python3 -m venv target/openapi-venv
//! target/openapi-venv/bin/pip install openapi-spec-validator==0.9.0 standardwebhooks==1.1.0 aiosmtpd==1.4.6 httpx==0.29.0 mcp==2.3.0
//! ```
//!
//! Without them a test fails (it never skips) and says why.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// What the venv holds, pinned.
const PACKAGES: &[&str] = &[
    "openapi-spec-validator==0.9.0",
    "standardwebhooks==1.1.0",
    "aiosmtpd==1.4.6",
    "httpx==0.29.0",
    // The official MCP client (tests/it/mcp, examples/clients/mcp_agent.py);
    // it brings its own HTTP client, httpx2.
    "mcp==2.3.0",
];
/// The modules `PACKAGES` install, imported to check the venv is whole.
const MODULES: &str = "import openapi_spec_validator, standardwebhooks, aiosmtpd, httpx, mcp";

/// Validate the OpenAPI 3.1 document in `file`; panics with the
/// validator's report when it refuses it.
pub fn validate(file: &Path) {
    let python = match python() {
        Ok(python) => python,
        Err(why) => panic!("no OpenAPI validator: {why}"),
    };
    let output = Command::new(python)
        .args(["-m", "openapi_spec_validator", "--schema", "3.1"])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(": OK"),
        "openapi-spec-validator refused {} ({}):\n{stdout}\n{stderr}",
        file.display(),
        output.status
    );
}

/// The interpreter with `PACKAGES` (and so Python's `jsonschema`, one of
/// the validator's dependencies), set up once per test process.
pub fn python() -> Result<&'static Path, &'static str> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(find_or_install)
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(String::as_str)
}

fn find_or_install() -> Result<PathBuf, String> {
    if let Some(python) = std::env::var_os("TOLLGATE_OPENAPI_PYTHON") {
        return Ok(PathBuf::from(python));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/openapi-venv");
    let python = venv.join("bin/python");
    std::fs::create_dir_all(venv.parent().unwrap_or(&venv))
        .map_err(|e| format!("cannot create {}: {e}", venv.display()))?;
    // Two test processes in one checkout install once, one after the other.
    let lock_path = venv.with_extension("lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    if has_packages(&python) {
        return Ok(python);
    }
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv (Debian: apt-get install python3-venv)",
    )?;
    run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet"])
            .args(PACKAGES),
        "pip install openapi-spec-validator standardwebhooks aiosmtpd httpx mcp (needs PyPI)",
    )?;
    if has_packages(&python) {
        Ok(python)
    } else {
        Err(format!(
            "{} was installed but does not import",
            venv.display()
        ))
    }
}

fn has_packages(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", MODULES])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
