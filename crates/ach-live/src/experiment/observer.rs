//! The measurement: the load of every master from its own INFO, step by step, with the same
//! reading rules as the rebalancers.

use std::time::{Duration, Instant};

use ach_redis::cluster::{Cluster, Snapshot};
use ach_redis::control::{ControlOptions, Controller, CpuBasis, cpu_bases};
use ach_redis::node_telemetry::info_samples;
use ach_redis::telemetry::{NodeSample, ReadingRules, data_ops_per_sec, reading};
use ach_sim::algorithms::{Catalogue, Entry, names};
use ach_telemetry::LoadTracker;

use crate::error::ExperimentError;

/// How the observer and the rebalancers read a master's cpu part (`ach-redis --idle-cpu` and
/// `--request-capacity`).
#[derive(Clone, Debug)]
pub(super) struct CpuRules {
    /// The cores of a master of relative weight 1.
    pub(super) cpu_per_weight: f64,
    /// Every master's idle cpu use in cores, by address (none: whole readings).
    pub(super) idle_cpu: Vec<(String, f64)>,
    /// Every master's capacity in requests per second, by address (none: cpu readings).
    pub(super) request_capacity: Vec<(String, f64)>,
}

impl CpuRules {
    /// Whole cpu readings over `cpu_per_weight` cores per weight.
    pub(super) fn cores(cpu_per_weight: f64) -> CpuRules {
        CpuRules {
            cpu_per_weight,
            idle_cpu: Vec::new(),
            request_capacity: Vec::new(),
        }
    }
}

/// The controller options of `algorithm` in the experiment (the observer uses Static-W's: it
/// only samples).
pub(super) fn control_options(
    algorithm: Entry,
    weights: Vec<(String, f64)>,
    cpu: &CpuRules,
) -> ControlOptions {
    ControlOptions {
        weights,
        idle_cpu: cpu.idle_cpu.clone(),
        request_capacity: cpu.request_capacity.clone(),
        rules: reading_rules(cpu.cpu_per_weight),
        ..ControlOptions::new(algorithm)
    }
}

/// How INFO becomes readings, for the observer and the rebalancers alike: memory over the
/// machine's memory, p99 over 1 ms, cpu over the quota of a node of relative weight 1.
fn reading_rules(cpu_per_weight: f64) -> ReadingRules {
    ReadingRules {
        cpu_per_weight,
        ..ReadingRules::default()
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
    /// What every master's cpu part counts.
    bases: Vec<CpuBasis>,
    previous: Vec<Option<NodeSample>>,
    masters: Vec<String>,
}

impl Observer {
    /// Takes the first sample of every master (the first step's cpu reading needs one).
    pub(super) fn new(
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        weights: &[(String, f64)],
        cpu: &CpuRules,
    ) -> Result<Observer, ExperimentError> {
        let options = control_options(reader(), weights.to_vec(), cpu);
        let telemetry = options.telemetry;
        let mut sampler = Controller::new(options)?;
        let relative_weights = sampler.relative_weights(snapshot)?;
        let bases = cpu_bases(
            &cpu.idle_cpu,
            &cpu.request_capacity,
            snapshot,
            &relative_weights,
            cpu.cpu_per_weight,
        )?;
        let previous = sampler.sample(cluster, snapshot);
        Ok(Observer {
            sampler,
            tracker: LoadTracker::new(snapshot.masters.len(), telemetry)?,
            rules: reading_rules(cpu.cpu_per_weight),
            relative_weights,
            bases,
            previous,
            masters: snapshot.masters.iter().map(|m| m.id.clone()).collect(),
        })
    }

    /// The seed's view of the cluster and the loads of one step.
    pub(super) fn observe(
        &mut self,
        cluster: &mut Cluster,
    ) -> Result<Observation, ExperimentError> {
        let snapshot = cluster.snapshot()?;
        let ids: Vec<String> = snapshot.masters.iter().map(|m| m.id.clone()).collect();
        if ids != self.masters {
            return Err(ExperimentError::MastersChanged);
        }
        let samples = self.sampler.sample(cluster, &snapshot);
        let mut readings = Vec::with_capacity(samples.len());
        for (index, sample) in samples.iter().enumerate() {
            let previous = self.previous[index].as_ref();
            let (raw, data_ops) = match sample {
                Some(now) => (
                    reading(previous, now, &self.rules),
                    data_ops_per_sec(previous, now),
                ),
                None => ([f64::NAN; 3], f64::NAN),
            };
            let weighted = self.bases[index].weighted(raw, self.relative_weights[index], data_ops);
            readings.push(weighted.map(|value| value.is_finite().then_some(value)));
            self.tracker.record(index, weighted)?;
            if sample.is_some() {
                self.previous[index] = sample.clone();
            }
        }
        let loads = self.tracker.finish_step().loads.to_vec();
        Ok(Observation {
            snapshot,
            loads,
            readings,
        })
    }
}

/// One step's observation of the cluster.
pub(super) struct Observation {
    /// The cluster's shape at the end of the step.
    pub snapshot: Snapshot,
    /// Every master's composite load.
    pub loads: Vec<f64>,
    /// The parts of every master's composite (see `StepRecord::telemetry_readings`).
    pub readings: Vec<[Option<f64>; 3]>,
}

/// Every master's cpu use without clients, in cores, by address: the growth of INFO's cpu
/// seconds over `seconds`, while the masters are read as they will be once the clients run:
/// every `interval`, one observation of a rebalance loop (`Controller::observe`: the cluster's
/// shape, the slots' figures, INFO and the latency histograms) and one of the observer's
/// samples. Empty for 0 seconds; a master that does not answer at the start or the end is
/// left out (its readings stay whole).
pub(super) fn idle_cpu(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    readers: IdleReaders<'_>,
) -> Result<Vec<(String, f64)>, ExperimentError> {
    if readers.seconds <= 0.0 {
        return Ok(Vec::new());
    }
    let options = control_options(
        reader(),
        readers.weights.to_vec(),
        &CpuRules::cores(readers.cpu_per_weight),
    );
    let mut controller = Controller::new(options)?;
    let first = info_samples(cluster, snapshot);
    let end = Instant::now() + Duration::from_secs_f64(readers.seconds);
    let mut last = first.clone();
    let mut loop_reads = true;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        std::thread::sleep(left.min(readers.interval / 2));
        if loop_reads {
            controller.observe(cluster)?;
        }
        last = info_samples(cluster, snapshot);
        loop_reads = !loop_reads;
    }
    Ok(snapshot
        .masters
        .iter()
        .zip(first.iter().zip(&last))
        .filter_map(|(master, pair)| {
            let (Some(before), Some(after)) = pair else {
                return None;
            };
            let wall = after.taken?.checked_duration_since(before.taken?)?;
            let cores = (after.cpu_seconds - before.cpu_seconds) / wall.as_secs_f64();
            cores
                .is_finite()
                .then(|| (master.address.clone(), cores.max(0.0)))
        })
        .collect())
}

/// The algorithm of a controller that only reads: A0's balancer, which never moves a token.
fn reader() -> Entry {
    Catalogue::built_in()
        .get(names::STATIC_W)
        .cloned()
        .expect("a built-in")
}

/// How long and how the masters are read for their idle cpu.
#[derive(Clone, Copy)]
pub(super) struct IdleReaders<'a> {
    /// Seconds of reading (0: none).
    pub(super) seconds: f64,
    /// The control step.
    pub(super) interval: Duration,
    /// `(address, capacity)` of every master.
    pub(super) weights: &'a [(String, f64)],
    /// The cpu of a node of relative weight 1.
    pub(super) cpu_per_weight: f64,
}
