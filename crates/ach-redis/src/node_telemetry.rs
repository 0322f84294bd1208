//! Where the controller's per-node readings come from: each node's own `INFO` and
//! `LATENCY HISTOGRAM` (the default), or a Prometheus server that scrapes `redis_exporter`
//! (`--telemetry prometheus`, [`crate::prometheus_telemetry`]). Everything after the readings
//! (weighting, smoothing, planning) is the same for both.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::cluster::{Cluster, Snapshot};
use crate::error::Error;
use crate::prometheus_api::PrometheusError;
use crate::prometheus_telemetry::{PrometheusReadings, PrometheusTelemetry};
use crate::telemetry::{
    NodeSample, ReadingRules, data_ops_per_sec, interval_p99, parse_latency_histogram, reading,
    sample_from_info,
};

/// The source of the per-node readings.
#[derive(Clone, Debug, Default)]
pub enum NodeTelemetry {
    /// Every master's `INFO` and `LATENCY HISTOGRAM`, asked by the controller.
    #[default]
    Info,
    /// PromQL over `redis_exporter`'s series in a Prometheus server.
    Prometheus(PrometheusTelemetry),
}

impl NodeTelemetry {
    /// `info` or `prometheus`, as `--telemetry` names it.
    pub fn name(&self) -> &'static str {
        match self {
            NodeTelemetry::Info => "info",
            NodeTelemetry::Prometheus(_) => "prometheus",
        }
    }

    /// Where the readings come from, in a sentence for `status`.
    pub fn describe(&self) -> String {
        match self {
            NodeTelemetry::Info => "INFO and LATENCY HISTOGRAM of every master".to_string(),
            NodeTelemetry::Prometheus(prometheus) => format!(
                "Prometheus at {} (redis_exporter series, nodes by label {:?}, rate window \
                 {} s, series older than {} s missing)",
                prometheus.url(),
                prometheus.node_label,
                prometheus.window.as_secs(),
                prometheus.max_age.as_secs()
            ),
        }
    }
}

/// One master's readings for one observation.
#[derive(Clone, Debug)]
pub struct NodeReading {
    /// `[cpu, memory, latency]` before weighting; NaN is a missing sample.
    pub reading: [f64; 3],
    /// The p99 of the data commands over the interval in microseconds (INFO; NaN otherwise).
    pub p99_usec: f64,
    /// The mean time per data command over the window in microseconds (Prometheus; NaN
    /// otherwise).
    pub mean_latency_usec: f64,
    /// Commands per second: INFO's data commands (`commandstats` without the rebalancer's
    /// and operators' commands) over the interval; Prometheus's rate of every command.
    pub ops_per_sec: f64,
    /// The data commands per second over the interval, without the rebalancer's and
    /// operators' commands: INFO's `commandstats`, or Prometheus's rate of
    /// `redis_commands_total` (NaN when missing).
    pub data_ops_per_sec: f64,
    /// The raw INFO figures (INFO only).
    pub sample: Option<NodeSample>,
    /// The raw Prometheus figures (Prometheus only).
    pub prometheus: Option<PrometheusReadings>,
}

/// Reads every master's readings from the chosen source, keeping what the next reading is a
/// difference from (INFO's cumulative counters).
#[derive(Clone, Debug, Default)]
pub struct NodeReader {
    /// The source.
    pub source: NodeTelemetry,
    /// The latest INFO sample of every master, by node id.
    previous: BTreeMap<String, NodeSample>,
}

impl NodeReader {
    /// A reader of `source`.
    pub fn new(source: NodeTelemetry) -> NodeReader {
        NodeReader {
            source,
            previous: BTreeMap::new(),
        }
    }

    /// Checks that the source answers for these masters (one read of Prometheus: an
    /// unreachable server or a query without series is an [`Error::Input`], exit 2); INFO needs
    /// no check.
    pub fn check(&self, snapshot: &Snapshot) -> Result<(), Error> {
        match &self.source {
            NodeTelemetry::Info => Ok(()),
            NodeTelemetry::Prometheus(prometheus) => prometheus
                .read(&addresses(snapshot))
                .map(|_| ())
                .map_err(|e| Error::Input(format!("--telemetry prometheus: {e}"))),
        }
    }

    /// Takes the base of the next reading: INFO's first samples; for Prometheus, a check
    /// (its rates need no base).
    pub fn prime(&mut self, cluster: &mut Cluster, snapshot: &Snapshot) -> Result<(), Error> {
        match &self.source {
            NodeTelemetry::Info => {
                let samples = info_samples(cluster, snapshot);
                self.remember(snapshot, &samples);
                Ok(())
            }
            NodeTelemetry::Prometheus(_) => self.check(snapshot),
        }
    }

    /// Remembers INFO samples as the base of the next reading.
    pub fn remember(&mut self, snapshot: &Snapshot, samples: &[Option<NodeSample>]) {
        for (master, sample) in snapshot.masters.iter().zip(samples) {
            if let Some(sample) = sample {
                self.previous.insert(master.id.clone(), sample.clone());
            }
        }
    }

    /// Every master's readings, in the order of `snapshot.masters`. INFO: a node that does not
    /// answer has missing samples. Prometheus: stale or absent series are missing samples; an
    /// unreachable server is [`Error::Unreachable`] (the loop skips the step), a query without
    /// series or refused [`Error::Input`].
    pub fn read(
        &mut self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        rules: &ReadingRules,
    ) -> Result<Vec<NodeReading>, Error> {
        match &self.source {
            NodeTelemetry::Info => {
                let samples = info_samples(cluster, snapshot);
                let readings = snapshot
                    .masters
                    .iter()
                    .zip(&samples)
                    .map(|(master, sample)| {
                        info_reading(self.previous.get(&master.id), sample.as_ref(), rules)
                    })
                    .collect();
                self.remember(snapshot, &samples);
                Ok(readings)
            }
            NodeTelemetry::Prometheus(prometheus) => {
                let read = prometheus.read(&addresses(snapshot)).map_err(|e| match e {
                    PrometheusError::Unreachable { url, reason } => Error::Unreachable {
                        address: format!("Prometheus at {url}"),
                        detail: reason,
                    },
                    other => Error::Input(format!("--telemetry prometheus: {other}")),
                })?;
                Ok(read
                    .into_iter()
                    .map(|figures| NodeReading {
                        reading: figures.reading(rules),
                        p99_usec: f64::NAN,
                        mean_latency_usec: figures.mean_latency_usec.unwrap_or(f64::NAN),
                        ops_per_sec: figures.ops_per_sec.unwrap_or(f64::NAN),
                        data_ops_per_sec: figures.data_ops_per_sec.unwrap_or(f64::NAN),
                        sample: None,
                        prometheus: Some(figures),
                    })
                    .collect())
            }
        }
    }
}

/// A master's INFO reading from its previous and current samples.
fn info_reading(
    previous: Option<&NodeSample>,
    sample: Option<&NodeSample>,
    rules: &ReadingRules,
) -> NodeReading {
    let data_ops = sample.map_or(f64::NAN, |now| data_ops_per_sec(previous, now));
    NodeReading {
        reading: sample.map_or([f64::NAN; 3], |now| reading(previous, now, rules)),
        p99_usec: sample
            .and_then(|now| interval_p99(previous, now))
            .unwrap_or(f64::NAN),
        mean_latency_usec: f64::NAN,
        ops_per_sec: data_ops,
        data_ops_per_sec: data_ops,
        sample: sample.cloned(),
        prometheus: None,
    }
}

fn addresses(snapshot: &Snapshot) -> Vec<String> {
    snapshot.masters.iter().map(|m| m.address.clone()).collect()
}

/// Takes an INFO and `LATENCY HISTOGRAM` sample of every master; a node that does not answer
/// gets `None`.
pub fn info_samples(cluster: &mut Cluster, snapshot: &Snapshot) -> Vec<Option<NodeSample>> {
    let mut samples = Vec::with_capacity(snapshot.masters.len());
    for master in &snapshot.masters {
        let histogram = cluster
            .query::<redis::Value>(&master.address, redis::cmd("LATENCY").arg("HISTOGRAM"))
            .ok()
            .and_then(|reply| parse_latency_histogram(&reply).ok());
        let info = cluster.query::<String>(
            &master.address,
            redis::cmd("INFO")
                .arg("server")
                .arg("memory")
                .arg("stats")
                .arg("cpu")
                .arg("commandstats")
                .arg("latencystats"),
        );
        samples.push(info.ok().map(|text| NodeSample {
            latency_buckets: histogram,
            ..sample_from_info(&text, Instant::now())
        }));
    }
    samples
}
