//! What one observation of the cluster holds: every master's view and load, the signals they
//! come from, the hot slots.

use crate::backend::{BackendKind, SlotFigures, SlotStatsReading};
use crate::cluster::Snapshot;
use crate::node_telemetry::{NodeReading, NodeTelemetry};
use crate::prometheus_telemetry::PrometheusReadings;
use crate::slot::SLOT_COUNT;
use crate::telemetry::{NodeSample, ReadingRules, SlotRateStatistic};

use super::{CpuBasis, SlotSplit};

/// One observation of the cluster.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Observed {
    /// Shape and health.
    #[serde(skip)]
    pub snapshot: Snapshot,
    /// Keys per slot.
    #[serde(skip)]
    pub slot_keys: Vec<u64>,
    /// Per master, in the order of `snapshot.masters`.
    pub nodes: Vec<NodeView>,
    /// Cluster total load.
    pub total_load: f64,
    /// Imbalance `D = max l - mean l` over the masters that are not drained.
    pub imbalance: f64,
    /// Which signals the loads come from.
    pub signals: Signals,
    /// The slots that used the most cpu over the interval (per-slot statistics only).
    pub hot_slots: Vec<HotSlot>,
    /// Observations since the per-slot figures (keys per slot, per-slot cpu) were read: 0
    /// when they were read for this one (`--slot-stats-every`).
    pub slot_figures_age: u32,
    /// Each slot's part of its owner's load, from its share of the owner's per-slot cpu
    /// (`None` without per-slot statistics; not serialised).
    #[serde(skip)]
    pub token_loads: Option<Vec<f64>>,
}

/// Which signals an observation's loads come from, as `status` reports them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Signals {
    /// Where the per-node readings come from: `info` or `prometheus`.
    pub telemetry: &'static str,
    /// The same, in a sentence (the Prometheus server, its label and window).
    pub source: String,
    /// The backend.
    pub backend: BackendKind,
    /// True when the slots' loads come from `CLUSTER SLOT-STATS`.
    pub slot_stats: bool,
    /// Where the cpu reading comes from.
    pub cpu: String,
    /// Where the memory reading comes from.
    pub memory: &'static str,
    /// Where the latency reading comes from.
    pub latency: &'static str,
    /// How slots are weighted when planning.
    pub slots: String,
    /// What is missing and how to get it, if anything.
    pub note: Option<String>,
}

impl Signals {
    /// The signals of an observation; `bases` says what every master's cpu part counts, and
    /// each slot's rate is as `reading` says ([`SlotStatsReading::window`] and `statistic`).
    pub(super) fn of(
        backend: BackendKind,
        figures: &SlotFigures,
        telemetry: &NodeTelemetry,
        bases: &[CpuBasis],
        (split, reading): (SlotSplit, &SlotStatsReading),
    ) -> Signals {
        let slot_stats = figures.cpu_usec.is_some();
        let note = match backend {
            BackendKind::Valkey if !slot_stats => Some(format!(
                "slot statistics are off on {} (cluster-slot-stats-enabled no): no per-slot \
                 load, slots weighted by keys; --enable-slot-stats turns them on (CONFIG SET)",
                figures.stats_off.join(", ")
            )),
            BackendKind::Redis => Some(
                "no per-slot load on this backend (it reads no CLUSTER SLOT-STATS; the valkey \
                 backend, for Valkey >= 9, does): a slot hot with few keys is not seen"
                    .into(),
            ),
            BackendKind::Valkey => None,
        };
        let (cpu, memory, latency) = match telemetry {
            NodeTelemetry::Info => (
                "used_cpu_sys + used_cpu_user growth over the interval (INFO cpu)",
                "INFO memory",
                "p99 of the data commands over the interval (LATENCY HISTOGRAM deltas)",
            ),
            NodeTelemetry::Prometheus(_) => (
                "rate of redis_cpu_sys_seconds_total + redis_cpu_user_seconds_total over the \
                 window",
                "redis_memory_used_bytes (over redis_memory_max_bytes, the capacity or \
                 redis_total_system_memory_bytes)",
                "mean time per data command over the window \
                 (redis_commands_duration_seconds_total / redis_commands_total)",
            ),
        };
        let by_requests = bases
            .iter()
            .filter(|b| matches!(b, CpuBasis::Requests { .. }))
            .count();
        let cpu = match by_requests {
            0 => cpu.to_string(),
            n if n == bases.len() => {
                "data commands per second over the interval over each master's \
                 --request-capacity"
                    .to_string()
            }
            n => format!(
                "data commands per second over --request-capacity on {n} of {} masters; on \
                 the others {cpu}",
                bases.len()
            ),
        };
        Signals {
            telemetry: telemetry.name(),
            source: telemetry.describe(),
            backend,
            slot_stats,
            cpu,
            memory,
            latency,
            slots: slot_signal(slot_stats, split, reading),
            note,
        }
    }
}

/// How slots are weighted when planning, in a sentence.
fn slot_signal(slot_stats: bool, split: SlotSplit, reading: &SlotStatsReading) -> String {
    if !slot_stats {
        return "cost by keys; load assumed in proportion to keys".into();
    }
    let counter = match split {
        SlotSplit::Cpu => "cpu-usec",
        SlotSplit::Network => "network-bytes-in + network-bytes-out",
    };
    let over = match reading.window {
        0 | 1 => "the interval".to_string(),
        n => format!("the last {n} readings"),
    };
    let load = match reading.statistic {
        SlotRateStatistic::Mean => format!("its share of its node's {counter} growth over {over}"),
        SlotRateStatistic::Median => format!(
            "the median of its {counter} rates over {over}, over the sum of its node's mean rates"
        ),
    };
    format!("cost by keys; each slot's load {load} (CLUSTER SLOT-STATS)")
}

impl Observed {
    /// True while a drained master owns slots: the step is then a drain step.
    pub fn draining(&self) -> bool {
        self.nodes.iter().any(|n| n.drained && n.slots > 0)
    }
}

/// A slot that used much cpu over the interval.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HotSlot {
    /// The slot.
    pub slot: u16,
    /// Its owner's address.
    pub owner: String,
    /// Keys in it.
    pub keys: u64,
    /// Cpu it used, in cores (1.0 = one core busy the whole interval).
    pub cpu: f64,
    /// Its share of the cluster's per-slot cpu.
    pub share: f64,
}

/// One master in an observation.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeView {
    /// `host:port`.
    pub address: String,
    /// Node id.
    pub id: String,
    /// Slots owned.
    pub slots: usize,
    /// Keys held.
    pub keys: u64,
    /// Relative weight (weight over the mean weight), by which the readings are divided.
    pub weight: f64,
    /// The weight as given (`--weight NODE=W`; 1 for a node not named).
    pub weight_given: f64,
    /// True for a drained master (`--weight NODE=0`, `--drain NODE`): a source only, its
    /// readings taken undivided and left out of `D`.
    pub drained: bool,
    /// The memory reading (weighted, as in `reading`) when a capacity is known: the node's
    /// `maxmemory` or `--memory-capacity-mb`; `None` (`null`) otherwise, where the load still
    /// reads memory over the machine's memory (`reading[1]`).
    pub memory: Option<f64>,
    /// `[cpu, memory, latency]` as given to the load tracker, weighted; a reading that could
    /// not be taken is NaN (`null` in JSON), which the tracker counts as a missing sample.
    pub reading: [f64; 3],
    /// The raw INFO figures (`--telemetry info`).
    pub sample: Option<NodeSample>,
    /// The raw Prometheus figures (`--telemetry prometheus`).
    pub prometheus: Option<PrometheusReadings>,
    /// The p99 of the data commands over the interval, in microseconds (NaN: no reading, or
    /// read from Prometheus).
    pub p99_usec: f64,
    /// The mean time per data command over the rate window, in microseconds (from Prometheus;
    /// NaN otherwise).
    pub mean_latency_usec: f64,
    /// Commands per second (INFO's `instantaneous_ops_per_sec`, or Prometheus's rate of
    /// `redis_commands_processed_total`; NaN: no reading).
    pub ops_per_sec: f64,
    /// Composite load after smoothing.
    pub load: f64,
}

/// Every slot's part of its owner's load: the owner's load times the slot's rate over the sum
/// of its owner's `totals` (of its `rates` when `None`), a rate that is not finite counting 0
/// (0 for a slot never sampled, and for all slots of a node whose totals sum to 0). With
/// `totals` the parts need not sum to the owner's load: under the median
/// ([`crate::telemetry::SlotRateStatistic::Median`]) the load of the slots whose median is 0
/// is no slot's.
pub(super) fn token_loads(
    slots_of: &[Vec<u16>],
    rates: &[f64],
    totals: Option<&[f64]>,
    loads: &[f64],
) -> Vec<f64> {
    let rate_in = |of: &[f64], s: u16| {
        let r = of[usize::from(s)];
        if r.is_finite() { r.max(0.0) } else { 0.0 }
    };
    let totals = totals.unwrap_or(rates);
    let mut out = vec![0.0; SLOT_COUNT];
    for (node, slots) in slots_of.iter().enumerate() {
        let total: f64 = slots.iter().map(|&s| rate_in(totals, s)).sum();
        if total > 0.0 && loads[node].is_finite() {
            for &slot in slots {
                out[usize::from(slot)] = loads[node] * rate_in(rates, slot) / total;
            }
        }
    }
    out
}

/// The `count` slots with the most cpu over the interval.
pub(super) fn hot_slots(
    snapshot: &Snapshot,
    keys: &[u64],
    rates: &[f64],
    count: usize,
) -> Vec<HotSlot> {
    let total: f64 = rates.iter().filter(|r| r.is_finite()).sum();
    let mut slots: Vec<usize> = (0..rates.len()).filter(|&s| rates[s] > 0.0).collect();
    slots.sort_by(|&a, &b| rates[b].total_cmp(&rates[a]).then(a.cmp(&b)));
    slots
        .into_iter()
        .take(count)
        .map(|slot| HotSlot {
            slot: slot as u16,
            owner: snapshot.owners[slot]
                .map(|o| snapshot.masters[o].address.clone())
                .unwrap_or_default(),
            keys: keys[slot],
            cpu: rates[slot],
            share: if total > 0.0 {
                rates[slot] / total
            } else {
                0.0
            },
        })
        .collect()
}

/// `D = max l - mean l` (0 for no nodes).
pub fn imbalance(loads: &[f64]) -> f64 {
    if loads.is_empty() {
        return 0.0;
    }
    let max = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    max - loads.iter().sum::<f64>() / loads.len() as f64
}

/// `D` over the masters that are not drained (a drained master's load says nothing of the
/// balance of the others).
pub(crate) fn undrained_imbalance(nodes: &[NodeView], loads: &[f64]) -> f64 {
    let kept: Vec<f64> = nodes
        .iter()
        .zip(loads)
        .filter(|(n, _)| !n.drained)
        .map(|(_, l)| *l)
        .collect();
    imbalance(&kept)
}

/// A master's view of a step, its load still to come: `weighted` is its reading over its
/// weight, `(weight, weight_given)` its relative weight and the weight as given, `keys` the
/// keys of its slots.
pub(super) fn node_view(
    master: &crate::cluster::Master,
    read: NodeReading,
    weighted: [f64; 3],
    (weight, weight_given): (f64, f64),
    keys: u64,
    rules: &ReadingRules,
) -> NodeView {
    let maxmemory = match (&read.sample, &read.prometheus) {
        (Some(sample), _) => sample.maxmemory,
        (None, Some(figures)) => figures.maxmemory.unwrap_or(0.0),
        (None, None) => 0.0,
    };
    // Memory only over a known capacity (maxmemory or --memory-capacity-mb).
    let capacity_known = maxmemory > 0.0 || rules.memory_capacity.is_some();
    NodeView {
        address: master.address.clone(),
        id: master.id.clone(),
        slots: master.slots,
        keys,
        weight,
        weight_given,
        drained: weight_given == 0.0,
        memory: capacity_known.then_some(weighted[1]),
        reading: weighted,
        sample: read.sample,
        prometheus: read.prometheus,
        p99_usec: read.p99_usec,
        mean_latency_usec: read.mean_latency_usec,
        ops_per_sec: read.ops_per_sec,
        load: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slot_signal_says_which_rate_weights_the_slots() {
        let mean = SlotStatsReading::default();
        assert_eq!(
            slot_signal(true, SlotSplit::Cpu, &mean),
            "cost by keys; each slot's load its share of its node's cpu-usec growth over the \
             interval (CLUSTER SLOT-STATS)"
        );
        let median = SlotStatsReading {
            window: 3,
            statistic: SlotRateStatistic::Median,
            ..SlotStatsReading::default()
        };
        assert_eq!(
            slot_signal(true, SlotSplit::Network, &median),
            "cost by keys; each slot's load the median of its network-bytes-in + \
             network-bytes-out rates over the last 3 readings, over the sum of its node's mean \
             rates (CLUSTER SLOT-STATS)"
        );
        assert_eq!(
            slot_signal(false, SlotSplit::Cpu, &median),
            "cost by keys; load assumed in proportion to keys"
        );
    }

    #[test]
    fn a_slots_load_is_its_rate_over_its_owners_totals() {
        let slots_of = vec![vec![0, 1, 2], vec![3]];
        let mut rates = vec![f64::NAN; SLOT_COUNT];
        rates[..4].copy_from_slice(&[1.0, 3.0, 0.0, 2.0]);
        let loads = [1.0, 0.5];
        let by_rates = token_loads(&slots_of, &rates, None, &loads);
        assert_eq!(by_rates[..4], [0.25, 0.75, 0.0, 0.5]);
        assert_eq!(by_rates[4..].iter().sum::<f64>(), 0.0);
        // Medians of 1, 0, 0 and 2 over means of 2, 3, 3 and 2: node 0's slots carry 1/8 of
        // its load, the rest is no slot's.
        let mut medians = rates.clone();
        medians[..4].copy_from_slice(&[1.0, 0.0, 0.0, 2.0]);
        let mut means = rates.clone();
        means[..4].copy_from_slice(&[2.0, 3.0, 3.0, 2.0]);
        let by_medians = token_loads(&slots_of, &medians, Some(&means), &loads);
        assert_eq!(by_medians[..4], [0.125, 0.0, 0.0, 0.5]);
    }
}
