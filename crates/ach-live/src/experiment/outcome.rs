//! The operators' outcomes of an arm: requests offered and answered, throughput, client
//! latency percentiles and errors, over the whole run and per phase of the workload, and how
//! long the migration took.

use super::{Outcome, PhaseOutcome, Rebalancing, StepRecord};
use crate::truth::Schedule;
use crate::workload::WorkloadConfig;

/// The `q` quantile (nearest rank) of sorted microseconds, in milliseconds.
pub(super) fn percentile(sorted: &[f32], q: f64) -> Option<f64> {
    crate::readings::nearest_rank(sorted, q).map(|micros| f64::from(micros) / 1000.0)
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
    pub(super) rebalancing: Option<Rebalancing>,
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
        let whole = outcome(records, latencies, schedule, Steps::Whole, interval_s);
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
                    outcome: outcome(
                        records,
                        latencies,
                        schedule,
                        Steps::Range(range.0, range.1),
                        interval_s,
                    ),
                }
            })
            .collect();
        let window = migration_window(records);
        Outcomes {
            whole,
            phases,
            migration_s: window.map(|(from, to)| f64::from(to - from) * interval_s),
            rebalancing: window.map(|steps| Rebalancing {
                steps,
                outcome: outcome(
                    records,
                    latencies,
                    schedule,
                    Steps::Range(steps.0, steps.1),
                    interval_s,
                ),
                static_p99_ms: None,
            }),
        }
    }
}

/// Which steps an [`Outcome`] covers.
#[derive(Clone, Copy)]
enum Steps {
    /// The whole run, requests answered after the last measured step included.
    Whole,
    /// The steps `[from, to)` (clipped to the steps measured).
    Range(u32, u32),
}

/// The outcome over `covered`.
fn outcome(
    records: &[StepRecord],
    latencies: &[(u32, u8, f32)],
    schedule: &Schedule,
    covered: Steps,
    interval_s: f64,
) -> Outcome {
    let steps = records.len() as u32;
    let (from, to, whole_run) = match covered {
        Steps::Whole => (0, steps, true),
        Steps::Range(from, to) => (from, to.min(steps), false),
    };
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

/// The steps `[from, to)` from the first step in which keys moved to the last (`None` when no
/// step saw a move).
fn migration_window(records: &[StepRecord]) -> Option<(u32, u32)> {
    let mut previous = 0;
    let mut moving = Vec::new();
    for record in records {
        if record.keys_moved > previous {
            moving.push(record.t);
        }
        previous = record.keys_moved;
    }
    Some((*moving.first()?, moving.last()? + 1))
}

/// The client p99 of the requests answered in the steps `[from, to)`, in milliseconds (`None`
/// when none was).
pub(super) fn p99_in(latencies: &[(u32, u8, f32)], (from, to): (u32, u32)) -> Option<f64> {
    let mut sorted: Vec<f32> = latencies
        .iter()
        .filter(|(t, _, _)| *t >= from && *t < to)
        .map(|&(_, _, micros)| micros)
        .collect();
    sorted.sort_by(f32::total_cmp);
    percentile(&sorted, 0.99)
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
    fn the_migration_window_spans_the_steps_that_moved_keys() {
        let record = |t: u32, keys_moved: u64| StepRecord::for_test(t, None, keys_moved);
        let records = [record(0, 0), record(1, 5), record(2, 5), record(3, 9)];
        assert_eq!(migration_window(&records), Some((1, 4)));
        assert_eq!(migration_window(&records[..1]), None);
    }

    #[test]
    fn the_p99_of_a_window_counts_only_its_steps() {
        // Steps 0 and 3 are slow; the window [1, 3) holds 100 requests of 1 to 100 us.
        let mut latencies: Vec<(u32, u8, f32)> =
            (1..=100).map(|us| (1 + us % 2, 0, us as f32)).collect();
        latencies.push((0, 0, 50_000.0));
        latencies.push((3, 1, 60_000.0));
        assert_eq!(p99_in(&latencies, (1, 3)), Some(0.099));
        assert_eq!(p99_in(&latencies, (0, 4)), Some(50.0));
        assert_eq!(p99_in(&latencies, (4, 9)), None);
    }
}
