//! The reference pages (docs/reference/) and the registries they are
//! generated from: a stale page fails, and so does code that reads an
//! environment variable, writes a metric, answers an error code or emits
//! an event its registry does not list.

mod pages;
mod registries;
