//! Every command and every argument has a help line: the check that keeps
//! it so, for `tollgate` and for an exported server's command line (each
//! runs it over its own clap tree in a unit test).

/// Each subcommand and argument of `command` (walked whole, hidden ones
/// left out: they are not offered) whose help is blank, as
/// `tollgate runs show <RUN_ID>`, `tollgate runs show --json` or
/// `tollgate runs` (the command itself). clap's own `--help` and
/// `--version` are never blank.
pub fn undocumented(command: &clap::Command) -> Vec<String> {
    let mut found = Vec::new();
    walk(command, command.get_name(), &mut found);
    found
}

fn walk(command: &clap::Command, path: &str, found: &mut Vec<String>) {
    for arg in command.get_arguments() {
        if !arg.is_hide_set() && is_blank(arg.get_help()) && is_blank(arg.get_long_help()) {
            found.push(format!("{path} {}", arg_name(arg)));
        }
    }
    for sub in command.get_subcommands() {
        let sub_path = format!("{path} {}", sub.get_name());
        if sub.is_hide_set() {
            continue;
        }
        if is_blank(sub.get_about()) && is_blank(sub.get_long_about()) {
            found.push(sub_path.clone());
        }
        walk(sub, &sub_path, found);
    }
}

fn is_blank(text: Option<&clap::builder::StyledStr>) -> bool {
    text.is_none_or(|t| t.to_string().trim().is_empty())
}

/// `--json` for a flag, `<RUN_ID>` for a positional.
fn arg_name(arg: &clap::Arg) -> String {
    match arg.get_long() {
        Some(long) => format!("--{long}"),
        None => format!("<{}>", arg.get_id().as_str().to_uppercase()),
    }
}
