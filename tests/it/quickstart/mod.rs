//! The first hour (issue 42): README.md's Quick start runs as pasted, and
//! what it leans on to take a key and a run id into a shell without a
//! JSON tool (`--quiet` listings, `POST /runs?wait=true`).

mod quiet;
mod readme;
mod run_wait;
