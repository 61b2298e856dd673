//! Work a server does beside its requests, each task owned by the
//! supervisor: schedules, the expiry sweeper, and the supervisor itself.

pub mod schedule;
pub(crate) mod supervisor;
pub(crate) mod sweeper;
