//! Every `${NAME}` the spec references, with the YAML path of each use, for
//! `.env.example` and the README.

use std::collections::BTreeMap;

use tollgate_runtime::Spec;
use tollgate_runtime::spec::SecretUse;

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
    let mut uses: BTreeMap<String, Vec<SecretUse>> = BTreeMap::new();
    for found in spec.secret_uses() {
        uses.entry(found.name.clone()).or_default().push(found);
    }
    uses.into_iter()
        .map(|(name, found)| {
            let first_default = found[0].default.clone();
            let default =
                first_default.filter(|d| found.iter().all(|u| u.default.as_ref() == Some(d)));
            let mut used_at: Vec<String> = Vec::new();
            for SecretUse { at, .. } in found {
                if !used_at.contains(&at) {
                    used_at.push(at);
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
