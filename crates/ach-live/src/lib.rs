//! `ach-live`: the paper's scenarios on a real Redis Cluster, ACH against the operators' tools.
//!
//! [`run`] measures each capacity class's service rate ([`calibrate`]), then, per arm and
//! repeat, starts a local Valkey 9 or Redis 7 cluster of heterogeneous nodes (the paper's strong,
//! medium and weak classes made real with a CPU quota per server process, see [`cgroup`]), loads
//! the keys, drives the same seeded request sequence ([`workload`], each client routing by its own slot
//! map, [`routes`]) against it while the arm
//! rebalances (nothing, `redis-cli --cluster rebalance` with the capacity weights, or any
//! algorithm of the catalogue through `ach-redis`'s rebalance loop), grades every step by the
//! ground truth ([`truth`]: the simulator's load of the requests scheduled for the slots each
//! node owned) beside the nodes' own telemetry, checks every key at the end, runs the same
//! scenario through the simulator calibrated to the measured rates ([`simulator`]) and writes
//! `summary.json`, `runs/`, `REPORT.md` and SVG figures ([`output`], [`summary`], [`report`]).
//! Every fallible function returns an error enum of [`error`].
//!
//! This is an edge crate: it starts processes, writes cgroup files, does network and file I/O
//! and reads clocks. It must not put any of that into the model crates, which it only calls, and
//! it must never leave a `redis-server` or a cgroup behind: servers are stopped by PID and
//! cgroups removed when their guards drop, also on failure.

pub mod cadence;
pub mod calibrate;
pub mod cgroup;
pub mod error;
pub mod experiment;
pub mod listing;
pub mod output;
pub mod pace;
pub mod readings;
pub mod report;
pub mod resimulate;
pub mod routes;
pub mod simulator;
pub mod summary;
pub mod truth;
pub mod workload;

pub use error::{
    CadenceError, CgroupError, ConfigError, ExperimentError, LiveError, OutputError, SimulatorError,
};
pub use experiment::{Arm, CpuReading, LiveBackend, LiveConfig, run};
