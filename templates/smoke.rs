//! Smoke test of the built server: `serve` starts and answers /healthz, and
//! `validate` and `hash` agree with agent.yaml. Uses only std and the
//! runtime, so the crate needs no dev-dependencies.
//!
//! This file is yours: `tollgate export` writes it once and never overwrites
//! your edits.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_{{ m.package }}");

/// Kills the server when the test ends, passed or not.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh directory for this test's state.
fn state_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("smoke-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the state directory");
    dir
}

fn command() -> Command {
    let mut command = Command::new(BIN);
    // The test decides where the state is and that no tokens are set.
    command
        .env_remove("TOLLGATE_DATABASE_URL")
        .env_remove("TOLLGATE_API_TOKENS");
{%- let required = m.required_env_vars() %}
{%- for name in required.iter() %}
    placeholder(&mut command, "{{ name }}");
{%- endfor %}
    command
}
{% if !required.is_empty() %}
/// `serve` refuses to start while a variable the spec needs is unset;
/// nothing here calls what it is for, so a placeholder will do.
fn placeholder(command: &mut Command, name: &str) {
    if std::env::var_os(name).is_none() {
        command.env(name, "smoke-test-placeholder");
    }
}
{% endif %}
fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn serve_answers_healthz() {
    let dir = state_dir("serve");
    let child = command()
        .args(["serve", "--listen", "127.0.0.1:0", "--state"])
        .arg(dir.join("state.db"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the server");
    let mut server = Server(child);
    let out = server.0.stdout.take().expect("piped stdout");

    // The server prints `listening on http://ADDR` once it accepts connections.
    let mut address = None;
    for line in BufReader::new(out).lines() {
        let line = line.expect("read the server's stdout");
        if let Some(rest) = line.trim().strip_prefix("listening on http://") {
            address = Some(rest.trim_end_matches('/').to_string());
            break;
        }
    }
    let address = address.expect("the server exited before printing `listening on http://ADDR`");

    let mut stream = TcpStream::connect(&address).expect("connect to the server");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set a read timeout");
    write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the response");
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "GET /healthz: {response}"
    );
}

#[test]
fn validate_and_hash_describe_the_embedded_spec() {
    let spec = tollgate_runtime::Spec::parse(include_str!("../agent.yaml"), "agent.yaml")
        .expect("agent.yaml is a valid spec");

    let output = command().arg("validate").output().expect("run validate");
    assert!(output.status.success(), "validate: {output:?}");
    assert!(stdout(&output).contains("ok"), "validate: {output:?}");

    let output = command().arg("hash").output().expect("run hash");
    assert!(output.status.success(), "hash: {output:?}");
    assert_eq!(stdout(&output).trim(), spec.hash.as_str());
}
