//! Who may use the inbox, apart from what the pages show: signed session
//! cookies and the key they are signed with (session.rs), CSRF tokens
//! (csrf.rs), and the viewer every page handler is for (viewer.rs).

pub(crate) mod csrf;
pub(crate) mod session;
pub(crate) mod viewer;
