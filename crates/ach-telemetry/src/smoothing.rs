//! EWMA smoothing, composite load and total load.

use crate::config::validate_beta;
use crate::error::{TelemetryConfigError, TelemetryError};
use crate::metrics::{METRIC_COUNT, Metrics};

/// Exponentially weighted moving average per node and metric, with state starting at zero:
/// `S <- (1 - beta) * S + beta * obs`.
#[derive(Debug, Clone, PartialEq)]
pub struct Smoother {
    beta: f64,
    state: Vec<Metrics>,
}

impl Smoother {
    /// Creates a smoother for `node_count` nodes with all state at zero.
    /// Fails when `beta` is not in `(0, 1]`.
    pub fn new(node_count: usize, beta: f64) -> Result<Smoother, TelemetryConfigError> {
        validate_beta(beta)?;
        Ok(Smoother {
            beta,
            state: vec![[0.0; METRIC_COUNT]; node_count],
        })
    }

    /// The smoothing factor.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// Number of nodes tracked.
    pub fn node_count(&self) -> usize {
        self.state.len()
    }

    /// The smoothed metrics of every node.
    pub fn state(&self) -> &[Metrics] {
        &self.state
    }

    /// Replaces the state (from a saved state).
    pub(crate) fn restore(&mut self, state: Vec<Metrics>) {
        self.state = state;
    }

    /// Changes the number of tracked nodes: new nodes start at zero, removed trailing nodes
    /// lose their state.
    pub fn resize(&mut self, node_count: usize) {
        self.state.resize(node_count, [0.0; METRIC_COUNT]);
    }

    /// Folds one observation per node into the state and returns the new state.
    /// Fails without changing the state when `observation` has the wrong length.
    pub fn update(&mut self, observation: &[Metrics]) -> Result<&[Metrics], TelemetryError> {
        TelemetryError::check_length("observation", self.state.len(), observation.len())?;
        self.fold(observation);
        Ok(&self.state)
    }

    /// Folds one observation per node into the state. The caller guarantees one entry per
    /// node.
    pub(crate) fn fold(&mut self, observation: &[Metrics]) {
        debug_assert_eq!(observation.len(), self.state.len());
        let keep = 1.0 - self.beta;
        for (state, observed) in self.state.iter_mut().zip(observation) {
            for metric in 0..METRIC_COUNT {
                // Same operation order as the reference: (1 - beta) * S, beta * obs, then the sum.
                state[metric] = keep * state[metric] + self.beta * observed[metric];
            }
        }
    }
}

/// Composite load of one node, the weighted Lp norm of its smoothed metrics:
/// `l = (sum_j weights_j * smoothed_j ^ p) ^ (1 / p)`.
///
/// The weighted terms are summed left to right (cpu, memory, latency), as numpy does for a row
/// of three. The powers are computed with `powf`, except for the paper's `p = 4`, where
/// `x^4 = (x * x) * (x * x)` and `y^(1/4) = sqrt(sqrt(y))`: two to three times faster, and like
/// `powf` within an ulp or two of the exact value. Against the recorded traces the composite
/// agrees to within a few ulps (well inside the 1e-12 of the replay); it cannot agree to the
/// last bit, because the recording machine's vectorised `pow` (most likely numpy's AVX-512
/// SVML path) is not correctly rounded. Everything before this stage is bit-identical.
pub fn composite_load(smoothed: &Metrics, weights: &[f64; METRIC_COUNT], p: f64) -> f64 {
    let mut sum = 0.0;
    if p == 4.0 {
        for metric in 0..METRIC_COUNT {
            let square = smoothed[metric] * smoothed[metric];
            sum += weights[metric] * (square * square);
        }
        return sum.sqrt().sqrt();
    }
    for metric in 0..METRIC_COUNT {
        sum += weights[metric] * smoothed[metric].powf(p);
    }
    sum.powf(1.0 / p)
}

/// Cluster total load: `alpha * mean(loads) + (1 - alpha) * max(loads)`; 0 for no nodes.
///
/// The mean sums with numpy's pairwise algorithm, so it matches `np.mean` to the last bit.
pub fn total_load(loads: &[f64], alpha: f64) -> f64 {
    if loads.is_empty() {
        return 0.0;
    }
    let mean = numpy_sum(loads) / loads.len() as f64;
    let max = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    alpha * mean + (1.0 - alpha) * max
}

/// Sum in the order of numpy's `pairwise_sum` for a contiguous float64 array: sequential
/// below 8 values, eight interleaved accumulators up to 128 values, halving above.
pub fn numpy_sum(values: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let count = values.len();
    if count < 8 {
        let mut sum = -0.0;
        for value in values {
            sum += value;
        }
        sum
    } else if count <= BLOCK {
        let mut accumulators = [0.0; 8];
        accumulators.copy_from_slice(&values[..8]);
        let unrolled_end = count - count % 8;
        let mut index = 8;
        while index < unrolled_end {
            for (lane, accumulator) in accumulators.iter_mut().enumerate() {
                *accumulator += values[index + lane];
            }
            index += 8;
        }
        let [a0, a1, a2, a3, a4, a5, a6, a7] = accumulators;
        let mut sum = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
        for value in &values[unrolled_end..] {
            sum += value;
        }
        sum
    } else {
        let mut half = count / 2;
        half -= half % 8;
        numpy_sum(&values[..half]) + numpy_sum(&values[half..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma_starts_from_zero() {
        let mut smoother = Smoother::new(1, 0.3).unwrap();
        assert_eq!(
            smoother.update(&[[1.0, 0.5, 0.0]]).unwrap(),
            &[[0.3, 0.15, 0.0]]
        );
        let state = smoother.update(&[[1.0, 0.5, 0.0]]).unwrap()[0];
        assert!((state[0] - 0.51).abs() < 1e-15);
        assert!((state[1] - 0.255).abs() < 1e-15);
        assert!(Smoother::new(1, 0.0).is_err());
    }

    #[test]
    fn ewma_resize_starts_new_nodes_at_zero() {
        let mut smoother = Smoother::new(1, 0.5).unwrap();
        smoother.update(&[[1.0; 3]]).unwrap();
        smoother.resize(2);
        assert_eq!(smoother.state(), &[[0.5; 3], [0.0; 3]]);
        assert!(smoother.update(&[[1.0; 3]]).is_err());
    }

    #[test]
    fn composite_of_known_vectors() {
        let weights = [0.4, 0.25, 0.35];
        assert_eq!(composite_load(&[0.0; 3], &weights, 4.0), 0.0);
        assert!((composite_load(&[1.0; 3], &weights, 4.0) - 1.0).abs() < 1e-15);
        // Only cpu at 0.5: (0.4 * 0.0625) ^ 0.25.
        let expected = (0.4_f64 * 0.0625).powf(0.25);
        assert_eq!(composite_load(&[0.5, 0.0, 0.0], &weights, 4.0), expected);
        // With p = 1 the composite is the weighted sum.
        let linear = composite_load(&[0.5, 1.0, 0.0], &weights, 1.0);
        assert!((linear - 0.45).abs() < 1e-15);
    }

    #[test]
    fn total_load_mixes_mean_and_max() {
        assert_eq!(total_load(&[0.2, 0.4, 0.6], 0.5), 0.5);
        assert_eq!(total_load(&[0.2, 0.4, 0.6], 1.0), 0.4000000000000001);
        assert_eq!(total_load(&[0.2, 0.4, 0.6], 0.0), 0.6);
        assert_eq!(total_load(&[], 0.5), 0.0);
    }

    #[test]
    fn numpy_sum_uses_pairwise_order() {
        let values: Vec<f64> = (0..10).map(|i| 0.1 * i as f64 + 1e-17).collect();
        let [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9] = values[..] else {
            unreachable!()
        };
        let expected = (((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) + a8) + a9;
        assert_eq!(numpy_sum(&values).to_bits(), expected.to_bits());
        let long: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        assert_eq!(numpy_sum(&long), 499_500.0);
    }
}
