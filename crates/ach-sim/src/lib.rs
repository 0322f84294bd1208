//! `ach-sim`: scenarios, runs and the experiment matrix of the ACH paper.
//!
//! Skeleton: built by the simulation issue. Depends on the model crates; no file I/O.
