//! The exported crate's `Cargo.lock`.
//!
//! An export must build with `cargo build --locked` and must be fast and
//! offline-safe, so the exporter never runs cargo. Instead
//! `templates/Cargo.lock.in` holds the lockfile cargo itself produced for an
//! exported crate (every package but the crate's own), with the versions of
//! this repository's `Cargo.lock`. Exporting inserts the crate's own entry at
//! the place cargo sorts it to.
//!
//! `tests/it/export/lockfile.rs` keeps the template honest: it exports a spec,
//! lets cargo prune this repository's lockfile down to what the export
//! needs, requires the result to equal the shipped lockfile, and checks
//! `cargo metadata --locked` accepts it. When the runtime's dependencies
//! change it fails and says how to regenerate the template.

use std::collections::BTreeSet;

/// The exported crate's version, in its Cargo.toml and its lockfile entry.
pub const PACKAGE_VERSION: &str = "0.1.0";

const TEMPLATE: &str = include_str!("../../templates/Cargo.lock.in");

const PACKAGE_HEADER: &str = "[[package]]\n";

/// The shipped template: every locked package except the exported crate.
pub fn template() -> &'static str {
    TEMPLATE
}

/// Every package name in the template (to keep the crate's name unique).
pub fn package_names() -> BTreeSet<&'static str> {
    split(TEMPLATE)
        .1
        .into_iter()
        .filter_map(block_name)
        .collect()
}

/// The `tokio` requirement for the exported Cargo.toml: the locked
/// `major.minor`, so the manifest never asks for less than the lockfile has.
pub fn tokio_requirement() -> String {
    let version = split(TEMPLATE)
        .1
        .into_iter()
        .filter(|b| block_name(b) == Some("tokio"))
        .find_map(|b| field(b, "version"))
        .unwrap_or("1");
    version.splitn(3, '.').take(2).collect::<Vec<_>>().join(".")
}

/// The lockfile of an exported crate named `package`.
pub fn render(package: &str) -> String {
    let (header, mut blocks) = split(TEMPLATE);
    let own = own_entry(package, &blocks);
    let at = blocks
        .iter()
        .position(|b| block_name(b).is_some_and(|name| name > package))
        .unwrap_or(blocks.len());
    blocks.insert(at, &own);
    join(header, &blocks)
}

/// `lock` without the entry of `package`: how the test turns a lockfile
/// cargo wrote for an export back into the template.
pub fn without_package(lock: &str, package: &str) -> String {
    let (header, blocks) = split(lock);
    let kept: Vec<&str> = blocks
        .into_iter()
        .filter(|b| block_name(b) != Some(package))
        .collect();
    join(header, &kept)
}

fn own_entry(package: &str, blocks: &[&str]) -> String {
    // Cargo names a dependency with its version only when several versions
    // of it are locked.
    let dependency = |name: &str| {
        let versions: Vec<&str> = blocks
            .iter()
            .filter(|b| block_name(b) == Some(name))
            .filter_map(|b| field(b, "version"))
            .collect();
        match versions.as_slice() {
            [_, _, ..] => format!("{name} {}", versions[versions.len() - 1]),
            _ => name.to_string(),
        }
    };
    format!(
        "{PACKAGE_HEADER}name = \"{package}\"\nversion = \"{PACKAGE_VERSION}\"\ndependencies = [\n \"{}\",\n \"{}\",\n]",
        dependency("tokio"),
        dependency("tollgate-runtime"),
    )
}

/// The text before the first package, and each package block (trimmed).
fn split(lock: &str) -> (&str, Vec<&str>) {
    let mut starts: Vec<usize> = lock
        .match_indices(PACKAGE_HEADER)
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || lock.as_bytes()[i - 1] == b'\n')
        .collect();
    let header = &lock[..starts.first().copied().unwrap_or(lock.len())];
    starts.push(lock.len());
    let blocks = starts
        .windows(2)
        .map(|w| lock[w[0]..w[1]].trim_end())
        .collect();
    (header.trim_end(), blocks)
}

fn join(header: &str, blocks: &[&str]) -> String {
    let mut out = String::from(header);
    for block in blocks {
        out.push_str("\n\n");
        out.push_str(block);
    }
    out.push('\n');
    out
}

fn block_name(block: &str) -> Option<&str> {
    field(block, "name")
}

fn field<'b>(block: &'b str, key: &str) -> Option<&'b str> {
    block.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(" = \"")?;
        value.strip_suffix('"')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = "# header\nversion = 4\n\n[[package]]\nname = \"alpha\"\nversion = \"1.0.0\"\n\n[[package]]\nname = \"tokio\"\nversion = \"1.54.1\"\n\n[[package]]\nname = \"tollgate-runtime\"\nversion = \"0.1.0\"\n";

    #[test]
    fn own_entry_goes_where_cargo_sorts_it_and_comes_out_again() {
        let (header, mut blocks) = split(LOCK);
        let own = own_entry("beta", &blocks);
        blocks.insert(1, &own);
        let rendered = join(header, &blocks);
        assert!(
            rendered
                .contains("name = \"alpha\"\nversion = \"1.0.0\"\n\n[[package]]\nname = \"beta\"")
        );
        assert!(
            rendered.contains(
                " \"tokio\",\n \"tollgate-runtime\",\n]\n\n[[package]]\nname = \"tokio\""
            )
        );
        assert_eq!(without_package(&rendered, "beta"), LOCK);
    }
}
