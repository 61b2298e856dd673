//! The runtime's layers, checked: no module of `vendored/src` refers to a
//! module of a layer above its own.
//!
//! Each layer is a folder of `vendored/src` (the application's entry
//! points, `app.rs` and `testing.rs`, sit beside the CLI's folder). From
//! the bottom up: support helpers, the domain (spec, expressions, events,
//! the approval record), the store, the engine (runs, workflow, gate,
//! tools), notify, the use cases (`service`: deciding, operating, gate
//! requests, batches, votes, notices, with their views), the server (HTTP
//! plumbing, routes, the inbox, MCP, background workers), and the
//! application (CLI, `App`, the testing harness). A module may use its own
//! layer and any below it. CONTRIBUTING.md "Layout" describes each layer.
//!
//! Within and above the server, the adapters (the API's routes, the inbox,
//! MCP, the CLI) meet only in the use cases: no adapter refers to another,
//! and the application refers to the server's front items (`Server`,
//! `serve`, `mount`...), never to a module inside it.
//!
//! The check reads the source as text: every `crate::NAME` path (and
//! `$crate::`, and each name of a `crate::{...}` group) outside comments
//! and string literals. `NAME` is a layer, or a name `lib.rs` re-exports
//! from one (`pub use domain::{spec, ..}` keeps `crate::spec` working),
//! resolved to the layer it comes from. A new upward reference fails here,
//! naming the file and line; a new top-level module fails until it is
//! given a layer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each layer and the top-level modules of `vendored/src` in it, lowest
/// first: one folder per layer, except the application's.
const LAYERS: &[(&str, &[&str])] = &[
    ("support", &["support"]),
    ("domain", &["domain"]),
    ("store", &["store"]),
    ("engine", &["engine"]),
    ("notify", &["notify"]),
    ("service", &["service"]),
    ("server", &["server"]),
    ("application", &["app", "cli", "testing"]),
];

/// Names at the crate root that are not modules: macros exported by a
/// module (`#[macro_export]` puts them at the root), with the layer that
/// defines them.
const ROOT_MACROS: &[(&str, &str)] = &[("named_enum", "support")];

fn runtime_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vendored/src")
}

#[test]
fn no_runtime_module_refers_to_a_layer_above_its_own() {
    let src = runtime_src();
    let layers = Layers::new();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("vendored/src/lib.rs");
    let reexports = root_reexports(&code_only(&lib));

    let mut upward = Vec::new();
    let mut unplaced = BTreeMap::new();
    for file in rust_files(&src) {
        let rel = file.strip_prefix(&src).expect("under src").to_path_buf();
        let Some(from) = top_module(&rel) else {
            continue; // lib.rs: the root re-exports every layer
        };
        let Some(from_layer) = layers.of(&from) else {
            unplaced.insert(from.clone(), rel.display().to_string());
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("readable source");
        for reference in crate_references(&code_only(&text)) {
            let target = resolve(&reference.name, &reexports);
            let Some(target) = target else { continue };
            if target == from {
                continue;
            }
            let Some(to_layer) = layers.of(&target) else {
                unplaced.insert(
                    target.clone(),
                    format!("{}:{}", rel.display(), reference.line),
                );
                continue;
            };
            if to_layer > from_layer {
                upward.push(format!(
                    "{}:{}: {from} ({}) refers to crate::{} in {target} ({})",
                    rel.display(),
                    reference.line,
                    layers.name(from_layer),
                    reference.name,
                    layers.name(to_layer),
                ));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "top-level modules with no layer (add each to LAYERS in tests/it/layers.rs): {unplaced:#?}"
    );
    assert!(
        upward.is_empty(),
        "references to a layer above the referring module's own:\n{}",
        upward.join("\n")
    );
}

/// Inside the crate a module is reached through its layer
/// (`crate::domain::spec`), never through the alias `lib.rs` keeps for
/// code outside (`crate::spec`): the path says which layer it is in. Items
/// `lib.rs` re-exports at the root (`crate::AgentRun`) stay the crate's
/// front door.
#[test]
fn modules_are_reached_through_their_layer_not_a_root_alias() {
    let src = runtime_src();
    let layers = Layers::new();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("vendored/src/lib.rs");
    let reexports = root_reexports(&code_only(&lib));
    let mut aliased = Vec::new();
    for file in rust_files(&src) {
        let rel = file.strip_prefix(&src).expect("under src").to_path_buf();
        if top_module(&rel).is_none() {
            continue; // lib.rs declares the aliases
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        for reference in crate_references(&code_only(&text)) {
            let name = reference.name.as_str();
            // A module of the layer it is re-exported from: its file or
            // folder is in that layer's folder.
            let is_module_alias = layers.of(name).is_none()
                && reexports
                    .get(name)
                    .and_then(Option::as_deref)
                    .is_some_and(|layer| {
                        src.join(layer).join(format!("{name}.rs")).is_file()
                            || src.join(layer).join(name).is_dir()
                    });
            if is_module_alias {
                aliased.push(format!(
                    "{}:{}: crate::{name} (write crate::{}::{name})",
                    rel.display(),
                    reference.line,
                    reexports[name].as_deref().unwrap_or("?"),
                ));
            }
        }
    }
    assert!(
        aliased.is_empty(),
        "modules reached through a lib.rs alias instead of their layer:\n{}",
        aliased.join("\n")
    );
}

/// The adapters: each turns its own input into calls to the use cases
/// (`service`) and their answers into its own output. Each is a module
/// path; a file belongs to the adapter whose path its module starts with.
const ADAPTERS: &[&[&str]] = &[
    &["server", "routes"],
    &["server", "ui"],
    &["server", "mcp"],
    &["cli"],
];

#[test]
fn no_adapter_refers_to_another() {
    let src = runtime_src();
    let mut crossing = Vec::new();
    for file in rust_files(&src) {
        let rel = file.strip_prefix(&src).expect("under src").to_path_buf();
        let module = module_path(&rel);
        let Some(from) = adapter_of(&module) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("readable source");
        for path in module_paths(&code_only(&text), &module, false) {
            if let Some(to) = adapter_of(&path.segments)
                && to != from
            {
                crossing.push(format!(
                    "{}:{}: {} refers to {} ({})",
                    rel.display(),
                    path.line,
                    from.join("::"),
                    path.segments.join("::"),
                    to.join("::"),
                ));
            }
        }
    }
    assert!(
        crossing.is_empty(),
        "adapters referring to another adapter (move what they share into \
         `service`, or into the server's plumbing):\n{}",
        crossing.join("\n")
    );
}

#[test]
fn the_application_uses_only_the_servers_front_items() {
    let src = runtime_src();
    let server_modules = submodules(&src.join("server"));
    assert!(
        server_modules.contains("routes"),
        "the server's modules are read from vendored/src/server: {server_modules:?}"
    );
    let application: Vec<&str> = LAYERS
        .iter()
        .find(|(name, _)| *name == "application")
        .expect("an application layer")
        .1
        .to_vec();
    let mut inside = Vec::new();
    for file in rust_files(&src) {
        let rel = file.strip_prefix(&src).expect("under src").to_path_buf();
        let module = module_path(&rel);
        if !module
            .first()
            .is_some_and(|top| application.contains(&top.as_str()))
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        // `use crate::server;` then `server::routes::..`: in the
        // application, a bare `server::` path is the crate's server.
        for path in module_paths(&code_only(&text), &module, true) {
            if path.segments.first().map(String::as_str) == Some("server")
                && path
                    .segments
                    .get(1)
                    .is_some_and(|name| server_modules.contains(name.as_str()))
            {
                inside.push(format!(
                    "{}:{}: {}",
                    rel.display(),
                    path.line,
                    path.segments.join("::")
                ));
            }
        }
    }
    assert!(
        inside.is_empty(),
        "the application refers to modules inside the server (use the use \
         cases in `service`, or an item the server re-exports):\n{}",
        inside.join("\n")
    );
}

/// The adapter a module path is in, if any.
fn adapter_of(module: &[String]) -> Option<&'static [&'static str]> {
    ADAPTERS.iter().copied().find(|adapter| {
        module.len() >= adapter.len() && adapter.iter().zip(module).all(|(a, m)| a == m)
    })
}

/// The module a file is: `server/routes/approvals.rs` is
/// `server::routes::approvals`, and `server/routes.rs` (or
/// `server/routes/mod.rs`) is `server::routes`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut segments: Vec<String> = rel
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .map(|name| name.strip_suffix(".rs").unwrap_or(name).to_string())
        .collect();
    if segments
        .last()
        .is_some_and(|last| last == "mod" || last == "lib")
    {
        segments.pop();
    }
    segments
}

/// The names of a folder's modules: `name.rs` files and subfolders.
fn submodules(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("a readable folder")
        .map(|entry| entry.expect("an entry").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            match name.strip_suffix(".rs") {
                Some(stem) if stem != "mod" => Some(stem.to_string()),
                Some(_) => None,
                None => path.is_dir().then(|| name.to_string()),
            }
        })
        .collect()
}

#[derive(Debug)]
struct ModulePath {
    /// From the crate root, without `crate`.
    segments: Vec<String>,
    line: usize,
}

/// Every path of the crate in `code` (`crate::a::b`, `super::a`,
/// `self::a`, with `{...}` groups expanded), resolved from `module` to a
/// path from the crate root. With `bare_server`, `server::a` counts as
/// `crate::server::a`. A path the resolution cannot place (more `super`s
/// than the module is deep) is skipped.
fn module_paths(code: &str, module: &[String], bare_server: bool) -> Vec<ModulePath> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':');
        if !starts_word || !is_ident(chars[i]) {
            i += 1;
            continue;
        }
        let word: String = chars[i..].iter().take_while(|c| is_ident(**c)).collect();
        let after = i + word.len();
        let base: Option<Vec<String>> = match word.as_str() {
            "crate" => Some(Vec::new()),
            "self" => Some(module.to_vec()),
            "super" => module.split_last().map(|(_, parent)| parent.to_vec()),
            "server" if bare_server => Some(Vec::new()),
            _ => None,
        };
        let (Some(base), true) = (base, followed_by_path(&chars, after)) else {
            i = after;
            continue;
        };
        let line = 1 + chars[..i].iter().filter(|c| **c == '\n').count();
        let start = if word == "server" { i } else { after };
        let (tails, end) = path_tails(&chars, start);
        for tail in tails {
            let mut segments = base.clone();
            let mut placed = true;
            for segment in tail {
                if segment == "super" {
                    placed &= segments.pop().is_some();
                } else if segment != "self" {
                    segments.push(segment);
                }
            }
            if placed {
                found.push(ModulePath { segments, line });
            }
        }
        i = end.max(after);
    }
    found
}

fn followed_by_path(chars: &[char], at: usize) -> bool {
    let i = skip_space(chars, at);
    chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':')
}

/// The paths starting at `at` (`a::b`, `::a::{b, c::d}`; a leading `::`
/// is skipped), each as its segments, and where they end.
fn path_tails(chars: &[char], at: usize) -> (Vec<Vec<String>>, usize) {
    let is_ident = |c: &char| c.is_alphanumeric() || *c == '_';
    let mut prefix = Vec::new();
    let mut i = at;
    loop {
        i = skip_space(chars, i);
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i = skip_space(chars, i + 2);
        }
        if chars.get(i) == Some(&'{') {
            let mut tails = Vec::new();
            let mut depth = 0;
            let mut item_start = i + 1;
            let mut j = i;
            while j < chars.len() {
                match chars[j] {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        let item: String = chars[item_start..j].iter().collect();
                        let item_chars: Vec<char> = item.chars().collect();
                        if item_chars.iter().any(is_ident) {
                            for tail in path_tails(&item_chars, 0).0 {
                                tails.push([prefix.clone(), tail].concat());
                            }
                        }
                        item_start = j + 1;
                        if chars[j] == '}' {
                            return (tails, j + 1);
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            return (tails, j);
        }
        let word: String = chars[i..].iter().take_while(|c| is_ident(c)).collect();
        if word.is_empty() {
            return (vec![prefix], i);
        }
        i += word.len();
        prefix.push(word);
        let next = skip_space(chars, i);
        if !(chars.get(next) == Some(&':') && chars.get(next + 1) == Some(&':')) {
            return (vec![prefix], i);
        }
    }
}

/// The path scanner of the adapter checks, on a small source: groups,
/// `super` and `self` resolved from the file's module, aliases dropped.
#[test]
fn the_path_scanner_resolves_relative_paths_and_groups() {
    let source = r#"
        use super::{runs::answer, super::ui::{self, stream as s}};
        use crate::service::{decide, views::DecisionView};
        // super::mcp in a comment
        let x = self::helper::f(); server::mcp::serve();
    "#;
    let module: Vec<String> = ["server", "routes", "approvals"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let paths: Vec<(String, usize)> = module_paths(&code_only(source), &module, true)
        .into_iter()
        .map(|p| (p.segments.join("::"), p.line))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("server::routes::runs::answer".to_string(), 2),
            ("server::ui".to_string(), 2),
            ("server::ui::stream".to_string(), 2),
            ("service::decide".to_string(), 3),
            ("service::views::DecisionView".to_string(), 3),
            ("server::routes::approvals::helper::f".to_string(), 5),
            ("server::mcp::serve".to_string(), 5),
        ]
    );
    assert_eq!(
        module_path(Path::new("server/routes/mod.rs")),
        ["server", "routes"]
    );
    assert_eq!(adapter_of(&module), Some(&["server", "routes"][..]));
}

/// The check itself, on a small source: it must see grouped imports,
/// `$crate`, and re-exported names, and skip comments and strings.
#[test]
fn the_reference_scanner_sees_paths_and_skips_comments_and_strings() {
    let source = r##"
        use crate::{spec::Spec, store::{self, StateStore}, self as me};
        // crate::server in a comment
        /* crate::cli in a block /* nested crate::app */ */
        let s = "crate::run in a string";
        let r = r#"crate::gate in a raw string"#;
        let c = '"'; let lifetime: &'static str = "";
        fn f() -> crate::AgentRun { $crate::named_enum!(); crate :: tools ::x() }
    "##;
    let names: Vec<_> = crate_references(&code_only(source))
        .into_iter()
        .map(|r| (r.name, r.line))
        .collect();
    assert_eq!(
        names,
        vec![
            ("spec".to_string(), 2),
            ("store".to_string(), 2),
            ("AgentRun".to_string(), 8),
            ("named_enum".to_string(), 8),
            ("tools".to_string(), 8),
        ]
    );
    let reexports = root_reexports(&code_only(
        "pub mod engine;\nmod store;\npub use run::{AgentRun, RunError};\n\
         pub use engine::{gate, run};\npub use store::{SharedStore};\n\
         #[cfg(unix)]\npub(crate) use store::watch;\npub use axum;",
    ));
    assert_eq!(resolve("AgentRun", &reexports).as_deref(), Some("engine"));
    assert_eq!(resolve("run", &reexports).as_deref(), Some("engine"));
    assert_eq!(resolve("SharedStore", &reexports).as_deref(), Some("store"));
    assert_eq!(resolve("watch", &reexports).as_deref(), Some("store"));
    assert_eq!(
        resolve("named_enum", &reexports).as_deref(),
        Some("support")
    );
    assert_eq!(resolve("axum", &reexports), None, "an external crate");
}

struct Layers {
    by_module: BTreeMap<&'static str, usize>,
}

impl Layers {
    fn new() -> Layers {
        let mut by_module = BTreeMap::new();
        for (index, (_, modules)) in LAYERS.iter().enumerate() {
            for module in *modules {
                assert!(
                    by_module.insert(*module, index).is_none(),
                    "{module} is in two layers"
                );
            }
        }
        Layers { by_module }
    }

    fn of(&self, module: &str) -> Option<usize> {
        self.by_module.get(module).copied()
    }

    fn name(&self, layer: usize) -> &'static str {
        LAYERS[layer].0
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|entry| entry.expect("readable vendored/src"))
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "rs"))
        .map(|entry| entry.into_path())
        .collect();
    files.sort();
    files
}

/// The top-level module a file belongs to: `store/sqlite/ops.rs` and
/// `store.rs` are both `store`. None for the crate root.
fn top_module(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_string())
}

/// What a `crate::NAME` refers to: a module, or (for names `lib.rs`
/// re-exports, and root macros) the module that defines it. None for an
/// external crate re-exported at the root.
fn resolve(name: &str, reexports: &BTreeMap<String, Option<String>>) -> Option<String> {
    if let Some((_, module)) = ROOT_MACROS
        .iter()
        .find(|(macro_name, _)| *macro_name == name)
    {
        return Some(module.to_string());
    }
    match reexports.get(name) {
        Some(module) => module.clone(),
        None => Some(name.to_string()),
    }
}

/// The names `lib.rs` re-exports (`pub use LAYER::{a, b};`, `pub use
/// a::{A, B};`), each with the layer module it comes from, followed
/// through re-exports of re-exports; a re-exported external crate maps to
/// None. A module of the crate is declared with `mod NAME`.
fn root_reexports(lib: &str) -> BTreeMap<String, Option<String>> {
    let statements: Vec<&str> = lib.split(';').map(str::trim).collect();
    let modules: Vec<&str> = statements
        .iter()
        .filter_map(|statement| {
            let words: Vec<&str> = statement.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "mod")?;
            words.get(at + 1).copied()
        })
        .collect();
    // (the path's first segment, the names it brings in)
    let uses: Vec<(&str, Vec<&str>)> = statements
        .iter()
        .filter_map(|statement| {
            let at = statement.find("use ")?;
            let head = &statement[..at];
            head.split_whitespace()
                .last()
                .is_some_and(|word| word.starts_with("pub"))
                .then_some(&statement[at + "use ".len()..])
        })
        .map(|path| {
            let mut segments = identifiers(path).filter(|name| *name != "self");
            let first = segments.next().unwrap_or_default();
            let names: Vec<&str> = segments.collect();
            // `pub use axum;` re-exports a crate under its own name.
            let names = if names.is_empty() { vec![first] } else { names };
            (first, names)
        })
        .collect();
    let mut reexports: BTreeMap<String, Option<String>> = BTreeMap::new();
    // A re-export may name another one (`pub use spec::{Spec}` after
    // `pub use domain::{spec}`): repeat until every name is placed.
    for _ in 0..uses.len() {
        for (first, names) in &uses {
            let source = if modules.contains(first) {
                Some(first.to_string())
            } else if let Some(source) = reexports.get(*first) {
                source.clone()
            } else {
                None
            };
            for name in names {
                reexports.insert(name.to_string(), source.clone());
            }
        }
    }
    reexports
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
}

#[derive(Debug)]
struct Reference {
    name: String,
    line: usize,
}

/// Every first segment after `crate::` (each item's, for a group), with
/// its line. `crate::{self, ..}` names the crate itself and is skipped.
fn crate_references(code: &str) -> Vec<Reference> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(start) = find_word(&chars, at, "crate") {
        at = start + "crate".len();
        let line = 1 + chars[..start].iter().filter(|c| **c == '\n').count();
        let mut i = skip_space(&chars, at);
        if !(chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':')) {
            continue;
        }
        i = skip_space(&chars, i + 2);
        if chars.get(i) == Some(&'{') {
            for item in group_items(&chars, i) {
                if let Some(name) = identifiers(&item).next().filter(|n| *n != "self") {
                    found.push(Reference {
                        name: name.to_string(),
                        line,
                    });
                }
            }
        } else {
            let name: String = chars[i..]
                .iter()
                .take_while(|c| c.is_alphanumeric() || **c == '_')
                .collect();
            if !name.is_empty() {
                found.push(Reference { name, line });
            }
        }
    }
    found
}

/// The next `word` at or after `from` that stands alone (not part of a
/// longer identifier; `$crate` counts).
fn find_word(chars: &[char], from: usize, word: &str) -> Option<usize> {
    let word: Vec<char> = word.chars().collect();
    let is_ident = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    (from..chars.len().saturating_sub(word.len() - 1)).find(|&i| {
        chars[i..i + word.len()] == word[..]
            && !is_ident(i.checked_sub(1).and_then(|p| chars.get(p)))
            && !is_ident(chars.get(i + word.len()))
    })
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// The top-level comma-separated items of the `{...}` group opening at
/// `open`.
fn group_items(chars: &[char], open: usize) -> Vec<String> {
    let mut items = vec![String::new()];
    let mut depth = 0;
    for &c in &chars[open..] {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push(String::new());
                continue;
            }
            _ => {}
        }
        items.last_mut().expect("one item at least").push(c);
    }
    items
}

/// The source with comments and the contents of string and character
/// literals blanked out (newlines kept, so lines still count).
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_is_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                    out.push_str("  ");
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    out.push_str("  ");
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r'))) && !prev_is_ident {
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[start..].iter().take_while(|c| **c == '#').count();
            if chars.get(start + hashes) == Some(&'"') {
                let closing: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                out.push(c);
                i = start + hashes + 1;
                while i < chars.len() && chars[i..].iter().take(closing.len()).ne(closing.iter()) {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                i += closing.len();
            } else {
                out.push(c);
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let step = if chars[i] == '\\' { 2 } else { 1 };
                for &skipped in chars.iter().skip(i).take(step) {
                    blank(&mut out, skipped);
                }
                i += step;
            }
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime.
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}
