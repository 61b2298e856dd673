//! Embeds every file of `vendored/` (the runtime crate) in the `tollgate`
//! binary, so `tollgate export` copies the runtime byte for byte even from a
//! `cargo install` copy with no source tree around.
//!
//! Writes `$OUT_DIR/vendored_files.rs`: a sorted slice of
//! `(path relative to vendored/, include_bytes!(absolute path))`, included by
//! `src/export/vendored.rs`.

#[path = "src/export/walk.rs"]
mod walk;

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));

    let walk = match walk::runtime_files(&root, "vendored") {
        Ok(walk) => walk,
        Err(e) => panic!("cannot walk vendored/: {e}"),
    };
    if walk.files.is_empty() {
        panic!("vendored/ has no files: the export would have no runtime to copy");
    }

    // A new, removed or edited file must re-run this script; directories are
    // listed so an added file is noticed too.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/export/walk.rs");
    for dir in &walk.dirs {
        println!("cargo:rerun-if-changed={}", dir.display());
    }

    let mut code = String::from(
        "/// Every file of vendored/: (path relative to vendored/, '/'-separated; bytes), sorted by path.\n\
         pub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for file in &walk.files {
        println!("cargo:rerun-if-changed={}", file.absolute.display());
        let absolute = file
            .absolute
            .to_str()
            .unwrap_or_else(|| panic!("vendored path is not UTF-8: {}", file.absolute.display()));
        writeln!(
            code,
            "    ({:?}, include_bytes!({:?})),",
            file.relative, absolute
        )
        .expect("writing to a String cannot fail");
    }
    code.push_str("];\n");

    let target = out.join("vendored_files.rs");
    // Rewrite only on change, so an unchanged runtime does not rebuild the crate.
    if std::fs::read_to_string(&target).ok().as_deref() != Some(code.as_str()) {
        std::fs::write(&target, code)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", target.display()));
    }
}
