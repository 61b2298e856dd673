//! Who acts: the caller every use case is asked by, and what it may do.
//! How a caller is recognised (a bearer token, a session, a signed link, a
//! Slack signature) is each adapter's business; the use cases see only this.

/// The authenticated caller: the name that goes into `decided_by`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(pub String);

crate::named_enum! {
    /// What a token may do.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum Scope {
        /// Everything: decide, list, operate, and request.
        #[default]
        Full = "full",
        /// Ask for approvals (`/gates`, `/mcp`) and follow its own
        /// requests; never decide.
        Requester = "requester",
    }
}
