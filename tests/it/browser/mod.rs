//! The approvals inbox (DESIGN §11) in a real headless Chromium, driven
//! over WebDriver (common/webdriver.rs), against real `tollgate serve`
//! processes on real SQLite files.

mod driver;
