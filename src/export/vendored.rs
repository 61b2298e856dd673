//! The runtime crate (`vendored/`), embedded in the binary by `build.rs`.

include!(concat!(env!("OUT_DIR"), "/vendored_files.rs"));

/// The embedded `vendored/Cargo.toml`.
pub fn cargo_toml() -> &'static str {
    FILES
        .iter()
        .find(|(path, _)| *path == "Cargo.toml")
        .and_then(|(_, bytes)| std::str::from_utf8(bytes).ok())
        .unwrap_or_default()
}

/// The runtime's `rust-version`, so the export declares the same minimum.
pub fn rust_version() -> Option<&'static str> {
    cargo_toml().lines().find_map(|line| {
        let value = line.strip_prefix("rust-version")?.trim_start();
        value
            .strip_prefix('=')?
            .trim()
            .strip_prefix('"')?
            .strip_suffix('"')
    })
}
