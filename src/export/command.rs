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

use super::{ExportError, ExportOptions, Plan, check, export, plan};

/// Export the spec as a standalone Rust server crate.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// The spec file (YAML).
    pub spec: PathBuf,
    /// The directory to write the crate into (created when missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Overwrite vendored and generated files even if they were edited since
    /// the last export (your own files are never overwritten).
    #[arg(long, conflicts_with_all = ["check", "dry_run"])]
    pub force: bool,
    /// Write nothing; exit 1 naming every file that is missing or stale.
    #[arg(long, conflicts_with = "dry_run")]
    pub check: bool,
    /// Write nothing; print the plan (path, role, size).
    #[arg(long)]
    pub dry_run: bool,
}

/// Run the command; returns the exit status (0 done, 1 stale on --check or
/// a write failed, 2 bad input, 4 edited files in the way).
pub fn run(args: ExportArgs) -> i32 {
    match run_inner(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// Read and validate the spec, and plan its export.
pub fn plan_for(spec_path: &Path) -> Result<Plan, ExportError> {
    let origin = spec_path.display().to_string();
    let source =
        std::fs::read(spec_path).map_err(|e| tollgate_runtime::SpecError::io(&origin, e))?;
    // Not lossy: a non-UTF-8 spec is refused here exactly as by validate.
    let spec = Spec::parse_bytes(&source, &origin)?;
    plan(&spec, &source)
}

fn run_inner(args: &ExportArgs) -> Result<i32, ExportError> {
    let plan = plan_for(&args.spec)?;
    if args.dry_run {
        print_plan(&plan);
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
        for finding in &report.findings {
            say!(
                "{}: {} ({})",
                finding.path,
                finding.problem.describe(),
                finding.role
            );
        }
        eprintln!(
            "error: {} is out of date with {}: {} file{} to update; run `tollgate export {} --out {}`",
            args.out.display(),
            args.spec.display(),
            report.findings.len(),
            if report.findings.len() == 1 { "" } else { "s" },
            args.spec.display(),
            args.out.display()
        );
        return Ok(exit::RUN_FAILED);
    }

    let report = export(&plan, &args.out, &ExportOptions { force: args.force })?;
    for path in &report.kept_with_new {
        say!("kept {path} (edited since the last export); the new version is {path}.new");
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
    say!("{summary}");
    Ok(exit::OK)
}

fn print_plan(plan: &Plan) {
    let width = plan.files.keys().map(String::len).max().unwrap_or(0);
    for (path, file) in &plan.files {
        say!(
            "{path:<width$}  {:<9}  {:>7}",
            file.role.as_str(),
            file.bytes.len()
        );
    }
}
