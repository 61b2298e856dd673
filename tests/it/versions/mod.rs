//! Spec versions across deploys (DESIGN §12): what a deploy will do to
//! the approvals and runs waiting on older versions.

mod plan;
