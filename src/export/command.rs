//! `tollgate export SPEC --out DIR [--force] [--check] [--dry-run]`: the
//! command-line edge of the exporter. Parses nothing itself (clap does),
//! prints, and maps errors to exit statuses.

/// `println!` that never panics on a closed stdout (`... | head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

use std::path::{Path, PathBuf};

use tollgate_runtime::Spec;
use tollgate_runtime::cli::exit;

use super::{
    ExportError, ExportOptions, Plan, Preview, Problem, check, export, plan, preview, waiting,
};

/// Export the spec as a standalone Rust server crate.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// The spec file (YAML).
    pub spec: PathBuf,
    /// The directory to write the crate into (created when missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Overwrite vendored and generated files even if they were edited since
    /// the last export, and export into a non-empty directory that is not an
    /// export or over another agent's export (your own files are never
    /// overwritten: edits are merged).
    #[arg(long, conflicts_with = "check")]
    pub force: bool,
    /// Write nothing; exit 1 naming every file that is missing or stale, and
    /// every conflict marker left in a file of yours (FILE:LINE).
    #[arg(long, conflicts_with = "dry_run")]
    pub check: bool,
    /// Write nothing; print what an export would do to each file (path,
    /// role, size, action: write, unchanged, merge clean, conflict, remove,
    /// keep).
    #[arg(long)]
    pub dry_run: bool,
    /// The exported server's state file, read after the export to say how
    /// many pending approvals wait on other versions of the spec (default:
    /// DIR/.tollgate/state.db, where the server keeps it when run from
    /// DIR). Nothing is created.
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
}

/// Run the command; returns the exit status (0 done, 1 stale or conflict
/// markers on --check, a merge left conflicts, or a write failed, 2 bad
/// input, 4 edited files or someone else's directory in the way).
///
/// After an export that wrote, it says on stderr how many pending
/// approvals of the exported server's state wait on other spec versions;
/// that check never changes the exit status.
pub async fn run(args: ExportArgs) -> i32 {
    let result = read_spec(&args.spec).and_then(|(spec, source)| {
        let code = run_inner(&args, &spec, &source)?;
        Ok((code, spec))
    });
    match result {
        Ok((code, spec)) => {
            if !args.dry_run && !args.check {
                tell_waiting(&args, &spec).await;
            }
            code
        }
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// Read and validate the spec, and plan its export.
pub fn plan_for(spec_path: &Path) -> Result<Plan, ExportError> {
    let (spec, source) = read_spec(spec_path)?;
    plan(&spec, &source)
}

/// The spec and its source bytes.
fn read_spec(spec_path: &Path) -> Result<(Spec, Vec<u8>), ExportError> {
    let origin = spec_path.display().to_string();
    let source =
        std::fs::read(spec_path).map_err(|e| tollgate_runtime::SpecError::io(&origin, e))?;
    // Not lossy: a non-UTF-8 spec is refused here exactly as by validate.
    let spec = Spec::parse_bytes(&source, &origin)?;
    Ok((spec, source))
}

/// The pending approvals the new build would find on other versions, if
/// the exported server's state has any. A state named with `--state` that
/// is not there is worth a warning; the default one simply may not exist.
async fn tell_waiting(args: &ExportArgs, spec: &Spec) {
    let state = match &args.state {
        Some(state) if !state.exists() => {
            eprintln!(
                "warning: no state file at {} (--state): pending approvals not checked",
                state.display()
            );
            return;
        }
        Some(state) => state.clone(),
        None => waiting::default_state(&args.out),
    };
    match waiting::notice(spec, &args.spec, &state).await {
        Ok(Some(notice)) => eprintln!("{notice}"),
        Ok(None) => {}
        Err(e) => eprintln!(
            "warning: cannot read the pending approvals in {}: {e}",
            state.display()
        ),
    }
}

fn run_inner(args: &ExportArgs, spec: &Spec, source: &[u8]) -> Result<i32, ExportError> {
    let plan = plan(spec, source)?;
    let options = ExportOptions { force: args.force };
    if args.dry_run {
        print_preview(&plan, &preview(&plan, &args.out, &options)?);
        return Ok(exit::OK);
    }
    if args.check {
        let report = check(&plan, &args.out)?;
        if report.findings.is_empty() {
            say!(
                "{}: up to date with {} ({} files)",
                args.out.display(),
                args.spec.display(),
                report.files
            );
            return Ok(exit::OK);
        }
        let (marked, stale): (Vec<_>, Vec<_>) = report
            .findings
            .iter()
            .partition(|f| matches!(f.problem, Problem::ConflictMarkers(_)));
        for finding in &stale {
            say!(
                "{}: {} ({})",
                finding.path,
                finding.problem.describe(),
                finding.role
            );
        }
        for finding in &marked {
            if let Problem::ConflictMarkers(lines) = &finding.problem {
                for line in lines {
                    say!(
                        "{}:{line}: {} ({})",
                        finding.path,
                        finding.problem.describe(),
                        finding.role
                    );
                }
            }
        }
        if !stale.is_empty() {
            eprintln!(
                "error: {} is out of date with {}: {} file{} to update; run `tollgate export {} --out {}`",
                args.out.display(),
                args.spec.display(),
                stale.len(),
                plural(stale.len()),
                args.spec.display(),
                args.out.display()
            );
        }
        if !marked.is_empty() {
            eprintln!(
                "error: {} has conflict markers left from a merge in {} file{} of yours: {}; resolve them (keep what you want between `<<<<<<< yours` and `>>>>>>> tollgate export`, then delete the marker lines)",
                args.out.display(),
                marked.len(),
                plural(marked.len()),
                marked
                    .iter()
                    .map(|f| f.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        return Ok(exit::RUN_FAILED);
    }

    let report = export(&plan, &args.out, &options)?;
    for path in &report.merged {
        say!("merged {path}: your edits and the new version, cleanly");
    }
    // Without a last export (--force into someone else's directory) the
    // file was not edited since one: it was there before.
    let why = if report.fresh {
        "there before this first export"
    } else {
        "edited since the last export, which kept no copy to merge from"
    };
    for path in &report.kept_with_new {
        say!("kept {path} ({why}); the new version is {path}.new");
    }
    for path in &report.removed {
        say!("removed {path} (no longer generated)");
    }
    for path in &report.kept_orphans {
        say!("kept {path}: no longer generated, but edited since the last export");
    }
    let mut summary = format!(
        "exported {} (spec {}) to {}: {} files, {} written, {} unchanged",
        plan.agent,
        &plan.spec_hash[..12],
        args.out.display(),
        report.files,
        report.written.len(),
        report.unchanged
    );
    let kept = report.kept_edited.len() + report.kept_with_new.len();
    if kept > 0 {
        summary.push_str(&format!(", {kept} of yours kept as you edited them"));
    }
    if !report.merged.is_empty() {
        summary.push_str(&format!(", {} merged", report.merged.len()));
    }
    if !report.conflicts.is_empty() {
        summary.push_str(&format!(", {} with conflicts", report.conflicts.len()));
    }
    say!("{summary}");
    if report.conflicts.is_empty() {
        return Ok(exit::OK);
    }
    for (path, lines) in &report.conflicts {
        for line in lines {
            eprintln!(
                "conflict: {path}:{line}: your edits and the new version change the same lines"
            );
        }
    }
    eprintln!(
        "error: {} file{} of yours with conflicts: {}; each conflict is between `<<<<<<< yours` and `>>>>>>> tollgate export` (with the last export's version after `||||||| last export`): resolve them, then `tollgate export {} --out {} --check` finds none left",
        report.conflicts.len(),
        plural(report.conflicts.len()),
        report
            .conflicts
            .iter()
            .map(|(path, _)| path.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        args.spec.display(),
        args.out.display()
    );
    Ok(exit::RUN_FAILED)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One line per file: path, role, size, then what an export would do.
/// Files the plan no longer has (to remove or keep) show the role and size
/// of nothing planned: `-`.
fn print_preview(plan: &Plan, preview: &Preview) {
    let width = preview
        .actions
        .iter()
        .map(|a| a.path().len())
        .max()
        .unwrap_or(0);
    for action in &preview.actions {
        let path = action.path();
        let (role, size) = match plan.get(path) {
            Some(file) => (file.role.as_str(), file.bytes.len().to_string()),
            None => ("-", "-".to_string()),
        };
        say!(
            "{path:<width$}  {role:<9}  {size:>7}  {}",
            action.describe()
        );
    }
}
