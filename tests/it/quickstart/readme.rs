//! README.md's Quick start runs as pasted (issue 42): its ```sh blocks,
//! in order, as one `bash -e` session in a temporary copy of `examples/`.
//!
//! How the section is read, so that a reader does not trip on it:
//! - A block whose paragraph before it says "in another terminal" is a
//!   server: it runs in the background (its output in `server.log`) for
//!   the rest of the session, and is stopped at the end.
//! - The session stops before the first block with a `cargo build` in it:
//!   the exported crate's build, which the export tests cover
//!   (`export::`); everything up to it, `tollgate export` and
//!   `export --check` included, runs.
//! - `cargo run --release --` and `cargo run -q --release --` become the
//!   `tollgate` binary this test suite built: no second (release) build.
//!   Any other `cargo` line in what runs fails the test.
//! - The session runs with `set -u` too, and its `curl` fails on an HTTP
//!   error answer (`--fail-with-body`, unless the line passes `-f`
//!   itself): an unset `$KEY` or a 404 prints an error and goes on in a
//!   reader's shell (what issue 42 found), so here it stops the session.
//! - The README uses the default port, 8080. The test serves on a free
//!   port instead (`TOLLGATE_LISTEN`, which `serve` reads) and writes that
//!   port for `:8080` in the blocks, so a server already on 8080 on this
//!   machine, or another test, cannot get in the way.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::tollgate_bin;

/// The whole session may take this long (the issue's budget is 60 s; it
/// takes a few seconds).
const SESSION_BUDGET: Duration = Duration::from_secs(60);

/// What the session runs first (see the module's comment).
const PRELUDE: &str = r#"set -eu
curl() {
  case " $* " in
    *" -f"* | *" -sf"* | *" --fail"*) command curl "$@" ;;
    *) command curl --fail-with-body "$@" ;;
  esac
}
"#;

/// One ```sh block of the section, and whether the text before it says it
/// runs in another terminal.
#[derive(Debug)]
struct Block {
    code: String,
    in_another_terminal: bool,
}

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of the `## Quick start` section: from its heading to the next
/// level-2 heading (its own `###` subsections included).
fn section<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let start = markdown
        .lines()
        .scan(0, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, line)| line.trim_end() == heading)
        .map(|(at, _)| at)
        .unwrap_or_else(|| panic!("README.md has no {heading:?} heading"));
    let body = &markdown[start + heading.len()..];
    let end = body.find("\n## ").map_or(body.len(), |at| at + 1);
    &body[..end]
}

/// The section's ```sh blocks, in order. Other fences (```yaml, bare
/// ```) are text for readers, not commands.
fn sh_blocks(section: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut prose = String::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let fence = line.trim_start();
        if !fence.starts_with("```") {
            if !line.trim().is_empty() || !prose.is_empty() {
                prose.push_str(line);
                prose.push('\n');
            }
            continue;
        }
        let mut code = String::new();
        for inner in lines.by_ref() {
            if inner.trim_start().starts_with("```") {
                break;
            }
            code.push_str(inner);
            code.push('\n');
        }
        if fence.trim_end() == "```sh" {
            blocks.push(Block {
                code,
                in_another_terminal: last_paragraph(&prose)
                    .to_lowercase()
                    .contains("in another terminal"),
            });
        }
        prose.clear();
    }
    blocks
}

/// The paragraph right before a block.
fn last_paragraph(prose: &str) -> &str {
    let trimmed = prose.trim_end();
    match trimmed.rfind("\n\n") {
        Some(at) => &trimmed[at + 2..],
        None => trimmed,
    }
}

/// A block as it runs here: the built binary for `cargo run`, the test's
/// port for 8080.
fn localize(code: &str, port: u16) -> String {
    let binary = format!("'{}'", tollgate_bin());
    code.replace("cargo run -q --release --", &binary)
        .replace("cargo run --release --", &binary)
        .replace(":8080", &format!(":{port}"))
}

/// A port nothing listens on now (the OS's choice of a free one).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

/// The script of the session: servers in the background, the rest in
/// order, stopping before the exported crate's build.
fn session_script(blocks: &[Block], port: u16) -> (String, Vec<String>) {
    let mut script = String::from(PRELUDE);
    let mut ran = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        if block.code.contains("cargo build") {
            break;
        }
        let code = localize(&block.code, port);
        assert!(
            !code.contains("cargo "),
            "the Quick start's block {} runs cargo other than `cargo run --release --`:\n{}",
            i + 1,
            block.code
        );
        if block.in_another_terminal {
            script.push_str(&format!("(\n{code}) > server-{i}.log 2>&1 &\n", i = i + 1));
        } else {
            script.push_str(&code);
        }
        ran.push(block.code.clone());
    }
    (script, ran)
}

/// Stops the session's process group (the shell, its background server and
/// anything they started) when the test ends, passed or not.
struct Session {
    child: Child,
}

impl Drop for Session {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary directory holding a copy of `examples/` (its files, not
/// the client programs' folders): the Quick start writes its state file
/// and the export there, never in the repository.
fn copy_of_examples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let to = dir.path().join("examples");
    std::fs::create_dir_all(&to).expect("create examples/");
    for entry in std::fs::read_dir(&from).expect("read examples/") {
        let path: PathBuf = entry.expect("an entry of examples/").path();
        if path.is_file() {
            let name = path.file_name().expect("a file name");
            std::fs::copy(&path, to.join(name)).expect("copy an example");
        }
    }
    dir
}

fn log(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".log") {
            let body = std::fs::read_to_string(entry.path()).unwrap_or_default();
            text.push_str(&format!("--- {name}\n{body}\n"));
        }
    }
    text
}

#[test]
fn the_quick_start_runs_as_pasted() {
    let markdown = readme();
    let quick_start = section(&markdown, "## Quick start");
    let blocks = sh_blocks(quick_start);
    assert!(
        !blocks.is_empty(),
        "README.md's Quick start has no ```sh blocks to run"
    );
    let server = blocks
        .iter()
        .position(|b| b.in_another_terminal)
        .expect("the Quick start starts a server \"in another terminal\"");
    for block in &blocks[..=server] {
        assert!(
            !block.code.contains("cargo build") && !block.code.contains("cargo install"),
            "the Quick start builds or installs before the server starts:\n{}",
            block.code
        );
    }

    let port = free_port();
    let (script, ran) = session_script(&blocks, port);
    let ran = ran.concat();
    assert!(
        ran.contains(" serve ") && ran.contains(" export ") && ran.contains("--check"),
        "the session must serve, export and `export --check` before the crate's build:\n{ran}"
    );

    let dir = copy_of_examples();
    std::fs::write(dir.path().join("session.sh"), &script).expect("write the script");
    let stdout = std::fs::File::create(dir.path().join("session.log")).expect("session.log");
    let stderr = stdout.try_clone().expect("session.log");
    let mut command = Command::new("bash");
    command
        .arg("-e")
        .arg("session.sh")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    // What the README says is all the environment it needs: none of the
    // caller's TOLLGATE_* settings, and the test's port.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("TOLLGATE_") {
            command.env_remove(name);
        }
    }
    command.env("TOLLGATE_LISTEN", format!("127.0.0.1:{port}"));
    // A group of its own, so that the background server ends with it.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut session = Session {
        child: command.spawn().expect("spawn bash"),
    };

    let started = Instant::now();
    let status = loop {
        if let Some(status) = session.child.try_wait().expect("wait for bash") {
            break status;
        }
        assert!(
            started.elapsed() < SESSION_BUDGET,
            "the Quick start did not finish within {SESSION_BUDGET:?}:\n{script}\n{}",
            log(dir.path())
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = log(dir.path());
    assert!(
        status.success(),
        "the Quick start failed ({status}):\n{script}\n{output}"
    );
    println!(
        "the Quick start ran in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // What the session was for, read from the state it left: the served
    // run completed with the decision, the run on the terminal too, and an
    // export that is up to date.
    let listed = Command::new(tollgate_bin())
        .args(["runs", "list", "--spec", "examples/hello-approval.yaml"])
        .args(["--status", "completed", "--quiet"])
        .current_dir(dir.path())
        .output()
        .expect("runs list");
    let completed = String::from_utf8_lossy(&listed.stdout).lines().count();
    assert_eq!(completed, 2, "{output}");
    assert!(
        dir.path().join("hello-approval/Cargo.toml").is_file(),
        "{output}"
    );
}

#[test]
fn the_reader_finds_blocks_and_the_other_terminal() {
    let text = "## Quick start\n\nIn another terminal, serve:\n\n```sh\nserve\n```\n\n\
                Then:\n\n```sh\ncurl localhost:8080/x\n```\n\n```yaml\nnot: run\n```\n\n\
                ### Export\n\n```sh\ncargo build --release\n```\n\n## Tests\n\n```sh\nno\n```\n";
    let blocks = sh_blocks(section(text, "## Quick start"));
    let seen: Vec<(&str, bool)> = blocks
        .iter()
        .map(|b| (b.code.as_str(), b.in_another_terminal))
        .collect();
    assert_eq!(
        seen,
        [
            ("serve\n", true),
            ("curl localhost:8080/x\n", false),
            ("cargo build --release\n", false),
        ]
    );
    let (script, ran) = session_script(&blocks, 4242);
    assert_eq!(ran.len(), 2, "stops before the crate's build: {script}");
    assert!(
        script.contains("(\nserve\n) > server-1.log 2>&1 &\n"),
        "{script}"
    );
    assert!(script.contains("curl localhost:4242/x"), "{script}");
}
