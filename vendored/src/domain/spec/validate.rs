//! Semantic checks on a converted spec: duplicate step ids, unknown tools,
//! template syntax, the names templates read (and that `steps.X` is an
//! earlier step), and malformed `${...}` secret references.
//!
//! Positions come from the marked tree, looked up by path; the source text
//! is never searched. Every check runs, and the error earliest in the file
//! is reported, so the answer does not depend on the order of the checks.

use std::collections::HashMap;

use super::convert::DEFAULT_CONFIDENCE;
use super::marked::{Node, Pos, Seg, Tree};
use super::schema::{Holds, Schema};
use super::{ModelOutput, Spec, SpecError, SpecErrorKind, StepKind, ToolSpec};
use crate::domain::expr;

/// Names every template can read.
const BASE_ROOTS: &[&str] = &["input", "trigger", "steps", "run"];

pub fn check(spec: &Spec, tree: &Tree, origin: &str) -> Result<(), SpecError> {
    let mut checker = Checker {
        spec,
        tree,
        origin,
        errors: Vec::new(),
    };
    checker.step_ids_and_tools();
    checker.tool_templates();
    checker.step_templates();
    checker.guardrails();
    checker.secret_references();
    match checker
        .errors
        .into_iter()
        .min_by_key(|e| (e.line, e.column))
    {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// Who reads a template, for the `steps.X` ordering rule.
#[derive(Clone, Copy)]
enum Reader<'a> {
    Step(usize),
    /// A tool's templates run inside every step that calls it.
    Tool(&'a str),
}

/// Where a template sits and what it may read.
struct Scope<'a> {
    /// `step "refund"` or `tool "issue_refund"`.
    owner: String,
    reader: Reader<'a>,
    /// `args` inside a tool, `output` inside a guardrail.
    extra_root: Option<&'static str>,
}

struct Checker<'a> {
    spec: &'a Spec,
    tree: &'a Tree,
    origin: &'a str,
    errors: Vec<SpecError>,
}

impl<'a> Checker<'a> {
    fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.errors.push(SpecError::at(
            SpecErrorKind::Invalid,
            self.origin,
            pos.line,
            pos.column,
            message,
        ));
    }

    fn node(&self, path: &[Seg<'_>]) -> Option<&'a Node> {
        self.tree.get(path)
    }

    fn step_ids_and_tools(&mut self) {
        let mut first_line: HashMap<&str, usize> = HashMap::new();
        for (i, step) in self.spec.steps.iter().enumerate() {
            let id_pos = self
                .node(&[Seg::Key("steps"), Seg::Index(i), Seg::Key("id")])
                .map(|n| n.pos);
            if let Some(pos) = id_pos {
                match first_line.get(step.id.as_str()) {
                    Some(line) => self.error(
                        pos,
                        format!(
                            "duplicate step id {:?} (first defined at line {line})",
                            step.id
                        ),
                    ),
                    None => {
                        first_line.insert(&step.id, pos.line);
                    }
                }
            }
            if let StepKind::Tool { tool, .. } = &step.kind {
                if !self.spec.tools.contains_key(tool) {
                    let pos = self
                        .node(&[Seg::Key("steps"), Seg::Index(i), Seg::Key("tool")])
                        .map_or(Pos { line: 1, column: 1 }, |n| n.pos);
                    self.error(
                        pos,
                        format!("step {:?} uses unknown tool {tool:?}", step.id),
                    );
                }
            }
        }
    }

    fn tool_templates(&mut self) {
        for name in self.spec.tools.keys() {
            let scope = Scope {
                owner: format!("tool {name:?}"),
                reader: Reader::Tool(name),
                extra_root: Some("args"),
            };
            if let Some(node) = self.node(&[Seg::Key("tools"), Seg::Key(name)]) {
                self.templates_in(node, &ToolSpec::SCHEMA, &scope);
            }
        }
    }

    fn step_templates(&mut self) {
        for (i, step) in self.spec.steps.iter().enumerate() {
            let scope = Scope {
                owner: format!("step {:?}", step.id),
                reader: Reader::Step(i),
                extra_root: None,
            };
            let node = self.node(&[Seg::Key("steps"), Seg::Index(i)]);
            if let (Some(node), Some(schema)) = (node, StepKind::schema(step.kind.key())) {
                self.templates_in(node, schema, &scope);
            }
        }
    }

    /// Check every template under `node`, a mapping of `schema`, in the
    /// order the schema declares its keys (which decides the report when
    /// two errors share a position, as inside an alias).
    fn templates_in(&mut self, node: &'a Node, schema: &Schema, scope: &Scope<'_>) {
        let scope = Scope {
            owner: scope.owner.clone(),
            reader: scope.reader,
            extra_root: schema.extra_root.or(scope.extra_root),
        };
        let scope = &scope;
        for field in schema.fields {
            let Some(value) = node.get(field.key) else {
                continue;
            };
            match field.holds {
                Holds::Value => {}
                Holds::Templates => {
                    for (text, pos) in value.strings() {
                        self.template(text, pos, scope);
                    }
                }
                // Not a mapping (`idempotency: false`, an empty
                // `approval:`): nothing to walk.
                Holds::Mapping(inner) if value.entries().is_some() => {
                    self.templates_in(value, inner, scope);
                }
                Holds::Mapping(_) => {}
            }
        }
    }

    /// A guardrail's default confidence reads `output.confidence`, which a
    /// text output never has: that run would fail at the gate.
    fn guardrails(&mut self) {
        for (i, step) in self.spec.steps.iter().enumerate() {
            let StepKind::Model(model) = &step.kind else {
                continue;
            };
            let Some(guardrail) = &model.guardrail else {
                continue;
            };
            if model.output == ModelOutput::Text && guardrail.confidence == DEFAULT_CONFIDENCE {
                let pos = self
                    .tree
                    .key_pos(&[Seg::Key("steps"), Seg::Index(i)], "guardrail")
                    .unwrap_or(Pos { line: 1, column: 1 });
                self.error(
                    pos,
                    format!(
                        "the guardrail of step {:?} reads output.confidence, but the model's output is text: add output: json to the model, or give the guardrail a confidence expression",
                        step.id
                    ),
                );
            }
        }
    }

    fn template(&mut self, text: &str, pos: Pos, scope: &Scope<'_>) {
        let names = match expr::check(text) {
            Ok(names) => names,
            Err(e) => {
                let detail = e.detail(text);
                self.error(pos, format!("bad template in {}: {detail}", scope.owner));
                return;
            }
        };
        for name in &names {
            let mut parts = name.split('.');
            let root = parts.next().unwrap_or_default();
            if expr::FUNCTIONS.contains(&root) {
                continue;
            }
            if !BASE_ROOTS.contains(&root) && scope.extra_root != Some(root) {
                let message = match root {
                    "args" => format!(
                        "{} reads {name:?}, but args exists only in a tool's definition",
                        scope.owner
                    ),
                    "output" => format!(
                        "{} reads {name:?}, but output exists only in a guardrail's confidence and message",
                        scope.owner
                    ),
                    _ => {
                        let mut available: Vec<&str> = BASE_ROOTS.to_vec();
                        available.extend(scope.extra_root);
                        let near = expr::closest(root, expr::FUNCTIONS)
                            .map(|f| format!("; did you mean the function {f:?}?"))
                            .unwrap_or_default();
                        format!(
                            "{} reads {name:?}: unknown name {root:?} (available here: {}{near})",
                            scope.owner,
                            available.join(", ")
                        )
                    }
                };
                self.error(pos, message);
                continue;
            }
            if root == "steps" {
                if let Some(target) = parts.next() {
                    self.step_reference(target, pos, scope);
                }
            }
        }
    }

    fn step_reference(&mut self, target: &str, pos: Pos, scope: &Scope<'_>) {
        let Some(j) = self.spec.step_index(target) else {
            self.error(
                pos,
                format!("{} refers to unknown step {target:?}", scope.owner),
            );
            return;
        };
        match scope.reader {
            Reader::Step(i) if j == i => self.error(
                pos,
                format!(
                    "{} refers to itself (steps.{target}): a step reads only the outputs of earlier steps",
                    scope.owner
                ),
            ),
            Reader::Step(i) if j > i => self.error(
                pos,
                format!("{} refers to step {target:?}, which runs later", scope.owner),
            ),
            Reader::Step(_) => {}
            Reader::Tool(tool) => {
                let caller = self.spec.steps.iter().enumerate().find(|(i, s)| {
                    matches!(&s.kind, StepKind::Tool { tool: t, .. } if t == tool) && j >= *i
                });
                if let Some((_, caller)) = caller {
                    let message = format!(
                        "{} refers to step {target:?}, which does not run before step {:?} that calls the tool",
                        scope.owner, caller.id
                    );
                    self.error(pos, message);
                }
            }
        }
    }

    /// `${NAME}` is resolved only at call time, so a typo in a reference would
    /// otherwise go out as literal text. Mirrors `secrets::references`.
    fn secret_references(&mut self) {
        let tree = self.tree;
        for (text, pos) in tree.root.strings() {
            if let Some(problem) = malformed_secret_reference(text) {
                self.error(pos, problem);
            }
        }
    }
}

fn malformed_secret_reference(text: &str) -> Option<String> {
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            // `$$` is an escaped `$`.
            rest = tail;
            continue;
        }
        let Some(inner_and_more) = after.strip_prefix('{') else {
            rest = after;
            continue;
        };
        if inner_and_more.starts_with('{') {
            // `${{ amount }}`: a dollar sign before a template, not a reference.
            rest = inner_and_more;
            continue;
        }
        let Some(close) = inner_and_more.find('}') else {
            let shown: String = rest[at..].chars().take(40).collect();
            return Some(format!(
                "unclosed secret reference {shown:?}: write ${{NAME}} (or $${{ for a literal \"${{\")"
            ));
        };
        let inner = &inner_and_more[..close];
        let name = inner.split_once(":-").map_or(inner, |(n, _)| n);
        if !crate::support::secrets::is_valid_name(name) {
            return Some(format!(
                "malformed secret reference \"${{{inner}}}\": a name starts with a letter or '_' followed by letters, digits or '_' (write $${{ for a literal \"${{\")"
            ));
        }
        rest = &inner_and_more[close + 1..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::malformed_secret_reference as bad;

    #[test]
    fn finds_malformed_secret_references() {
        assert_eq!(bad("Bearer ${SHOP_TOKEN} ${REGION:-eu} $5 $${NOT}"), None);
        assert!(bad("${}").unwrap().contains("\"${}\""));
        assert!(bad("x ${1X} y").unwrap().contains("\"${1X}\""));
        assert!(bad("${A-B}").is_some());
        assert!(bad("${OPEN").unwrap().starts_with("unclosed"));
        assert_eq!(bad("price: $ 5, {x}"), None);
        assert_eq!(bad("Refund ${{ steps.assess.output.amount }}?"), None);
    }
}
