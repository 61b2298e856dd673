//! Upgrading a tool file of yours written by an export older than the
//! generated tool registry.
//!
//! Such a file (`src/tools/NAME.rs`) has the tool's type and `fn new()`,
//! and src/main.rs registered it by hand (`.tool("NAME", tools::Type::new())`).
//! The registry now calls the file's `tool` function, so a re-export gives
//! the file one: appended, building the value as main.rs did, rather than
//! three-way merged from the new template, whose changes (imports, the
//! constructor replacing `new`) fall on the lines users edit most and would
//! conflict. An append never conflicts, and leaves the user's code as it was.
//! main.rs needs nothing of the kind: its `.tool(...)` lines are the last
//! export's, so the ordinary three-way merge replaces them by the call to
//! the registry unless they were edited (then it is a conflict to resolve).

/// Whether `text` defines the `tool` function the generated registry calls
/// (any visibility, generic or not).
pub fn has_constructor(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix("pub") else {
            return false;
        };
        let rest = match rest.strip_prefix('(') {
            Some(restricted) => restricted.split_once(')').map_or("", |(_, r)| r),
            None => rest,
        };
        let rest = rest.trim_start();
        rest.starts_with("fn tool(") || rest.starts_with("fn tool<")
    })
}

/// The tool file at `path` (`src/tools/NAME.rs`, not the generated
/// `mod.rs`), as an older export left it and you edited it, with the
/// constructor appended; None when it needs none (it has one) or is not a
/// tool file, or no type implementing `CustomTool` is found in it (then
/// `cargo build` names the missing `tool` function).
pub fn add_constructor(path: &str, yours: &[u8]) -> Option<Vec<u8>> {
    let file = path.strip_prefix("src/tools/")?;
    let stem = file.strip_suffix(".rs")?;
    if stem == "mod" || stem.contains('/') {
        return None;
    }
    let name = if stem == "mod_" { "mod" } else { stem };
    let text = std::str::from_utf8(yours).ok()?;
    if has_constructor(text) {
        return None;
    }
    let ty = tool_type(text)?;
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let shim = format!(
        "\n\
         /// Builds the `{name}` tool for the generated registry (src/tools/mod.rs),\n\
         /// as src/main.rs did before exports registered their tools: added by\n\
         /// `tollgate export`. Read the tool's configuration here, from `env`\n\
         /// (`env.var(\"NAME\")`, `env.secret(\"NAME\")`), if `{ty}::new` needs any.\n\
         pub fn tool(\n    \
             _env: &tollgate_runtime::tools::ToolEnv,\n\
         ) -> Result<{ty}, tollgate_runtime::tools::ToolError> {{\n    \
             Ok({ty}::new())\n\
         }}\n"
    )
    .replace('\n', newline);
    let mut out = text.to_string();
    if !out.ends_with('\n') {
        out.push_str(newline);
    }
    out.push_str(&shim);
    Some(out.into_bytes())
}

/// The type of `impl CustomTool for Type` (or `impl ...::CustomTool for Type`).
fn tool_type(text: &str) -> Option<&str> {
    text.lines().find_map(|line| {
        let (_, after) = line.split_once("CustomTool for ")?;
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        (end > 0 && line.trim_start().starts_with("impl")).then(|| &after[..end])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool file as exports before the registry wrote it, implemented.
    const OLD: &str = "use tollgate_runtime::tools::{CallContext, CustomTool, ToolError};\n\n\
        pub struct ScoreRisk {}\n\n\
        impl ScoreRisk {\n    pub fn new() -> ScoreRisk {\n        ScoreRisk {}\n    }\n}\n\n\
        #[tollgate_runtime::async_trait]\n\
        impl CustomTool for ScoreRisk {\n}\n";

    #[test]
    fn a_file_without_a_constructor_gets_one_appended_building_its_type() {
        let upgraded = add_constructor("src/tools/score_risk.rs", OLD.as_bytes()).unwrap();
        let upgraded = String::from_utf8(upgraded).unwrap();
        assert!(upgraded.starts_with(OLD), "your code stays as it was");
        assert!(
            upgraded.ends_with(
                ") -> Result<ScoreRisk, tollgate_runtime::tools::ToolError> {\n    Ok(ScoreRisk::new())\n}\n"
            ),
            "{upgraded}"
        );
        assert!(upgraded.contains("/// Builds the `score_risk` tool"));
        assert!(has_constructor(&upgraded));
        // Once is enough: upgraded again, nothing changes.
        assert_eq!(
            add_constructor("src/tools/score_risk.rs", upgraded.as_bytes()),
            None
        );
    }

    #[test]
    fn only_tool_files_without_a_constructor_and_with_a_tool_type_are_upgraded() {
        assert_eq!(add_constructor("src/tools/mod.rs", OLD.as_bytes()), None);
        assert_eq!(add_constructor("src/main.rs", OLD.as_bytes()), None);
        assert_eq!(
            add_constructor("src/tools/x.rs", b"pub struct X {}\n"),
            None
        );
        let named_mod = add_constructor("src/tools/mod_.rs", OLD.as_bytes()).unwrap();
        assert!(
            String::from_utf8(named_mod)
                .unwrap()
                .contains("the `mod` tool")
        );
        for defined in [
            "pub fn tool(env: &ToolEnv) -> Result<X, ToolError> {",
            "  pub(crate) fn tool(_: &ToolEnv) -> Result<impl CustomTool, ToolError> {",
            "pub fn tool<'a>(env: &'a ToolEnv) -> Result<X, ToolError> {",
        ] {
            assert!(has_constructor(defined), "{defined}");
        }
        assert!(!has_constructor("pub fn tools(env: &ToolEnv) {"));
        assert!(!has_constructor("// pub fn tool(env)"));
    }

    #[test]
    fn a_crlf_file_gets_a_crlf_constructor() {
        let crlf = OLD.replace('\n', "\r\n");
        let upgraded = add_constructor("src/tools/score_risk.rs", crlf.as_bytes()).unwrap();
        let upgraded = String::from_utf8(upgraded).unwrap();
        assert!(!upgraded.replace("\r\n", "").contains('\n'), "{upgraded:?}");
    }
}
