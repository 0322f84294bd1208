//! The measurement: the load of every master from its own INFO, step by step, with the same
//! reading rules as the rebalancers.

use ach_redis::cluster::{Cluster, Snapshot};
use ach_redis::control::{ControlOptions, Controller, live_ach_config};
use ach_redis::migrate::MigrationOptions;
use ach_redis::telemetry::{NodeSample, ReadingRules, reading};
use ach_sim::algorithms::{Catalogue, Entry, names};
use ach_telemetry::{LoadTracker, TelemetryConfig};

use crate::error::ExperimentError;

/// The controller options of `algorithm` in the experiment (the observer uses Static-W's: it
/// only samples).
pub(super) fn control_options(
    algorithm: Entry,
    weights: Vec<(String, f64)>,
    cpu_per_weight: f64,
) -> ControlOptions {
    ControlOptions {
        algorithm,
        parameters: Vec::new(),
        weights,
        rules: reading_rules(cpu_per_weight),
        telemetry: TelemetryConfig::paper(),
        ach: live_ach_config(),
        migration: MigrationOptions::default(),
        min_slot_keys: 1,
    }
}

/// How INFO becomes readings, for the observer and the rebalancers alike: memory over the
/// machine's memory, p99 over 1 ms, cpu over the quota of a node of relative weight 1.
fn reading_rules(cpu_per_weight: f64) -> ReadingRules {
    ReadingRules {
        memory_capacity: None,
        latency_target_usec: 1000.0,
        cpu_per_weight,
    }
}

/// The load of every master from its own INFO, step by step, whatever the cluster's health
/// (a rebalancer's controller stops observing while nodes disagree on a slot's owner; the
/// measurement must not). Masters are those of the first snapshot, in address order.
pub(super) struct Observer {
    sampler: Controller,
    tracker: LoadTracker,
    rules: ReadingRules,
    relative_weights: Vec<f64>,
    previous: Vec<Option<NodeSample>>,
    masters: Vec<String>,
}

impl Observer {
    /// Takes the first sample of every master (the first step's cpu reading needs one).
    pub(super) fn new(
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        weights: &[(String, f64)],
        cpu_per_weight: f64,
    ) -> Result<Observer, ExperimentError> {
        // The observer only samples: A0's balancer, which never moves a token.
        let observer = Catalogue::built_in()
            .get(names::STATIC_W)
            .cloned()
            .expect("a built-in");
        let options = control_options(observer, weights.to_vec(), cpu_per_weight);
        let telemetry = options.telemetry;
        let mut sampler = Controller::new(options)?;
        let relative_weights = sampler.relative_weights(snapshot)?;
        let previous = sampler.sample(cluster, snapshot);
        Ok(Observer {
            sampler,
            tracker: LoadTracker::new(snapshot.masters.len(), telemetry)?,
            rules: reading_rules(cpu_per_weight),
            relative_weights,
            previous,
            masters: snapshot.masters.iter().map(|m| m.id.clone()).collect(),
        })
    }

    /// The seed's view of the cluster and the loads of one step.
    pub(super) fn observe(
        &mut self,
        cluster: &mut Cluster,
    ) -> Result<(Snapshot, Vec<f64>), ExperimentError> {
        let snapshot = cluster.snapshot()?;
        let ids: Vec<String> = snapshot.masters.iter().map(|m| m.id.clone()).collect();
        if ids != self.masters {
            return Err(ExperimentError::MastersChanged);
        }
        let samples = self.sampler.sample(cluster, &snapshot);
        for (index, sample) in samples.iter().enumerate() {
            let raw = match sample {
                Some(now) => reading(self.previous[index].as_ref(), now, &self.rules),
                None => [f64::NAN; 3],
            };
            let weighted = raw.map(|value| value / self.relative_weights[index]);
            self.tracker.record(index, weighted)?;
            if sample.is_some() {
                self.previous[index] = sample.clone();
            }
        }
        let loads = self.tracker.finish_step().loads.to_vec();
        Ok((snapshot, loads))
    }
}
