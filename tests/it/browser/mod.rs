//! The approvals inbox (DESIGN §11) in a real headless Chromium, driven
//! over WebDriver (common/webdriver.rs), against real `tollgate serve`
//! processes on real SQLite files. Every test ends by checking the store
//! through the API or the SQLite file, not only the page.
//! Screenshots: target/screenshots/; `scripts/screenshots` also rewrites
//! the ones docs/screenshots/ holds (the guides show those).

mod access;
mod approver;
mod decide;
mod desk;
mod driver;
mod form;
mod inbox;
mod links;
mod refusals;
mod sign_in;
mod stale;
mod votes;
