//! The askama templates of an export (`templates/`), one type per file.
//!
//! Escaping is off everywhere: these are Rust, TOML, Markdown and shell
//! files, not HTML. Values that need quoting in their target language go
//! through the filters below.

use askama::Template;

use super::ExportError;
use super::model::{Model, RustTool};

macro_rules! template {
    ($name:ident, $path:literal) => {
        #[derive(Template)]
        #[template(path = $path, escape = "none")]
        pub struct $name<'m, 'a> {
            pub m: &'m Model<'a>,
        }
    };
}

template!(CargoToml, "Cargo.toml.in");
template!(Readme, "README.md");
template!(MainRs, "main.rs");
template!(WorkflowRs, "workflow.rs");
template!(Dockerfile, "Dockerfile");
template!(EnvExample, "env.example");
template!(SmokeRs, "smoke.rs");

/// The file of one `rust:` tool, `src/tools/<name>.rs`.
#[derive(Template)]
#[template(path = "tool.rs", escape = "none")]
pub struct ToolRs<'m> {
    pub tool: &'m RustTool,
}

/// Every `rust:` tool's file, by path.
pub fn tool_files(m: &Model<'_>) -> Result<Vec<(String, String)>, ExportError> {
    m.rust_tools
        .iter()
        .map(|tool| {
            let text = render(&tool.file, &ToolRs { tool })?;
            Ok((
                tool.file.clone(),
                format!("{}\n", text.trim_end_matches('\n')),
            ))
        })
        .collect()
}

/// Files without anything to fill in.
pub const DOCKERIGNORE: &str = include_str!("../../templates/dockerignore");
pub const GITIGNORE: &str = include_str!("../../templates/gitignore");

/// Render one template, naming the file on failure (a template bug).
pub fn render(path: &str, template: &dyn DynRender) -> Result<String, ExportError> {
    template
        .render_dyn()
        .map_err(|e| ExportError::internal(path, e))
}

/// Object-safe rendering, so the plan can hold templates of different types.
pub trait DynRender {
    fn render_dyn(&self) -> askama::Result<String>;
}

impl<T: Template> DynRender for T {
    fn render_dyn(&self) -> askama::Result<String> {
        self.render()
    }
}

mod filters {
    /// A TOML basic string, quotes included.
    pub fn toml<T: std::fmt::Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
        let text = value.to_string();
        let mut out = String::with_capacity(text.len() + 2);
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        Ok(out)
    }

    /// Text for one line of a Markdown table cell: no newlines, no bare pipes.
    pub fn cell<T: std::fmt::Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(value.to_string().replace('\n', " ").replace('|', "\\|"))
    }

    /// A Rust string literal, quotes included.
    pub fn rust<T: std::fmt::Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(format!("{:?}", value.to_string()))
    }

    /// One-line text for a `#` comment.
    pub fn comment<T: std::fmt::Display>(
        value: T,
        _: &dyn askama::Values,
    ) -> askama::Result<String> {
        Ok(value.to_string().replace('\n', " "))
    }
}
