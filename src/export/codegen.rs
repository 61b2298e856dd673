//! `src/generated.rs`: built as token streams with quote and formatted with
//! prettyplease, so it is valid Rust by construction.
//!
//! prettyplease drops `//` comments, so items explain themselves with doc
//! comments, and the one `//` header is prepended after formatting. The file
//! names no tool version, so upgrading tollgate alone does not rewrite it.

use proc_macro2::{Ident, Span};
use quote::quote;

use super::model::Model;
use super::{ExportError, SPEC_FILE};

const PATH: &str = "src/generated.rs";
const TOOLS_PATH: &str = "src/tools/mod.rs";

/// Below the plan's "Code generated ... DO NOT EDIT." marker (the
/// `@generated` form tools such as rustfmt and GitHub also recognise).
const HEADER: &str = "// @generated from agent.yaml: every export rewrites this file, and an\n\
// export stops if it was edited. Change agent.yaml where you export from,\n\
// and your own code in main.rs and src/tools/NAME.rs.\n\n";

pub fn generated_rs(model: &Model<'_>) -> Result<String, ExportError> {
    let agent = model.agent;
    let spec_hash = model.spec_hash;
    let spec_include = format!("../{SPEC_FILE}");
    let webhook_paths: Vec<&str> = model.webhook.iter().map(|w| w.path.as_str()).collect();

    let tokens = quote! {
        //! What the server runs: the spec, embedded at build time.
        //!
        //! Formatted by the exporter, not by rustfmt: `cargo fmt` leaves it
        //! as generated, so `tollgate export --check` stays clean.
        #![cfg_attr(rustfmt, rustfmt::skip)]

        /// The agent id (`agent:` in agent.yaml).
        pub const AGENT: &str = #agent;

        /// The canonical hash of agent.yaml: approvals made under another spec
        /// are refused with `spec_changed`.
        pub const SPEC_HASH: &str = #spec_hash;

        /// The spec, embedded at build time.
        pub const SPEC_YAML: &str = include_str!(#spec_include);

        /// The spec's webhook paths (the server routes them already), for
        /// routes you add yourself.
        #[allow(dead_code)]
        pub const WEBHOOK_PATHS: &[&str] = &[#(#webhook_paths),*];

        /// The spec built into this program, for `tollgate_runtime::App::new`.
        pub fn embedded() -> tollgate_runtime::cli::Embedded {
            tollgate_runtime::cli::Embedded {
                agent: AGENT,
                spec_hash: SPEC_HASH,
                spec_yaml: SPEC_YAML,
                spec_file: #SPEC_FILE,
            }
        }
    };
    format_file(PATH, tokens)
}

/// `src/tools/mod.rs`: a module per `rust:` tool (its file is yours), the
/// registry main.rs calls (`.tools(tools::register)`), registering each
/// tool as what its file's `tool` function builds, and a compile-time
/// check per tool that `tool` builds a `CustomTool`, failing with a message
/// that names the tool's file rather than this one. It names only what the
/// spec declares and the export's contract: each tool's module and its
/// `tool` function, never a type of yours, so a missing or misnamed file or
/// function fails `cargo build` naming it.
pub fn tools_mod_rs(model: &Model<'_>) -> Result<String, ExportError> {
    let modules = model.rust_tools.iter().map(|tool| {
        let module = module_ident(&tool.module);
        // A tool named `tools` is a module `tools` inside `tools`, which
        // clippy flags (the export must pass `clippy -D warnings`).
        let inception =
            (tool.module == "tools").then(|| quote! { #[allow(clippy::module_inception)] });
        match &tool.module_path {
            Some(path) => quote! { #[path = #path] #inception mod #module; },
            None => quote! { #inception mod #module; },
        }
    });
    let registrations = model.rust_tools.iter().map(|tool| {
        let module = module_ident(&tool.module);
        let name = &tool.name;
        quote! { .build_tool(#name, self::#module::tool) }
    });
    let checks = model.rust_tools.iter().map(|tool| {
        let module = module_ident(&tool.module);
        let message = format!(
            "the `rust:` tool `{}` of agent.yaml is not implemented: `tool` in {} does not build a `CustomTool`",
            tool.name, tool.file
        );
        let label = format!(
            "implement `tollgate_runtime::tools::CustomTool` for what `tool` in {} returns",
            tool.file
        );
        let note = format!(
            "{} is yours: `tollgate export` wrote it when the tool first appeared and never rewrites it",
            tool.file
        );
        // The trait and function live in the const's block, so no tool's
        // module can clash with them; no type name has an underscore.
        quote! {
            const _: () = {
                #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
                trait Implemented_ {}
                impl<T: ::tollgate_runtime::tools::CustomTool> Implemented_ for T {}
                const fn builds_a_tool_<T: Implemented_>(
                    _: fn(&::tollgate_runtime::tools::ToolEnv) -> Result<T, ::tollgate_runtime::tools::ToolError>,
                ) {}
                builds_a_tool_(self::#module::tool)
            };
        }
    });
    let body = if model.rust_tools.is_empty() {
        quote! {
            //! The spec's `rust:` tools, one file each: agent.yaml declares none.
            //!
            //! Declare one in the spec (`tools: { score_risk: { rust: {} } }`) and
            //! export again: the export writes its file, `src/tools/score_risk.rs`,
            //! which is yours from then on, declares it here and registers it in
            //! [`register`]; main.rs does not change.
            #![cfg_attr(rustfmt, rustfmt::skip)]

            /// Registers every `rust:` tool of agent.yaml on `app`: it declares
            /// none. main.rs calls it once, with `.tools(tools::register)`.
            pub fn register(app: ::tollgate_runtime::App) -> ::tollgate_runtime::App {
                app
            }
        }
    } else {
        quote! {
            //! The spec's `rust:` tools, one file each: `src/tools/NAME.rs` is
            //! yours (written once, when the tool first appears); this file is
            //! rewritten on every export. [`register`] registers each tool as
            //! what its file's `tool` function builds, and each is checked at
            //! compile time: a missing file or `tool` function, or one that does
            //! not build a `CustomTool`, fails the build naming the tool's file.
            #![cfg_attr(rustfmt, rustfmt::skip)]

            #(#modules)*

            /// Registers every `rust:` tool of agent.yaml on `app`, each built once,
            /// when a command that runs the spec starts, by the `tool` function of
            /// its file. main.rs calls it once, with `.tools(tools::register)`.
            pub fn register(app: ::tollgate_runtime::App) -> ::tollgate_runtime::App {
                app #(#registrations)*
            }

            #(#checks)*
        }
    };
    format_file(TOOLS_PATH, body).map(|text| space_groups(&text))
}

/// A blank line between the groups of `src/tools/mod.rs`: the modules, the
/// registry, and each check.
fn space_groups(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + 256);
    let mut previous_group = "";
    for line in code.lines() {
        let group = if line.starts_with("mod ")
            || line.starts_with("#[path")
            || line.starts_with("#[allow(clippy::module_inception)]")
        {
            "mod"
        } else if line.starts_with("const _") {
            "check"
        } else {
            ""
        };
        let starts_group = !group.is_empty() && (group != previous_group || group == "check");
        if starts_group && !out.ends_with("\n\n") {
            out.push('\n');
        }
        if !group.is_empty() {
            previous_group = group;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A module name as an identifier: `r#type` is a raw one.
fn module_ident(module: &str) -> Ident {
    match module.strip_prefix("r#") {
        Some(raw) => Ident::new_raw(raw, Span::call_site()),
        None => Ident::new(module, Span::call_site()),
    }
}

fn format_file(path: &str, tokens: proc_macro2::TokenStream) -> Result<String, ExportError> {
    let file: syn::File = syn::parse2(tokens).map_err(|e| ExportError::internal(path, e))?;
    Ok(format!(
        "{HEADER}{}",
        space_items(&prettyplease::unparse(&file))
    ))
}

/// prettyplease puts top-level items on consecutive lines; a blank line
/// before each documented item reads better (and rustfmt keeps it).
fn space_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + 256);
    let mut previous = "";
    for line in code.lines() {
        let starts_item = line.starts_with("///") || line.starts_with("#[");
        let continues = previous.starts_with("///") || previous.starts_with("#[");
        if starts_item && !continues && !previous.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
        previous = line;
    }
    out
}
