//! `ach-control`: the ACH controller and the interface every balancing algorithm implements.
//!
//! Skeleton: built by the controller/telemetry issue. Depends on `ach-ring` only; no I/O, no
//! clock, no randomness.
