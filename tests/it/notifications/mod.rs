//! Notifications through the outbox (DESIGN §14): each channel against a
//! real receiver.

mod operate;
mod webhook;
