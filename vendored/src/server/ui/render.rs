//! What turns a page's data into HTML and its answer: the templates
//! (templates.rs, with the `Page` contexts' layout), times and paths as
//! people read them (format.rs), payloads as trees and diffs (payload.rs),
//! a run's timeline (timeline.rs), a gate's votes (votes.rs), who may
//! decide a gate (deciders.rs), a run's context in a list (context.rs), a
//! gate's form as typed fields (fields.rs), and the
//! security headers of every answer (headers.rs).

pub(crate) mod context;
pub(crate) mod deciders;
pub(crate) mod fields;
pub(crate) mod format;
pub(crate) mod headers;
pub(crate) mod payload;
pub(crate) mod templates;
pub(crate) mod timeline;
pub(crate) mod votes;
