//! The spec language (DESIGN §2): errors with positions, limits, the hash, and property tests of the reader and the expressions.

mod checks;
mod errors;
mod expr_fuzz;
mod fuzz;
mod hash;
mod limits;
mod oracle;
mod policies;
mod tabs;
