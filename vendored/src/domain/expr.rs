//! Expressions and templates, on minijinja.
//!
//! A string that is exactly one `{{ expr }}` keeps the value's JSON type
//! (number, bool, object); any other string with `{{`/`{%` renders to text;
//! a string without either is a literal. Undefined names are errors, so a
//! typo fails loudly instead of sending an empty value to a payment API.
//!
//! `${NAME}` secret references are plain text to minijinja: they are never
//! resolved here, so no secret can enter an expression context or an output.
//!
//! minijinja's parser, compiler and renderer recurse: a left-deep chain such
//! as `1 + 1 + ... + 1` is as deep as it is long, and rendering a value is
//! as deep as the value. So every template is scanned before minijinja sees
//! it (size, tokens per expression, bracket nesting, tags), and every
//! evaluation checks how deep its data is: at these limits the deepest
//! recursion stays far below a 2 MiB thread stack, so neither `validate` nor
//! a server's worker thread can overflow.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use minijinja::{Environment, UndefinedBehavior};
use serde_json::{Map, Value};
use thiserror::Error;

use crate::support::json_doc::JsonDoc;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct ExprError {
    pub message: String,
}

impl ExprError {
    fn from_minijinja(template: &str, err: &minijinja::Error) -> ExprError {
        if err.kind() == minijinja::ErrorKind::OutOfFuel {
            return ExprError::new(
                template,
                format!(
                    "the template ran more than {MAX_INSTRUCTIONS} instructions, the limit for one evaluation (a loop over too many items?)"
                ),
            );
        }
        let mut detail = err.kind().to_string();
        if let Some(more) = err.detail() {
            detail.push_str(": ");
            detail.push_str(more);
        }
        ExprError::new(template, detail)
    }

    fn new(template: &str, detail: impl std::fmt::Display) -> ExprError {
        ExprError {
            message: format!("{}{detail}", prefix(template)),
        }
    }

    /// The message without its `in "TEMPLATE": ` prefix.
    pub fn detail(&self, template: &str) -> &str {
        let prefix = prefix(template);
        self.message.strip_prefix(&prefix).unwrap_or(&self.message)
    }
}

/// `in "TEMPLATE": `, the template cut short: a message must stay readable
/// when the template is 60 KB.
fn prefix(template: &str) -> String {
    const SHOWN: usize = 120;
    if template.len() <= SHOWN {
        return format!("in {template:?}: ");
    }
    let mut end = SHOWN;
    while !template.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "in {:?}: ",
        format!("{}... ({} bytes)", &template[..end], template.len())
    )
}

/// The most bytes one template string may have.
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;
/// The most tokens (names, literals, operators, brackets) one `{{ }}` or
/// `{% %}` may hold. Real expressions have a few dozen.
pub const MAX_EXPRESSION_TOKENS: usize = 500;
/// The deepest `(`, `[` and `{` may nest inside one expression.
pub const MAX_EXPRESSION_NESTING: usize = 32;
/// The most `{% %}` tags one template may hold: an `elif` chain nests in
/// minijinja's parser, and 500 of them is near what a 2 MiB stack holds.
pub const MAX_TEMPLATE_TAGS: usize = 250;
/// The deepest the result of an expression may nest (objects and arrays):
/// results are stored (step outputs, tool arguments, payloads) and wrapped
/// again there, so they are held to the limit of anything from outside a
/// run ([`crate::support::json_depth::MAX_JSON_DEPTH`]).
pub const MAX_DATA_DEPTH: usize = crate::support::json_depth::MAX_JSON_DEPTH;
/// The deepest the data an expression reads may nest, counted from the
/// context's root: anything a store can hold
/// ([`crate::support::json_depth::READABLE_DEPTH`]) under the context's own levels
/// (the root, then `steps.<id>.output` puts a stored output two levels
/// deeper than the `outputs` map it is stored in). Deeper cannot come from
/// a run; the bound keeps minijinja's recursion far from the stack's end.
pub const MAX_CONTEXT_DEPTH: usize = crate::support::json_depth::READABLE_DEPTH + 3;
/// How deep macros and recursive loops may call themselves.
const MAX_RECURSION: usize = 64;
/// The most instructions one evaluation may run. A loop over 100,000 items
/// with a few operations each fits; nested `range()` loops, which would keep
/// a step busy for hours, do not. Running out fails the step, like any other
/// expression error.
pub const MAX_INSTRUCTIONS: u64 = 5_000_000;

/// Declares a table of minijinja builtins once: the name list validation
/// checks against, and the registration the runtime uses, from one source.
macro_rules! registry {
    ($(#[$doc:meta])* $names:ident, $register:ident, $add:ident { $($name:literal => $f:expr),* $(,)? }) => {
        $(#[$doc])*
        pub const $names: &[&str] = &[$($name),*];
        fn $register(env: &mut Environment<'static>) {
            $(env.$add($name, $f);)*
        }
    };
}

registry!(
    /// Every filter a template may use (minijinja's builtins and `fromjson`).
    FILTERS, add_filters, add_filter {
    "safe" => minijinja::filters::safe,
    "escape" => minijinja::filters::escape,
    "e" => minijinja::filters::escape,
    "lower" => minijinja::filters::lower,
    "upper" => minijinja::filters::upper,
    "title" => minijinja::filters::title,
    "capitalize" => minijinja::filters::capitalize,
    "replace" => minijinja::filters::replace,
    "length" => minijinja::filters::length,
    "count" => minijinja::filters::length,
    "dictsort" => minijinja::filters::dictsort,
    "items" => minijinja::filters::items,
    "reverse" => minijinja::filters::reverse,
    "trim" => minijinja::filters::trim,
    "join" => minijinja::filters::join,
    "split" => minijinja::filters::split,
    "lines" => minijinja::filters::lines,
    "default" => minijinja::filters::default,
    "d" => minijinja::filters::default,
    "round" => minijinja::filters::round,
    "abs" => minijinja::filters::abs,
    "int" => minijinja::filters::int,
    "float" => minijinja::filters::float,
    "attr" => minijinja::filters::attr,
    "first" => minijinja::filters::first,
    "last" => minijinja::filters::last,
    "min" => minijinja::filters::min,
    "max" => minijinja::filters::max,
    "sort" => minijinja::filters::sort,
    "list" => minijinja::filters::list,
    "string" => minijinja::filters::string,
    "bool" => minijinja::filters::bool,
    "batch" => minijinja::filters::batch,
    "slice" => minijinja::filters::slice,
    "sum" => minijinja::filters::sum,
    "indent" => minijinja::filters::indent,
    "select" => minijinja::filters::select,
    "reject" => minijinja::filters::reject,
    "selectattr" => minijinja::filters::selectattr,
    "rejectattr" => minijinja::filters::rejectattr,
    "map" => minijinja::filters::map,
    "groupby" => minijinja::filters::groupby,
    "unique" => minijinja::filters::unique,
    "chain" => minijinja::filters::chain,
    "zip" => minijinja::filters::zip,
    "pprint" => minijinja::filters::pprint,
    "format" => minijinja::filters::format,
    "tojson" => minijinja::filters::tojson,
    "fromjson" => fromjson,
});

registry!(
    /// Every test a template may use after `is`.
    TESTS, add_tests, add_test {
    "undefined" => minijinja::tests::is_undefined,
    "defined" => minijinja::tests::is_defined,
    "none" => minijinja::tests::is_none,
    "safe" => minijinja::tests::is_safe,
    "escaped" => minijinja::tests::is_safe,
    "boolean" => minijinja::tests::is_boolean,
    "odd" => minijinja::tests::is_odd,
    "even" => minijinja::tests::is_even,
    "divisibleby" => minijinja::tests::is_divisibleby,
    "number" => minijinja::tests::is_number,
    "integer" => minijinja::tests::is_integer,
    "int" => minijinja::tests::is_integer,
    "float" => minijinja::tests::is_float,
    "string" => minijinja::tests::is_string,
    "sequence" => minijinja::tests::is_sequence,
    "iterable" => minijinja::tests::is_iterable,
    "mapping" => minijinja::tests::is_mapping,
    "startingwith" => minijinja::tests::is_startingwith,
    "endingwith" => minijinja::tests::is_endingwith,
    "lower" => minijinja::tests::is_lower,
    "upper" => minijinja::tests::is_upper,
    "sameas" => minijinja::tests::is_sameas,
    "eq" => minijinja::tests::is_eq,
    "equalto" => minijinja::tests::is_eq,
    "==" => minijinja::tests::is_eq,
    "ne" => minijinja::tests::is_ne,
    "!=" => minijinja::tests::is_ne,
    "lt" => minijinja::tests::is_lt,
    "lessthan" => minijinja::tests::is_lt,
    "<" => minijinja::tests::is_lt,
    "le" => minijinja::tests::is_le,
    "<=" => minijinja::tests::is_le,
    "gt" => minijinja::tests::is_gt,
    "greaterthan" => minijinja::tests::is_gt,
    ">" => minijinja::tests::is_gt,
    "ge" => minijinja::tests::is_ge,
    ">=" => minijinja::tests::is_ge,
    "in" => minijinja::tests::is_in,
    "true" => minijinja::tests::is_true,
    "false" => minijinja::tests::is_false,
    "filter" => minijinja::tests::is_filter,
    "test" => minijinja::tests::is_test,
});

registry!(
    /// Every global function a template may call. Not `namespace()`: it is
    /// the one way for a loop to carry a value from one pass to the next,
    /// so `{% set ns.v = [ns.v] %}` could build data of any depth, and
    /// dropping or printing it would overflow the stack.
    FUNCTIONS, add_functions, add_function {
    "range" => minijinja::functions::range,
    "dict" => minijinja::functions::dict,
    "debug" => minijinja::functions::debug,
});

/// The shared environment: strict undefined, no auto-escaping (outputs are
/// JSON and HTTP payloads, not HTML), exactly the filters, tests and
/// functions declared above, and a recursion limit a 2 MiB stack can hold.
pub fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::empty();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_keep_trailing_newline(true);
        env.set_recursion_limit(MAX_RECURSION);
        env.set_fuel(Some(MAX_INSTRUCTIONS));
        add_filters(&mut env);
        add_tests(&mut env);
        add_functions(&mut env);
        env
    })
}

fn fromjson(text: &str) -> Result<minijinja::Value, minijinja::Error> {
    let parsed: Value = serde_json::from_str(text).map_err(|e| {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!("fromjson: not JSON: {e}"),
        )
    })?;
    Ok(minijinja::Value::from_serialize(&parsed))
}

/// The shape of a template string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape<'a> {
    /// No template syntax: the text itself.
    Literal,
    /// Exactly one `{{ expr }}` and nothing else: keeps the value's type.
    Lone(&'a str),
    /// Anything else: renders to a string.
    Mixed,
}

pub(crate) fn shape(text: &str) -> Shape<'_> {
    if !text.contains("{{") && !text.contains("{%") && !text.contains("{#") {
        return Shape::Literal;
    }
    let trimmed = text.trim();
    if let Some(inner) = trimmed
        .strip_prefix("{{")
        .and_then(|rest| rest.strip_suffix("}}"))
    {
        let single = !inner.contains("{{")
            && !inner.contains("}}")
            && !inner.contains("{%")
            && !inner.contains("{#");
        if single {
            let inner = inner.trim_start_matches(['-', '+']);
            let inner = inner.trim_end_matches(['-', '+']);
            return Shape::Lone(inner.trim());
        }
    }
    Shape::Mixed
}

/// Evaluation context: the JSON object every template sees (`input`,
/// `trigger`, `steps`, `run`, and `args` or `output` where they apply).
///
/// Each root is shared ([`Context::with_shared`], [`Context::with_doc`]):
/// a run's input is built into a context for every step, and a wide one
/// costs some 190 bytes a key as a tree; sharing it costs nothing. A root
/// given as a document ([`JsonDoc`]) stays text: a template that reads
/// `input.name` parses that member alone (see [`DocObject`]).
#[derive(Debug, Clone, Default)]
pub struct Context {
    root: Vec<(String, Root)>,
}

/// One root of a [`Context`].
#[derive(Debug, Clone)]
enum Root {
    Tree(Arc<Value>),
    Doc(JsonDoc),
}

impl Root {
    /// How deep its data nests, stopping past `stop`.
    fn depth(&self, stop: usize) -> usize {
        match self {
            Root::Tree(value) => crate::support::json_depth::value_depth(value, stop),
            Root::Doc(doc) => crate::support::json_depth::text_depth(doc.as_str().as_bytes()),
        }
    }

    fn to_minijinja(&self) -> minijinja::Value {
        match self {
            Root::Tree(value) => minijinja::Value::from_serialize(&**value),
            Root::Doc(doc) if doc.is_object() => minijinja::Value::from_object(DocObject {
                doc: doc.clone(),
                tree: OnceLock::new(),
            }),
            Root::Doc(doc) => minijinja::Value::from_serialize(doc.to_value()),
        }
    }
}

impl Context {
    pub fn new() -> Context {
        Context::default()
    }

    pub fn with(self, name: &str, value: Value) -> Context {
        self.with_shared(name, Arc::new(value))
    }

    /// [`Context::with`] for a value held elsewhere too: not copied.
    pub fn with_shared(mut self, name: &str, value: Arc<Value>) -> Context {
        self.set_root(name, Root::Tree(value));
        self
    }

    /// [`Context::with`] for a value kept as text: neither copied nor
    /// parsed until a template reads it.
    pub fn with_doc(mut self, name: &str, doc: JsonDoc) -> Context {
        self.set_root(name, Root::Doc(doc));
        self
    }

    pub fn set(&mut self, name: &str, value: Value) {
        self.set_root(name, Root::Tree(Arc::new(value)));
    }

    fn set_root(&mut self, name: &str, value: Root) {
        match self.root.iter_mut().find(|(n, _)| n == name) {
            Some((_, slot)) => *slot = value,
            None => self.root.push((name.to_string(), value)),
        }
    }

    /// The roots as one minijinja map, each converted when a template
    /// first reads it (and once per evaluation).
    fn to_minijinja(&self) -> minijinja::Value {
        minijinja::Value::from_object(Roots {
            converted: self.root.iter().map(|_| OnceLock::new()).collect(),
            roots: self.root.clone(),
        })
    }
}

/// A context's roots, as templates see them: one map.
#[derive(Debug)]
struct Roots {
    roots: Vec<(String, Root)>,
    converted: Vec<OnceLock<minijinja::Value>>,
}

impl minijinja::value::Object for Roots {
    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        let name = key.as_str()?;
        let at = self.roots.iter().position(|(n, _)| n == name)?;
        Some(
            self.converted[at]
                .get_or_init(|| self.roots[at].1.to_minijinja())
                .clone(),
        )
    }

    fn enumerate(self: &Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Values(
            self.roots
                .iter()
                .map(|(name, _)| minijinja::Value::from(name.as_str()))
                .collect(),
        )
    }
}

/// A JSON object kept as text, as templates see it: reading one member
/// parses that member alone; iterating it (`for`, `items()`, printing it
/// whole) converts it once.
#[derive(Debug)]
struct DocObject {
    doc: JsonDoc,
    tree: OnceLock<minijinja::Value>,
}

impl DocObject {
    fn tree(&self) -> &minijinja::Value {
        self.tree
            .get_or_init(|| minijinja::Value::from_serialize(self.doc.to_value()))
    }
}

impl minijinja::value::Object for DocObject {
    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        if let Some(tree) = self.tree.get() {
            return tree.get_item(key).ok().filter(|v| !v.is_undefined());
        }
        let member = self.doc.get(key.as_str()?)?;
        Some(minijinja::Value::from_serialize(member))
    }

    fn enumerate(self: &Arc<Self>) -> minijinja::value::Enumerator {
        match self.tree().try_iter() {
            Ok(keys) => minijinja::value::Enumerator::Values(keys.collect()),
            Err(_) => minijinja::value::Enumerator::Empty,
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        match self.tree.get() {
            Some(tree) => tree.len(),
            None => self.doc.len_of_top(),
        }
    }
}

/// Evaluate one template string.
pub fn evaluate_str(template: &str, ctx: &Context) -> Result<Value, ExprError> {
    // Validation checked the template already; checking again is cheap and
    // keeps a template from any other source from reaching the recursion.
    if shape(template) != Shape::Literal {
        scan(template).map_err(|e| ExprError::new(template, e))?;
        if let Some(name) = too_deep(&ctx.root) {
            return Err(ExprError::new(
                template,
                format!(
                    "the data in {name:?} nests deeper than {MAX_CONTEXT_DEPTH} levels (the limit for expressions)"
                ),
            ));
        }
    }
    match shape(template) {
        Shape::Literal => Ok(Value::String(template.to_string())),
        Shape::Lone(expr) => {
            let compiled = environment()
                .compile_expression(expr)
                .map_err(|e| ExprError::from_minijinja(template, &e))?;
            let value = compiled
                .eval(ctx.to_minijinja())
                .map_err(|e| ExprError::from_minijinja(template, &e))?;
            to_json(template, &value)
        }
        Shape::Mixed => environment()
            .render_str(template, ctx.to_minijinja())
            .map(Value::String)
            .map_err(|e| ExprError::from_minijinja(template, &e)),
    }
}

/// Evaluate a template and require a string result (URLs, headers, keys).
pub fn evaluate_to_string(template: &str, ctx: &Context) -> Result<String, ExprError> {
    Ok(match evaluate_str(template, ctx)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// Evaluate every string inside a JSON value (objects and arrays recursively);
/// other scalars are kept as written.
pub fn evaluate_value(value: &Value, ctx: &Context) -> Result<Value, ExprError> {
    Ok(match value {
        Value::String(s) => evaluate_str(s, ctx)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| evaluate_value(v, ctx))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                out.insert(k.clone(), evaluate_value(v, ctx)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

/// Jinja truthiness for JSON: false, null, 0, "", [] and {} are false.
pub fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn to_json(template: &str, value: &minijinja::Value) -> Result<Value, ExprError> {
    // minijinja's strict mode only objects when an undefined value is
    // printed or iterated; a lone expression hands it back as it is. A typo
    // must not become a null sent to a payment API.
    // A document root handed back whole (`{{ input }}`): its text is
    // already JSON, as deep as the door let it be.
    if let Some(doc) = value.downcast_object_ref::<DocObject>() {
        return Ok(doc.doc.to_value());
    }
    if value.is_undefined() {
        return Err(ExprError {
            message: format!(
                "in {template:?}: undefined value (a name or field that does not exist; use `| default(...)` or `is defined` for optional ones)"
            ),
        });
    }
    // A template can build deep data out of shallow data (a loop that
    // wraps a namespace value); turning it into JSON recurses as deep.
    if value_depth(value) > MAX_DATA_DEPTH {
        return Err(ExprError::new(
            template,
            format!(
                "the result nests deeper than {MAX_DATA_DEPTH} levels (the limit for expressions)"
            ),
        ));
    }
    serde_json::to_value(value).map_err(|e| ExprError {
        message: format!(
            "{}result is not representable as JSON: {e}",
            prefix(template)
        ),
    })
}

/// The first context root whose data nests deeper than `MAX_CONTEXT_DEPTH`
/// (objects and arrays, as [`crate::support::json_depth`] counts them). Iterative,
/// so the check itself cannot overflow.
fn too_deep(root: &[(String, Root)]) -> Option<&str> {
    // The root object itself is one level.
    let limit = MAX_CONTEXT_DEPTH - 1;
    root.iter()
        .find(|(_, value)| value.depth(limit) > limit)
        .map(|(name, _)| name.as_str())
}

/// How deep a minijinja value nests (objects and arrays, as
/// [`crate::support::json_depth`] counts them: a scalar is 0, `[[1]]` is 2), up to
/// just past `MAX_DATA_DEPTH`. Iterative, and it stops at the limit.
fn value_depth(value: &minijinja::Value) -> usize {
    let mut max = 0;
    let mut todo: Vec<(minijinja::Value, usize)> = vec![(value.clone(), 0)];
    while let Some((v, depth)) = todo.pop() {
        let kind = v.kind();
        if !matches!(
            kind,
            minijinja::value::ValueKind::Seq | minijinja::value::ValueKind::Map
        ) {
            continue;
        }
        let depth = depth + 1;
        max = max.max(depth);
        if depth > MAX_DATA_DEPTH {
            break;
        }
        if let Ok(iter) = v.try_iter() {
            for key in iter {
                let item = match kind {
                    minijinja::value::ValueKind::Map => v.get_item(&key).unwrap_or_default(),
                    _ => key,
                };
                todo.push((item, depth));
            }
        }
    }
    max
}

/// Compile a template without evaluating it (spec validation). Returns the
/// dotted names it reads, e.g. `steps.order.output`, `input.order_id`.
pub fn check(template: &str) -> Result<BTreeSet<String>, ExprError> {
    if shape(template) == Shape::Literal {
        return Ok(BTreeSet::new());
    }
    // Limits first: minijinja would recurse as deep as the input is long.
    let scanned = scan(template).map_err(|e| ExprError::new(template, e))?;
    let names = match shape(template) {
        Shape::Literal => return Ok(BTreeSet::new()),
        Shape::Lone(expr) => environment()
            .compile_expression(expr)
            .map_err(|e| ExprError::from_minijinja(template, &e))?
            .undeclared_variables(true),
        Shape::Mixed => environment()
            .template_from_str(template)
            .map_err(|e| ExprError::from_minijinja(template, &e))?
            .undeclared_variables(true),
    };
    // minijinja looks filters and tests up only when they run, so a typo
    // would wait for the run that reaches it.
    for (kind, used, known) in [
        ("filter", &scanned.filters, FILTERS),
        ("test", &scanned.tests, TESTS),
    ] {
        if let Some(name) = used.iter().find(|n| !known.contains(n)) {
            return Err(ExprError::new(template, unknown(kind, name, known)));
        }
    }
    Ok(names.into_iter().collect())
}

/// `unknown filter "tofloat" (did you mean "float"?)`.
pub fn unknown(kind: &str, name: &str, known: &[&str]) -> String {
    match closest(name, known) {
        Some(near) => format!("unknown {kind} {name:?} (did you mean {near:?}?)"),
        None => format!("unknown {kind} {name:?} (known: {})", known.join(", ")),
    }
}

/// The known name nearest to `name`, if it is near enough to be a typo.
pub fn closest<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (name.chars().count() / 3).max(1);
    known
        .iter()
        .filter(|k| k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, k)| *d <= limit || (k.len() >= 3 && name.contains(k)))
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// What the pre-scan found besides the limits: the filters and tests used.
#[derive(Debug, Default)]
struct Scanned<'a> {
    filters: Vec<&'a str>,
    tests: Vec<&'a str>,
}

/// A cheap linear scan of a template, before minijinja parses it: bounds
/// its size, the tokens in each `{{ }}` and `{% %}`, bracket nesting and
/// the number of tags, and collects filter and test names. It follows
/// minijinja's lexer closely enough (strings, comments, `raw` blocks, a
/// closing `}}` only outside brackets); where it differs it only counts a
/// little differently, and minijinja still reports the syntax errors.
fn scan(template: &str) -> Result<Scanned<'_>, String> {
    if template.len() > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "the template is {} bytes, more than the limit of {MAX_TEMPLATE_BYTES}",
            template.len()
        ));
    }
    let b = template.as_bytes();
    let mut out = Scanned::default();
    let mut tags = 0usize;
    let mut i = 0;
    while let Some(open) = find(b, i, b"{") {
        let Some(&kind) = b.get(open + 1) else { break };
        match kind {
            b'#' => match find(b, open + 2, b"#}") {
                Some(end) => i = end + 2,
                None => break,
            },
            b'{' | b'%' => {
                if kind == b'%' {
                    tags += 1;
                    if tags > MAX_TEMPLATE_TAGS {
                        return Err(format!(
                            "the template has more than {MAX_TEMPLATE_TAGS} {{% %}} tags (the limit)"
                        ));
                    }
                }
                let close: &[u8] = if kind == b'{' { b"}}" } else { b"%}" };
                // `{{-`, `{%+`: whitespace control, not an operator.
                let mut start = open + 2;
                if matches!(b.get(start), Some(b'-' | b'+' | b'~')) {
                    start += 1;
                }
                let (end, first) = scan_code(template, start, close, &mut out)?;
                i = end;
                if kind == b'%'
                    && let Some(name) = first.filter(|n| NOT_IN_EXPRESSIONS.contains(n))
                {
                    return Err(format!(
                        "unknown statement {name}: expressions have no macros, includes or \
                         template inheritance"
                    ));
                }
                if kind == b'%' && first == Some("raw") {
                    // `{% raw %}...{% endraw %}`: the inside is text.
                    match find(b, i, b"endraw").and_then(|at| find(b, at, b"%}")) {
                        Some(at) => i = at + 2,
                        None => break,
                    }
                }
            }
            _ => i = open + 1,
        }
    }
    Ok(out)
}

/// Statements minijinja knows (its `macros` and `multi_template` features,
/// which the inbox's own templates use: server/ui/templates/) that the
/// expression language does not have: refused here as minijinja refuses a
/// statement it does not know, so those features change no spec.
const NOT_IN_EXPRESSIONS: [&str; 9] = [
    "macro", "call", "extends", "block", "include", "import", "from", "endmacro", "endcall",
];

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Scan one expression or tag from `start` to its `close`. Returns where
/// the text after it starts and the tag's first name.
fn scan_code<'a>(
    template: &'a str,
    start: usize,
    close: &[u8],
    out: &mut Scanned<'a>,
) -> Result<(usize, Option<&'a str>), String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Prev<'a> {
        Start,
        Name(&'a str),
        Pipe,
        Dot,
        Is,
        Other,
    }
    let b = template.as_bytes();
    let (mut k, mut depth, mut tokens) = (start, 0usize, 0usize);
    let mut prev = Prev::Start;
    let mut first = None;
    let mut filter_tag = false;
    while k < b.len() {
        let c = b[k];
        if c.is_ascii_whitespace() {
            k += 1;
            continue;
        }
        if depth == 0 {
            let rest = &b[k..];
            let trimmed = match rest.first() {
                Some(b'-' | b'+' | b'~') => &rest[1..],
                _ => rest,
            };
            if trimmed.starts_with(close) {
                return Ok((k + (rest.len() - trimmed.len()) + close.len(), first));
            }
        }
        tokens += 1;
        if tokens > MAX_EXPRESSION_TOKENS {
            return Err(format!(
                "an expression has more than {MAX_EXPRESSION_TOKENS} tokens (names, literals and operators; the limit): split it into steps or set values"
            ));
        }
        let token_start = k;
        let next = match c {
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                while k < b.len() && (b[k].is_ascii_alphanumeric() || b[k] == b'_') {
                    k += 1;
                }
                let name = &template[token_start..k];
                if first.is_none() && prev == Prev::Start {
                    first = Some(name);
                    filter_tag = close == b"%}" && name == "filter";
                    Prev::Name(name)
                } else {
                    match prev {
                        Prev::Pipe => out.filters.push(name),
                        Prev::Name(_) if filter_tag && tokens == 2 => out.filters.push(name),
                        Prev::Is if name != "not" => out.tests.push(name),
                        _ => {}
                    }
                    match (prev, name) {
                        (Prev::Dot, _) => Prev::Other,
                        (Prev::Is, "not") => Prev::Is,
                        (_, "is") => Prev::Is,
                        _ => Prev::Name(name),
                    }
                }
            }
            b'0'..=b'9' => {
                while k < b.len() && (b[k].is_ascii_alphanumeric() || b[k] == b'_' || b[k] == b'.')
                {
                    k += 1;
                }
                Prev::Other
            }
            b'\'' | b'"' => {
                k += 1;
                while k < b.len() && b[k] != c {
                    k += if b[k] == b'\\' { 2 } else { 1 };
                }
                k += 1;
                Prev::Other
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_EXPRESSION_NESTING {
                    return Err(format!(
                        "brackets nest deeper than {MAX_EXPRESSION_NESTING} levels (the limit)"
                    ));
                }
                k += 1;
                Prev::Other
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                k += 1;
                Prev::Other
            }
            b'|' => {
                k += 1;
                Prev::Pipe
            }
            b'.' => {
                k += 1;
                Prev::Dot
            }
            _ => {
                // One character of an operator; multi-byte UTF-8 as a whole.
                k += template
                    .get(k..)
                    .and_then(|t| t.chars().next())
                    .map_or(1, char::len_utf8);
                Prev::Other
            }
        };
        prev = next;
    }
    Ok((b.len(), first))
}

/// Every string inside a JSON template value, for validation.
pub fn template_strings(value: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    collect_strings(value, &mut out);
    out
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Context {
        Context::new()
            .with(
                "input",
                json!({"order_id": "A1", "amount": 150, "items": [1, 2]}),
            )
            .with(
                "steps",
                json!({"assess": {"output": {"amount": 120, "ok": true}}}),
            )
    }

    #[test]
    fn lone_expression_keeps_its_type() {
        assert_eq!(
            evaluate_str("{{ input.amount }}", &ctx()).unwrap(),
            json!(150)
        );
        assert_eq!(
            evaluate_str(" {{ input.items }} ", &ctx()).unwrap(),
            json!([1, 2])
        );
        assert_eq!(
            evaluate_str("{{ steps.assess.output.amount > 100 }}", &ctx()).unwrap(),
            json!(true)
        );
        assert_eq!(
            evaluate_str("{{ steps.assess.output }}", &ctx()).unwrap(),
            json!({"amount": 120, "ok": true})
        );
    }

    #[test]
    fn mixed_text_interpolates_to_a_string() {
        assert_eq!(
            evaluate_str("Refund {{ input.amount }} on {{ input.order_id }}?", &ctx()).unwrap(),
            json!("Refund 150 on A1?")
        );
        assert_eq!(
            evaluate_str("{{ input.items | tojson }}", &ctx()).unwrap(),
            json!("[1,2]")
        );
    }

    #[test]
    fn secret_references_stay_literal() {
        assert_eq!(
            evaluate_str("Bearer ${SHOP_TOKEN}", &ctx()).unwrap(),
            json!("Bearer ${SHOP_TOKEN}")
        );
        assert_eq!(
            evaluate_str("${A}/{{ input.order_id }}", &ctx()).unwrap(),
            json!("${A}/A1")
        );
    }

    #[test]
    fn undefined_names_are_errors() {
        let err = evaluate_str("{{ input.missing.deeper }}", &ctx()).unwrap_err();
        assert!(err.message.contains("undefined"), "{}", err.message);
        let err = evaluate_str("{{ input.missing }}", &ctx()).unwrap_err();
        assert!(err.message.contains("undefined"), "{}", err.message);
        assert_eq!(
            evaluate_str("{{ input.missing | default('x') }}", &ctx()).unwrap(),
            json!("x")
        );
        assert_eq!(
            evaluate_str("{{ input.missing is defined }}", &ctx()).unwrap(),
            json!(false)
        );
    }

    #[test]
    fn check_reports_dotted_references() {
        let names = check("{{ steps.order.output.id }} for {{ input.x }}").unwrap();
        assert!(names.contains("steps.order.output.id"), "{names:?}");
        assert!(names.contains("input.x"));
        assert!(check("{{ 1 + }}").is_err());
    }

    /// A deeply nested JSON value: `{"a": {"a": ... 1}}`.
    fn nested(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 1..depth {
            v = json!({ "a": v });
        }
        v
    }

    /// Runs `f` on a thread with the stack of a tokio worker (2 MiB), so a
    /// recursion that would abort a server aborts this test instead.
    fn on_small_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(f)
            .expect("spawn")
            .join()
            .expect("no panic");
    }

    /// Every shape at the edge of the limits compiles and evaluates on a
    /// 2 MiB stack; one step past the limit is refused before minijinja.
    #[test]
    fn at_the_limits_nothing_overflows_a_2_mib_stack() {
        on_small_stack(|| {
            let terms = MAX_EXPRESSION_TOKENS / 2;
            let chain =
                |sep: &str, head: &str, n: usize| format!("{{{{ {head}{} }}}}", sep.repeat(n));
            let at_limit = [
                format!("{{{{ {} }}}}", vec!["1"; terms].join(" + ")),
                format!("{{{{ {} }}}}", vec!["1"; terms].join(" ~ ")),
                chain(" | string", "1", terms - 1),
                chain(".a", "input.deep", terms - 2),
                format!("{{{{ {}1 }}}}", "not ".repeat(MAX_EXPRESSION_TOKENS - 1)),
                format!("{{{{ {}1 }}}}", "- ".repeat(MAX_EXPRESSION_TOKENS - 1)),
                format!(
                    "{{{{ {}1{} }}}}",
                    "(".repeat(MAX_EXPRESSION_NESTING),
                    ")".repeat(MAX_EXPRESSION_NESTING)
                ),
                format!(
                    "{{{{ {}1{} }}}}",
                    "[".repeat(MAX_EXPRESSION_NESTING),
                    "]".repeat(MAX_EXPRESSION_NESTING)
                ),
                format!(
                    "{{% if false %}}{}{{% else %}}x{{% endif %}}",
                    "{% elif false %}".repeat(MAX_TEMPLATE_TAGS - 3)
                ),
                format!(
                    "{}x{}",
                    "{% if true %}".repeat(MAX_TEMPLATE_TAGS / 2),
                    "{% endif %}".repeat(MAX_TEMPLATE_TAGS / 2)
                ),
                "{{ input.deep }}".to_string(),
                "{{ input.deep | tojson }}".to_string(),
                "x {{ input.deep }}".to_string(),
                "{{ input.deep == input.deep }}".to_string(),
                "{% macro m(n) %}{% if n > 0 %}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(1000) }}"
                    .to_string(),
                "{% set v = [] %}{% for i in range(100000) %}{% set v = [v] %}{% endfor %}{{ v | length }}"
                    .to_string(),
                "{% set v = [] %}{% for i in range(100000) %}{% set v = [v] %}{{ v|length }}{% endfor %}"
                    .to_string(),
                "{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v | length }}"
                    .to_string(),
                "{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}"
                    .to_string(),
                "{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}x{{ ns.v }}"
                    .to_string(),
            ];
            let ctx = Context::new().with("input", json!({"deep": nested(MAX_DATA_DEPTH - 2)}));
            // The first ten are accepted by validation: the recursion ran.
            for template in &at_limit[..10] {
                check(template).unwrap_or_else(|e| panic!("{e}"));
            }
            for template in &at_limit {
                let _ = check(template);
                let _ = evaluate_str(template, &ctx);
            }
            assert_eq!(
                evaluate_str("{{ input.deep == input.deep }}", &ctx).unwrap(),
                json!(true)
            );
        });
    }

    #[test]
    fn past_the_limits_is_refused_naming_the_limit() {
        let tokens = format!("{{{{ {} }}}}", vec!["1"; 10_000].join(" + "));
        let err = check(&tokens).unwrap_err().message;
        assert!(err.contains("more than 500 tokens"), "{err}");
        assert!(
            err.len() < 400,
            "the message cuts the template short: {err}"
        );
        let nesting = format!("{{{{ {}1{} }}}}", "(".repeat(33), ")".repeat(33));
        assert!(
            check(&nesting)
                .unwrap_err()
                .message
                .contains("deeper than 32")
        );
        let lists = format!("{{{{ {}{} }}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(
            check(&lists)
                .unwrap_err()
                .message
                .contains("deeper than 32")
        );
        for statement in [
            "{% macro m() %}x{% endmacro %}{{ m() }}",
            "{% include 'x' %}",
            "{% import 'x' as y %}",
            "{% from 'x' import y %}",
            "{% extends 'x' %}",
            "{% block b %}x{% endblock %}",
            "{%- call m() %}x{% endcall %}",
        ] {
            let refused = check(statement).unwrap_err().message;
            assert!(
                refused.contains("unknown statement"),
                "{statement}: {refused}"
            );
        }
        let tags = "{% if true %}x{% endif %}".repeat(200);
        assert!(check(&tags).unwrap_err().message.contains("more than 250"));
        let big = format!("{}{{{{ input }}}}", "x".repeat(MAX_TEMPLATE_BYTES));
        assert!(check(&big).unwrap_err().message.contains("bytes"));
        // Run time refuses the same, and data that nests too deep.
        assert!(evaluate_str(&tokens, &ctx()).is_err());
        // `nested(n)` holds n - 1 objects; the context's root is one more.
        let deep = Context::new().with("input", nested(MAX_CONTEXT_DEPTH + 1));
        let err = evaluate_str("{{ input.a }}", &deep).unwrap_err().message;
        let want = format!("the data in \"input\" nests deeper than {MAX_CONTEXT_DEPTH} levels");
        assert!(err.contains(&want), "{err}");
        // A result is stored: it may nest as deep as data from outside, no more.
        let at_limit = Context::new().with("input", nested(MAX_DATA_DEPTH + 1));
        assert_eq!(
            evaluate_str("{{ input }}", &at_limit).unwrap(),
            nested(MAX_DATA_DEPTH + 1)
        );
        let err = evaluate_str("{{ [input] }}", &at_limit)
            .unwrap_err()
            .message;
        let want = format!("the result nests deeper than {MAX_DATA_DEPTH} levels");
        assert!(err.contains(&want), "{err}");
        // Shallow enough data, wrapped deeper by the expression itself.
        let near = Context::new().with("input", nested(MAX_DATA_DEPTH - 10));
        let wrap = format!("{{{{ {}input{} }}}}", "[".repeat(20), "]".repeat(20));
        let err = evaluate_str(&wrap, &near).unwrap_err().message;
        assert!(err.contains(&want), "{err}");
        assert_eq!(MAX_DATA_DEPTH, crate::support::json_depth::MAX_JSON_DEPTH);
        // A literal is not a template: no limit but the spec's size.
        assert!(evaluate_str(&"x".repeat(MAX_TEMPLATE_BYTES + 1), &ctx()).is_ok());
    }

    #[test]
    fn unknown_filters_and_tests_are_refused_with_a_near_name() {
        let err = check("{{ input.amount | tofloat }}").unwrap_err().message;
        assert!(
            err.ends_with("unknown filter \"tofloat\" (did you mean \"float\"?)"),
            "{err}"
        );
        let err = check("x {{ input.a is definde }}").unwrap_err().message;
        assert!(
            err.ends_with("unknown test \"definde\" (did you mean \"defined\"?)"),
            "{err}"
        );
        let err = check("{% filter shout %}x{% endfilter %}")
            .unwrap_err()
            .message;
        assert!(err.contains("unknown filter \"shout\""), "{err}");
        assert!(check("{{ input.a is not none and input.b | d(1) | tojson }}").is_ok());
        assert!(check("{{ 'a | tofloat' ~ input.x.is }}").is_ok());
        assert!(check("{% raw %}{{ x | nope }}{% endraw %}").is_ok());
    }

    /// The lists validation checks against are the environment's: every
    /// listed name is registered, and a name not listed is not.
    #[test]
    fn the_name_lists_are_what_the_environment_registers() {
        let env = environment();
        let kind_of = |template: &str| env.render_str(template, ()).err().map(|e| e.kind());
        for name in FILTERS {
            let got = kind_of(&format!("{{{{ none | {name} }}}}"));
            assert_ne!(got, Some(minijinja::ErrorKind::UnknownFilter), "{name}");
        }
        for name in TESTS
            .iter()
            .filter(|n| n.chars().all(char::is_alphanumeric))
        {
            let got = kind_of(&format!("{{{{ none is {name} }}}}"));
            assert_ne!(got, Some(minijinja::ErrorKind::UnknownTest), "{name}");
        }
        for name in FUNCTIONS {
            assert!(env.globals().any(|(n, _)| n == *name), "{name}");
        }
        assert_eq!(env.globals().count(), FUNCTIONS.len());
        assert_eq!(
            kind_of("{{ 1 | tofloat }}"),
            Some(minijinja::ErrorKind::UnknownFilter)
        );
        assert_eq!(
            kind_of("{{ 1 is numeric }}"),
            Some(minijinja::ErrorKind::UnknownTest)
        );
    }

    #[test]
    fn evaluates_nested_values() {
        let v = evaluate_value(&json!({"a": ["{{ input.amount }}", 3], "b": "x"}), &ctx()).unwrap();
        assert_eq!(v, json!({"a": [150, 3], "b": "x"}));
    }

    #[test]
    fn a_loop_that_would_run_for_hours_runs_out_of_instructions() {
        let hours =
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        let err = evaluate_str(hours, &ctx()).unwrap_err().message;
        assert!(err.contains("more than 5000000 instructions"), "{err}");
        let lone = "{{ range(100000) | map('string') | join(',') | length }}";
        assert!(evaluate_str(lone, &ctx()).is_ok(), "a long loop fits");
    }
}
