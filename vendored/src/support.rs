//! Small helpers the other layers share and that belong to none of them.

pub mod hmac;
