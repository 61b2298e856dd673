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

/// UpperCamelCase of a tool name (`score_risk` -> `ScoreRisk`). Tool names are
/// `[a-z_][a-z0-9_]*`; a name that would not make a type of its own (`_`,
/// `_1`, `self`) gets a `Tool` prefix.
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
    if camel.is_empty() || camel == "Self" || camel.starts_with(|c: char| c.is_ascii_digit()) {
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
    fn type_names_are_upper_camel_case() {
        assert_eq!(type_name("score_risk"), "ScoreRisk");
        assert_eq!(type_name("_private_tool"), "PrivateTool");
        assert_eq!(type_name("v2_api"), "V2Api");
        assert_eq!(type_name("_1"), "Tool1");
        assert_eq!(type_name("self"), "ToolSelf");
        assert!(type_names(["a_b", "a__b"]).is_err());
    }
}
