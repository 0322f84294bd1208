//! Shared inputs of the benchmarks in `benches/benches/` (run them with
//! `cargo bench -p ach-benches`). Nothing here is part of the toolkit's API.

pub mod concurrent;

/// A deterministic pseudo-random sequence (SplitMix64) mapped to `[0, 1)`: the same inputs on
/// every machine and every run, without a random-number crate.
pub fn uniform_values(seed: u64, count: usize) -> Vec<f64> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1_u64 << 53) as f64
        })
        .collect()
}
