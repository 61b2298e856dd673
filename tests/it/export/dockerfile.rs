//! The exported Dockerfile. Docker is not needed: its instructions are
//! parsed and checked against the crate they build (the toolchain is the
//! crate's rust-version, the dependency layer comes before the sources, every
//! file the build reads is copied, the state location is set in the image
//! under its volume), its HEALTHCHECK command is run against a real server,
//! and the build stage's commands are run for real with cargo, copies made
//! as COPY makes them (modification times kept), so the dependency-layer
//! trick is shown to yield the real binary and not the stub.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use tollgate::export::{self, ExportOptions, Plan, Role};

use crate::common::Workspace;
use crate::common::server::Served;
use crate::common::stub_server::{Response, StubServer};

const EXAMPLES: &[&str] = &["refund-desk", "no-gate", "with-rust-tools"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn plan_of(spec: &Path) -> Plan {
    export::command::plan_for(spec).unwrap()
}

fn file_text(plan: &Plan, path: &str) -> String {
    let file = plan
        .files
        .get(path)
        .unwrap_or_else(|| panic!("the export has no {path}"));
    String::from_utf8(file.bytes.to_vec()).unwrap()
}

/// One Dockerfile instruction: its keyword (upper case) and its arguments,
/// continuation lines joined.
#[derive(Debug, Clone)]
struct Instruction {
    keyword: String,
    args: String,
}

fn parse(dockerfile: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in dockerfile.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let (keyword, args) = pending
            .split_once(' ')
            .expect("an instruction has arguments");
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_string(),
        });
        pending.clear();
    }
    assert!(pending.is_empty(), "a continuation line ends the file");
    out
}

/// The instructions of the first stage (up to the second FROM).
fn build_stage(instructions: &[Instruction]) -> &[Instruction] {
    let second = instructions
        .iter()
        .enumerate()
        .filter(|(_, i)| i.keyword == "FROM")
        .nth(1)
        .map(|(n, _)| n)
        .expect("a runtime stage");
    &instructions[..second]
}

fn rust_version(cargo_toml: &str) -> String {
    cargo_toml
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .map(|v| v.trim_matches('"').to_string())
        .expect("Cargo.toml has a rust-version")
}

/// The sources of a `COPY SRC... DEST` (not `--from`).
fn copy_sources(copy: &Instruction) -> Vec<String> {
    let words: Vec<&str> = copy.args.split_whitespace().collect();
    words[..words.len() - 1]
        .iter()
        .map(|s| s.trim_end_matches('/').to_string())
        .collect()
}

fn index_of(stage: &[Instruction], what: impl Fn(&Instruction) -> bool, name: &str) -> usize {
    stage
        .iter()
        .position(what)
        .unwrap_or_else(|| panic!("no {name} in the build stage: {stage:#?}"))
}

/// Files of an export that a `cargo build` of it does not read.
fn not_built(path: &str) -> bool {
    [
        "README.md",
        "TOLLGATE.md",
        "Dockerfile",
        ".dockerignore",
        ".gitignore",
        ".env.example",
        ".gitattributes",
        "openapi.json",
    ]
    .contains(&path)
        || path.starts_with("tests/")
        || path.starts_with(".tollgate/")
}

#[test]
fn the_dockerfile_pins_the_toolchain_caches_dependencies_and_copies_what_the_build_reads() {
    for example in EXAMPLES {
        let plan = plan_of(&repo().join(format!("examples/{example}.yaml")));
        let dockerfile = file_text(&plan, "Dockerfile");
        let instructions = parse(&dockerfile);
        let stage = build_stage(&instructions);

        // The toolchain is the crate's rust-version.
        let version = rust_version(&file_text(&plan, "Cargo.toml"));
        assert_eq!(
            stage[0].args,
            format!("rust:{version}-slim-bookworm AS build"),
            "{example}"
        );

        // Manifest, lockfile and vendored runtime, a build of a stub, then
        // the spec and the sources, then the real build.
        let copies = |path: &'static str| {
            move |i: &Instruction| i.keyword == "COPY" && copy_sources(i).iter().any(|s| s == path)
        };
        let deps_build = index_of(
            stage,
            |i| i.keyword == "RUN" && i.args.contains("cargo build --release --locked"),
            "dependency build",
        );
        let stub = &stage[deps_build].args;
        assert!(stub.contains("echo 'fn main() {}' > src/main.rs"), "{stub}");
        for path in ["Cargo.toml", "Cargo.lock", "vendored"] {
            assert!(
                index_of(stage, copies(path), path) < deps_build,
                "{example}: {path}"
            );
        }
        let src = index_of(stage, copies("src"), "COPY src/");
        let spec = index_of(stage, copies("agent.yaml"), "COPY agent.yaml");
        assert!(deps_build < src && deps_build < spec, "{example}");
        let final_build = stage.len() - 1;
        assert!(src < final_build && spec < final_build, "{example}");
        let last = &stage[final_build];
        assert_eq!(last.keyword, "RUN");
        assert!(
            last.args
                .starts_with("touch src/main.rs && cargo build --release --locked"),
            "the real build must not reuse the stub's binary: {}",
            last.args
        );

        // Every file the build reads is copied into the build stage, and
        // none of those is kept out of the context by .dockerignore.
        let sources: Vec<String> = stage
            .iter()
            .filter(|i| i.keyword == "COPY")
            .flat_map(copy_sources)
            .collect();
        let ignored: Vec<String> = file_text(&plan, ".dockerignore")
            .lines()
            .map(|l| l.trim().trim_end_matches('/').to_string())
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        for (path, file) in &plan.files {
            if not_built(path) {
                continue;
            }
            let covered = sources
                .iter()
                .any(|s| path == s || path.starts_with(&format!("{s}/")));
            assert!(
                covered,
                "{example}: the build reads {path} ({:?}) but no COPY brings it",
                file.role
            );
            assert!(
                !ignored
                    .iter()
                    .any(|i| path == i || path.starts_with(&format!("{i}/"))),
                "{example}: .dockerignore keeps {path} out"
            );
        }
        assert!(
            plan.files
                .keys()
                .any(|p| p.starts_with("vendored/") && plan.files[p].role == Role::Vendored)
        );
    }
}

#[test]
fn the_image_sets_the_store_under_its_volume_and_serves_without_extra_flags() {
    let plan = plan_of(&repo().join("examples/refund-desk.yaml"));
    let instructions = parse(&file_text(&plan, "Dockerfile"));
    let runtime = &instructions[build_stage(&instructions).len()..];
    let all = |keyword: &str| -> Vec<&str> {
        runtime
            .iter()
            .filter(|i| i.keyword == keyword)
            .map(|i| i.args.as_str())
            .collect()
    };
    let env = all("ENV");
    assert!(
        env.contains(&"TOLLGATE_DATABASE_URL=sqlite:///data/state.db"),
        "{env:?}"
    );
    assert!(env.contains(&"TOLLGATE_LISTEN=0.0.0.0:8080"), "{env:?}");
    assert_eq!(all("VOLUME"), ["[\"/data\"]"]);
    assert_eq!(all("WORKDIR"), ["/data"]);
    assert_eq!(all("USER"), ["tollgate"], "not root");
    // `serve` alone: the store and the address come from the environment,
    // which every `docker exec ... approvals list` sees too.
    assert_eq!(all("CMD"), ["[\"serve\"]"]);
    let entrypoint: Vec<String> = serde_json::from_str(all("ENTRYPOINT")[0]).unwrap();
    assert_eq!(entrypoint, [format!("/usr/local/bin/{}", plan.package)]);

    // The variable the image sets is the one the CLI reads.
    let help = Command::new(crate::common::tollgate_bin())
        .args(["approvals", "list", "--help"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("TOLLGATE_DATABASE_URL"),
        "{}",
        String::from_utf8_lossy(&help.stdout)
    );
}

/// The HEALTHCHECK's command (exec form) and its options.
fn healthcheck() -> (String, Vec<String>) {
    let plan = plan_of(&repo().join("examples/no-gate.yaml"));
    let instructions = parse(&file_text(&plan, "Dockerfile"));
    let check = instructions
        .iter()
        .find(|i| i.keyword == "HEALTHCHECK")
        .expect("a HEALTHCHECK");
    let (options, command) = check.args.split_once("CMD ").expect("HEALTHCHECK ... CMD");
    let argv: Vec<String> = serde_json::from_str(command).expect("exec form: a JSON array");
    (options.to_string(), argv)
}

/// Run the probe as Docker would, in the image's environment with
/// TOLLGATE_LISTEN naming `port`.
fn probe(argv: &[String], port: u16) -> std::process::ExitStatus {
    Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TOLLGATE_LISTEN", format!("0.0.0.0:{port}"))
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
}

fn port_of(base: &str) -> u16 {
    base.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no port in {base}"))
}

#[test]
fn the_healthcheck_probes_healthz_with_bash_alone() {
    let (options, argv) = healthcheck();
    assert!(
        options.contains("--interval=") && options.contains("--timeout="),
        "{options}"
    );
    assert_eq!(argv[0], "bash", "the slim image has bash, not curl or wget");
    let script = argv.join(" ");
    assert!(
        script.contains("/dev/tcp/127.0.0.1/") && script.contains("GET /healthz "),
        "{script}"
    );
    assert!(
        !script.contains("curl") && !script.contains("wget"),
        "{script}"
    );

    // A real server: healthy.
    let ws = Workspace::new("version: 1\nagent: probe-me\nsteps:\n  - id: a\n    set: { x: 1 }\n");
    let served = Served::start(&ws.spec, &ws.state_db(), &[], &[]);
    assert!(
        probe(&argv, port_of(&served.base)).success(),
        "{}",
        served.logs()
    );

    // Something else on the port that answers 503: unhealthy.
    let sick = StubServer::start(|_| Response::json(503, json!({"error": "down"})));
    assert!(!probe(&argv, port_of(&sick.url(""))).success());

    // Nothing listening: unhealthy.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = free.local_addr().unwrap().port();
    drop(free);
    assert!(!probe(&argv, closed).success());
}

/// The exports' shared target directory (see build.rs): the dependencies
/// compiled once for every exported-crate build of the suite.
fn shared_target_dir() -> PathBuf {
    repo().join("target").join("export-e2e")
}

/// `COPY SRC... DEST` into `work`: copied as Docker copies from the build
/// context, modification times kept (`cp -a`).
fn copy(context: &Path, work: &Path, copy: &Instruction) {
    let words: Vec<&str> = copy.args.split_whitespace().collect();
    let dest = work.join(words[words.len() - 1]);
    for src in &words[..words.len() - 1] {
        let from = context.join(src.trim_end_matches('/'));
        let to = if src.ends_with('/') {
            dest.clone()
        } else {
            dest.join(src)
        };
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let status = Command::new("cp")
            .arg("-a")
            .arg(if src.ends_with('/') {
                from.join(".")
            } else {
                from
            })
            .arg(&to)
            .status()
            .unwrap();
        assert!(status.success(), "cp {src}");
    }
}

/// A `RUN` of the build stage, in `work`, in a debug build (the profile the
/// suite's other exported builds share) with `/usr/local/bin` under `bin`.
fn run(work: &Path, bin: &Path, command: &str) -> String {
    let command = command
        .replace(" --release", "")
        .replace("target/release/", "target/debug/")
        .replace("/usr/local/bin/", &format!("{}/", bin.display()));
    // The cargo running this suite first on PATH, as in the image.
    let cargo_dir = std::env::var("CARGO")
        .ok()
        .and_then(|c| PathBuf::from(c).parent().map(Path::to_path_buf));
    let mut path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    if let Some(dir) = cargo_dir {
        path = format!("{}:{path}", dir.display());
    }
    let out = Command::new("sh")
        .args(["-ec", &command])
        .current_dir(work)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", shared_target_dir())
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "RUN {command}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    command
}

#[test]
fn the_build_stage_runs_with_cargo_and_yields_the_real_binary() {
    // An agent of its own: its binary name is no other test's.
    let ws =
        Workspace::new("version: 1\nagent: docker-layers\nsteps:\n  - id: a\n    set: { x: 1 }\n");
    let plan = plan_of(&ws.spec);
    let context = ws.path().join("context");
    export::export(&plan, &context, &ExportOptions::default()).unwrap();
    let instructions = parse(&file_text(&plan, "Dockerfile"));
    let stage = build_stage(&instructions);

    let work = ws.path().join("image-src");
    let bin = ws.path().join("image-bin");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(shared_target_dir()).unwrap();
    // `target/` in the build directory is the suite's shared one.
    std::os::unix::fs::symlink(shared_target_dir(), work.join("target")).unwrap();

    let binary = shared_target_dir().join("debug").join(&plan.package);
    let mut ran = Vec::new();
    for instruction in &stage[1..] {
        match instruction.keyword.as_str() {
            "WORKDIR" => {}
            "COPY" => copy(&context, &work, instruction),
            "RUN" => {
                ran.push(run(&work, &bin, &instruction.args));
                if ran.len() == 1 {
                    // The dependency layer: the stub's binary, and no sources left.
                    let stub = Command::new(&binary).arg("hash").output().unwrap();
                    assert!(stub.status.success() && stub.stdout.is_empty(), "{stub:?}");
                    assert!(!work.join("src").exists());
                }
            }
            other => panic!("unexpected {other} in the build stage"),
        }
    }
    assert_eq!(ran.len(), 2, "{ran:?}");

    let installed = bin.join(&plan.package);
    let hash = Command::new(&installed).arg("hash").output().unwrap();
    assert!(hash.status.success(), "{hash:?}");
    assert_eq!(
        String::from_utf8_lossy(&hash.stdout).trim(),
        plan.spec_hash,
        "the image's binary is the crate, not the dependency layer's stub"
    );
}
