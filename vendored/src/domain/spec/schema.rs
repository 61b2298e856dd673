//! The keys of each spec mapping, declared once.
//!
//! Every typed struct in `spec.rs` that a YAML mapping turns into carries a
//! `SCHEMA` next to its fields: the keys the mapping may have, in the order
//! messages list them, and what each key holds. The converter checks keys
//! against it (the "allowed: ..." list of an unknown-key error comes from
//! here), and the semantic checks walk it to find every template, so a new
//! key is one line in one table, not three edits in three files.
//!
//! The reading itself stays hand-written (convert.rs): it names places in
//! spec terms, which a derived deserializer cannot.

/// One mapping's keys.
#[derive(Debug)]
pub(crate) struct Schema {
    pub fields: &'static [Field],
    /// A name templates under this mapping may read besides the base roots
    /// (`output` inside a guardrail).
    pub extra_root: Option<&'static str>,
}

#[derive(Debug)]
pub(crate) struct Field {
    pub key: &'static str,
    pub holds: Holds,
}

/// What a key's value holds, as far as the template checks care.
#[derive(Debug)]
pub(crate) enum Holds {
    /// Plain data: no templates under it.
    Value,
    /// Every string under it is a template.
    Templates,
    /// A mapping with keys of its own (walked when the value is a mapping;
    /// `idempotency: false` or an empty `approval:` are not).
    Mapping(&'static Schema),
}

impl Schema {
    pub const fn new(fields: &'static [Field]) -> Schema {
        Schema {
            fields,
            extra_root: None,
        }
    }

    pub const fn reading(extra_root: &'static str, fields: &'static [Field]) -> Schema {
        Schema {
            fields,
            extra_root: Some(extra_root),
        }
    }

    pub fn allows(&self, key: &str) -> bool {
        self.fields.iter().any(|f| f.key == key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.fields.iter().map(|f| f.key)
    }

    /// `version, agent, description, ...` for an unknown-key message.
    pub fn allowed(&self) -> String {
        self.keys().collect::<Vec<_>>().join(", ")
    }
}

/// A key holding plain data.
pub(crate) const fn value(key: &'static str) -> Field {
    Field {
        key,
        holds: Holds::Value,
    }
}

/// A key whose strings are all templates.
pub(crate) const fn template(key: &'static str) -> Field {
    Field {
        key,
        holds: Holds::Templates,
    }
}

/// A key holding a mapping with its own schema.
pub(crate) const fn mapping(key: &'static str, schema: &'static Schema) -> Field {
    Field {
        key,
        holds: Holds::Mapping(schema),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Spec, StepKind, ToolSpec};
    use super::*;

    /// Every template-bearing path, as the checks find them: derived from
    /// the tables, so this list changes exactly when a table does.
    fn template_paths(schema: &Schema, prefix: &str, out: &mut Vec<String>) {
        for f in schema.fields {
            let path = format!("{prefix}.{}", f.key);
            match f.holds {
                Holds::Value => {}
                Holds::Templates => {
                    let root = schema
                        .extra_root
                        .map_or(String::new(), |r| format!(" (+{r})"));
                    out.push(format!("{path}{root}"));
                }
                Holds::Mapping(inner) => template_paths(inner, &path, out),
            }
        }
    }

    #[test]
    fn the_template_paths_are_the_ones_the_checks_always_read() {
        let mut paths = Vec::new();
        template_paths(&ToolSpec::SCHEMA, "tools.NAME", &mut paths);
        for (kind, schema) in StepKind::SCHEMAS {
            template_paths(schema, &format!("steps[{kind}]"), &mut paths);
        }
        assert_eq!(
            paths,
            [
                "tools.NAME.http.url",
                "tools.NAME.http.headers",
                "tools.NAME.http.query",
                "tools.NAME.http.json",
                "tools.NAME.http.body",
                "tools.NAME.approval.when",
                "tools.NAME.approval.message",
                "tools.NAME.message",
                "steps[tool].with",
                "steps[model].model.prompt",
                "steps[model].model.system",
                "steps[model].guardrail.confidence (+output)",
                "steps[model].guardrail.message (+output)",
                "steps[approval].approval.message",
                "steps[approval].approval.payload",
                "steps[if].if",
                "steps[if].message",
                "steps[if].payload",
                "steps[dedupe].dedupe.key",
                "steps[set].set",
            ]
        );
    }

    fn all(schema: &'static Schema, out: &mut Vec<&'static Schema>) {
        out.push(schema);
        for f in schema.fields {
            if let Holds::Mapping(inner) = f.holds {
                all(inner, out);
            }
        }
    }

    #[test]
    fn keys_are_unique_and_each_step_schema_has_its_kind_and_an_id() {
        let mut schemas = Vec::new();
        all(&Spec::SCHEMA, &mut schemas);
        all(&ToolSpec::SCHEMA, &mut schemas);
        for (kind, schema) in StepKind::SCHEMAS {
            assert!(schema.allows(kind), "{kind}");
            assert!(schema.allows("id"), "{kind}");
            all(schema, &mut schemas);
        }
        for schema in schemas {
            let keys: Vec<_> = schema.keys().collect();
            let mut unique = keys.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(keys.len(), unique.len(), "{keys:?}");
        }
    }
}
