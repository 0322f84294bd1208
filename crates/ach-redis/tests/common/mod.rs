//! Shared helpers of the integration tests.

#![allow(dead_code)]

mod workload;

use std::process::{Command, Output};

pub use workload::*;

/// Runs the `ach-redis` binary to completion.
pub fn ach_redis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ach-redis"))
        .args(args)
        .output()
        .expect("the ach-redis binary runs")
}
