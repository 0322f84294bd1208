//! `ach-sim`: scenarios, runs and the experiment matrix of the ACH paper.
//!
//! A run ([`simulate`]) is a pure function of a series configuration, a profile and a run
//! index: the scenario draws each step's requests once (per-token Poisson counts, exact in
//! distribution for Poisson arrivals over the key universe), every algorithm routes them with
//! its own ring, turns them into telemetry, plans and commits its moves; the run records the
//! observed and true imbalance, the cost of every step and every invariant violation.
//!
//! The crate depends on the model crates only. It does no file or network I/O and reads no
//! clock; every random number comes from a stream derived from the run's seed ([`streams`]).
//! Parallel execution ([`matrix`]) gives the same records whatever the thread count.

pub mod algorithms;
pub mod config;
pub mod keys;
pub mod matrix;
pub mod pacing;
pub mod phases;
pub mod point;
pub mod reading;
pub mod record;
pub mod run;
pub mod streams;
pub mod summary;
pub mod sweep;
pub mod token_loads;
pub mod validate;
pub mod workload;

pub use algorithms::{AlgorithmInfo, Registry};
pub use config::{AchFilter, ChBlConfig, Profile, SeriesConfig, SweepPoint, built_in_series};
pub use matrix::run_jobs_with;
pub use record::{Aggregates, AlgorithmRecord, RunRecord};
pub use run::{RunSpec, SimError, simulate, simulate_probed};
