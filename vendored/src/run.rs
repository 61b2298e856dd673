//! STUB
pub struct AgentRun;
pub struct RunOutcome;
#[derive(Debug)]
pub struct RunError;
