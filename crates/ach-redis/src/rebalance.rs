//! The `rebalance` loop: `fix`, then observe, plan, migrate and confirm once per interval,
//! one JSON line per step.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::backend::BackendKind;
use crate::cluster::Cluster;
use crate::control::{Controller, Observed, StepOutcome, StepPlan};
use crate::error::Error;
use crate::metrics::{Metrics, NodeMetrics};
use crate::migrate::{FixAction, MigrationOptions, SlotMigration};
use crate::notable::name_hash_tags;
use crate::report::notable_lines;
use crate::summary::RunSummary;
use crate::topology::format_slot_ranges;

/// When the loop stops early and how fast it may copy (`--until-balanced`,
/// `--max-keys-per-second`); the default has neither rule.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunRules {
    /// Stop at the first step whose measured `D` is at most this, before planning it.
    pub until_balanced: Option<f64>,
    /// Copy at most this many keys per second within a step: after each migration the step
    /// waits until its keys over its time are within the rate (a migration is one slot key by
    /// key, one group for an atomic job).
    pub max_keys_per_second: Option<f64>,
    /// Add the step's progress and its estimated time left to every migration's line (for a
    /// terminal: the command line sets it when stderr is one).
    pub show_eta: bool,
}

/// How long and how often the loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopOptions {
    /// Number of control steps.
    pub steps: u64,
    /// Time between two steps.
    pub interval: Duration,
}

/// One line of the step log.
#[derive(Debug, serde::Serialize)]
pub struct StepRecord<'a> {
    /// `step` (the other lines of the log are `fix` and `summary`).
    pub event: &'static str,
    /// Step index from 0.
    pub step: u64,
    /// The backend (`redis` or `valkey`).
    pub backend: BackendKind,
    /// True when the step's loads came from per-slot statistics.
    pub slot_stats: bool,
    /// Wall clock, milliseconds since the Unix epoch.
    pub unix_ms: u128,
    /// False when the step migrated nothing because the cluster was degraded.
    pub healthy: bool,
    /// Why the cluster was degraded.
    pub problems: Vec<String>,
    /// Slots closed by `fix` before the step.
    pub fixed: Vec<FixAction>,
    /// The observation (loads and their inputs).
    pub observed: Option<&'a Observed>,
    /// The plan and its score.
    pub plan: Option<&'a StepPlan>,
    /// What was migrated.
    pub outcome: Option<&'a StepOutcome>,
    /// Keys copied over the number of keys at observation.
    pub moved_fraction: f64,
    /// The imbalance `D` the previous step's plan predicted, to hold against this step's
    /// measured `D` (`observed.imbalance`).
    pub previous_predicted: Option<f64>,
}

/// Runs the loop. Returns the number of keys moved in all. Reports each step on `log` (one
/// JSON line) and a short progress line on `progress`.
pub fn run(
    cluster: &mut Cluster,
    controller: &mut Controller,
    options: LoopOptions,
    migration: &MigrationOptions,
    stop: &AtomicBool,
    log: &mut dyn Write,
    progress: &mut dyn Write,
) -> Result<u64, Error> {
    let outputs = LoopOutputs {
        log,
        progress,
        metrics: None,
    };
    run_with_summary(
        cluster,
        controller,
        options,
        RunRules::default(),
        migration,
        stop,
        outputs,
    )
    .map(|summary| summary.keys_moved)
}

/// Where [`run_with_summary`] reports: the step log, the progress lines and, when given,
/// the metrics.
pub struct LoopOutputs<'a> {
    /// One JSON line a step (and the `fix` and `summary` lines).
    pub log: &'a mut dyn Write,
    /// A short line a step, and one a migration.
    pub progress: &'a mut dyn Write,
    /// The `/metrics` endpoint's families (`--metrics-addr`), updated as the loop goes: each
    /// observation's loads, readings and imbalance, the cluster's health, every migration's
    /// outcome and time, each step's time and the share of the window budget the last `H`
    /// steps' moved keys spent.
    pub metrics: Option<LoopMetrics<'a>>,
}

/// Where the loop reports its metrics: the families, and the window budget its ratio is of.
#[derive(Clone, Copy)]
pub struct LoopMetrics<'a> {
    /// The families to update.
    pub metrics: &'a Metrics,
    /// The window `H`, in steps.
    pub horizon: usize,
    /// The window budget `M_H`, as a share of the keys.
    pub m_horizon: f64,
}

/// [`run`] under `rules`, reporting to `outputs`, and returning the run's summary (also the
/// log's last line): keys and slots moved, failed migrations, dropped moves, D at the first
/// and last steps, and the cluster's health and slot map at exit; [`RunSummary::exit_code`]
/// says whether the run did what it planned. `rules` may end the run early and throttle it
/// ([`RunRules`]; `options.steps` is then the cap).
pub fn run_with_summary(
    cluster: &mut Cluster,
    controller: &mut Controller,
    options: LoopOptions,
    rules: RunRules,
    migration: &MigrationOptions,
    stop: &AtomicBool,
    outputs: LoopOutputs<'_>,
) -> Result<RunSummary, Error> {
    let LoopOutputs {
        log,
        progress,
        metrics,
    } = outputs;
    let started_run = Instant::now();
    let mut run = Run {
        migration,
        stop,
        log,
        progress,
        metrics,
        rules,
        summary: RunSummary::default(),
        window: VecDeque::new(),
        previous_predicted: None,
        pending_fix: Vec::new(),
    };
    let actions = cluster.backend().fix(cluster, migration)?;
    report_fix(&actions, run.progress);
    write_fix(run.log, "start", None, &actions)?;
    let snapshot = cluster.snapshot()?;
    controller.prime(cluster, &snapshot)?;
    for step in 0..options.steps {
        if !sleep_unless_stopped(options.interval, stop) {
            let _ = writeln!(run.progress, "stopped by request before step {step}");
            break;
        }
        if run.step(cluster, controller, step)? == StepEnd::Stop {
            break;
        }
    }
    run.finish(cluster, controller, started_run)
}

/// What a step tells the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepEnd {
    /// Go on to the next step (when there is one).
    Next,
    /// Stop: balanced, or stopped by request.
    Stop,
}

/// The loop's options, outputs and what it carries from one step to the next.
struct Run<'a> {
    migration: &'a MigrationOptions,
    stop: &'a AtomicBool,
    log: &'a mut dyn Write,
    progress: &'a mut dyn Write,
    metrics: Option<LoopMetrics<'a>>,
    rules: RunRules,
    summary: RunSummary,
    /// The moved fractions of the last `H` steps, for the window budget's metric.
    window: VecDeque<f64>,
    /// The imbalance the last step's plan predicted; only the step right after a planned one
    /// holds a prediction for its observation.
    previous_predicted: Option<f64>,
    /// The slots `fix` closed at the last step, reported with the next one.
    pending_fix: Vec<FixAction>,
}

impl Run<'_> {
    /// Control step `step`: observe, plan, migrate, and the step's line of the log.
    fn step(
        &mut self,
        cluster: &mut Cluster,
        controller: &mut Controller,
        step: u64,
    ) -> Result<StepEnd, Error> {
        let mut record = StepRecord {
            event: "step",
            step,
            backend: cluster.backend().kind(),
            slot_stats: false,
            unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0),
            healthy: true,
            problems: Vec::new(),
            fixed: std::mem::take(&mut self.pending_fix),
            observed: None,
            plan: None,
            outcome: None,
            moved_fraction: 0.0,
            previous_predicted: self.previous_predicted.take(),
        };
        let step_started = Instant::now();
        let Some(observed) = self.observe(cluster, controller, &mut record)? else {
            return Ok(StepEnd::Next);
        };
        if !observed.snapshot.open.is_empty() {
            // A migration of an earlier step failed half-way: close it before planning.
            self.close_open_slots(cluster, record)?;
            return Ok(StepEnd::Next);
        }
        record.slot_stats = observed.signals.slot_stats;
        if let Some(m) = self.metrics {
            observe_metrics(m.metrics, &observed);
        }
        if self.stop_if_balanced(&observed, &mut record)? {
            return Ok(StepEnd::Stop);
        }
        let mut plan = controller.plan(&observed)?;
        name_hash_tags(cluster, &observed.snapshot, &mut plan.notable_slots);
        for line in notable_lines(&plan) {
            let _ = writeln!(self.progress, "step {step}: {line}");
        }
        let started = Instant::now();
        let outcome = self.execute(cluster, controller, &observed, &plan, started);
        self.summary.add_step(step, &plan, &outcome);
        record.moved_fraction = moved_fraction(&observed, &outcome);
        let line = step_line(&record, &observed, &plan, &outcome, started);
        let _ = writeln!(self.progress, "{line}");
        if let Some(m) = self.metrics {
            m.metrics.migration_ended();
            self.window.push_back(record.moved_fraction);
            while self.window.len() > m.horizon.max(1) {
                self.window.pop_front();
            }
            let spent: f64 = self.window.iter().sum();
            let ratio = if m.m_horizon > 0.0 {
                spent / m.m_horizon
            } else {
                0.0
            };
            m.metrics.step_finished(step_started.elapsed(), ratio);
        }
        self.previous_predicted = Some(plan.imbalance_predicted);
        record.observed = Some(&observed);
        record.plan = Some(&plan);
        record.outcome = Some(&outcome);
        write_record(self.log, &record)?;
        if outcome.interrupted || self.stop.load(Ordering::SeqCst) {
            let _ = writeln!(self.progress, "stopped by request after step {step}");
            return Ok(StepEnd::Stop);
        }
        Ok(StepEnd::Next)
    }

    /// The step's observation, or `None` for a degraded cluster (the step is logged as such);
    /// an error that no later step can mend (bad input, not a cluster, refused credentials)
    /// ends the run.
    fn observe(
        &mut self,
        cluster: &mut Cluster,
        controller: &mut Controller,
        record: &mut StepRecord<'_>,
    ) -> Result<Option<Observed>, Error> {
        match controller.observe(cluster) {
            Ok(observed) => Ok(Some(observed)),
            Err(Error::Degraded(problems)) => {
                self.degraded(record, problems)?;
                Ok(None)
            }
            Err(
                error @ (Error::Input(_)
                | Error::NotCluster { .. }
                | Error::Auth { .. }
                | Error::Permission { .. }),
            ) => Err(error),
            Err(error) => {
                self.degraded(record, vec![error.to_string()])?;
                Ok(None)
            }
        }
    }

    /// A degraded step: it migrates nothing, and says why in the progress, the log, the
    /// metrics and the summary.
    fn degraded(
        &mut self,
        record: &mut StepRecord<'_>,
        problems: Vec<String>,
    ) -> Result<(), Error> {
        if let Some(m) = self.metrics {
            m.metrics.set_healthy(false);
        }
        self.summary.add_degraded_step();
        let _ = writeln!(
            self.progress,
            "step {}: cluster degraded, migrating nothing: {}",
            record.step,
            problems.join("; ")
        );
        record.healthy = false;
        record.problems = problems;
        write_record(self.log, record)
    }

    /// Closes the slots an earlier step left open; the step plans nothing, and the next one
    /// reports what was closed.
    fn close_open_slots(
        &mut self,
        cluster: &mut Cluster,
        mut record: StepRecord<'_>,
    ) -> Result<(), Error> {
        let step = record.step;
        match cluster.backend().fix(cluster, self.migration) {
            Ok(actions) => {
                report_fix(&actions, self.progress);
                write_fix(self.log, "step", Some(step), &actions)?;
                record.fixed.extend(actions);
            }
            Err(error) => return self.degraded(&mut record, vec![error.to_string()]),
        }
        self.pending_fix = std::mem::take(&mut record.fixed);
        self.summary.add_degraded_step();
        let _ = writeln!(
            self.progress,
            "step {step}: open slots closed, planning next step"
        );
        Ok(())
    }

    /// True, with the step logged, when `--until-balanced` stops the run at this observation.
    /// A drain is never balanced: its master must end with no slot.
    fn stop_if_balanced<'o>(
        &mut self,
        observed: &'o Observed,
        record: &mut StepRecord<'o>,
    ) -> Result<bool, Error> {
        let Some(tolerance) = self.rules.until_balanced else {
            return Ok(false);
        };
        let balanced = observed.imbalance <= tolerance && !observed.draining();
        if !balanced {
            return Ok(false);
        }
        let _ = writeln!(
            self.progress,
            "step {}: balanced: D {:.3} <= {tolerance} (--until-balanced), stopping",
            record.step, observed.imbalance
        );
        self.summary.balanced_at_step = Some(record.step);
        self.summary.steps += 1;
        self.summary
            .imbalance_first
            .get_or_insert(observed.imbalance);
        self.summary.imbalance_last = Some(observed.imbalance);
        record.observed = Some(observed);
        write_record(self.log, record)?;
        Ok(true)
    }

    /// Migrates the plan's moves, a line of progress (and the metrics) per migration, at most
    /// `--max-keys-per-second`.
    fn execute(
        &mut self,
        cluster: &mut Cluster,
        controller: &mut Controller,
        observed: &Observed,
        plan: &StepPlan,
        started: Instant,
    ) -> StepOutcome {
        if let Some(m) = self.metrics
            && !plan.moves.is_empty()
        {
            m.metrics.migration_started();
        }
        let (rules, metrics, stop) = (self.rules, self.metrics, self.stop);
        let progress = &mut *self.progress;
        let mut copied = 0u64;
        let mut slots_done = 0usize;
        let planned_slots: usize = plan.groups.iter().map(|g| g.slots.len()).sum();
        controller.execute(cluster, observed, plan, stop, &mut |migration| {
            copied += migration.keys;
            slots_done += migration.slots.len();
            if let Some(rate) = rules.max_keys_per_second {
                throttle(copied, rate, started, stop);
            }
            if let Some(m) = metrics {
                m.metrics.migration_finished(
                    migration.method.name(),
                    migration.outcome,
                    Duration::from_secs_f64(migration.millis / 1000.0),
                    migration.keys,
                );
                // The next migration of the step, if any, starts now.
                m.metrics.migration_started();
            }
            let eta = if rules.show_eta {
                eta(
                    (slots_done, planned_slots),
                    (copied, plan.keys_to_copy),
                    started,
                )
            } else {
                String::new()
            };
            let _ = writeln!(progress, "{}{eta}", migration_line(migration));
        })
    }

    /// The run's end: the open slots closed, the cluster's state at exit, the summary's line.
    fn finish(
        mut self,
        cluster: &mut Cluster,
        controller: &Controller,
        started_run: Instant,
    ) -> Result<RunSummary, Error> {
        self.summary.stopped_by_request = self.stop.load(Ordering::SeqCst);
        // A migration that failed (a node slow to answer, a signal interrupting a reply) may
        // have left its slot open: close it before leaving.
        match cluster.backend().fix(cluster, self.migration) {
            Ok(actions) => {
                report_fix(&actions, self.progress);
                write_fix(self.log, "end", None, &actions)?;
            }
            Err(error) => self
                .summary
                .problems_at_exit
                .push(format!("fix at exit: {error}")),
        }
        finish_summary(cluster, controller, &mut self.summary, started_run);
        write_line(
            self.log,
            &serde_json::json!({ "event": "summary", "summary": &self.summary }),
        )?;
        Ok(self.summary)
    }
}

/// A migration's line of progress: how, which slots, from and to, keys, time and outcome.
fn migration_line(migration: &SlotMigration) -> String {
    format!(
        "  {} slot {} {} -> {}: {} keys in {:.1} ms, {}{}",
        migration.method.name(),
        format_slot_ranges(&migration.slots),
        migration.from,
        migration.to,
        migration.keys,
        migration.millis,
        migration.outcome,
        if migration.message.is_empty() {
            String::new()
        } else {
            format!(" ({})", migration.message)
        },
    )
}

/// The keys a step copied over the keys at its observation.
fn moved_fraction(observed: &Observed, outcome: &StepOutcome) -> f64 {
    let total_keys: u64 = observed.slot_keys.iter().sum();
    if total_keys == 0 {
        0.0
    } else {
        outcome.keys_moved as f64 / total_keys as f64
    }
}

/// A step's line of progress: the loads, `D` now (and as the last step predicted it) and
/// predicted, what moved in how long, and why nothing moved or what failed.
fn step_line(
    record: &StepRecord<'_>,
    observed: &Observed,
    plan: &StepPlan,
    outcome: &StepOutcome,
    started: Instant,
) -> String {
    let loads: Vec<String> = observed
        .nodes
        .iter()
        .map(|n| format!("{:.3}", n.load))
        .collect();
    format!(
        "step {}: loads [{}] D {:.3}{} -> {:.3} predicted; {} slots ({} small skipped), {} keys moved in {:.0} ms{}",
        record.step,
        loads.join(", "),
        plan.imbalance_now,
        record
            .previous_predicted
            .map(|d| format!(" (step {} predicted {d:.3})", record.step.saturating_sub(1)))
            .unwrap_or_default(),
        plan.imbalance_predicted,
        outcome.migrations.len(),
        plan.skipped_moves,
        outcome.keys_moved,
        started.elapsed().as_secs_f64() * 1000.0,
        match (&plan.nothing_moves_because, outcome.errors.is_empty()) {
            (_, false) => format!("; errors: {}", outcome.errors.join("; ")),
            (Some(reason), true) => format!("; nothing moves: {reason}"),
            (None, true) => String::new(),
        }
    )
}

/// The cluster's state at exit into `summary`: its health, slot map and epoch, and the
/// drained masters that still own slots.
fn finish_summary(
    cluster: &mut Cluster,
    controller: &Controller,
    summary: &mut RunSummary,
    started: Instant,
) {
    match cluster.snapshot() {
        Ok(snapshot) => {
            summary.drains_unfinished = controller.drains_left(&snapshot);
            summary
                .problems_at_exit
                .extend(snapshot.problems.iter().cloned());
            summary.set_slot_map(&snapshot.owners);
            let seed = cluster.seed().to_string();
            summary.epoch_at_exit = cluster
                .query::<String>(&seed, redis::cmd("CLUSTER").arg("INFO"))
                .ok()
                .and_then(|info| {
                    info.lines()
                        .find_map(|l| l.strip_prefix("cluster_current_epoch:"))
                        .and_then(|v| v.trim().parse().ok())
                });
        }
        Err(error) => summary.problems_at_exit.push(error.to_string()),
    }
    summary.seconds = started.elapsed().as_secs_f64();
}

/// ` [slots i/N, keys k/K, ETA T s]`: a step's progress and, from its keys so far over its
/// time, the time left.
fn eta(slots: (usize, usize), keys: (u64, u64), started: Instant) -> String {
    let elapsed = started.elapsed().as_secs_f64();
    let left = if keys.0 == 0 || keys.0 >= keys.1 {
        // No keys copied yet (or all): count by slots.
        let done = slots.0.max(1) as f64;
        elapsed * (slots.1.saturating_sub(slots.0)) as f64 / done
    } else {
        elapsed * (keys.1 - keys.0) as f64 / keys.0 as f64
    };
    format!(
        " [slots {}/{}, keys {}/{}, ETA {left:.1} s]",
        slots.0, slots.1, keys.0, keys.1
    )
}

/// Waits until `copied` keys since `started` are within `rate` keys per second (or `stop` is
/// set).
fn throttle(copied: u64, rate: f64, started: Instant, stop: &AtomicBool) {
    let due = Duration::from_secs_f64(copied as f64 / rate);
    let elapsed = started.elapsed();
    if due > elapsed {
        let _ = sleep_unless_stopped(due - elapsed, stop);
    }
}

/// An observation's loads, raw readings and imbalance, and a healthy cluster, into `metrics`.
fn observe_metrics(metrics: &Metrics, observed: &Observed) {
    const SIGNALS: [&str; 3] = ["cpu", "memory", "latency"];
    let readings: Vec<[(&str, f64); 3]> = observed
        .nodes
        .iter()
        .map(|node| std::array::from_fn(|k| (SIGNALS[k], node.reading[k])))
        .collect();
    metrics.observe(
        observed
            .nodes
            .iter()
            .zip(&readings)
            .map(|(node, readings)| NodeMetrics {
                address: &node.address,
                load: node.load,
                readings,
            }),
        observed.imbalance,
    );
    metrics.set_healthy(true);
}

/// One line per slot `fix` closed.
pub fn report_fix(actions: &[FixAction], out: &mut dyn Write) {
    for action in actions {
        let _ = writeln!(
            out,
            "fix: slot {} {} (owner {}, {} keys moved)",
            action.slot, action.action, action.owner, action.keys
        );
    }
}

/// One `fix` line of the log: when (`start`, `step` or `end`), the step, what was closed.
fn write_fix(
    log: &mut dyn Write,
    when: &str,
    step: Option<u64>,
    actions: &[FixAction],
) -> Result<(), Error> {
    write_line(
        log,
        &serde_json::json!({ "event": "fix", "when": when, "step": step, "actions": actions }),
    )
}

fn write_record(log: &mut dyn Write, record: &StepRecord<'_>) -> Result<(), Error> {
    write_line(log, record)
}

fn write_line(log: &mut dyn Write, record: &impl serde::Serialize) -> Result<(), Error> {
    let line = serde_json::to_string(record).expect("records serialise");
    writeln!(log, "{line}")
        .and_then(|()| log.flush())
        .map_err(|source| Error::File {
            path: "--log".into(),
            source,
        })
}

/// Sleeps `duration` in short slices; false when `stop` was set meanwhile.
fn sleep_unless_stopped(duration: Duration, stop: &AtomicBool) -> bool {
    let until = Instant::now() + duration;
    while Instant::now() < until {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
    }
    !stop.load(Ordering::SeqCst)
}
