//! A telemetry filter in front of any balancer: ACH-F is ACH behind a per-node median filter.

use ach_control::{Balancer, ConfirmError, Observation, Plan};
use ach_ring::TokenRing;

/// A balancer that sees, instead of each step's loads, the median of each node's last `window`
/// observed loads (and the median of the last `window` total loads).
///
/// The median is a robust filter for the paper's telemetry noise: one noisy sample in `window`
/// cannot move it past the other samples, so a single spike cannot start a rebalance. This is
/// the future work the paper names (a telemetry filter), not one of its algorithms. The
/// filtered value always lies between the smallest and the largest sample of its window; with
/// `window = 1` the balancer sees exactly what it is given.
///
/// A node's history restarts when it stops being live, so a node that leaves and joins again
/// is not judged by its old samples. For an even window the median is the mean of the two
/// middle samples.
#[derive(Clone, Debug)]
pub struct MedianFiltered<B> {
    inner: B,
    window: usize,
    /// Per node, its last samples, oldest first.
    history: Vec<Vec<f64>>,
    totals: Vec<f64>,
    filtered: Vec<f64>,
}

impl<B: Balancer> MedianFiltered<B> {
    /// `inner` behind a median filter of `window` steps (`window >= 1`; 0 is treated as 1).
    pub fn new(inner: B, window: usize) -> MedianFiltered<B> {
        MedianFiltered {
            inner,
            window: window.max(1),
            history: Vec::new(),
            totals: Vec::new(),
            filtered: Vec::new(),
        }
    }
}

/// The median of `samples` (not empty).
pub fn median(samples: &[f64]) -> f64 {
    median_in_place(&mut samples.to_vec())
}

/// The median of `samples` (not empty), reordering them: the middle value in the order of
/// `f64::total_cmp`, or the mean of the two middle ones. A selection finds them, the values
/// a sort would put there.
pub(crate) fn median_in_place(samples: &mut [f64]) -> f64 {
    let (middle, odd) = (samples.len() / 2, samples.len() % 2 == 1);
    let (below, &mut upper, _) = samples.select_nth_unstable_by(middle, f64::total_cmp);
    if odd {
        return upper;
    }
    // The largest value below the middle one is the lower of the two middle ones.
    let lower = below
        .iter()
        .copied()
        .max_by(f64::total_cmp)
        .expect("an even count of at least two");
    0.5 * (lower + upper)
}

fn push_window(samples: &mut Vec<f64>, value: f64, window: usize) {
    if samples.len() == window {
        samples.remove(0);
    }
    samples.push(value);
}

impl<B: Balancer> Balancer for MedianFiltered<B> {
    fn name(&self) -> &'static str {
        crate::catalogue::names::ACH_F
    }

    fn plan(&mut self, ring: &TokenRing, observation: &Observation<'_>) -> Plan {
        let n = observation.n_nodes();
        self.history.resize_with(n, Vec::new);
        self.filtered.clear();
        for (i, samples) in self.history.iter_mut().enumerate() {
            if observation.live.get(i).copied().unwrap_or(true) {
                push_window(samples, observation.loads[i], self.window);
                self.filtered.push(median(samples));
            } else {
                samples.clear();
                self.filtered.push(observation.loads[i]);
            }
        }
        push_window(&mut self.totals, observation.total_load, self.window);
        let filtered = Observation {
            step: observation.step,
            loads: &self.filtered,
            total_load: median(&self.totals),
            live: observation.live,
            token_loads: None,
        };
        self.inner.plan(ring, &filtered)
    }

    /// The inner algorithm's budget is charged on confirmation: a wrapper must pass it on.
    fn confirm(&mut self, plan: &Plan) -> Result<f64, ConfirmError> {
        self.inner.confirm(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StaticW;
    use crate::test_support::even_ring;
    use proptest::prelude::*;

    /// Remembers the last loads it saw.
    struct Spy(Vec<f64>, f64);

    impl Balancer for Spy {
        fn name(&self) -> &'static str {
            "spy"
        }

        fn plan(&mut self, _ring: &TokenRing, observation: &Observation<'_>) -> Plan {
            self.0 = observation.loads.to_vec();
            self.1 = observation.total_load;
            Plan::none()
        }
    }

    fn observe(filter: &mut MedianFiltered<Spy>, loads: &[f64], live: &[bool]) -> Vec<f64> {
        let ring = even_ring(30, loads.len());
        let total = loads.iter().sum::<f64>() / loads.len() as f64;
        let observation = Observation {
            step: 0,
            loads,
            total_load: total,
            live,
            token_loads: None,
        };
        filter.plan(&ring, &observation);
        filter.inner.0.clone()
    }

    #[test]
    fn a_single_spike_does_not_pass_a_median_of_three() {
        let mut filter = MedianFiltered::new(Spy(Vec::new(), 0.0), 3);
        let live = [true, true];
        observe(&mut filter, &[0.5, 0.5], &live);
        observe(&mut filter, &[0.5, 0.5], &live);
        assert_eq!(observe(&mut filter, &[0.95, 0.5], &live), vec![0.5, 0.5]);
        // Two high samples of three are the median.
        assert_eq!(observe(&mut filter, &[0.9, 0.5], &live), vec![0.9, 0.5]);
    }

    #[test]
    fn window_one_passes_the_loads_unchanged_and_dead_nodes_restart() {
        let mut filter = MedianFiltered::new(Spy(Vec::new(), 0.0), 1);
        assert_eq!(
            observe(&mut filter, &[0.3, 0.7], &[true; 2]),
            vec![0.3, 0.7]
        );
        let mut filter = MedianFiltered::new(Spy(Vec::new(), 0.0), 3);
        observe(&mut filter, &[0.9, 0.1], &[true; 2]);
        observe(&mut filter, &[0.9, 0.1], &[true, false]);
        // Node 1 came back: its old samples are forgotten.
        assert_eq!(
            observe(&mut filter, &[0.9, 0.6], &[true; 2]),
            vec![0.9, 0.6]
        );
    }

    #[test]
    fn the_inner_balancer_plans() {
        let mut filter = MedianFiltered::new(StaticW, 5);
        let ring = even_ring(30, 3);
        let observation = Observation {
            step: 0,
            loads: &[0.9, 0.1, 0.5],
            total_load: 0.5,
            live: &[true; 3],
            token_loads: None,
        };
        assert_eq!(filter.plan(&ring, &observation), Plan::none());
        assert_eq!(filter.name(), "ACH-F");
    }

    proptest! {
        /// The median found by a selection is the sorted samples' middle value (or the mean of
        /// the two middle ones), bit for bit, with ties, signed zeros and NaNs among them. A
        /// mean with a NaN among the two is a NaN whose sign Rust leaves unspecified (the
        /// compiler may add the two in either order, and `NaN + -NaN` takes the first one's
        /// sign), so that mean is held to being a NaN.
        #[test]
        fn the_median_is_the_middle_of_the_sorted_samples(
            samples in proptest::collection::vec(prop_oneof![
                (0u32..4).prop_map(f64::from),
                -2.0f64..2.0,
                Just(0.0),
                Just(-0.0),
                Just(f64::NAN),
                Just(-f64::NAN),
                Just(f64::INFINITY),
            ], 1..40),
        ) {
            let mut sorted = samples.clone();
            sorted.sort_by(f64::total_cmp);
            let middle = sorted.len() / 2;
            let expected = if sorted.len() % 2 == 1 {
                sorted[middle]
            } else {
                0.5 * (sorted[middle - 1] + sorted[middle])
            };
            let got = median(&samples);
            if sorted.len() % 2 == 0 && expected.is_nan() {
                prop_assert!(got.is_nan(), "median {got} of {samples:?}, expected a NaN");
            } else {
                prop_assert_eq!(got.to_bits(), expected.to_bits());
            }
        }

        /// Every filtered load (and total) lies between the smallest and the largest sample of
        /// its window.
        #[test]
        fn filter_outputs_are_bounded_by_their_inputs(
            window in 1usize..8,
            steps in proptest::collection::vec(proptest::collection::vec(0.0f64..2.0, 3), 1..30),
        ) {
            let mut filter = MedianFiltered::new(Spy(Vec::new(), 0.0), window);
            let ring = even_ring(30, 3);
            for (k, loads) in steps.iter().enumerate() {
                let total = loads.iter().sum::<f64>() / 3.0;
                let observation = Observation {
                    step: k as u64,
                    loads,
                    total_load: total,
                    live: &[true; 3],
                    token_loads: None,
                };
                filter.plan(&ring, &observation);
                let first = (k + 1).saturating_sub(window);
                let recent = &steps[first..=k];
                for i in 0..3 {
                    let low = recent.iter().map(|l| l[i]).fold(f64::INFINITY, f64::min);
                    let high = recent.iter().map(|l| l[i]).fold(f64::NEG_INFINITY, f64::max);
                    let seen = filter.inner.0[i];
                    prop_assert!(low <= seen && seen <= high, "{low} <= {seen} <= {high}");
                }
                let totals: Vec<f64> = recent.iter().map(|l| l.iter().sum::<f64>() / 3.0).collect();
                let low = totals.iter().copied().fold(f64::INFINITY, f64::min);
                let high = totals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                prop_assert!(low <= filter.inner.1 && filter.inner.1 <= high);
            }
        }
    }
}
