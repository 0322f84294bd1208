//! `ach-telemetry`: from per-node request counts to the load vector an ACH controller observes.
//!
//! Skeleton: the cluster model, distortion, smoothing and composite load are built by the
//! controller/telemetry issue. The crate depends on no other `ach-*` crate and does no I/O.
