//! `ach-baselines`: the baseline algorithms A0-A3 of the ACH paper.
//!
//! Skeleton: built by the controller/telemetry issue. Depends on `ach-ring` and `ach-control`.
