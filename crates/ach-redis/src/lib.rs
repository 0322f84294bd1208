//! `ach-redis`: ACH rebalancing a live Redis Cluster.
//!
//! The rebalancer runs beside the cluster. Each control step it reads the cluster's shape
//! (`CLUSTER NODES`), the keys in every slot (`CLUSTER COUNTKEYSINSLOT`) and each master's
//! telemetry (`INFO`: cpu time, memory, latency percentiles), feeds the readings to ACH's
//! [`LoadTracker`](ach_telemetry::LoadTracker), asks a balancing algorithm for a plan over a
//! ring with one token per slot whose arc is the slot's share of the keys (so a budget is a
//! budget of keys actually copied), moves every planned slot with Redis Cluster's standard live
//! migration protocol ([`migrate`]) and confirms to the controller only the moves whose slot
//! switched owner. [`migrate::fix`] closes slots an interrupted run left open.
//!
//! This is an edge crate: it does network I/O and reads clocks. It must not put any of that
//! into the model crates (`ach-ring`, `ach-control`, `ach-telemetry`, `ach-baselines`), which
//! it only calls. Every command goes to one named node over a plain connection; the `redis`
//! crate's cluster pipelines are not used, since they misbehave while a slot migrates.
//!
//! [`local`] starts throwaway local servers and clusters for the tests and measurements.
//! [`cli`] is the `ach-redis` command line over a catalogue of algorithms
//! (`ach_baselines::catalogue`): a user's binary runs it with its own algorithms added.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use ach_redis::cluster::Cluster;
//!
//! let mut cluster = Cluster::connect("127.0.0.1:7000", Duration::from_secs(5))?;
//! let snapshot = cluster.snapshot()?;
//! println!("{} masters, healthy: {}", snapshot.masters.len(), snapshot.healthy());
//! # Ok::<(), ach_redis::Error>(())
//! ```

pub mod backend;
pub mod cli;
pub mod cluster;
pub mod compact;
pub mod control;
pub mod drain;
mod error;
pub mod explain;
mod live;
pub mod local;
pub mod local_prometheus;
pub mod metrics;
pub mod migrate;
pub mod node_telemetry;
pub mod notable;
pub mod prometheus_api;
pub mod prometheus_telemetry;
pub mod rebalance;
pub mod report;
pub mod resp;
pub mod security;
pub mod slot;
pub mod summary;
pub mod telemetry;
pub mod topology;

pub use error::Error;
pub use live::{EMPTY_SLOT_SHARE, key_weighted_ring};
