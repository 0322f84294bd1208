//! `ach-report`: the edge of the experiment matrix, as a library that a user's binary can call.
//!
//! It runs the matrix of [`ach_sim`] to disk and renders what the paper shows:
//!
//! - [`experiments`]: the `experiments` command (arguments, checks, resume, progress, parallel
//!   runs on a rayon pool) over [`ach_sim::matrix`];
//! - [`store`]: where run records live and how they are written (atomically); the one module of
//!   the workspace that knows the record format (bincode);
//! - [`outputs`]: `summary.json`, the series configurations, the published simulation's JSON and
//!   the printed summary;
//! - [`shard`]: a matrix split over processes or machines (Slurm array tasks) and `merge`;
//! - [`report`]: REPORT.md, tables (Markdown, LaTeX, CSV) and SVG figures, rendered from saved
//!   results only;
//! - [`mod@bench`]: the timed benchmark of one run at several cluster sizes (`bench-scale`);
//! - [`profile`]: the profile of one run by phase and the matrix's time (`bench-run`).
//!
//! This crate does file I/O and reads the clock (for progress, `timing.json` and the benchmark only); the model
//! crates it calls do neither. It must not compute anything a result depends on: every number it
//! writes comes from [`ach_sim`]'s records and summary, so the same results give byte-identical
//! files whatever the thread count or the binary that calls it (`cargo xtask` or a user's crate).

pub mod bench;
pub mod experiments;
pub mod outputs;
pub mod profile;
pub mod report;
pub mod shard;
pub mod store;
