//! Per-node telemetry from `INFO`, turned into the `[cpu, memory, latency]` readings ACH's
//! `LoadTracker` takes.
//!
//! - **cpu**: the growth of `used_cpu_sys + used_cpu_user` (seconds of cpu the server used)
//!   over the wall time between two samples; 1.0 is one core, the most a single-threaded
//!   Redis can use.
//! - **memory**: `used_memory` over `maxmemory` when the node sets one, otherwise over the
//!   configured capacity (`--memory-capacity`), otherwise over `total_system_memory`.
//! - **latency**: the 99th percentile of the node's commands (`INFO latencystats`, Redis 7.0+,
//!   averaged over the commands weighted by their calls) over a target latency
//!   (`--latency-target-us`), capped at 1; 0 for a node that served no data command yet. Redis keeps these histograms since its start (or
//!   `CONFIG RESETSTAT`); the rebalancer does not reset them, so the reading follows changes
//!   slowly.
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
        let base = command.split('|').next().unwrap_or(command);
        if matches!(
            base,
            "cluster" | "info" | "config" | "migrate" | "ping" | "restore-asking" | "asking"
        ) {
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
    let capacity = if now.maxmemory > 0.0 {
        now.maxmemory
    } else {
        rules.memory_capacity.unwrap_or(now.total_system_memory)
    };
    let memory = now.used_memory / capacity;
    // A node that served no data command yet (`p99_usec` NaN) made no client wait.
    let p99 = if now.p99_usec.is_nan() {
        0.0
    } else {
        now.p99_usec
    };
    let latency = (p99 / rules.latency_target_usec).min(1.0);
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
}
