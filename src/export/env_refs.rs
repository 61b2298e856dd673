//! Every `${NAME}` the spec references, with the YAML path of each use, for
//! `.env.example` and the README.

use std::collections::BTreeMap;

use serde_json::Value;
use tollgate_runtime::Spec;
use tollgate_runtime::secrets;

/// One environment variable and where the spec reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    pub name: String,
    /// YAML paths such as `tools.lookup_order.http.headers.Authorization`, in
    /// document order.
    pub used_at: Vec<String>,
    /// The `${NAME:-default}` fallback, when every use has the same one.
    pub default: Option<String>,
}

/// Sorted by name.
pub fn env_vars(spec: &Spec) -> Vec<EnvVar> {
    let mut uses: BTreeMap<String, Vec<(String, Option<String>)>> = BTreeMap::new();
    walk(&spec.document, &mut String::new(), &mut uses);
    uses.into_iter()
        .map(|(name, found)| {
            let first_default = found[0].1.clone();
            let default =
                first_default.filter(|d| found.iter().all(|(_, e)| e.as_ref() == Some(d)));
            let mut used_at: Vec<String> = Vec::new();
            for (path, _) in found {
                if !used_at.contains(&path) {
                    used_at.push(path);
                }
            }
            EnvVar {
                name,
                used_at,
                default,
            }
        })
        .collect()
}

fn walk(
    value: &Value,
    path: &mut String,
    out: &mut BTreeMap<String, Vec<(String, Option<String>)>>,
) {
    match value {
        Value::String(text) => {
            for r in secrets::references(text) {
                out.entry(r.name.to_string())
                    .or_default()
                    .push((path.clone(), r.default.map(str::to_string)));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, path, out);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&path_key(key));
                walk(item, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// A key as it reads in a dotted path; quoted when it would be ambiguous.
fn path_key(key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_defaults() {
        let spec = Spec::parse(
            r#"
version: 1
agent: a
tools:
  t:
    http:
      url: "https://x/${HOST:-example.org}/a"
      headers: { Authorization: "Bearer ${TOKEN}", "X.Key": "${TOKEN}" }
steps:
  - id: s
    tool: t
"#,
            "spec.yaml",
        )
        .unwrap();
        let vars = env_vars(&spec);
        assert_eq!(
            vars,
            vec![
                EnvVar {
                    name: "HOST".into(),
                    used_at: vec!["tools.t.http.url".into()],
                    default: Some("example.org".into()),
                },
                EnvVar {
                    name: "TOKEN".into(),
                    used_at: vec![
                        "tools.t.http.headers.Authorization".into(),
                        "tools.t.http.headers.\"X.Key\"".into()
                    ],
                    default: None,
                },
            ]
        );
    }
}
