//! Telemetry read from Prometheus (`--telemetry prometheus --prometheus-url URL`): each
//! master's readings by PromQL over the metrics of `redis_exporter`, instead of `INFO`.
//!
//! **Which series is which node.** A series belongs to the master whose `host:port` equals the
//! value of its node label, `instance` by default (`--prometheus-node-label` names another);
//! a `redis://` or `rediss://` prefix of the value is ignored. With one exporter per node,
//! give each target its node's address as `instance` in the scrape configuration:
//!
//! ```yaml
//! scrape_configs:
//!   - job_name: redis
//!     static_configs:
//!       - targets: ["10.0.0.5:9121"]
//!         labels: { instance: "10.0.0.5:6379" }
//! ```
//!
//! With the exporter's multi-target `/scrape?target=redis://host:port`, relabel `instance` from
//! `__param_target` as its README shows.
//!
//! **What is read**, each over the rate window (`--prometheus-window-s`, at least two scrape
//! intervals):
//! - cpu: `rate(redis_cpu_sys_seconds_total) + rate(redis_cpu_user_seconds_total)`, in cores;
//! - memory: `redis_memory_used_bytes`, `redis_memory_max_bytes` and
//!   `redis_total_system_memory_bytes` (the exporter's `-include-system-metrics`);
//! - latency: the mean time per data command over the window,
//!   `rate(redis_commands_duration_seconds_total) / rate(redis_commands_total)` without the
//!   cluster, info, config and migration commands (the rebalancer's own);
//! - ops/s: `rate(redis_commands_processed_total)`;
//! - data ops/s: `rate(redis_commands_total)` without those commands, the count a
//!   `--request-capacity` divides.
//!
//! **Missing samples.** A node whose exporter reports `redis_up 0`, whose newest sample is
//! older than [`PrometheusTelemetry::max_age`], or that has no series for a reading gets no
//! value for it (a missing sample, as the model treats one); a query that returns no series
//! for any node at all is an error, since then the scrape configuration or the labels are
//! wrong rather than a node being down.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::prometheus_api::{PrometheusClient, PrometheusError, Sample};
use crate::telemetry::{ReadingRules, memory_reading};

/// The commands a latency reading leaves out: the rebalancer's own and the monitoring's.
const CONTROL_COMMANDS: &str =
    "cluster.*|info|config.*|migrate|ping|restore-asking|asking|latency.*|slowlog.*|client.*";

/// How to read telemetry from one Prometheus server.
#[derive(Clone, Debug)]
pub struct PrometheusTelemetry {
    client: PrometheusClient,
    /// The label whose value is a node's `host:port`.
    pub node_label: String,
    /// The window of every `rate()`.
    pub window: Duration,
    /// A node whose newest `redis_up` sample is older than this counts as missing.
    pub max_age: Duration,
}

/// One master's readings from Prometheus; `None` is a missing sample.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PrometheusReadings {
    /// Cores of cpu over the window.
    pub cpu_cores: Option<f64>,
    /// `used_memory` in bytes.
    pub used_memory: Option<f64>,
    /// `maxmemory` in bytes (0: none set).
    pub maxmemory: Option<f64>,
    /// `total_system_memory` in bytes.
    pub total_system_memory: Option<f64>,
    /// Mean microseconds per data command over the window.
    pub mean_latency_usec: Option<f64>,
    /// Commands per second over the window.
    pub ops_per_sec: Option<f64>,
    /// Data commands per second over the window (without the rebalancer's and monitoring's).
    pub data_ops_per_sec: Option<f64>,
}

impl PrometheusReadings {
    /// The `[cpu, memory, latency]` reading the load tracker takes, before weighting, by the
    /// rules INFO's readings follow: cpu in cores over `cpu_per_weight`; memory over
    /// `maxmemory`, the configured capacity or the machine's memory; latency (here the mean
    /// time per data command over the window, not a p99) over the target, capped at 1. A
    /// reading without its series is NaN (a missing sample), except the latency of a node that
    /// is read (it has a cpu reading) but served no data command over the window: 0, as for
    /// INFO, since no client waited.
    pub fn reading(&self, rules: &ReadingRules) -> [f64; 3] {
        let cpu = self
            .cpu_cores
            .map_or(f64::NAN, |cores| cores / rules.cpu_per_weight);
        let memory = match self.used_memory {
            Some(used) => memory_reading(
                used,
                self.maxmemory.unwrap_or(0.0),
                self.total_system_memory.unwrap_or(f64::NAN),
                rules,
            ),
            None => f64::NAN,
        };
        let latency = match (self.mean_latency_usec, self.cpu_cores) {
            (Some(usec), _) => (usec / rules.latency_target_usec).min(1.0),
            (None, Some(_)) => 0.0,
            (None, None) => f64::NAN,
        };
        [cpu, memory, latency]
    }
}

impl PrometheusTelemetry {
    /// Telemetry from the Prometheus at `url`, nodes by the `instance` label, a 30 s window.
    pub fn new(url: &str) -> Result<PrometheusTelemetry, PrometheusError> {
        Ok(PrometheusTelemetry {
            client: PrometheusClient::new(url)?,
            node_label: "instance".to_string(),
            window: Duration::from_secs(30),
            max_age: Duration::from_secs(60),
        })
    }

    /// The server's URL, without user information.
    pub fn url(&self) -> &str {
        self.client.url()
    }

    /// The PromQL of every reading, by name, for this configuration.
    pub fn queries(&self) -> Vec<(&'static str, String)> {
        let by = &self.node_label;
        let w = format!("{}s", self.window.as_secs().max(1));
        let data = format!("{{cmd!~\"{CONTROL_COMMANDS}\"}}");
        vec![
            (
                "cpu",
                format!(
                    "sum by ({by}) (rate(redis_cpu_sys_seconds_total[{w}]) + \
                     rate(redis_cpu_user_seconds_total[{w}]))"
                ),
            ),
            (
                "used_memory",
                format!("max by ({by}) (redis_memory_used_bytes)"),
            ),
            (
                "maxmemory",
                format!("max by ({by}) (redis_memory_max_bytes)"),
            ),
            (
                "total_system_memory",
                format!("max by ({by}) (redis_total_system_memory_bytes)"),
            ),
            (
                "latency",
                format!(
                    "1e6 * sum by ({by}) (rate(redis_commands_duration_seconds_total{data}[{w}])) \
                     / sum by ({by}) (rate(redis_commands_total{data}[{w}]))"
                ),
            ),
            (
                "ops_per_sec",
                format!("sum by ({by}) (rate(redis_commands_processed_total[{w}]))"),
            ),
            (
                "data_ops_per_sec",
                format!("sum by ({by}) (rate(redis_commands_total{data}[{w}]))"),
            ),
            (
                "fresh",
                format!(
                    "max by ({by}) (redis_up == 1 and (time() - timestamp(redis_up)) < {})",
                    self.max_age.as_secs().max(1)
                ),
            ),
        ]
    }

    /// The readings of every node in `nodes` (`host:port`), in that order.
    pub fn read(&self, nodes: &[String]) -> Result<Vec<PrometheusReadings>, PrometheusError> {
        let mut readings = vec![PrometheusReadings::default(); nodes.len()];
        let mut fresh = vec![false; nodes.len()];
        for (name, query) in self.queries() {
            let samples = self.client.query(&query)?;
            let values = self.by_node(&samples, nodes);
            // Ops and latency may be absent for an idle cluster (no data command yet), and a
            // cluster without maxmemory or system metrics has no such series: only the cpu and
            // the liveness series must name some node, or the configuration is wrong.
            if matches!(name, "cpu" | "used_memory" | "fresh") && values.iter().all(Option::is_none)
            {
                return Err(PrometheusError::NoSeries(format!(
                    "{query:?} (for a series with {} = one of {})",
                    self.node_label,
                    nodes.join(", ")
                )));
            }
            for (i, value) in values.into_iter().enumerate() {
                let node = &mut readings[i];
                match name {
                    "cpu" => node.cpu_cores = value,
                    "used_memory" => node.used_memory = value,
                    "maxmemory" => node.maxmemory = value,
                    "total_system_memory" => node.total_system_memory = value,
                    "latency" => node.mean_latency_usec = value,
                    "ops_per_sec" => node.ops_per_sec = value,
                    "data_ops_per_sec" => node.data_ops_per_sec = value,
                    _ => fresh[i] = value.is_some(),
                }
            }
        }
        for (node, fresh) in readings.iter_mut().zip(fresh) {
            if !fresh {
                *node = PrometheusReadings::default();
            }
        }
        Ok(readings)
    }

    /// The finite value of each node's series in `samples`, `None` where it has none.
    fn by_node(&self, samples: &[Sample], nodes: &[String]) -> Vec<Option<f64>> {
        let mut values: BTreeMap<&str, f64> = BTreeMap::new();
        for sample in samples {
            if let Some(label) = sample.labels.get(&self.node_label)
                && sample.value.is_finite()
            {
                let address = label
                    .strip_prefix("redis://")
                    .or_else(|| label.strip_prefix("rediss://"))
                    .unwrap_or(label);
                values.insert(address, sample.value);
            }
        }
        nodes
            .iter()
            .map(|node| values.get(node.as_str()).copied())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(instance: &str, value: f64) -> Sample {
        Sample {
            labels: [("instance".to_string(), instance.to_string())].into(),
            timestamp: 0.0,
            value,
        }
    }

    #[test]
    fn series_map_to_nodes_by_their_label_with_or_without_a_scheme() {
        let telemetry = PrometheusTelemetry::new("http://127.0.0.1:9090").unwrap();
        let nodes = ["127.0.0.1:7000".to_string(), "127.0.0.1:7001".to_string()];
        let samples = [
            sample("redis://127.0.0.1:7001", 0.5),
            sample("127.0.0.1:7000", f64::NAN),
            sample("127.0.0.1:9999", 1.0),
        ];
        assert_eq!(telemetry.by_node(&samples, &nodes), [None, Some(0.5)]);
    }

    #[test]
    fn readings_follow_the_info_rules_and_missing_series_are_missing_samples() {
        let rules = ReadingRules {
            memory_capacity: None,
            latency_target_usec: 1000.0,
            cpu_per_weight: 0.5,
        };
        let read = PrometheusReadings {
            cpu_cores: Some(0.25),
            used_memory: Some(100.0),
            maxmemory: Some(0.0),
            total_system_memory: Some(400.0),
            mean_latency_usec: Some(250.0),
            ops_per_sec: Some(10.0),
            data_ops_per_sec: Some(8.0),
        };
        assert_eq!(read.reading(&rules), [0.5, 0.25, 0.25]);
        let capped = PrometheusReadings {
            maxmemory: Some(200.0),
            mean_latency_usec: Some(5000.0),
            ..read.clone()
        };
        assert_eq!(capped.reading(&rules), [0.5, 0.5, 1.0]);
        // Read but idle: no data command over the window is no wait.
        let idle = PrometheusReadings {
            mean_latency_usec: None,
            ..read
        };
        assert_eq!(idle.reading(&rules)[2], 0.0);
        assert!(
            PrometheusReadings::default()
                .reading(&rules)
                .iter()
                .all(|r| r.is_nan())
        );
    }

    #[test]
    fn the_queries_use_the_label_and_the_window() {
        let mut telemetry = PrometheusTelemetry::new("http://127.0.0.1:9090").unwrap();
        telemetry.node_label = "redis_node".into();
        telemetry.window = Duration::from_secs(15);
        let queries = telemetry.queries();
        let cpu = &queries.iter().find(|(name, _)| *name == "cpu").unwrap().1;
        assert_eq!(
            cpu,
            "sum by (redis_node) (rate(redis_cpu_sys_seconds_total[15s]) + \
             rate(redis_cpu_user_seconds_total[15s]))"
        );
        assert!(queries.iter().all(|(_, q)| q.contains("by (redis_node)")));
    }
}
