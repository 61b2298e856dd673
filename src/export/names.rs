//! Rust and Cargo names derived from the spec.

use std::collections::BTreeMap;

use super::ExportError;

/// Names Cargo refuses for a package or binary, or that would shadow a crate
/// every program links. Agent ids are lowercase letters, digits and '-', so
/// only these whole words can clash.
const RESERVED: &[&str] = &[
    "abstract",
    "alloc",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "build",
    "const",
    "continue",
    "core",
    "crate",
    "deps",
    "do",
    "dyn",
    "else",
    "enum",
    "examples",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "incremental",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "proc-macro",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "std",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
];

/// The exported package (and binary) name: the agent id, unless Cargo would
/// refuse it (a leading digit, a reserved word) or it is the name of a crate
/// the export depends on; then `tollgate-<agent>`.
pub fn package_name(agent: &str, is_dependency: impl Fn(&str) -> bool) -> String {
    let starts_with_letter = agent.starts_with(|c: char| c.is_ascii_lowercase());
    if starts_with_letter && !RESERVED.contains(&agent) && !is_dependency(agent) {
        agent.to_string()
    } else {
        format!("tollgate-{agent}")
    }
}

/// Type names a tool's type must not take: `src/tools/NAME.rs` declares
/// the tool's type next to what it imports, and next to the prelude its
/// code (and `#[async_trait]`'s expansion: `Box::pin`) relies on. A tool
/// named `result` or `value` must not shadow `Result` or `Value` there.
/// `Self` is a keyword.
pub const RESERVED_TYPE_NAMES: &[&str] = &[
    // What templates/tool.rs imports.
    "Value",
    "CallContext",
    "CustomTool",
    "ToolEnv",
    "ToolError",
    // The Rust 2024 prelude (std::prelude::rust_2024), types, traits and
    // variants alike: a unit struct named like a variant shadows it too.
    "AsMut",
    "AsRef",
    "AsyncFn",
    "AsyncFnMut",
    "AsyncFnOnce",
    "Box",
    "Clone",
    "Copy",
    "Default",
    "DoubleEndedIterator",
    "Drop",
    "Eq",
    "Err",
    "ExactSizeIterator",
    "Extend",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "FromIterator",
    "Future",
    "Into",
    "IntoFuture",
    "IntoIterator",
    "Iterator",
    "None",
    "Ok",
    "Option",
    "Ord",
    "PartialEq",
    "PartialOrd",
    "Result",
    "Send",
    "Sized",
    "Some",
    "String",
    "Sync",
    "ToOwned",
    "ToString",
    "TryFrom",
    "TryInto",
    "Unpin",
    "Vec",
    "Self",
];

/// UpperCamelCase of a tool name (`score_risk` -> `ScoreRisk`). Tool names are
/// `[a-z_][a-z0-9_]*`; a name that would not make a type of its own (`_`,
/// `_1`) or would clash with a name the generated code uses
/// ([`RESERVED_TYPE_NAMES`]: `self`, `result`, `value`, ...) gets a `Tool`
/// prefix, which no reserved name has.
pub fn type_name(tool: &str) -> String {
    let camel: String = tool
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect();
    if camel.is_empty()
        || RESERVED_TYPE_NAMES.contains(&camel.as_str())
        || camel.starts_with(|c: char| c.is_ascii_digit())
    {
        format!("Tool{camel}")
    } else {
        camel
    }
}

/// The type name of every `rust:` tool, refusing two tools that map to one
/// type (`a_b` and `a__b`).
pub fn type_names<'a>(
    tools: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeMap<&'a str, String>, ExportError> {
    let mut by_type: BTreeMap<String, &str> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for tool in tools {
        let ty = type_name(tool);
        if let Some(first) = by_type.insert(ty.clone(), tool) {
            return Err(ExportError::ToolTypeClash {
                first: first.to_string(),
                second: tool.to_string(),
                type_name: ty,
            });
        }
        out.insert(tool, ty);
    }
    Ok(out)
}

/// Rust's strict and reserved keywords (edition 2024): a tool named like
/// one needs a raw identifier (`r#type`) as its module name.
const KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "try", "type", "typeof",
    "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Keywords that cannot be raw identifiers, and `_`, which is no name.
const NOT_RAW: &[&str] = &["crate", "self", "super", "_"];

/// The module `src/tools/mod.rs` declares for a tool, and its file's name
/// in `src/tools/`: the tool's name, as a raw identifier for a keyword
/// (`r#type`, whose file is still `type.rs`), or, for the names no
/// identifier can spell (`self`, `super`, `crate`, `_`), `tool_<name>` with a
/// `#[path]` to the file. A tool named `mod` keeps `r#mod` but its file is
/// `mod_.rs`: `mod.rs` is the module that declares the others. No two tools
/// share a module or a file: they would share a type name too, which
/// [`type_names`] refuses (`mod` and `mod_` are both `Mod`).
pub fn tool_module(tool: &str) -> ToolModule {
    let (ident, file) = if NOT_RAW.contains(&tool) {
        (format!("tool_{tool}"), format!("{tool}.rs"))
    } else if tool == "mod" {
        ("r#mod".to_string(), "mod_.rs".to_string())
    } else if KEYWORDS.contains(&tool) {
        (format!("r#{tool}"), format!("{tool}.rs"))
    } else {
        (tool.to_string(), format!("{tool}.rs"))
    };
    ToolModule { ident, file }
}

/// See [`tool_module`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolModule {
    /// The module's name, `r#` included for a raw identifier.
    pub ident: String,
    /// The file's name in `src/tools/`.
    pub file: String,
}

impl ToolModule {
    /// The `#[path]` the declaration needs: when the file is not the one
    /// rustc would look for.
    pub fn path_attr(&self) -> Option<&str> {
        let plain = self.ident.strip_prefix("r#").unwrap_or(&self.ident);
        (self.file != format!("{plain}.rs")).then_some(self.file.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names() {
        assert_eq!(package_name("refund-desk", |_| false), "refund-desk");
        assert_eq!(package_name("7eleven", |_| false), "tollgate-7eleven");
        assert_eq!(package_name("test", |_| false), "tollgate-test");
        assert_eq!(package_name("tokio", |n| n == "tokio"), "tollgate-tokio");
    }

    #[test]
    fn tool_modules_spell_every_tool_name() {
        let cases = [
            ("score_risk", "score_risk", "score_risk.rs", None),
            ("type", "r#type", "type.rs", None),
            ("union", "union", "union.rs", None),
            ("self", "tool_self", "self.rs", Some("self.rs")),
            ("_", "tool__", "_.rs", Some("_.rs")),
            ("_1", "_1", "_1.rs", None),
            ("mod", "r#mod", "mod_.rs", Some("mod_.rs")),
        ];
        for (tool, ident, file, path) in cases {
            let module = tool_module(tool);
            assert_eq!((module.ident.as_str(), module.file.as_str()), (ident, file));
            assert_eq!(module.path_attr(), path, "{tool}");
        }
        assert!(
            type_names(["mod", "mod_"]).is_err(),
            "they would share mod_.rs"
        );
    }

    #[test]
    fn type_names_are_upper_camel_case() {
        assert_eq!(type_name("score_risk"), "ScoreRisk");
        assert_eq!(type_name("_private_tool"), "PrivateTool");
        assert_eq!(type_name("v2_api"), "V2Api");
        assert_eq!(type_name("_1"), "Tool1");
        assert_eq!(type_name("self"), "ToolSelf");
        assert_eq!(type_name("result"), "ToolResult");
        assert_eq!(type_name("value"), "ToolValue");
        assert_eq!(type_name("tool_error"), "ToolToolError");
        assert_eq!(type_name("type"), "Type");
        for reserved in RESERVED_TYPE_NAMES {
            let prefixed = format!("Tool{reserved}");
            assert!(
                !RESERVED_TYPE_NAMES.contains(&prefixed.as_str()),
                "the prefix must lead out of the reserved names: {prefixed}"
            );
        }
        assert!(type_names(["a_b", "a__b"]).is_err());
    }
}
