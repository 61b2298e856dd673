//! `openapi.json` in an export: the document the exported server serves at
//! `GET /openapi.json`, written beside it for clients and code generators
//! that read a file (the runtime builds both from the same spec, so they are
//! the same document).

use tollgate_runtime::server::openapi;
use tollgate_runtime::spec::Spec;

/// Where the document goes in an export.
pub const OPENAPI_FILE: &str = "openapi.json";

/// The export's OpenAPI document ([`OPENAPI_FILE`]): pretty-printed, so a
/// re-export's diff reads field by field, and ending in a newline like
/// every other text file of the export.
pub fn openapi_file(spec: &Spec) -> Vec<u8> {
    // `{:#}` is serde_json's pretty form, which cannot fail for a `Value`.
    format!("{:#}\n", openapi::document(spec)).into_bytes()
}
