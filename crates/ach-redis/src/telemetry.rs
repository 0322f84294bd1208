//! Per-node telemetry from `INFO`, turned into the `[cpu, memory, latency]` readings ACH's
//! `LoadTracker` takes.
//!
//! - **cpu**: the growth of `used_cpu_sys + used_cpu_user` (seconds of cpu the server used)
//!   over the wall time between two samples; 1.0 is one core, the most a single-threaded
//!   Redis can use. With `--request-capacity` a master's cpu part is its data commands per
//!   second over its capacity instead (`control::CpuBasis`).
//! - **memory**: `used_memory` over `maxmemory` when the node sets one, otherwise over the
//!   configured capacity (`--memory-capacity`), otherwise over `total_system_memory`.
//!   With per-slot statistics (the valkey backend, `cluster-slot-stats-enabled yes`), each
//!   slot's part of its node's load is its share of the growth of the node's `cpu-usec`
//!   counters ([`slot_cpu_rates`]); the node's own reading stays INFO's, since `cpu-usec`
//!   counts only the time commands execute (4 to 10 % of the process's cpu under GET/SET,
//!   measured), not the I/O around them.
//! - **latency**: the 99th percentile of the node's data commands over the control interval,
//!   from the growth of their `LATENCY HISTOGRAM` buckets (Redis 7.0+ and Valkey; powers of
//!   two in microseconds) between two samples ([`interval_p99`]), over a target latency
//!   (`--latency-target-us`), capped at 1; 0 for an interval without data commands, a missing
//!   sample (NaN) for the first one or after a reset. A server without `LATENCY HISTOGRAM`
//!   falls back to the calls-weighted p99 of `INFO latencystats`, kept since start.
//! - **ops/s**: `instantaneous_ops_per_sec`, reported but not part of the load.
//!
//! A node's readings are divided by its relative weight (`--weight`, the weight over the mean
//! weight), so that a node twice as big counts half as loaded for the same readings.
//!
//! Redis 7.0 has no per-slot load counters (`CLUSTER SLOT-STATS` came with Redis 8), so the
//! rebalancer cannot see which slot is hot; it weights each slot by its number of keys, which
//! is also the cost of moving it.

use std::collections::BTreeMap;
use std::time::Instant;

use redis::Value;

use crate::resp::{ReplyShape, integer, pairs, text};

/// The fields of one `INFO` reply, by name.
pub fn parse_info(reply: &str) -> BTreeMap<String, String> {
    reply
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.trim().split_once(':'))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

/// The raw figures of one node at one moment.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NodeSample {
    /// Cumulative cpu seconds (`used_cpu_sys + used_cpu_user`).
    pub cpu_seconds: f64,
    /// `used_memory` in bytes.
    pub used_memory: f64,
    /// `maxmemory` in bytes (0: none set).
    pub maxmemory: f64,
    /// `total_system_memory` in bytes.
    pub total_system_memory: f64,
    /// The calls-weighted mean p99 latency of the node's commands, in microseconds (NaN when
    /// `latencystats` reports nothing).
    pub p99_usec: f64,
    /// `instantaneous_ops_per_sec`.
    pub ops_per_sec: f64,
    /// `total_commands_processed`.
    pub total_commands: f64,
    /// The calls of the data commands since start: `commandstats` without the commands of the
    /// rebalancer and of operators (cluster, info, config, migrate, latency, ...; see
    /// `is_admin_command`), so that its rate leaves out `ach-redis`'s own `COUNTKEYSINSLOT`,
    /// `CLUSTER SLOTS`, `INFO` and `MIGRATE` (NaN: no `commandstats` in the reply).
    pub data_commands: f64,
    /// Calls of the node's data commands since start per `LATENCY HISTOGRAM` bucket (its upper
    /// bound in microseconds), merged over the commands; `None` when not read (not
    /// serialised).
    #[serde(skip)]
    pub latency_buckets: Option<BTreeMap<u64, u64>>,
    /// When the sample was taken (not serialised).
    #[serde(skip)]
    pub taken: Option<Instant>,
}

/// Reads a sample from an `INFO server memory stats cpu commandstats latencystats` reply.
pub fn sample_from_info(reply: &str, taken: Instant) -> NodeSample {
    let fields = parse_info(reply);
    let number = |name: &str| {
        fields
            .get(name)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    NodeSample {
        cpu_seconds: number("used_cpu_sys") + number("used_cpu_user"),
        used_memory: number("used_memory"),
        maxmemory: number("maxmemory"),
        total_system_memory: number("total_system_memory"),
        p99_usec: weighted_p99(&fields),
        ops_per_sec: number("instantaneous_ops_per_sec"),
        total_commands: number("total_commands_processed"),
        data_commands: data_command_calls(&fields),
        latency_buckets: None,
        taken: Some(taken),
    }
}

/// The calls-weighted mean of the p99 of every command in `latencystats`
/// (`latency_percentiles_usec_<cmd>:p50=..,p99=..,p99.9=..`), with the calls from
/// `commandstats` (`cmdstat_<cmd>:calls=..,...`). Cluster, info and config commands (the
/// rebalancer's own) are left out.
fn weighted_p99(fields: &BTreeMap<String, String>) -> f64 {
    let mut weighted = 0.0;
    let mut calls_total = 0.0;
    for (name, value) in fields {
        let Some(command) = name.strip_prefix("latency_percentiles_usec_") else {
            continue;
        };
        if is_admin_command(command) {
            continue;
        }
        let p99 = value
            .split(',')
            .find_map(|part| part.strip_prefix("p99="))
            .and_then(|v| v.parse::<f64>().ok());
        let calls = fields
            .get(&format!("cmdstat_{command}"))
            .and_then(|stats| {
                stats
                    .split(',')
                    .find_map(|part| part.strip_prefix("calls="))
                    .and_then(|v| v.parse::<f64>().ok())
            })
            .unwrap_or(0.0);
        if let Some(p99) = p99
            && calls > 0.0
        {
            weighted += p99 * calls;
            calls_total += calls;
        }
    }
    if calls_total > 0.0 {
        weighted / calls_total
    } else {
        f64::NAN
    }
}

/// The calls of every command in `commandstats` (`cmdstat_<cmd>:calls=..,...`) that is not
/// an admin command; NaN when the reply has no `commandstats` section.
fn data_command_calls(fields: &BTreeMap<String, String>) -> f64 {
    let mut seen = false;
    let mut calls_total = 0.0;
    for (name, value) in fields {
        let Some(command) = name.strip_prefix("cmdstat_") else {
            continue;
        };
        seen = true;
        if is_admin_command(command) {
            continue;
        }
        calls_total += value
            .split(',')
            .find_map(|part| part.strip_prefix("calls="))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
    }
    if seen { calls_total } else { f64::NAN }
}

/// The data commands per second between two samples (the rate of
/// [`NodeSample::data_commands`]); NaN without an earlier sample or when the counters went
/// back (a restart or `CONFIG RESETSTAT`).
pub fn data_ops_per_sec(previous: Option<&NodeSample>, now: &NodeSample) -> f64 {
    match (previous.and_then(|p| p.taken.map(|t| (p, t))), now.taken) {
        (Some((before, then)), Some(taken)) if taken > then => {
            let calls = now.data_commands - before.data_commands;
            if calls >= 0.0 {
                calls / (taken - then).as_secs_f64()
            } else {
                f64::NAN
            }
        }
        _ => f64::NAN,
    }
}

/// True for the commands of the rebalancer and of operators (cluster, info, config, ...),
/// which latency readings leave out. `command` may be `name|subcommand`.
fn is_admin_command(command: &str) -> bool {
    let base = command.split('|').next().unwrap_or(command);
    matches!(
        base,
        "cluster"
            | "info"
            | "config"
            | "migrate"
            | "ping"
            | "restore-asking"
            | "asking"
            | "latency"
            | "command"
            | "hello"
            | "client"
            | "syncslots"
            | "auth"
    )
}

/// The calls per bucket of a `LATENCY HISTOGRAM` reply, merged over the data commands: each
/// command lists its buckets (upper bounds in microseconds) with cumulative counts.
pub fn parse_latency_histogram(reply: &Value) -> Result<BTreeMap<u64, u64>, ReplyShape> {
    let mut merged = BTreeMap::new();
    for (command, details) in pairs(reply)? {
        if is_admin_command(&command.to_ascii_lowercase()) {
            continue;
        }
        let Some((_, histogram)) = pairs(details)?
            .into_iter()
            .find(|(field, _)| field == "histogram_usec")
        else {
            return Err(ReplyShape::MissingField {
                context: command,
                field: "histogram_usec",
            });
        };
        let mut below = 0u64;
        for (bucket, cumulative) in pairs(histogram)? {
            let bucket: u64 = bucket.parse().map_err(|_| ReplyShape::NotANumber {
                context: command.clone(),
                what: "bucket",
                value: format!("{bucket:?}"),
            })?;
            let cumulative = integer(cumulative)
                .and_then(|c| u64::try_from(c).ok())
                .ok_or_else(|| ReplyShape::NotANumber {
                    context: command.clone(),
                    what: "count",
                    value: format!("{:?}", text(cumulative)),
                })?;
            *merged.entry(bucket).or_insert(0) += cumulative.saturating_sub(below);
            below = below.max(cumulative);
        }
    }
    Ok(merged)
}

/// The p99 of the data commands served between two samples, in microseconds (the upper bound
/// of the bucket that holds it): `Some(0)` for an interval without data commands, `None`
/// without two histograms or when a bucket went down (`CONFIG RESETSTAT`, a restart).
pub fn interval_p99(previous: Option<&NodeSample>, now: &NodeSample) -> Option<f64> {
    let before = previous?.latency_buckets.as_ref()?;
    let after = now.latency_buckets.as_ref()?;
    if before
        .iter()
        .any(|(bucket, &count)| after.get(bucket).copied().unwrap_or(0) < count)
    {
        return None;
    }
    let delta: Vec<(u64, u64)> = after
        .iter()
        .map(|(&bucket, &count)| (bucket, count - before.get(&bucket).copied().unwrap_or(0)))
        .collect();
    let total: u64 = delta.iter().map(|(_, count)| count).sum();
    if total == 0 {
        return Some(0.0);
    }
    let wanted = (total as f64 * 0.99).ceil() as u64;
    let mut seen = 0;
    for (bucket, count) in &delta {
        seen += count;
        if seen >= wanted {
            return Some(*bucket as f64);
        }
    }
    delta.last().map(|(bucket, _)| *bucket as f64)
}

/// The cumulative `cpu-usec` of every slot at one observation, with each slot's owner then.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotCpuSample {
    /// The node id owning each slot (`None`: unassigned).
    pub owners: Vec<Option<String>>,
    /// `cpu-usec` of each slot on its owner.
    pub usec: Vec<u64>,
    /// When the sample was taken.
    pub taken: Instant,
}

/// Updates `rates` (cores each slot used, one entry per slot) with the growth of every slot's
/// `cpu-usec` between two samples, and returns how many slots were missing samples. A slot
/// whose owner changed or whose counter went down (its owner changed, `CONFIG RESETSTAT`) is
/// a missing sample: it keeps its earlier rate, never a negative or a zero load; a slot never
/// sampled stays NaN (unknown).
pub fn slot_cpu_rates(
    previous: Option<&SlotCpuSample>,
    now: &SlotCpuSample,
    rates: &mut [f64],
) -> usize {
    match previous.and_then(|before| SlotInterval::between(before, now)) {
        Some(interval) => rates_over(std::slice::from_ref(&interval), rates),
        None => rates.len(),
    }
}

/// Sets every slot's rate to its growth summed over the `intervals` it was sampled in, over
/// their time summed; a slot sampled in none keeps its rate and counts as missing. Returns
/// the missing.
fn rates_over<'a>(
    intervals: impl IntoIterator<Item = &'a SlotInterval> + Copy,
    rates: &mut [f64],
) -> usize {
    let mut missing = 0;
    for (slot, rate) in rates.iter_mut().enumerate() {
        let (mut growth, mut elapsed_usec, mut sampled) = (0u64, 0.0, false);
        for (slot_growth, interval_usec) in samples_of(slot, intervals) {
            growth += slot_growth;
            elapsed_usec += interval_usec;
            sampled = true;
        }
        if sampled {
            *rate = growth as f64 / elapsed_usec;
        } else {
            missing += 1;
        }
    }
    missing
}

/// A slot's growth and the interval's microseconds, in each of the `intervals` it was sampled
/// in.
fn samples_of<'a>(
    slot: usize,
    intervals: impl IntoIterator<Item = &'a SlotInterval>,
) -> impl Iterator<Item = (u64, f64)> {
    intervals.into_iter().filter_map(move |interval| {
        let growth = interval.growth.get(slot).copied().flatten()?;
        Some((growth, interval.elapsed_usec))
    })
}

/// The growth of every slot's counter between two samples, and the microseconds between them.
struct SlotInterval {
    /// Per slot: the counter's growth (`None`: a missing sample, see [`slot_cpu_rates`]).
    growth: Vec<Option<u64>>,
    elapsed_usec: f64,
}

impl SlotInterval {
    /// The interval from `before` to `now` (`None` unless `now` was taken later).
    fn between(before: &SlotCpuSample, now: &SlotCpuSample) -> Option<SlotInterval> {
        if now.taken <= before.taken {
            return None;
        }
        let growth = (0..now.usec.len())
            .map(|slot| {
                let same_owner = before.owners.get(slot) == now.owners.get(slot);
                match (before.usec.get(slot), now.usec.get(slot)) {
                    (Some(&then), Some(&usec)) if same_owner && usec >= then => Some(usec - then),
                    _ => None,
                }
            })
            .collect();
        Some(SlotInterval {
            growth,
            elapsed_usec: (now.taken - before.taken).as_secs_f64() * 1e6,
        })
    }
}

/// An interval's growth is one number a slot: its debug form gives their count.
impl std::fmt::Debug for SlotInterval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotInterval")
            .field("slots", &self.growth.len())
            .field("elapsed_usec", &self.elapsed_usec)
            .finish()
    }
}

/// Per-slot rates of a cumulative counter (`cpu-usec`, bytes) over its last `window`
/// intervals: a slot's rate is its growth summed over the intervals of the window in which
/// it was sampled, over their time summed. A slot asked a few times a second grows by a few
/// whole microseconds of `cpu-usec` in one interval, so a rate over one interval is mostly
/// noise; over `window` intervals the noise falls by about the square root of `window`, and
/// a change of load shows fully only after `window` intervals. A window of 1 is
/// [`slot_cpu_rates`] exactly.
#[derive(Debug)]
pub struct SlotRateWindow {
    window: usize,
    previous: Option<SlotCpuSample>,
    /// The last intervals, oldest first; at most `window`.
    intervals: std::collections::VecDeque<SlotInterval>,
}

impl SlotRateWindow {
    /// A window of the last `window` intervals (at least 1).
    pub fn new(window: usize) -> SlotRateWindow {
        SlotRateWindow {
            window: window.max(1),
            previous: None,
            intervals: std::collections::VecDeque::new(),
        }
    }

    /// Takes a sample: the interval since the previous sample joins the window, the oldest
    /// leaves it past `window`, and `rates` (one entry per slot) gets every slot's rate over
    /// the window. Returns how many slots were sampled in none of the window's intervals;
    /// those keep their earlier rate (NaN: never sampled), as in [`slot_cpu_rates`].
    pub fn push(&mut self, now: SlotCpuSample, rates: &mut [f64]) -> usize {
        let interval = self
            .previous
            .as_ref()
            .and_then(|before| SlotInterval::between(before, &now));
        self.previous = Some(now);
        let Some(interval) = interval else {
            return rates.len();
        };
        if self.intervals.len() == self.window {
            self.intervals.pop_front();
        }
        self.intervals.push_back(interval);
        rates_over(&self.intervals, rates)
    }

    /// Sets every slot's entry of `medians` (one per slot) to the median of its rates over
    /// the window's intervals in which it was sampled (the mean of the middle two for an even
    /// count), and returns how many slots were sampled in none; those keep their entry, as in
    /// [`push`](Self::push). A window of one interval gives `push`'s rates exactly.
    ///
    /// A rate that one interval alone makes high leaves the median of three or more intervals
    /// unmoved: Valkey adds a command's elapsed time to its slot's `cpu-usec`, so a command
    /// preempted or throttled on a busy host charges its slot with milliseconds in one
    /// interval, where a master's slots all together take a few a second.
    pub fn medians(&self, medians: &mut [f64]) -> usize {
        let mut missing = 0;
        let mut sampled = Vec::with_capacity(self.intervals.len());
        for (slot, median) in medians.iter_mut().enumerate() {
            sampled.clear();
            sampled.extend(
                samples_of(slot, &self.intervals).map(|(growth, usec)| growth as f64 / usec),
            );
            if sampled.is_empty() {
                missing += 1;
                continue;
            }
            sampled.sort_by(f64::total_cmp);
            let middle = sampled.len() / 2;
            *median = if sampled.len() % 2 == 1 {
                sampled[middle]
            } else {
                (sampled[middle - 1] + sampled[middle]) / 2.0
            };
        }
        missing
    }

    /// Forgets every sample (the counter is gone): the next sample starts the window again.
    pub fn forget(&mut self) {
        self.previous = None;
        self.intervals.clear();
    }
}

/// Which per-slot rate over a [`SlotRateWindow`] weights the slots of a master
/// (`ach-redis --slot-rate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlotRateStatistic {
    /// The counter's growth over the window over its time ([`SlotRateWindow::push`]); a
    /// master's load is split among its slots in proportion to these rates.
    #[default]
    Mean,
    /// The median of the per-interval rates over the window ([`SlotRateWindow::medians`]):
    /// a slot's load is the master's load times its median over the sum of the master's mean
    /// rates, so one interval's outlier does not make a slot hot, and the load of slots whose
    /// median is 0 (asked less than every other interval) is left to no slot rather than
    /// spread over the others.
    Median,
}

/// How samples become readings.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ReadingRules {
    /// Memory capacity in bytes used when a node sets no `maxmemory` (`None`: the node's
    /// `total_system_memory`).
    pub memory_capacity: Option<f64>,
    /// The p99 latency that counts as fully loaded, in microseconds.
    pub latency_target_usec: f64,
    /// CPUs a node of relative weight 1 may use: the cpu reading is the cpu seconds per second
    /// over this (1: one core). A cluster whose nodes run under CPU quotas in proportion to
    /// their weights sets the quota of a weight-1 node, so that the weighted reading is each
    /// node's use of its own quota.
    pub cpu_per_weight: f64,
}

impl Default for ReadingRules {
    /// The command line's defaults: memory over `maxmemory` or the machine's memory, a p99
    /// of 1 ms as full load (`--latency-target-us 1000`), and one core a relative weight.
    fn default() -> ReadingRules {
        ReadingRules {
            memory_capacity: None,
            latency_target_usec: 1000.0,
            cpu_per_weight: 1.0,
        }
    }
}

/// The memory reading: `used` over `maxmemory` when the node sets one, otherwise over the
/// configured capacity, otherwise over the machine's memory (NaN when a figure is missing).
pub fn memory_reading(
    used: f64,
    maxmemory: f64,
    total_system_memory: f64,
    rules: &ReadingRules,
) -> f64 {
    let capacity = if maxmemory > 0.0 {
        maxmemory
    } else {
        rules.memory_capacity.unwrap_or(total_system_memory)
    };
    used / capacity
}

/// One node's `[cpu, memory, latency]` reading between two samples, before weighting. An
/// entry that cannot be computed (no earlier sample, a field missing) is NaN.
pub fn reading(previous: Option<&NodeSample>, now: &NodeSample, rules: &ReadingRules) -> [f64; 3] {
    let cpu = match (previous, now.taken) {
        (Some(before), Some(taken)) => match before.taken {
            Some(then) if taken > then => {
                (now.cpu_seconds - before.cpu_seconds)
                    / (taken - then).as_secs_f64()
                    / rules.cpu_per_weight
            }
            _ => f64::NAN,
        },
        _ => f64::NAN,
    };
    let memory = memory_reading(
        now.used_memory,
        now.maxmemory,
        now.total_system_memory,
        rules,
    );
    let latency = match interval_p99(previous, now) {
        Some(p99) => (p99 / rules.latency_target_usec).min(1.0),
        // The first sample, or histograms that were reset: a missing sample.
        None if now.latency_buckets.is_some() => f64::NAN,
        // No LATENCY HISTOGRAM: INFO latencystats since start. A node that served no data
        // command yet (`p99_usec` NaN) made no client wait.
        None if now.p99_usec.is_nan() => 0.0,
        None => (now.p99_usec / rules.latency_target_usec).min(1.0),
    };
    [cpu, memory, latency]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const INFO: &str = "# Memory\r\nused_memory:1048576\r\nmaxmemory:0\r\ntotal_system_memory:8388608\r\n\
# Stats\r\ninstantaneous_ops_per_sec:1500\r\ntotal_commands_processed:99\r\n\
# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:2.5\r\n\
# Commandstats\r\ncmdstat_get:calls=300,usec=600,usec_per_call=2.00\r\n\
cmdstat_set:calls=100,usec=400,usec_per_call=4.00\r\ncmdstat_cluster|nodes:calls=9,usec=1\r\n\
# Latencystats\r\nlatency_percentiles_usec_get:p50=1.003,p99=10.000,p99.9=20.0\r\n\
latency_percentiles_usec_set:p50=2.0,p99=30.000,p99.9=40.0\r\n\
latency_percentiles_usec_cluster|nodes:p50=2.0,p99=9000.0,p99.9=9000.0\r\n";

    #[test]
    fn reads_the_fields_and_weights_p99_by_calls() {
        let now = Instant::now();
        let sample = sample_from_info(INFO, now);
        assert_eq!(sample.cpu_seconds, 4.0);
        assert_eq!(sample.used_memory, 1_048_576.0);
        assert_eq!(sample.ops_per_sec, 1500.0);
        // (10 * 300 + 30 * 100) / 400; the cluster command is left out.
        assert_eq!(sample.p99_usec, 15.0);
        // GET and SET, not CLUSTER NODES.
        assert_eq!(sample.data_commands, 400.0);
    }

    #[test]
    fn data_ops_leave_out_the_rebalancers_commands() {
        let start = Instant::now();
        let before = sample_from_info(INFO, start);
        let later = INFO
            .replace("cmdstat_get:calls=300", "cmdstat_get:calls=500")
            .replace(
                "cmdstat_cluster|nodes:calls=9",
                "cmdstat_cluster|nodes:calls=9000",
            );
        let after = sample_from_info(&later, start + Duration::from_secs(2));
        assert_eq!(data_ops_per_sec(Some(&before), &after), 100.0);
        assert!(data_ops_per_sec(None, &after).is_nan());
        // Counters reset (CONFIG RESETSTAT): no reading rather than a negative one.
        assert!(
            data_ops_per_sec(
                Some(&after),
                &sample_from_info(INFO, start + Duration::from_secs(3))
            )
            .is_nan()
        );
        assert!(
            sample_from_info("# Stats\r\n", start)
                .data_commands
                .is_nan()
        );
    }

    #[test]
    fn readings_follow_the_documented_rules() {
        let start = Instant::now();
        let mut before = sample_from_info(INFO, start);
        before.cpu_seconds = 3.0;
        let now = sample_from_info(INFO, start + Duration::from_secs(2));
        let rules = ReadingRules {
            memory_capacity: Some(4_194_304.0),
            latency_target_usec: 30.0,
            cpu_per_weight: 1.0,
        };
        assert_eq!(reading(Some(&before), &now, &rules), [0.5, 0.25, 0.5]);
        let quota = ReadingRules {
            cpu_per_weight: 0.25,
            ..rules
        };
        assert_eq!(reading(Some(&before), &now, &quota)[0], 2.0);
        let first = reading(None, &now, &rules);
        assert!(first[0].is_nan());
        let system = ReadingRules {
            memory_capacity: None,
            latency_target_usec: 10.0,
            cpu_per_weight: 1.0,
        };
        assert_eq!(reading(None, &now, &system)[1..], [0.125, 1.0]);
        // No data command served yet: no latency (f64::min would have turned NaN into 1).
        let idle = NodeSample {
            p99_usec: f64::NAN,
            ..now.clone()
        };
        assert_eq!(reading(None, &idle, &rules)[2], 0.0);
    }

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    /// A `LATENCY HISTOGRAM` reply (RESP2) of `(command, [(bucket, cumulative)])`.
    fn histogram(commands: &[(&str, &[(u64, i64)])]) -> Value {
        Value::Array(
            commands
                .iter()
                .flat_map(|(name, buckets)| {
                    let calls = buckets.last().map_or(0, |b| b.1);
                    let pairs = buckets
                        .iter()
                        .flat_map(|&(b, c)| [bulk(&b.to_string()), Value::Int(c)])
                        .collect();
                    [
                        bulk(name),
                        Value::Array(vec![
                            bulk("calls"),
                            Value::Int(calls),
                            bulk("histogram_usec"),
                            Value::Array(pairs),
                        ]),
                    ]
                })
                .collect(),
        )
    }

    #[test]
    fn latency_is_the_p99_of_the_interval_from_histogram_deltas() {
        // Since start: 1000 fast GETs (<= 2 us); cluster commands are left out.
        let before = histogram(&[
            ("get", &[(1, 500), (2, 1000)]),
            ("cluster|nodes", &[(1024, 40)]),
        ]);
        // In the interval: 100 more GETs, 2 of them slow (<= 4096 us), and 100 SETs <= 8 us.
        let after = histogram(&[
            ("get", &[(1, 550), (2, 1098), (4096, 1100)]),
            ("set", &[(8, 100)]),
            ("cluster|nodes", &[(1024, 90)]),
        ]);
        let merged = parse_latency_histogram(&after).unwrap();
        assert_eq!(merged.get(&1024), None);
        assert_eq!(merged[&4096], 2);
        let start = Instant::now();
        let mut first = sample_from_info(INFO, start);
        first.latency_buckets = Some(parse_latency_histogram(&before).unwrap());
        let mut second = sample_from_info(INFO, start + Duration::from_secs(1));
        second.latency_buckets = Some(merged);
        // 200 calls in the interval: the 198th is a SET (8 us); the 2 slow GETs are its p99.5+.
        assert_eq!(interval_p99(Some(&first), &second), Some(8.0));
        assert_eq!(interval_p99(Some(&second), &second), Some(0.0));
        assert_eq!(interval_p99(Some(&second), &first), None, "a reset");
        let rules = ReadingRules {
            memory_capacity: None,
            latency_target_usec: 16.0,
            cpu_per_weight: 1.0,
        };
        assert_eq!(reading(Some(&first), &second, &rules)[2], 0.5);
        assert!(reading(None, &second, &rules)[2].is_nan());
    }

    #[test]
    fn a_slot_that_moved_is_a_missing_sample_that_keeps_its_rate() {
        let start = Instant::now();
        let owners = |o: &[&str]| o.iter().map(|id| Some(id.to_string())).collect::<Vec<_>>();
        let first = SlotCpuSample {
            owners: owners(&["a", "a", "b"]),
            usec: vec![0, 100, 50],
            taken: start,
        };
        let second = SlotCpuSample {
            owners: owners(&["a", "a", "b"]),
            usec: vec![500_000, 100, 250_050],
            taken: start + Duration::from_secs(1),
        };
        let mut rates = vec![f64::NAN; 3];
        assert_eq!(slot_cpu_rates(None, &first, &mut rates), 3);
        assert!(rates.iter().all(|r| r.is_nan()));
        assert_eq!(slot_cpu_rates(Some(&first), &second, &mut rates), 0);
        assert_eq!(rates, vec![0.5, 0.0, 0.25]);
        // Slot 0 moves to b (its counter restarts on b), slot 2's counter is reset.
        let third = SlotCpuSample {
            owners: owners(&["b", "a", "b"]),
            usec: vec![1_000, 100_100, 10],
            taken: start + Duration::from_secs(2),
        };
        assert_eq!(slot_cpu_rates(Some(&second), &third, &mut rates), 2);
        assert_eq!(rates, vec![0.5, 0.1, 0.25]);
    }

    /// Samples of three slots over four intervals of 1, 1, 2 and 1 s: slot 0 steady at 0.5
    /// cores, slot 1 growing once by 300 000 us, slot 2 moving from `a` to `b` in the third
    /// interval; slot 3 never sampled (missing from every sample).
    fn four_intervals() -> Vec<SlotCpuSample> {
        let start = Instant::now();
        let sample = |at_s: u64, owner_2: &str, usec: [u64; 3]| SlotCpuSample {
            owners: ["a", "a", owner_2].map(|id| Some(id.to_string())).to_vec(),
            usec: usec.to_vec(),
            taken: start + Duration::from_secs(at_s),
        };
        vec![
            sample(0, "a", [0, 0, 0]),
            sample(1, "a", [500_000, 0, 100_000]),
            sample(2, "a", [1_000_000, 300_000, 300_000]),
            sample(4, "b", [2_000_000, 300_000, 40_000]),
            sample(5, "b", [2_500_000, 300_000, 140_000]),
        ]
    }

    #[test]
    fn a_window_of_one_is_the_rate_since_the_last_sample() {
        let samples = four_intervals();
        let mut by_window = vec![f64::NAN; 4];
        let mut by_pairs = vec![f64::NAN; 4];
        let mut window = SlotRateWindow::new(1);
        for (i, sample) in samples.iter().enumerate() {
            let previous = i.checked_sub(1).map(|p| &samples[p]);
            let missing = slot_cpu_rates(previous, sample, &mut by_pairs);
            assert_eq!(window.push(sample.clone(), &mut by_window), missing);
            assert_eq!(
                format!("{by_window:?}"),
                format!("{by_pairs:?}"),
                "sample {i}"
            );
        }
    }

    #[test]
    fn a_window_sums_the_growth_of_the_intervals_a_slot_was_sampled_in() {
        let mut window = SlotRateWindow::new(3);
        let mut rates = vec![f64::NAN; 4];
        let samples = four_intervals();
        // The first sample has no interval yet: every slot is missing.
        assert_eq!(window.push(samples[0].clone(), &mut rates), 4);
        assert!(rates.iter().all(|r| r.is_nan()));
        assert_eq!(window.push(samples[1].clone(), &mut rates), 1);
        assert_eq!(rates[..3], [0.5, 0.0, 0.1]);
        assert_eq!(window.push(samples[2].clone(), &mut rates), 1);
        // Slot 1: 300 000 us in 2 s.
        assert_eq!(rates[..3], [0.5, 0.15, 0.15]);
        // Slot 2 moved in the third interval: its rate is over the first two intervals only.
        assert_eq!(window.push(samples[3].clone(), &mut rates), 1);
        assert_eq!(rates[..3], [0.5, 0.075, 0.15]);
        assert!(rates[3].is_nan());
        // The first interval leaves the window: slot 1 over 1 + 2 + 1 s, slot 2 over its
        // second interval and its first on b.
        assert_eq!(window.push(samples[4].clone(), &mut rates), 1);
        assert_eq!(rates[..3], [0.5, 0.075, 0.15]);
        window.forget();
        assert_eq!(window.push(samples[4].clone(), &mut rates), 4);
        assert_eq!(rates[..3], [0.5, 0.075, 0.15]);
    }

    #[test]
    fn the_medians_of_a_window_of_one_are_its_rates() {
        let mut window = SlotRateWindow::new(1);
        let mut rates = vec![f64::NAN; 4];
        let mut medians = vec![f64::NAN; 4];
        for (i, sample) in four_intervals().into_iter().enumerate() {
            let missing = window.push(sample, &mut rates);
            assert_eq!(window.medians(&mut medians), missing, "sample {i}");
            assert_eq!(format!("{medians:?}"), format!("{rates:?}"), "sample {i}");
        }
    }

    #[test]
    fn a_median_leaves_out_the_one_interval_that_made_a_slot_hot() {
        let mut window = SlotRateWindow::new(3);
        let mut rates = vec![f64::NAN; 4];
        let mut medians = vec![f64::NAN; 4];
        let samples = four_intervals();
        window.push(samples[0].clone(), &mut rates);
        assert_eq!(window.medians(&mut medians), 4);
        assert!(medians.iter().all(|m| m.is_nan()));
        window.push(samples[1].clone(), &mut rates);
        window.push(samples[2].clone(), &mut rates);
        // Two intervals: slot 1 read 0 and 0.3 cores, the mean of the middle two.
        assert_eq!(window.medians(&mut medians), 1);
        assert_close(&medians[..3], &[0.5, 0.15, 0.15]);
        // Slot 1's one busy interval among three: its median is 0 while its mean rate is
        // 0.075; slot 2 moved in the third interval, so its median is over its first two.
        window.push(samples[3].clone(), &mut rates);
        assert_eq!(window.medians(&mut medians), 1);
        assert_close(&medians[..3], &[0.5, 0.0, 0.15]);
        assert_close(&rates[..3], &[0.5, 0.075, 0.15]);
        assert!(medians[3].is_nan());
        // The first interval leaves: slot 2's median is over its second interval (0.2 cores)
        // and its first on b (0.1).
        window.push(samples[4].clone(), &mut rates);
        assert_eq!(window.medians(&mut medians), 1);
        assert_close(&medians[..3], &[0.5, 0.0, 0.15]);
    }

    fn assert_close(actual: &[f64], expected: &[f64]) {
        let close = actual.len() == expected.len()
            && actual
                .iter()
                .zip(expected)
                .all(|(a, e)| (a - e).abs() < 1e-12);
        assert!(close, "{actual:?} is not {expected:?}");
    }
}
