//! cli.md and cli-exported.md: a clap command tree, walked whole (hidden
//! commands and arguments left out, as `--help` leaves them out).

use std::fmt::Write as _;

use super::{header, one_line};

/// The page of `command`, named `name` (the binary's name as users type it).
pub fn page(command: clap::Command, name: &str, intro: &str) -> String {
    let mut out = header(&format!("`{name}` command line"), intro);
    out.push_str(&commands(command, name));
    out
}

/// A section (`## NAME SUBCOMMAND`) for `command`, named `name`, and for
/// each of its commands.
pub fn commands(command: clap::Command, name: &str) -> String {
    let mut command = command.name(name.to_string()).bin_name(name.to_string());
    command.build();
    let mut out = String::new();
    let mut sections = Vec::new();
    walk(&command, name, &mut sections);
    sections.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, text) in sections {
        out.push('\n');
        out.push_str(&text);
    }
    out
}

/// One section per command with anything to say (`name` first), by path.
fn walk(command: &clap::Command, path: &str, sections: &mut Vec<(String, String)>) {
    sections.push((path.to_string(), section(command, path)));
    for sub in command.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        walk(sub, &format!("{path} {}", sub.get_name()), sections);
    }
}

fn section(command: &clap::Command, path: &str) -> String {
    let mut out = format!("## `{path}`\n\n");
    if let Some(about) = command.get_long_about().or(command.get_about()) {
        for paragraph in about.to_string().split("\n\n") {
            let _ = writeln!(out, "{}\n", one_line(paragraph));
        }
    }
    let usage = command
        .clone()
        .render_usage()
        .to_string()
        .replace("Usage: ", "");
    let _ = writeln!(out, "```\n{}\n```\n", usage.trim());
    let subcommands: Vec<&clap::Command> = command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set() && sub.get_name() != "help")
        .collect();
    if !subcommands.is_empty() {
        out.push_str("Commands:\n\n");
        for sub in subcommands {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let _ = writeln!(out, "- `{}`: {}", sub.get_name(), one_line(&about));
        }
        out.push('\n');
    }
    let arguments: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set() && !is_builtin(arg))
        .collect();
    if !arguments.is_empty() {
        out.push_str("Arguments and flags:\n\n");
        for arg in arguments {
            let _ = writeln!(out, "- {}", argument(arg));
        }
        out.push('\n');
    }
    out
}

/// clap's own `--help` and `--version`, on every command alike.
fn is_builtin(arg: &clap::Arg) -> bool {
    matches!(arg.get_id().as_str(), "help" | "version")
}

/// `` `--out <DIR>` (required): help. Environment: `X`. Default: `y`. ``
fn argument(arg: &clap::Arg) -> String {
    let values: Vec<String> = arg
        .get_value_names()
        .map(|names| names.iter().map(|n| format!("<{n}>")).collect())
        .unwrap_or_else(|| vec![format!("<{}>", arg.get_id().as_str().to_uppercase())]);
    let takes_value = arg.get_action().takes_values();
    let mut spelled = match (arg.get_short(), arg.get_long()) {
        (Some(short), Some(long)) => format!("-{short}, --{long}"),
        (None, Some(long)) => format!("--{long}"),
        (Some(short), None) => format!("-{short}"),
        (None, None) => values.join(" "),
    };
    if takes_value && (arg.get_long().is_some() || arg.get_short().is_some()) {
        spelled = format!("{spelled} {}", values.join(" "));
    }
    let mut text = format!("`{spelled}`");
    if arg.is_required_set() {
        text.push_str(" (required)");
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let _ = write!(text, ": {}", one_line(&help));
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if takes_value && !possible.is_empty() {
        let _ = write!(text, " Values: {}.", possible.join(", "));
    }
    if let Some(env) = arg.get_env() {
        let _ = write!(text, " Environment: `{}`.", env.to_string_lossy());
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if takes_value && !defaults.is_empty() {
        let _ = write!(text, " Default: {}.", defaults.join(", "));
    }
    text
}

/// The flags that read `variable` (clap's `env = ...`), as (`tollgate
/// serve`, `--listen`), and their default when clap has one.
pub fn flags_reading(
    command: &clap::Command,
    variable: &str,
) -> (Vec<(String, String)>, Option<String>) {
    let mut flags = Vec::new();
    let mut default = None;
    collect(
        command,
        command.get_name(),
        variable,
        &mut flags,
        &mut default,
    );
    flags.sort();
    flags.dedup();
    (flags, default)
}

fn collect(
    command: &clap::Command,
    path: &str,
    variable: &str,
    flags: &mut Vec<(String, String)>,
    default: &mut Option<String>,
) {
    for arg in command.get_arguments() {
        if arg.get_env().is_some_and(|e| e == variable) {
            if let Some(long) = arg.get_long() {
                flags.push((path.to_string(), format!("--{long}")));
            }
            if let Some(value) = arg.get_default_values().first() {
                *default = Some(value.to_string_lossy().into_owned());
            }
        }
    }
    for sub in command.get_subcommands() {
        collect(
            sub,
            &format!("{path} {}", sub.get_name()),
            variable,
            flags,
            default,
        );
    }
}
