//! The operators' outcomes of an arm: requests offered and answered, throughput, client
//! latency percentiles and errors, over the whole run and per phase of the workload, and how
//! long the migration took.

use super::{Outcome, PhaseOutcome, StepRecord};
use crate::truth::Schedule;
use crate::workload::WorkloadConfig;

/// The `q` quantile (nearest rank) of sorted microseconds, in milliseconds.
pub(super) fn percentile(sorted: &[f32], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(f64::from(sorted[rank - 1]) / 1000.0)
}

/// A phase of the workload: its name and steps `[from, to)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Phase {
    pub(super) name: String,
    pub(super) from: u32,
    pub(super) to: u32,
}

/// The phases of `workload` over `steps` steps: `base` before the hot-key phase,
/// `hot-keys` during it, `load-step` from the load step on (`hot-keys+load-step` where they
/// overlap), each a run of steps whose start is in it.
pub(super) fn phases(workload: &WorkloadConfig, steps: u32) -> Vec<Phase> {
    let step_of = |fraction: f64| ((fraction * f64::from(steps)).round() as u32).min(steps);
    let (hot_from, hot_to) = (step_of(workload.hot_phase.0), step_of(workload.hot_phase.1));
    let stepped = step_of(workload.step_at);
    let name = |t: u32| {
        let hot = t >= hot_from && t < hot_to;
        match (hot, t >= stepped) {
            (true, true) => "hot-keys+load-step",
            (true, false) => "hot-keys",
            (false, true) => "load-step",
            (false, false) => "base",
        }
    };
    let mut phases: Vec<Phase> = Vec::new();
    for t in 0..steps {
        match phases.last_mut() {
            Some(last) if last.name == name(t) => last.to = t + 1,
            _ => phases.push(Phase {
                name: name(t).into(),
                from: t,
                to: t + 1,
            }),
        }
    }
    phases
}

/// The outcomes of one arm.
pub(super) struct Outcomes {
    pub(super) whole: Outcome,
    pub(super) phases: Vec<PhaseOutcome>,
    pub(super) migration_s: Option<f64>,
}

impl Outcomes {
    /// From the step records (client errors and keys moved filled in), every answered
    /// request's `(step, node, microseconds)` and the schedule.
    pub(super) fn of(
        records: &[StepRecord],
        latencies: &[(u32, u8, f32)],
        schedule: &Schedule,
        phases: &[Phase],
        interval_s: f64,
    ) -> Outcomes {
        let steps = records.len() as u32;
        let whole = outcome(
            records,
            latencies,
            schedule,
            (0, u32::MAX),
            interval_s,
            steps,
        );
        let phases = phases
            .iter()
            .map(|phase| {
                let range = (phase.from, phase.to);
                let in_phase = |t: u32| t >= phase.from && t < phase.to;
                let truth: Vec<f64> = records
                    .iter()
                    .filter(|r| in_phase(r.t) && !r.warmup)
                    .map(|r| r.d_true)
                    .collect();
                let moved_before = records
                    .iter()
                    .rfind(|r| r.t < phase.from)
                    .map_or(0, |r| r.keys_moved);
                let moved_at_end = records
                    .iter()
                    .rfind(|r| in_phase(r.t))
                    .map_or(moved_before, |r| r.keys_moved);
                PhaseOutcome {
                    phase: phase.name.clone(),
                    steps: range,
                    d_true: if truth.is_empty() {
                        f64::NAN
                    } else {
                        truth.iter().sum::<f64>() / truth.len() as f64
                    },
                    keys_moved: moved_at_end - moved_before,
                    outcome: outcome(records, latencies, schedule, range, interval_s, steps),
                }
            })
            .collect();
        Outcomes {
            whole,
            phases,
            migration_s: migration_seconds(records, interval_s),
        }
    }
}

/// The outcome over the steps `[from, to)` (clipped to the `steps` measured).
fn outcome(
    records: &[StepRecord],
    latencies: &[(u32, u8, f32)],
    schedule: &Schedule,
    (from, to): (u32, u32),
    interval_s: f64,
    steps: u32,
) -> Outcome {
    let to = to.min(steps);
    let whole_run = from == 0 && to == steps;
    let mut sorted: Vec<f32> = latencies
        .iter()
        // The whole run also counts requests answered after the last measured step.
        .filter(|(t, _, _)| whole_run || (*t >= from && *t < to))
        .map(|&(_, _, micros)| micros)
        .collect();
    sorted.sort_by(f32::total_cmp);
    let offered = if whole_run {
        schedule.offered()
    } else {
        (from..to).map(|t| schedule.offered_in(t as usize)).sum()
    };
    let seconds = f64::from(to.saturating_sub(from)) * interval_s;
    let answered = sorted.len() as u64;
    Outcome {
        requests_offered: offered,
        requests_answered: answered,
        throughput: if seconds > 0.0 {
            answered as f64 / seconds
        } else {
            f64::NAN
        },
        p50_ms: percentile(&sorted, 0.5).unwrap_or(f64::NAN),
        p99_ms: percentile(&sorted, 0.99).unwrap_or(f64::NAN),
        p999_ms: percentile(&sorted, 0.999).unwrap_or(f64::NAN),
        client_errors: records
            .iter()
            .filter(|r| whole_run || (r.t >= from && r.t < to))
            .map(|r| u64::from(r.client_errors))
            .sum(),
    }
}

/// Seconds from the start of the first step in which keys moved to the end of the last
/// (`None` when no step saw a move).
fn migration_seconds(records: &[StepRecord], interval_s: f64) -> Option<f64> {
    let mut previous = 0;
    let mut moving = Vec::new();
    for record in records {
        if record.keys_moved > previous {
            moving.push(record.t);
        }
        previous = record.keys_moved;
    }
    let (first, last) = (moving.first()?, moving.last()?);
    Some(f64::from(last - first + 1) * interval_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_ranks_in_milliseconds() {
        let sorted = [1000.0, 2000.0, 3000.0, 4000.0];
        assert_eq!(percentile(&sorted, 0.5), Some(2.0));
        assert_eq!(percentile(&sorted, 0.99), Some(4.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn the_default_phases_are_base_hot_keys_and_load_step() {
        let workload = super::super::LiveConfig::default().workload(0);
        let names: Vec<(String, u32, u32)> = phases(&workload, 20)
            .into_iter()
            .map(|p| (p.name, p.from, p.to))
            .collect();
        assert_eq!(
            names,
            vec![
                ("base".into(), 0, 5),
                ("hot-keys".into(), 5, 10),
                ("load-step".into(), 10, 20)
            ]
        );
    }

    #[test]
    fn migration_time_spans_the_steps_that_moved_keys() {
        let record = |t: u32, keys_moved: u64| StepRecord::for_test(t, None, keys_moved);
        let records = [record(0, 0), record(1, 5), record(2, 5), record(3, 9)];
        assert_eq!(migration_seconds(&records, 0.5), Some(1.5));
        assert_eq!(migration_seconds(&records[..1], 0.5), None);
    }
}
