//! One control step of `ach-redis plan` on a synthetic observation: 16384 slots over 100
//! masters, no servers. A step is what `ach_redis::control::Controller::plan` computes for an
//! observation: the key-weighted slot ring (`ach_redis::key_weighted_ring`), then the
//! algorithm's plan on it. ACH runs with its live configuration (`AchConfig::live()`, what `ach_redis` runs); the
//! baselines Dynamic-R and Bounded-Loads with their paper parameters, for comparison.
//!
//! Every iteration plans from the same state (a fresh copy of the balancer), as the first
//! step of an imbalance does; the number of moves each plan makes is printed once, so that a
//! step that plans nothing cannot pass for a fast one.
//!
//! Run with `CARGO_TARGET_DIR=/work/target-bench cargo bench -p ach-benches --bench redis_plan`.

#![allow(missing_docs)] // `criterion_group!` generates an undocumented public function.

use ach_baselines::{BoundedLoads, DynamicR};
use ach_benches::uniform_values;
use ach_control::{Ach, AchConfig, Balancer, Observation};
use ach_redis::key_weighted_ring;
use ach_ring::NodeId;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;

/// Hash slots of a Redis Cluster.
const SLOTS: usize = 16_384;

/// Masters of the synthetic cluster.
const MASTERS: usize = 100;

/// A synthetic observation: keys per slot (500 to 1500, deterministic), slots in contiguous
/// ranges per master as `redis-cli --cluster create` assigns them, and loads spread from 0.3
/// to 1.0 so that a fifth of the masters are above ACH's switch-on threshold and a fifth below
/// its switch-off one.
struct Synthetic {
    slot_keys: Vec<u64>,
    owners: Vec<NodeId>,
    loads: Vec<f64>,
    live: Vec<bool>,
    total_load: f64,
}

fn synthetic() -> Synthetic {
    let slot_keys = uniform_values(7, SLOTS)
        .iter()
        .map(|u| 500 + (u * 1000.0) as u64)
        .collect();
    let owners = (0..SLOTS)
        .map(|slot| NodeId((slot * MASTERS / SLOTS) as u32))
        .collect();
    let loads: Vec<f64> = uniform_values(11, MASTERS)
        .iter()
        .map(|u| 0.3 + 0.7 * u)
        .collect();
    let total_load = loads.iter().sum::<f64>() / MASTERS as f64;
    Synthetic {
        slot_keys,
        owners,
        loads,
        live: vec![true; MASTERS],
        total_load,
    }
}

/// One control step: the ring of the observation, then `balancer`'s plan on it; returns the
/// number of moves.
fn step(balancer: &mut dyn Balancer, input: &Synthetic) -> usize {
    let ring = key_weighted_ring(&input.slot_keys, input.owners.clone()).expect("a valid ring");
    let observation = Observation {
        step: 0,
        loads: &input.loads,
        total_load: input.total_load,
        live: &input.live,
        token_loads: None,
    };
    balancer.plan(&ring, &observation).moves.len()
}

/// The balancers a step is measured with, by label.
const BALANCERS: [&str; 3] = ["ach_live", "dynamic_r", "bounded_loads"];

/// A fresh balancer for `label` (one of [`BALANCERS`]).
fn fresh(label: &str) -> Box<dyn Balancer> {
    match label {
        "ach_live" => {
            Box::new(Ach::new(AchConfig::live()).expect("the live configuration is valid"))
        }
        "dynamic_r" => Box::new(DynamicR::paper()),
        _ => Box::new(BoundedLoads::paper()),
    }
}

fn plan_step(c: &mut Criterion) {
    let input = synthetic();
    let mut group = c.benchmark_group("redis_plan");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    group.bench_function("ring_only", |b| {
        b.iter(|| black_box(key_weighted_ring(&input.slot_keys, input.owners.clone()).unwrap()))
    });
    for label in BALANCERS {
        let moves = step(fresh(label).as_mut(), &input);
        eprintln!("redis_plan/{label}: {SLOTS} slots, {MASTERS} masters, {moves} moves planned");
        group.bench_function(label, |b| {
            b.iter_batched(
                || fresh(label),
                |mut balancer| black_box(step(balancer.as_mut(), black_box(&input))),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, plan_step);
criterion_main!(benches);
