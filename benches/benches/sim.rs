//! Benchmarks of `ach-sim`: whole runs of series C1, C3 and C4c (all five algorithms, 2000
//! steps, one thread), C1 at a hundred times its request rate, and one step of per-token
//! request sampling at the C1 rate and at a hundred times it, beside the step's random words
//! alone.
//!
//! Run with `CARGO_TARGET_DIR=/work/target-bench cargo bench -p ach-benches --bench sim`.

#![allow(missing_docs)] // `criterion_group!` generates an undocumented public function.

use ach_benches::uniform_values;
use ach_sim::config::LoadProfile;
use ach_sim::streams::{Stream, stream};
use ach_sim::workload::Workload;
use ach_sim::{Profile, RunSpec, SeriesConfig, built_in_series, simulate};
use criterion::{Criterion, criterion_group, criterion_main};
use rand::RngCore;
use std::hint::black_box;
use std::time::Duration;

/// The request rate of series C1.
const C1_RATE: f64 = 1437.5;

/// The built-in series called `name`.
fn series(name: &str) -> SeriesConfig {
    built_in_series()
        .into_iter()
        .find(|s| s.name == name)
        .expect("a built-in series")
}

/// Run 0 of `config` in the paper profile.
fn run(config: &SeriesConfig) -> ach_sim::RunRecord {
    simulate(&RunSpec {
        config,
        point: None,
        profile: Profile::Paper,
        run_index: 0,
    })
    .expect("the built-in series run")
}

fn whole_runs(c: &mut Criterion) {
    let mut group = c.benchmark_group("run");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(4));
    group.warm_up_time(Duration::from_secs(1));
    for name in ["C1", "C3", "C4c"] {
        let config = series(name);
        group.bench_function(name, |b| b.iter(|| run(black_box(&config))));
    }
    let mut heavy = series("C1");
    heavy.load = LoadProfile::Constant {
        lambda: 100.0 * C1_RATE,
    };
    group.bench_function("C1_lambda_x100", |b| b.iter(|| run(black_box(&heavy))));
    group.finish();
}

/// One step of request sampling for the C1 workload (1000 tokens, 50 000 uniform keys, 30 %
/// writes), at the C1 rate and at a hundred times it. The tables are built before timing.
fn sampling_step(c: &mut Criterion) {
    let config = series("C1");
    let hashes = uniform_values(42, config.keys);
    let mut positions = hashes[..config.tokens].to_vec();
    positions.sort_by(f64::total_cmp);
    let mut group = c.benchmark_group("sampling_step");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    group.warm_up_time(Duration::from_secs(1));
    for (label, rate) in [("lambda", C1_RATE), ("lambda_x100", 100.0 * C1_RATE)] {
        let mut workload = Workload::new(&positions, &hashes, config.zipf_s, config.write_fraction);
        let mut rng = stream(42, Stream::Requests);
        let mut packed = vec![0_u64; config.tokens];
        workload.draw_packed(rate, &mut rng, &mut packed);
        group.bench_function(label, |b| {
            b.iter(|| {
                workload.draw_packed(black_box(rate), &mut rng, &mut packed);
                black_box(&packed);
            })
        });
    }
    // The step's random words alone, written where the draw writes its counts: one word a
    // token from the request stream's generator, which every draw of the same stream needs,
    // so the floor under the draw (`lambda`) of any change that keeps the values.
    let mut rng = stream(42, Stream::Requests);
    let mut packed = vec![0_u64; config.tokens];
    group.bench_function("random_words", |b| {
        b.iter(|| {
            for word in packed.iter_mut() {
                *word = rng.next_u64();
            }
            black_box(&packed);
        })
    });
    // The rebuild path: the rate changes every step, as in series C2 after t = 350.
    let mut workload = Workload::new(&positions, &hashes, config.zipf_s, config.write_fraction);
    let mut rng = stream(42, Stream::Requests);
    let mut packed = vec![0_u64; config.tokens];
    let mut step = 0_u32;
    group.bench_function("changing_rate", |b| {
        b.iter(|| {
            step = step.wrapping_add(1);
            let phase = f64::from(step % 50) / 50.0;
            let rate = 3200.0 * (1.0 + 0.25 * (2.0 * std::f64::consts::PI * phase).sin());
            workload.draw_packed(black_box(rate), &mut rng, &mut packed);
            black_box(&packed);
        })
    });
    group.finish();
}

criterion_group!(benches, sampling_step, whole_runs);
criterion_main!(benches);
