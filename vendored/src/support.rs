//! Support: small helpers every layer shares and that belong to none of
//! them (time, hex, secret references, backoff, HMAC, named enums,
//! the environment variables read, what an export embeds). Refers to no
//! other layer.

pub mod backoff;
pub mod embedded;
pub mod env;
#[cfg(unix)]
pub mod fatal;
pub mod hex;
pub mod hmac;
pub mod json_depth;
pub mod json_doc;
pub mod json_keys;
pub(crate) mod json_kind;
pub mod json_scan;
pub mod large_blocks;
pub mod names;
pub mod secrets;
pub mod time;
pub mod webhook_signature;
