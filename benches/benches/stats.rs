//! Benchmarks of `ach-stats`: Cliff's delta for 10^6 against 10^6 values and the exact
//! Wilcoxon signed-rank test at n = 50.
//!
//! Run with `CARGO_TARGET_DIR=/work/target-bench cargo bench -p ach-benches --bench stats`.

#![allow(missing_docs)] // `criterion_group!` generates an undocumented public function.

use ach_benches::uniform_values;
use ach_stats::{WilcoxonMethod, WilcoxonOptions, cliffs_delta, wilcoxon};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

fn cliffs_delta_million(c: &mut Criterion) {
    let x = uniform_values(1, 1_000_000);
    let y: Vec<f64> = uniform_values(2, 1_000_000)
        .iter()
        .map(|v| v + 0.1)
        .collect();
    let mut group = c.benchmark_group("cliffs_delta");
    group.sample_size(10);
    group.bench_function("1e6_vs_1e6", |b| {
        b.iter(|| cliffs_delta(black_box(&x), black_box(&y)).unwrap())
    });
    group.finish();
}

fn wilcoxon_exact_50(c: &mut Criterion) {
    let x = uniform_values(3, 50);
    let y: Vec<f64> = uniform_values(4, 50).iter().map(|v| v * 0.9).collect();
    let options = WilcoxonOptions {
        method: WilcoxonMethod::Exact,
        ..WilcoxonOptions::scipy_default()
    };
    c.bench_function("wilcoxon_exact_n50", |b| {
        b.iter(|| wilcoxon(black_box(&x), black_box(&y), &options).unwrap())
    });
}

criterion_group!(benches, cliffs_delta_million, wilcoxon_exact_50);
criterion_main!(benches);
