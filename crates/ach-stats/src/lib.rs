//! `ach-stats`: paired tests, effect sizes and intervals as scipy and R compute them.
//!
//! Skeleton: built by the statistics issue. Depends on no other `ach-*` crate; no I/O.
