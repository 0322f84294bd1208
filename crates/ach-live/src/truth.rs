//! The ground truth: every node's load computed from the requests the experiment scheduled and
//! the slot map of each step, with the simulator's own definition, never from telemetry.
//!
//! The workload is seeded, so the experiment knows every request it scheduled: its due time
//! (hence its step), its key (hence its slot) and whether it is a write. With the owner of
//! every slot at each step and each node's measured service rate, a node's step is exactly a
//! simulator step: `rho = clip((requests + 0.5 writes) / mu)` ([`ach_telemetry::utilisation`]),
//! raw `[cpu, memory, latency]` from `rho` ([`raw_metrics_for_cluster`]), the noise-free
//! pipeline's EWMA and Lp composite ([`TelemetryPipeline::noise_free`] with the paper's
//! configuration), `D_true(t) = max l - mean l`, and `d_bar_true` its mean after the same
//! warm-up the simulator leaves out ([`mean_after_warmup`]). Beside it, the unclipped demand
//! over capacity `(requests + 0.5 writes) / mu` of every node and its coefficient of
//! variation ([`coefficient_of_variation`], as the simulator's `report_cv`), which keeps
//! growing where `rho` saturates at 1.

use ach_redis::slot::{SLOT_COUNT, key_slot};
use ach_sim::record::{coefficient_of_variation, mean_after_warmup};
use ach_telemetry::{
    Metrics, StepDraws, TelemetryConfig, TelemetryError, TelemetryPipeline, WRITE_EXTRA_COST,
    raw_metrics_for_cluster,
};

use crate::workload::{WorkloadConfig, key_name};

/// The marker of a slot without an owner in an owner map.
pub const NO_OWNER: u8 = u8::MAX;

/// The requests scheduled per step and slot: `(requests, writes)`.
#[derive(Clone, Debug)]
pub struct Schedule {
    steps: usize,
    counts: Vec<[u32; 2]>,
    offered: u64,
}

impl Schedule {
    /// Every request of every client of `workload` (with hot keys `hot`), counted in the step
    /// of its due time (steps of `interval_s`; the last step takes any request due after it).
    pub fn of(workload: &WorkloadConfig, hot: &[usize], steps: u32, interval_s: f64) -> Schedule {
        let steps = steps.max(1) as usize;
        let slots: Vec<u16> = (0..workload.keys)
            .map(|i| key_slot(key_name(i).as_bytes()))
            .collect();
        let mut counts = vec![[0u32; 2]; steps * SLOT_COUNT];
        let mut offered = 0;
        for client in 0..workload.clients {
            for (due, request) in workload.stream(client, hot) {
                let step = ((due / interval_s) as usize).min(steps - 1);
                let cell = &mut counts[step * SLOT_COUNT + usize::from(slots[request.key])];
                cell[0] += 1;
                cell[1] += u32::from(request.write);
                offered += 1;
            }
        }
        Schedule {
            steps,
            counts,
            offered,
        }
    }

    /// Steps counted.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Requests scheduled in all.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// Requests scheduled in step `step`.
    pub fn offered_in(&self, step: usize) -> u64 {
        self.step(step).iter().map(|c| u64::from(c[0])).sum()
    }

    /// `(requests, writes)` of every slot in step `step`.
    pub fn step(&self, step: usize) -> &[[u32; 2]] {
        &self.counts[step * SLOT_COUNT..(step + 1) * SLOT_COUNT]
    }

    /// `(requests, writes)` of every node in step `step` under the slot map `owners` (the
    /// index of each slot's owner, [`NO_OWNER`] for none: those requests count nowhere).
    pub fn per_node(&self, step: usize, owners: &[u8], nodes: usize) -> (Vec<u64>, Vec<u64>) {
        let mut requests = vec![0u64; nodes];
        let mut writes = vec![0u64; nodes];
        for (cell, &owner) in self.step(step).iter().zip(owners) {
            let owner = usize::from(owner);
            if owner < nodes {
                requests[owner] += u64::from(cell[0]);
                writes[owner] += u64::from(cell[1]);
            }
        }
        (requests, writes)
    }
}

/// The ground truth of one step.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TrueStep {
    /// `D_true(t) = max l - mean l` of the true composite loads.
    pub d_true: f64,
    /// The true composite load of every node.
    pub loads: Vec<f64>,
    /// Unclipped `(requests + 0.5 writes) / mu` of every node.
    pub demand_over_capacity: Vec<f64>,
    /// Coefficient of variation of `demand_over_capacity`.
    pub cv: f64,
    /// Requests scheduled in the step.
    pub offered: u64,
}

/// The ground truth of one arm.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GroundTruth {
    /// Every step.
    pub steps: Vec<TrueStep>,
    /// Mean of `D_true(t)` over the steps `t >= warmup`.
    pub d_bar_true: f64,
    /// Mean of the demand-over-capacity CV over the steps `t >= warmup`.
    pub cv_bar_true: f64,
}

/// The ground truth of the steps whose slot maps are `owners` (one map per step, node indices
/// as in `service_per_step`, each node's service rate in demand units per step).
pub fn ground_truth(
    schedule: &Schedule,
    owners: &[Vec<u8>],
    service_per_step: &[f64],
    warmup: u32,
) -> Result<GroundTruth, TelemetryError> {
    let nodes = service_per_step.len();
    let mut pipeline = TelemetryPipeline::noise_free(nodes, TelemetryConfig::paper())?;
    let mut raw: Vec<Metrics> = Vec::with_capacity(nodes);
    let mut scratch = Vec::with_capacity(nodes);
    let every = vec![true; nodes];
    let mut steps = Vec::with_capacity(owners.len());
    for (t, map) in owners.iter().enumerate().take(schedule.steps()) {
        let (requests, writes) = schedule.per_node(t, map, nodes);
        raw_metrics_for_cluster(&requests, &writes, service_per_step, &mut raw)?;
        let loads = pipeline.observe(&raw, &StepDraws::none())?.loads.to_vec();
        let demand: Vec<f64> = requests
            .iter()
            .zip(&writes)
            .zip(service_per_step)
            .map(|((&r, &w), &mu)| (r as f64 + WRITE_EXTRA_COST * w as f64) / mu)
            .collect();
        steps.push(TrueStep {
            d_true: ach_redis::control::imbalance(&loads),
            cv: coefficient_of_variation(&demand, &every, &mut scratch),
            loads,
            demand_over_capacity: demand,
            offered: schedule.offered_in(t),
        });
    }
    let d: Vec<f64> = steps.iter().map(|s| s.d_true).collect();
    let cv: Vec<f64> = steps.iter().map(|s| s.cv).collect();
    Ok(GroundTruth {
        d_bar_true: mean_after_warmup(&d, warmup as usize),
        cv_bar_true: mean_after_warmup(&cv, warmup as usize),
        steps,
    })
}

/// The first time (in steps from the start) after which `D_true` stays within `tolerance`
/// (a fraction) of its final level, the mean over the last tenth of the steps (at least 2);
/// `None` for fewer than 2 steps.
pub fn settle_step(d_true: &[f64], tolerance: f64) -> Option<usize> {
    if d_true.len() < 2 {
        return None;
    }
    let tail = (d_true.len() / 10).max(2).min(d_true.len());
    let last = &d_true[d_true.len() - tail..];
    let level = last.iter().sum::<f64>() / tail as f64;
    let band = tolerance * level.abs();
    let outside = d_true.iter().rposition(|d| (d - level).abs() > band);
    Some(outside.map_or(0, |t| t + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> WorkloadConfig {
        WorkloadConfig {
            keys: 500,
            clients: 2,
            rate: 200.0,
            duration_s: 4.0,
            seed: 3,
            zipf_s: 1.0,
            write_fraction: 0.3,
            hot_phase: (0.25, 0.5),
            hot_share: 0.3,
            hot_keys: 4,
            step_at: 0.5,
            step_factor: 2.0,
        }
    }

    #[test]
    fn the_schedule_counts_every_request_once_in_its_step_and_slot() {
        let workload = workload();
        let schedule = Schedule::of(&workload, &[], 4, 1.0);
        let all: Vec<(f64, crate::workload::Request)> = (0..2)
            .flat_map(|c| workload.stream(c, &[]).collect::<Vec<_>>())
            .collect();
        assert_eq!(schedule.offered(), all.len() as u64);
        let first = all.iter().filter(|(due, _)| *due < 1.0).count() as u64;
        assert_eq!(schedule.offered_in(0), first);
        // Everything on node 0 but the slots of node 1.
        let mut owners = vec![0u8; SLOT_COUNT];
        owners[..8192].fill(1);
        let (requests, writes) = schedule.per_node(3, &owners, 2);
        assert_eq!(requests.iter().sum::<u64>(), schedule.offered_in(3));
        assert!(writes[0] <= requests[0] && writes[1] <= requests[1]);
        let on_one = all
            .iter()
            .filter(|(due, r)| *due >= 3.0 && key_slot(key_name(r.key).as_bytes()) < 8192)
            .count() as u64;
        assert_eq!(requests[1], on_one);
    }

    #[test]
    fn the_truth_is_the_simulators_composite_of_scheduled_demand() {
        let workload = workload();
        let schedule = Schedule::of(&workload, &[], 4, 1.0);
        let mut owners = vec![0u8; SLOT_COUNT];
        owners[8192..].fill(1);
        let maps = vec![owners; 4];
        // Node 1 twice as fast as node 0.
        let mu = [60.0, 120.0];
        let truth = ground_truth(&schedule, &maps, &mu, 2).unwrap();
        assert_eq!(truth.steps.len(), 4);
        // Recompute step by step with the simulator's pieces.
        let mut pipeline = TelemetryPipeline::noise_free(2, TelemetryConfig::paper()).unwrap();
        let mut raw = Vec::new();
        for (t, step) in truth.steps.iter().enumerate() {
            let (r, w) = schedule.per_node(t, &maps[t], 2);
            raw_metrics_for_cluster(&r, &w, &mu, &mut raw).unwrap();
            let loads = pipeline.observe(&raw, &StepDraws::none()).unwrap().loads;
            assert_eq!(step.loads, loads);
            let max = loads[0].max(loads[1]);
            assert!((step.d_true - (max - (loads[0] + loads[1]) / 2.0)).abs() < 1e-12);
            let demand0 = (r[0] as f64 + 0.5 * w[0] as f64) / 60.0;
            assert!((step.demand_over_capacity[0] - demand0).abs() < 1e-12);
        }
        let d_bar = (truth.steps[2].d_true + truth.steps[3].d_true) / 2.0;
        assert!((truth.d_bar_true - d_bar).abs() < 1e-12);
    }

    #[test]
    fn settling_is_the_first_step_after_the_last_excursion() {
        let d = [0.9, 0.5, 0.31, 0.2, 0.21, 0.2, 0.19, 0.2, 0.2, 0.2];
        // Final level 0.2; 0.31 is the last value outside 0.18..0.22.
        assert_eq!(settle_step(&d, 0.1), Some(3));
        assert_eq!(settle_step(&[0.2, 0.2], 0.1), Some(0));
        assert_eq!(settle_step(&[0.2], 0.1), None);
    }
}
