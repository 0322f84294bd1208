//! What a run leaves behind: per-algorithm traces, aggregates and violations.

use ach_telemetry::numpy_sum;
use serde::{Deserialize, Serialize};

use crate::config::{Profile, SeriesConfig, SweepPoint};

/// Version of the model and of the record layout. Part of every record's fingerprint, so a
/// record made by a different model is never reused.
pub const MODEL_VERSION: u32 = 1;

/// One run of one series (at one sweep point), every algorithm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Series name.
    pub series: String,
    /// Sweep point, for a sensitivity series.
    pub point: Option<SweepPoint>,
    /// Index of the run.
    pub run_index: u32,
    /// Seed of the run.
    pub seed: u64,
    /// Modelling profile.
    pub profile: Profile,
    /// Fingerprint of (configuration, profile, model version): see [`fingerprint`].
    pub fingerprint: u64,
    /// One record per algorithm, in the configuration's order.
    pub algorithms: Vec<AlgorithmRecord>,
}

impl RunRecord {
    /// The record of an algorithm by name.
    pub fn algorithm(&self, name: &str) -> Option<&AlgorithmRecord> {
        self.algorithms.iter().find(|a| a.name == name)
    }
}

/// One algorithm in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlgorithmRecord {
    /// Algorithm name.
    pub name: String,
    /// Aggregates after the warm-up.
    pub aggregates: Aggregates,
    /// Observed imbalance `D(t)`, every step.
    pub d_trace: Vec<f64>,
    /// True imbalance from noise-free telemetry, every step; empty when the telemetry has no
    /// distortion (then it equals `d_trace`).
    pub d_true_trace: Vec<f64>,
    /// `M_keys(t)`, every step.
    pub m_trace: Vec<f64>,
    /// The first violations in detail (all are counted in the aggregates).
    pub violations: Vec<ViolationRecord>,
}

/// One invariant violation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViolationRecord {
    /// Step.
    pub t: u32,
    /// Which invariant: `arc-sum`, `v_min`, `owner`, `sorted`, `arc`, `budget`, `invariant`
    /// (a violation standing from an earlier step).
    pub kind: String,
    /// What was found.
    pub detail: String,
}

/// Aggregates of one algorithm over one run (spec section 6), after the warm-up.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Aggregates {
    /// Mean observed imbalance (the paper's D-bar).
    pub d_mean: f64,
    /// Largest observed imbalance.
    pub d_max: f64,
    /// Mean true imbalance (noise-free telemetry).
    pub d_true_mean: f64,
    /// Cumulative redistribution cost.
    pub m_cum: f64,
    /// Fraction of steps with a non-zero move.
    pub pi_chg: f64,
    /// Invariant violations over the whole run (warm-up included).
    pub n_viol: u64,
    /// Mean coefficient of variation of the true loads after the warm-up (see
    /// [`coefficient_of_variation`]); `Some` only for a series with `report_cv = true`.
    /// Left out of the serde form: the store writes it in an optional trailing block, so that
    /// the records of every other series encode exactly as before the field existed.
    #[serde(skip)]
    pub cv_true_mean: Option<f64>,
    /// Fraction of the requests after the warm-up that were served by a node other than
    /// their token's owner (see [`forwarded_fraction`]); `Some` only for an algorithm that
    /// routes requests its own way (CH-BL). Left out of the serde form like `cv_true_mean`:
    /// the store writes it in its own optional trailing block.
    #[serde(skip)]
    pub forwarded_fraction: Option<f64>,
}

/// Forwarded requests over requests, both summed over the steps `t >= warmup`: the
/// request-weighted share of forwarded requests. It is 0 when no request is left.
pub fn forwarded_fraction(forwarded: &[u64], requests: &[u64], warmup: usize) -> f64 {
    let after = |x: &[u64]| -> u128 { x.iter().skip(warmup).map(|&v| u128::from(v)).sum() };
    let total = after(requests);
    if total == 0 {
        0.0
    } else {
        after(forwarded) as f64 / total as f64
    }
}

/// Coefficient of variation `std(l) / mean(l)` of the loads of the nodes in `mask` (the nodes
/// D counts): a size-independent imbalance. `std` is the population standard deviation
/// (divisor N, numpy's `std` with `ddof = 0`); both sums in numpy's order. It is 0 when no node
/// is counted or when the mean load is 0 (an idle cluster is balanced).
pub fn coefficient_of_variation(loads: &[f64], mask: &[bool], scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend(loads.iter().zip(mask).filter(|&(_, &m)| m).map(|(&l, _)| l));
    if scratch.is_empty() {
        return 0.0;
    }
    let n = scratch.len() as f64;
    let mean = numpy_sum(scratch) / n;
    if mean == 0.0 {
        return 0.0;
    }
    for l in scratch.iter_mut() {
        *l = (*l - mean) * (*l - mean);
    }
    (numpy_sum(scratch) / n).sqrt() / mean
}

/// Mean of `x` over the steps `t >= warmup` (numpy's summation order); 0 when none is left.
pub fn mean_after_warmup(x: &[f64], warmup: usize) -> f64 {
    match x.get(warmup..) {
        Some(window) if !window.is_empty() => numpy_sum(window) / window.len() as f64,
        _ => 0.0,
    }
}

impl Aggregates {
    /// Aggregates of traces over the steps `t >= warmup` (numpy's summation order, as the
    /// published simulation computes them).
    pub fn of(d: &[f64], d_true: &[f64], m: &[f64], warmup: usize, n_viol: u64) -> Aggregates {
        let window = |x: &[f64]| x.get(warmup..).unwrap_or(&[]).to_vec();
        let d_window = window(d);
        let m_window = window(m);
        let d_mean = mean_after_warmup(d, warmup);
        Aggregates {
            d_mean,
            d_max: d_window.iter().copied().fold(0.0, f64::max),
            d_true_mean: if d_true.is_empty() {
                d_mean
            } else {
                mean_after_warmup(d_true, warmup)
            },
            m_cum: numpy_sum(&m_window),
            pi_chg: if m_window.is_empty() {
                0.0
            } else {
                m_window.iter().filter(|&&x| x > 0.0).count() as f64 / m_window.len() as f64
            },
            n_viol,
            cv_true_mean: None,
            forwarded_fraction: None,
        }
    }
}

/// Fingerprint of a run's inputs: XXH3-64 of the configuration as JSON, the profile and
/// [`MODEL_VERSION`]. Two runs with the same fingerprint and seed give the same record.
pub fn fingerprint(config: &SeriesConfig, profile: Profile) -> u64 {
    // `against_a0` changes the statistics only, never a run.
    let runs_alike = SeriesConfig {
        against_a0: false,
        ..config.clone()
    };
    let text = serde_json::to_string(&runs_alike).expect("a configuration serialises");
    let keyed = format!("{text}|{}|{MODEL_VERSION}", profile.name());
    ach_ring::classic::key_hash(keyed.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_skip_the_warmup() {
        let d = [9.0, 9.0, 0.1, 0.3];
        let m = [5.0, 0.0, 0.0, 0.2];
        let a = Aggregates::of(&d, &[], &m, 2, 0);
        assert!((a.d_mean - 0.2).abs() < 1e-15);
        assert_eq!(a.d_max, 0.3);
        assert_eq!(a.d_true_mean, a.d_mean);
        assert_eq!(a.m_cum, 0.2);
        assert_eq!(a.pi_chg, 0.5);
        assert_eq!(a.cv_true_mean, None);
        assert_eq!(a.forwarded_fraction, None);
    }

    #[test]
    fn forwarded_fraction_weighs_steps_by_their_requests() {
        // Warm-up steps do not count; then 10 of 100 and 30 of 100 requests: 40 / 200.
        assert_eq!(forwarded_fraction(&[50, 10, 30], &[50, 100, 100], 1), 0.2);
        assert_eq!(forwarded_fraction(&[0, 0], &[0, 0], 0), 0.0);
        assert_eq!(forwarded_fraction(&[5], &[5], 3), 0.0);
    }

    #[test]
    fn coefficient_of_variation_of_hand_made_loads() {
        let mut scratch = Vec::new();
        // Loads 1, 2, 3 (node 3 not counted): mean 2, population variance 2/3.
        let loads = [1.0, 2.0, 3.0, 100.0];
        let mask = [true, true, true, false];
        let cv = coefficient_of_variation(&loads, &mask, &mut scratch);
        assert!((cv - (2.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-15, "{cv}");
        // Scaling every load leaves it unchanged; so does repeating the cluster (size-free).
        let scaled = coefficient_of_variation(&[10.0, 20.0, 30.0], &[true; 3], &mut scratch);
        assert!((scaled - cv).abs() < 1e-15);
        let repeated = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0];
        let twice = coefficient_of_variation(&repeated, &[true; 6], &mut scratch);
        assert!((twice - cv).abs() < 1e-15);
        // Equal loads, an idle cluster and an empty mask are balanced.
        assert_eq!(
            coefficient_of_variation(&[0.4; 5], &[true; 5], &mut scratch),
            0.0
        );
        assert_eq!(
            coefficient_of_variation(&[0.0; 3], &[true; 3], &mut scratch),
            0.0
        );
        assert_eq!(
            coefficient_of_variation(&[1.0, 2.0], &[false; 2], &mut scratch),
            0.0
        );
        // One loaded node of four: mean 1/4, std sqrt(3)/4, CV sqrt(3).
        let one = coefficient_of_variation(&[1.0, 0.0, 0.0, 0.0], &[true; 4], &mut scratch);
        assert!((one - 3f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn mean_after_warmup_skips_the_warmup() {
        assert_eq!(mean_after_warmup(&[9.0, 1.0, 3.0], 1), 2.0);
        assert_eq!(mean_after_warmup(&[9.0], 1), 0.0);
        assert_eq!(mean_after_warmup(&[], 5), 0.0);
    }
}
