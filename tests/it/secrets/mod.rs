//! `${NAME}` secrets: resolved at call time, never stored, logged or echoed back, in any encoding.

mod encodings;
mod references;
