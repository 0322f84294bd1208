//! Shared helpers of the integration tests.

#![allow(dead_code)]

mod slot_map;
mod workload;

use std::process::{Command, Output};

// Not every test file reads slot maps or plans.
#[allow(unused_imports)]
pub use slot_map::*;
pub use workload::*;

/// Runs the `ach-redis` binary to completion.
pub fn ach_redis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ach-redis"))
        .args(args)
        .output()
        .expect("the ach-redis binary runs")
}

/// Runs each named test function (which takes the [`ach_redis::local::ServerKind`] of the
/// servers to start) once per backend: `redis_backend::NAME` on `redis-server`,
/// `valkey_backend::NAME` on `valkey-server` (Valkey 9, the valkey backend). A missing server
/// binary fails the test with the command that installs it.
#[allow(unused_macros)]
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod redis_backend {
            $(
                #[test]
                fn $name() {
                    super::$name(ach_redis::local::ServerKind::Redis)
                }
            )*
        }
        mod valkey_backend {
            $(
                #[test]
                fn $name() {
                    super::$name(ach_redis::local::ServerKind::Valkey)
                }
            )*
        }
    };
}
