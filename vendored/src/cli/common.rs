//! Helpers shared by the commands: where the spec comes from, the agent with
//! this process's tools, who decides.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::exit::ExitFailure;
use crate::engine::tools::{CustomTools, Toolbox};
use crate::support::embedded::Embedded;
use crate::{AgentRun, SharedStore, Spec};

/// The spec a command works with: a file (tollgate) or the copy built into
/// an exported server.
#[derive(Debug, Clone)]
pub enum SpecSource {
    File(PathBuf),
    Embedded(Embedded),
}

impl SpecSource {
    /// Parse and validate, or fail with exit 2 and the error's position.
    pub fn load(&self) -> Result<Arc<Spec>, ExitFailure> {
        let spec = match self {
            SpecSource::File(path) => Spec::load(path)?,
            SpecSource::Embedded(e) => {
                let spec = Spec::parse(e.spec_yaml, e.spec_file)?;
                // The generator hashed the spec it embedded; a different
                // hash here means the runtime and the generator disagree on
                // the spec language, which must not go unnoticed (pauses are
                // keyed to the hash).
                if spec.hash.as_str() != e.spec_hash {
                    return Err(ExitFailure::bad_input(format!(
                        "the built-in spec hashes to {} but was exported as {}; re-export it with a matching tollgate",
                        spec.hash.short(),
                        crate::SpecHash::short_of(e.spec_hash)
                    )));
                }
                spec
            }
        };
        Ok(Arc::new(spec))
    }

    /// The default state file: `.tollgate/state.db` next to a spec file, or
    /// in the working directory for an embedded spec.
    pub fn default_state_path(&self) -> PathBuf {
        match self {
            SpecSource::File(path) => super::store_location::default_state_path(path),
            SpecSource::Embedded(_) => Path::new(".tollgate").join("state.db"),
        }
    }

    /// How to name the spec in a hint like `approve: ... --spec X`.
    pub fn spec_flag(&self) -> String {
        match self {
            SpecSource::File(path) => format!(" --spec {}", path.display()),
            SpecSource::Embedded(_) => String::new(),
        }
    }

    /// `--spec` if given, else the embedded spec, else an error naming the flag.
    pub fn resolve(
        flag: Option<&Path>,
        embedded: Option<&SpecSource>,
    ) -> Result<SpecSource, ExitFailure> {
        match (flag, embedded) {
            (Some(path), _) => Ok(SpecSource::File(path.to_path_buf())),
            (None, Some(source)) => Ok(source.clone()),
            (None, None) => Err(ExitFailure::bad_input("--spec SPEC is required")),
        }
    }
}

/// The agent with this process's tools. A spec whose `rust:` tools are not
/// registered here is refused up front (exit 2), before any run starts.
pub fn agent(
    spec: Arc<Spec>,
    store: SharedStore,
    custom: &CustomTools,
) -> Result<AgentRun, ExitFailure> {
    // Before the HTTP client is built: a build without it names the
    // feature the spec needs (exit 2) instead of failing the first call.
    spec.check_features()
        .map_err(|e| ExitFailure::bad_input(e.to_string()))?;
    let tools = toolbox(custom)?;
    tools
        .check(&spec)
        .map_err(|e| ExitFailure::bad_input(e.to_string()))?;
    with_tools(spec, store, tools)
}

/// The agent of a command that moves pending approvals and runs no step
/// (`approvals migrate`): like [`agent`], without its checks of the
/// spec's `rust:` tools and runtime features, which only running a step
/// needs. So a spec that `plan` reads, tools only its export implements
/// included, can be migrated to; deciding an approval it moved runs the
/// next step, and that is checked where it is decided.
pub fn records_agent(
    spec: Arc<Spec>,
    store: SharedStore,
    custom: &CustomTools,
) -> Result<AgentRun, ExitFailure> {
    with_tools(spec, store, toolbox(custom)?)
}

fn toolbox(custom: &CustomTools) -> Result<Toolbox, ExitFailure> {
    Toolbox::new()
        .map(|tools| tools.with_custom_tools(custom.clone()))
        .map_err(|e| ExitFailure::new(super::exit::RUN_FAILED, e.message))
}

fn with_tools(
    spec: Arc<Spec>,
    store: SharedStore,
    tools: Toolbox,
) -> Result<AgentRun, ExitFailure> {
    // Every command that drives runs holds them under the same lease.
    let lease = crate::domain::durable::lease_from_env().map_err(ExitFailure::bad_input)?;
    Ok(AgentRun::new(spec, store)
        .with_tools(Arc::new(tools))
        .with_lease(lease))
}

/// JSON given to a run from outside nests at most
/// [`crate::support::json_depth::MAX_JSON_DEPTH`] levels (what the run stores wraps
/// it again and must stay readable); the error completes "X ...".
pub fn check_depth(text: &str) -> Result<(), String> {
    let limit = crate::support::json_depth::MAX_JSON_DEPTH;
    if crate::support::json_depth::text_depth(text.as_bytes()) > limit {
        return Err(format!(
            "nests deeper than {limit} levels of objects and arrays, the most tollgate accepts"
        ));
    }
    Ok(())
}

/// Who decides: --by, else $USER, else "cli".
pub fn decider(by: Option<&str>) -> String {
    by.map(str::to_string)
        .or_else(|| {
            std::env::var(crate::support::env::USER)
                .ok()
                .filter(|u| !u.is_empty())
        })
        .unwrap_or_else(|| "cli".to_string())
}

/// Ask `question` on the terminal (stderr) and read the answer from stdin:
/// `y` or `yes` (any case) is yes; anything else, an empty line included,
/// is no.
pub(crate) fn ask_yes(question: &str) -> Result<bool, ExitFailure> {
    use std::io::Write;
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| ExitFailure::bad_input(format!("cannot read the answer: {e}")))?;
    Ok(answer.trim().eq_ignore_ascii_case("y") || answer.trim().eq_ignore_ascii_case("yes"))
}
