//! Cluster model: from per-node request counts to utilisation and raw telemetry.
//!
//! These are the paper's formulas (MODEL.md, section 2). The simulator owns the node
//! capacities; this module only provides the functions that turn them into numbers.

use crate::error::TelemetryError;
use crate::metrics::{METRIC_COUNT, Metrics};

/// Service rate of a capacity-1.0 node, in requests per step (the paper's `mu_base`).
pub const PAPER_MU_BASE: f64 = 350.0;

/// Extra cost of a write, in requests: a write costs `1 + WRITE_EXTRA_COST` requests.
pub const WRITE_EXTRA_COST: f64 = 0.5;

/// Floor applied to the service rate before dividing, so that a removed node (rate 0) gives
/// utilisation 1 when it receives a request and 0 when it receives none.
pub const SERVICE_RATE_FLOOR: f64 = 1e-9;

/// Memory grows with slope `MEMORY_SLOPE` in the utilisation.
pub const MEMORY_SLOPE: f64 = 0.6;

/// Memory jumps by `MEMORY_JUMP` once the utilisation exceeds [`MEMORY_JUMP_THRESHOLD`].
pub const MEMORY_JUMP: f64 = 0.1;

/// Utilisation strictly above which memory jumps by [`MEMORY_JUMP`].
pub const MEMORY_JUMP_THRESHOLD: f64 = 0.5;

/// Utilisation at which the queueing curve `r / (1 - r)` is capped and normalised to 1.
pub const LATENCY_KNEE: f64 = 0.849;

/// Utilisation from which latency is reported as saturated (exactly 1).
pub const LATENCY_SATURATION: f64 = 0.85;

/// Capacity class of a node. The paper's initial cluster has 3 strong, 4 medium and 3 weak
/// nodes (see [`PAPER_INITIAL_CLASSES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CapacityClass {
    /// Capacity 1.0 (class index 0).
    Strong,
    /// Capacity 0.55 (class index 1).
    Medium,
    /// Capacity 0.25 (class index 2).
    Weak,
}

impl CapacityClass {
    /// Relative capacity `c` of the class: 1.0, 0.55 or 0.25.
    pub fn capacity(self) -> f64 {
        match self {
            CapacityClass::Strong => 1.0,
            CapacityClass::Medium => 0.55,
            CapacityClass::Weak => 0.25,
        }
    }

    /// The class with the given index as used in the paper's churn events
    /// (`cap_class`: 0 strong, 1 medium, 2 weak), or `None` for any other index.
    pub fn from_index(index: usize) -> Option<CapacityClass> {
        match index {
            0 => Some(CapacityClass::Strong),
            1 => Some(CapacityClass::Medium),
            2 => Some(CapacityClass::Weak),
            _ => None,
        }
    }

    /// Service rate of a node of this class: `capacity * mu_base`.
    pub fn service_rate(self, mu_base: f64) -> f64 {
        service_rate(self.capacity(), mu_base)
    }
}

/// Capacity classes of the paper's initial cluster of 10 nodes: nodes 0-2 strong, 3-6 medium,
/// 7-9 weak.
pub const PAPER_INITIAL_CLASSES: [CapacityClass; 10] = [
    CapacityClass::Strong,
    CapacityClass::Strong,
    CapacityClass::Strong,
    CapacityClass::Medium,
    CapacityClass::Medium,
    CapacityClass::Medium,
    CapacityClass::Medium,
    CapacityClass::Weak,
    CapacityClass::Weak,
    CapacityClass::Weak,
];

/// Service rate `mu = capacity * mu_base`, in requests per step.
///
/// The product is computed exactly in this order, so `service_rate(0.55, 350.0)` is
/// `192.50000000000003`, as recorded by the reference simulation.
pub fn service_rate(capacity: f64, mu_base: f64) -> f64 {
    capacity * mu_base
}

/// Utilisation of a node in one step:
/// `rho = clip((requests + 0.5 * writes) / max(service_rate, 1e-9), 0, 1)`.
///
/// `writes` counts the subset of `requests` that were writes. A removed node has service
/// rate 0 and therefore utilisation 1 if it received any request, 0 otherwise.
pub fn utilisation(requests: u64, writes: u64, service_rate: f64) -> f64 {
    let demand = requests as f64 + WRITE_EXTRA_COST * writes as f64;
    clip_unit(demand / service_rate.max(SERVICE_RATE_FLOOR))
}

/// Raw telemetry `[cpu, memory, latency]` of a node with utilisation `rho`:
///
/// - `cpu = rho`;
/// - `memory = clip(0.6 * rho + 0.1 * [rho > 0.5], 0, 1)`;
/// - `latency = clip((r / (1 - r)) / (0.849 / (1 - 0.849)), 0, 1)` with `r = min(rho, 0.849)`,
///   and `latency = 1` when `rho >= 0.85`.
///
/// The normaliser is computed as `0.849 / (1 - 0.849)` (not `0.849 / 0.151`, which differs in
/// the last bit) because that is what the reference simulation does.
pub fn raw_metrics(rho: f64) -> Metrics {
    [rho, memory(rho), latency(rho)]
}

/// The memory of [`raw_metrics`].
#[inline(always)]
fn memory(rho: f64) -> f64 {
    let memory_jump = if rho > MEMORY_JUMP_THRESHOLD {
        MEMORY_JUMP
    } else {
        0.0
    };
    clip_unit(MEMORY_SLOPE * rho + memory_jump)
}

/// The latency of [`raw_metrics`], written without branches on `rho` so that the compiler
/// computes several nodes' at a time.
#[inline(always)]
fn latency(rho: f64) -> f64 {
    // `rho.min(LATENCY_KNEE)`, NaN included (it gives the knee), as a comparison.
    let capped = if rho < LATENCY_KNEE {
        rho
    } else {
        LATENCY_KNEE
    };
    let normaliser = LATENCY_KNEE / (1.0 - LATENCY_KNEE);
    let queueing = clip_unit((capped / (1.0 - capped)) / normaliser);
    if rho >= LATENCY_SATURATION {
        1.0
    } else {
        queueing
    }
}

/// Fills `raw` with the raw telemetry of every node from its request count, write count and
/// service rate (one entry per node in each slice).
///
/// `raw` is cleared and refilled, so a buffer kept across steps is not reallocated once it
/// has grown to the node count. Fails with [`TelemetryError::LengthMismatch`] when the three
/// input slices do not have the same length; `raw` is left untouched in that case.
pub fn raw_metrics_for_cluster(
    requests: &[u64],
    writes: &[u64],
    service_rates: &[f64],
    raw: &mut Vec<Metrics>,
) -> Result<(), TelemetryError> {
    let node_count = requests.len();
    TelemetryError::check_length("writes", node_count, writes.len())?;
    TelemetryError::check_length("service_rates", node_count, service_rates.len())?;
    // The utilisations first, in a loop of their own that the compiler vectorises (their
    // divisions two at a time).
    raw.clear();
    raw.resize(node_count, [0.0; METRIC_COUNT]);
    for (((metrics, &requests), &writes), &rate) in
        raw.iter_mut().zip(requests).zip(writes).zip(service_rates)
    {
        metrics[0] = utilisation(requests, writes, rate);
    }
    // Then the latencies of a block of nodes at a time (their two divisions a node are most
    // of the rest), and the memory of each.
    const BLOCK: usize = 8;
    for block in raw.chunks_mut(BLOCK) {
        let mut latencies = [0.0; BLOCK];
        for (latency_of, metrics) in latencies.iter_mut().zip(block.iter()) {
            *latency_of = latency(metrics[0]);
        }
        for (metrics, latency) in block.iter_mut().zip(latencies) {
            let rho = metrics[0];
            *metrics = [rho, memory(rho), latency];
        }
    }
    Ok(())
}

/// Clips `value` to `[0, 1]` (NaN stays NaN).
pub(crate) fn clip_unit(value: f64) -> f64 {
    value.clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The raw metrics as the model states them, one node at a time.
    fn stated_raw_metrics(requests: u64, writes: u64, service_rate: f64) -> Metrics {
        let demand = requests as f64 + 0.5 * writes as f64;
        let rho = (demand / service_rate.max(1e-9)).clamp(0.0, 1.0);
        let memory = (0.6 * rho + if rho > 0.5 { 0.1 } else { 0.0 }).clamp(0.0, 1.0);
        let latency = if rho >= 0.85 {
            1.0
        } else {
            let capped = rho.min(0.849);
            ((capped / (1.0 - capped)) / (0.849 / (1.0 - 0.849))).clamp(0.0, 1.0)
        };
        [rho, memory, latency]
    }

    proptest::proptest! {
        /// The cluster's raw metrics, computed a metric at a time over blocks of nodes, are
        /// those of each node on its own, bit for bit, at any length and around the knee.
        #[test]
        fn a_cluster_s_raw_metrics_are_each_node_s(
            nodes in proptest::collection::vec(
                (0_u64..2_000, 0_u64..=100, proptest::prop_oneof![
                    proptest::strategy::Just(0.0),
                    proptest::strategy::Just(87.5),
                    proptest::strategy::Just(192.50000000000003),
                    proptest::strategy::Just(350.0),
                    0.001_f64..5_000.0,
                ]),
                0..40,
            ),
        ) {
            let requests: Vec<u64> = nodes.iter().map(|n| n.0).collect();
            let writes: Vec<u64> = nodes.iter().map(|n| n.0 * n.1 / 100).collect();
            let rates: Vec<f64> = nodes.iter().map(|n| n.2).collect();
            let mut raw = Vec::new();
            raw_metrics_for_cluster(&requests, &writes, &rates, &mut raw).unwrap();
            let bits = |m: &Metrics| m.map(f64::to_bits);
            for (k, metrics) in raw.iter().enumerate() {
                let stated = stated_raw_metrics(requests[k], writes[k], rates[k]);
                proptest::prop_assert_eq!(bits(metrics), bits(&stated));
                let one = raw_metrics(utilisation(requests[k], writes[k], rates[k]));
                proptest::prop_assert_eq!(bits(&one), bits(&stated));
            }
            proptest::prop_assert_eq!(raw.len(), nodes.len());
        }
    }

    #[test]
    fn service_rates_match_the_recorded_values() {
        assert_eq!(CapacityClass::Strong.service_rate(PAPER_MU_BASE), 350.0);
        assert_eq!(
            CapacityClass::Medium.service_rate(PAPER_MU_BASE),
            192.50000000000003
        );
        assert_eq!(CapacityClass::Weak.service_rate(PAPER_MU_BASE), 87.5);
        assert_eq!(CapacityClass::from_index(1), Some(CapacityClass::Medium));
        assert_eq!(CapacityClass::from_index(3), None);
    }

    #[test]
    fn utilisation_charges_writes_and_clips() {
        assert_eq!(utilisation(100, 0, 200.0), 0.5);
        assert_eq!(utilisation(100, 100, 300.0), 0.5);
        assert_eq!(utilisation(1000, 0, 200.0), 1.0);
    }

    #[test]
    fn removed_node_is_saturated_only_when_it_gets_requests() {
        assert_eq!(utilisation(1, 0, 0.0), 1.0);
        assert_eq!(utilisation(0, 0, 0.0), 0.0);
    }

    #[test]
    fn latency_is_one_at_the_knee_and_saturated_above() {
        let at_knee = raw_metrics(0.849)[crate::LATENCY];
        assert_eq!(at_knee, 1.0);
        assert_eq!(raw_metrics(0.85)[crate::LATENCY], 1.0);
        assert_eq!(raw_metrics(0.8495)[crate::LATENCY], 1.0);
        let below = raw_metrics(0.5)[crate::LATENCY];
        assert!((below - (1.0 / (0.849 / (1.0 - 0.849)))).abs() < 1e-15);
        assert_eq!(raw_metrics(0.0), [0.0, 0.0, 0.0]);
    }

    #[test]
    fn memory_jumps_strictly_above_one_half() {
        assert_eq!(raw_metrics(0.5)[crate::MEMORY], 0.3);
        let just_above = raw_metrics(0.5000001)[crate::MEMORY];
        assert!((just_above - 0.40000006).abs() < 1e-12);
        assert_eq!(raw_metrics(1.0)[crate::MEMORY], 0.7);
    }

    #[test]
    fn cluster_helper_checks_lengths() {
        let mut raw = Vec::new();
        let error = raw_metrics_for_cluster(&[1, 2], &[0], &[10.0, 10.0], &mut raw).unwrap_err();
        assert_eq!(
            error,
            TelemetryError::LengthMismatch {
                what: "writes",
                expected: 2,
                got: 1
            }
        );
        raw_metrics_for_cluster(&[1, 2], &[0, 0], &[10.0, 10.0], &mut raw).unwrap();
        assert_eq!(raw.len(), 2);
        assert_eq!(raw[1][crate::CPU], 0.2);
    }
}
