//! The workload of a run: key popularity folded onto the tokens, and each step's per-token
//! request counts (spec section 2).
//!
//! Requests arrive as `N(t) ~ Poisson(Lambda(t))`, each picks a key with probability `P(k)`
//! and is a write with probability `write_fraction`. By Poisson thinning, the reads and the
//! writes of token `s` are then independent Poisson variables with means
//! `Lambda(t) * p_s * (1 - write_fraction)` and `Lambda(t) * p_s * write_fraction`, where `p_s`
//! sums `P(k)` over the keys token `s` owns. Drawing them per token is exact in distribution
//! and costs `O(V)` per step whatever the request rate.

use ach_ring::TokenRing;
use rand_distr::{Distribution, Poisson};
use rand_pcg::Pcg64Mcg;

/// The shared workload of a run: key popularity folded onto the tokens.
pub struct Workload {
    /// `p[s]`: probability that a request's key belongs to token `s`.
    token_probability: Vec<f64>,
    /// Poisson distributions of reads and writes per token for the current rate, or `None`
    /// for tokens that own no key.
    reads: Vec<Option<Poisson<f64>>>,
    writes: Vec<Option<Poisson<f64>>>,
    rate: f64,
    write_fraction: f64,
}

impl Workload {
    /// Folds key popularity (Zipf exponent `zipf_s`, 0 for uniform) onto the tokens at
    /// `positions` (sorted, strictly increasing): key `k` with hash `hashes[k]` has rank `k + 1`.
    pub fn new(positions: &[f64], hashes: &[f64], zipf_s: f64, write_fraction: f64) -> Workload {
        let lookup = TokenRing::round_robin(positions.to_vec(), 1)
            .expect("positions were validated by the caller");
        // P(key of rank r) is proportional to r^-s; key k has rank k + 1.
        let weights: Vec<f64> = (0..hashes.len())
            .map(|k| {
                if zipf_s == 0.0 {
                    1.0
                } else {
                    ((k + 1) as f64).powf(-zipf_s)
                }
            })
            .collect();
        let total: f64 = weights.iter().sum();
        let mut token_probability = vec![0.0; positions.len()];
        for (&h, w) in hashes.iter().zip(&weights) {
            token_probability[lookup.lookup(h)] += w / total;
        }
        Workload {
            token_probability,
            reads: Vec::new(),
            writes: Vec::new(),
            rate: f64::NAN,
            write_fraction,
        }
    }

    /// Probability that a request's key belongs to each token.
    pub fn token_probability(&self) -> &[f64] {
        &self.token_probability
    }

    /// Draws this step's read and write counts of every token at rate `rate`.
    pub fn draw(
        &mut self,
        rate: f64,
        rng: &mut Pcg64Mcg,
        requests: &mut [u64],
        writes: &mut [u64],
    ) {
        if rate != self.rate {
            self.rate = rate;
            let poisson = |mean: f64| Poisson::new(mean).ok().filter(|_| mean > 0.0);
            let read_share = rate * (1.0 - self.write_fraction);
            let write_share = rate * self.write_fraction;
            self.reads = self
                .token_probability
                .iter()
                .map(|p| poisson(read_share * p))
                .collect();
            self.writes = self
                .token_probability
                .iter()
                .map(|p| poisson(write_share * p))
                .collect();
        }
        for s in 0..self.token_probability.len() {
            let r = self.reads[s].as_ref().map_or(0, |d| d.sample(rng) as u64);
            let w = self.writes[s].as_ref().map_or(0, |d| d.sample(rng) as u64);
            requests[s] = r + w;
            writes[s] = w;
        }
    }
}
