//! The approvals inbox (server/ui) over real loopback HTTP against real
//! `tollgate serve` processes, without a browser (tests/it/browser drives
//! Chromium): headers, sessions, CSRF, decisions by plain form POST,
//! escaping, signed links, loopback mode and redirects.

mod client;
mod decisions;
mod headers;
mod links;
mod live;
mod loopback;
mod runs;
mod sessions;
