//! Notifications through the outbox (DESIGN §14): each channel against a
//! real receiver.

mod delivery;
mod email;
mod lanes;
mod operate;
pub(crate) mod webhook;
