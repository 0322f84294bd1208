//! The profile by phase behind `cargo xtask bench-run`: where one run's time goes (drawing the
//! workload, routing, telemetry, each algorithm's planning, commits, invariant checks, records),
//! what the run costs in CPU time, and the section of docs/performance.md that shows it.
//!
//! A run is timed twice per repeat: once without a probe (its thread's CPU time from
//! `/proc/thread-self/schedstat` and its wall time: the figures of the run as users get it; for
//! a short run, the mean of as many runs in a row as take [`MIN_REPEAT_SECONDS`]) and once with
//! a [`PhaseClock`] (the wall time between the run's phase changes, which costs about
//! a clock read per change). The phase table gives the probed repeat with the smallest total and
//! each phase's share of it; a phase's CPU estimate is its share of the best unprobed CPU time.
//! This module only measures and formats; it never judges a figure against a target.
//!
//! Its parts: the profile of a point (here), the generated section and the default matrix's
//! time (`section`), and the published simulation timed beside ours (`reference`). A user's
//! program calls them exactly as `cargo xtask bench-run` does.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use ach_sim::SeriesConfig;
use ach_sim::phases::{NoProbe, Phase, PhaseProbe};
use ach_sim::run::simulate_probed;

use crate::bench::{BenchError, BenchPoint, run_zero};

mod reference;
mod section;

pub use reference::{PublishedSimulation, ReferenceError};
pub use section::{
    GeneratedSection, MarkerMissing, MatrixError, MatrixTiming, SECTION_BEGIN, SECTION_END,
    load_average, machine, replace_section, time_matrix, utc_date, working_tree_commit,
};

/// The phases of a run in table order, with the number of algorithms for the per-arm planning.
fn phase_order(arms: usize) -> Vec<Phase> {
    let mut order = vec![Phase::Setup, Phase::Events, Phase::Draw, Phase::Route];
    order.push(Phase::Telemetry);
    order.extend((0..arms).map(|arm| Phase::Plan { arm }));
    order.extend([Phase::Commit, Phase::Invariants, Phase::Records]);
    order
}

/// Slot of `phase` in [`PhaseClock::totals`].
fn slot(phase: Phase) -> usize {
    match phase {
        Phase::Setup => 0,
        Phase::Events => 1,
        Phase::Draw => 2,
        Phase::Route => 3,
        Phase::Telemetry => 4,
        Phase::Commit => 5,
        Phase::Invariants => 6,
        Phase::Records => 7,
        Phase::Plan { arm } => 8 + arm,
    }
}

/// A probe that adds the wall time between phase changes to the phase that was running.
#[derive(Debug)]
pub struct PhaseClock {
    current: Option<Phase>,
    since: Instant,
    totals: Vec<Duration>,
}

impl Default for PhaseClock {
    fn default() -> PhaseClock {
        PhaseClock {
            current: None,
            since: Instant::now(),
            totals: Vec::new(),
        }
    }
}

impl PhaseClock {
    fn add(&mut self, now: Instant) {
        if let Some(phase) = self.current {
            let index = slot(phase);
            if self.totals.len() <= index {
                self.totals.resize(index + 1, Duration::ZERO);
            }
            self.totals[index] += now - self.since;
        }
        self.since = now;
    }

    /// Ends the running phase (call when the run returns).
    pub fn stop(&mut self) {
        self.add(Instant::now());
        self.current = None;
    }

    /// Seconds spent in `phase`.
    pub fn seconds(&self, phase: Phase) -> f64 {
        self.totals
            .get(slot(phase))
            .map_or(0.0, Duration::as_secs_f64)
    }

    /// Seconds over every phase.
    pub fn total_seconds(&self) -> f64 {
        self.totals.iter().map(Duration::as_secs_f64).sum()
    }
}

impl PhaseProbe for PhaseClock {
    fn enter(&mut self, phase: Phase) {
        self.add(Instant::now());
        self.current = Some(phase);
    }
}

/// CPU time of the calling thread so far (`/proc/thread-self/schedstat`, nanoseconds on a
/// CPU), or `None` where the system does not say.
pub fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanoseconds: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(nanoseconds as f64 * 1e-9)
}

/// The fields of `/proc/self/stat` after the command name, or `None` where there is none.
fn own_stat_fields() -> Option<Vec<u64>> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it start past its ')'.
    let rest = &text[text.rfind(')')? + 1..];
    // Field 3 (the state) is a letter: read it as 0.
    Some(
        rest.split_whitespace()
            .map(|f| f.parse::<u64>().unwrap_or(0))
            .collect(),
    )
}

/// CPU time of the finished and waited-for children of this process (`cutime + cstime` of
/// `/proc/self/stat`, every thread, in clock ticks of 10 ms), or `None` where the system does
/// not say.
pub fn process_children_cpu_seconds() -> Option<f64> {
    let fields = own_stat_fields()?;
    // cutime and cstime are fields 16 and 17, i.e. the 14th and 15th after the name.
    let ticks = fields.get(13)? + fields.get(14)?;
    Some(ticks as f64 / 100.0)
}

/// The figures of one profiled point.
#[derive(Clone, Debug)]
pub struct PointProfile {
    /// The point's title in the table (`C1`, `scale 1000 nodes`).
    pub title: String,
    /// Nodes, tokens and steps of the run.
    pub nodes: usize,
    /// Tokens `V`.
    pub tokens: usize,
    /// Steps of a run.
    pub steps: u32,
    /// Runs in a row that make one unprobed repeat (see [`MIN_REPEAT_SECONDS`]).
    pub runs_per_repeat: u32,
    /// CPU seconds of the run's thread per run, the mean of each unprobed repeat's runs (empty
    /// without schedstat).
    pub cpu_seconds: Vec<f64>,
    /// Wall seconds per run, the mean of each unprobed repeat's runs.
    pub wall_seconds: Vec<f64>,
    /// (phase name, seconds) of the fastest probed repeat, in table order.
    pub phases: Vec<(String, f64)>,
    /// Seconds to encode the run's record as the store writes it (the shortest of the
    /// repeats).
    pub encode_seconds: f64,
}

/// The smallest of `values` (a time's best repeat), or `None` for none.
pub fn best(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::min)
}

impl PointProfile {
    /// The best CPU time of a run, or the best wall time where CPU time is not available.
    pub fn best_cpu_or_wall(&self) -> f64 {
        best(&self.cpu_seconds)
            .or(best(&self.wall_seconds))
            .unwrap_or(f64::NAN)
    }

    /// Tokens times steps.
    pub fn token_steps(&self) -> f64 {
        self.tokens as f64 * f64::from(self.steps)
    }
}

/// The shortest time an unprobed repeat measures: a repeat of a shorter run times several
/// runs in a row and gives their mean. The CPU time a system keeps for a thread may grow in
/// ticks of the scheduler (4 ms on the development machine's virtual machine, a quarter of a
/// C1 run), which a single short run would round.
pub const MIN_REPEAT_SECONDS: f64 = 0.25;

/// Runs `point` `repeats` times unprobed and `repeats` times probed, in this thread. An
/// unprobed repeat is as many runs in a row as take [`MIN_REPEAT_SECONDS`] (one for a long
/// run), counted on warm runs after one that warms the caches up (the first run also faults
/// the process's memory in: counted on it alone, C1's repeats were at times 8 runs in a row,
/// a third of a quarter second). The record's encoding is timed `repeats` times and the
/// shortest kept, as the runs are.
pub fn profile_point(point: BenchPoint, repeats: u32) -> Result<PointProfile, BenchError> {
    let config = point.config()?;
    let spec = run_zero(&config);
    // The first run warms up; then as many runs in a row as take the shortest repeat are
    // counted, at most a thousand.
    let mut record = simulate_probed(&spec, &mut NoProbe)?;
    let start = Instant::now();
    let mut runs_per_repeat = 0_u32;
    while runs_per_repeat == 0
        || (runs_per_repeat < 1000 && start.elapsed().as_secs_f64() < MIN_REPEAT_SECONDS)
    {
        record = simulate_probed(&spec, &mut NoProbe)?;
        runs_per_repeat += 1;
    }
    let mut cpu_seconds = Vec::new();
    let mut wall_seconds = Vec::new();
    for _ in 0..repeats.max(1) {
        let cpu_start = thread_cpu_seconds();
        let start = Instant::now();
        for _ in 0..runs_per_repeat {
            record = simulate_probed(&spec, &mut NoProbe)?;
        }
        let runs = f64::from(runs_per_repeat);
        wall_seconds.push(start.elapsed().as_secs_f64() / runs);
        if let (Some(a), Some(b)) = (cpu_start, thread_cpu_seconds()) {
            cpu_seconds.push((b - a) / runs);
        }
    }
    let mut fastest: Option<PhaseClock> = None;
    for _ in 0..repeats.max(1) {
        let mut clock = PhaseClock::default();
        simulate_probed(&spec, &mut clock)?;
        clock.stop();
        if fastest
            .as_ref()
            .is_none_or(|f| clock.total_seconds() < f.total_seconds())
        {
            fastest = Some(clock);
        }
    }
    let clock = fastest.expect("at least one repeat");
    let mut encode_seconds = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        let bytes = crate::store::encode(&record);
        encode_seconds = encode_seconds.min(start.elapsed().as_secs_f64());
        drop(bytes);
    }
    Ok(PointProfile {
        title: match point {
            BenchPoint::C1 => "C1".to_string(),
            BenchPoint::Scale(nodes) => format!("scale, {nodes} nodes"),
        },
        nodes: config.cluster.classes.len(),
        tokens: config.tokens,
        steps: config.steps,
        runs_per_repeat,
        cpu_seconds,
        wall_seconds,
        phases: named_phases(&config, &clock),
        encode_seconds,
    })
}

fn named_phases(config: &SeriesConfig, clock: &PhaseClock) -> Vec<(String, f64)> {
    phase_order(config.algorithms.len())
        .into_iter()
        .map(|phase| {
            let name = match phase {
                Phase::Plan { arm } => format!("planning: {}", config.algorithms[arm]),
                other => other.name().to_string(),
            };
            (name, clock.seconds(phase))
        })
        .collect()
}

/// How a repeat's figure was made, when it is a mean of several runs.
fn per_repeat(runs: u32) -> String {
    if runs > 1 {
        format!(", each the mean of {runs} runs in a row")
    } else {
        String::new()
    }
}

fn milliseconds(seconds: &[f64]) -> String {
    let parts: Vec<String> = seconds.iter().map(|s| format!("{:.1}", s * 1e3)).collect();
    parts.join(", ")
}

/// The Markdown of one point: its run figures and the table by phase.
pub fn point_markdown(p: &PointProfile) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### {} ({} nodes, {} tokens, {} steps, five algorithms, one thread)\n",
        p.title, p.nodes, p.tokens, p.steps
    );
    match best(&p.cpu_seconds) {
        Some(cpu) => {
            let _ = writeln!(
                out,
                "- CPU time of one run (the run's thread): best **{:.1} ms** (repeats {} ms{}); \
                 {:.2} ns per token-step.",
                cpu * 1e3,
                milliseconds(&p.cpu_seconds),
                per_repeat(p.runs_per_repeat),
                cpu * 1e9 / p.token_steps()
            );
        }
        None => {
            let _ = writeln!(out, "- CPU time of one run: not available on this system.");
        }
    }
    let _ = writeln!(
        out,
        "- Wall time of one run: best {:.1} ms (repeats {} ms{}).",
        best(&p.wall_seconds).unwrap_or(f64::NAN) * 1e3,
        milliseconds(&p.wall_seconds),
        per_repeat(p.runs_per_repeat)
    );
    let _ = writeln!(
        out,
        "- Encoding its record as the store writes it: best {:.2} ms (outside the run).\n",
        p.encode_seconds * 1e3
    );
    let total: f64 = p.phases.iter().map(|(_, s)| s).sum();
    let cpu = p.best_cpu_or_wall();
    let _ = writeln!(
        out,
        "| phase | share | ms (probed run) | CPU ms (share x best CPU) | ns per token-step |"
    );
    let _ = writeln!(out, "| :--- | ---: | ---: | ---: | ---: |");
    for (name, seconds) in &p.phases {
        let share = if total > 0.0 { seconds / total } else { 0.0 };
        let _ = writeln!(
            out,
            "| {name} | {:.1} % | {:.2} | {:.2} | {:.2} |",
            share * 100.0,
            seconds * 1e3,
            share * cpu * 1e3,
            share * cpu * 1e9 / p.token_steps()
        );
    }
    let _ = writeln!(
        out,
        "| **total** | 100.0 % | {:.2} | {:.2} | {:.2} |",
        total * 1e3,
        cpu * 1e3,
        cpu * 1e9 / p.token_steps()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probed_run_sees_every_phase_and_gives_the_unprobed_record() {
        let mut config = BenchPoint::C1.config().unwrap();
        config.steps = 30;
        config.warmup = 5;
        let spec = run_zero(&config);
        let mut clock = PhaseClock::default();
        let probed = simulate_probed(&spec, &mut clock).unwrap();
        clock.stop();
        assert_eq!(probed, ach_sim::simulate(&spec).unwrap());
        for phase in phase_order(config.algorithms.len()) {
            assert!(clock.seconds(phase) > 0.0, "{phase:?}");
        }
        let phases = named_phases(&config, &clock);
        assert!(phases.iter().any(|(name, _)| name == "planning: ACH"));
    }

    #[test]
    fn the_point_table_sums_its_shares() {
        let p = PointProfile {
            title: "C1".into(),
            nodes: 10,
            tokens: 1000,
            steps: 2000,
            runs_per_repeat: 16,
            cpu_seconds: vec![0.02, 0.01],
            wall_seconds: vec![0.03],
            phases: vec![
                ("drawing the workload".into(), 0.003),
                ("routing to owners".into(), 0.001),
            ],
            encode_seconds: 0.0001,
        };
        let text = point_markdown(&p);
        assert!(text.contains(
            "best **10.0 ms** (repeats 20.0, 10.0 ms, each the mean of 16 runs in a row); \
             5.00 ns per token-step"
        ));
        assert!(text.contains("| drawing the workload | 75.0 % | 3.00 | 7.50 | 3.75 |"));
        assert!(text.contains("| **total** | 100.0 % | 4.00 | 10.00 | 5.00 |"));
    }
}
