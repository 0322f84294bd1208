//! The control loop: observe the cluster, plan with a balancing algorithm, migrate the planned
//! slots, confirm what was switched.

use std::sync::atomic::{AtomicBool, Ordering};

use ach_baselines::catalogue::{Context, Entry, names};
use ach_control::{AchConfig, Balancer, Observation, Plan};
use ach_ring::TokenMove;
use ach_telemetry::{LoadTracker, TelemetryConfig};

use crate::backend::{GroupOutcome, MoveGroup, SlotStatsReading};
use crate::cluster::{Cluster, Snapshot, short};
use crate::compact::{CompactInputs, GroupPlan, SlotChoice, group_moves};
use crate::drain::{DrainLedger, drain_plan};
use crate::error::Error;
use crate::explain::Explainer;
use crate::live;
use crate::migrate::{MigrationOptions, SlotMigration};
use crate::node_telemetry::{NodeReader, NodeReading, NodeTelemetry, info_samples};
use crate::notable::notable_slots;
use crate::slot::SLOT_COUNT;
use crate::telemetry::{NodeSample, ReadingRules};
use crate::topology::format_slot_ranges;

mod cpu_basis;
mod idle;
mod observed;
mod order;
mod slot_reading;
mod step;

pub use cpu_basis::{CpuBasis, cpu_bases};
pub use idle::{idle_shares, without_idle};
pub(crate) use observed::undrained_imbalance;
pub use observed::{HotSlot, NodeView, Observed, Signals, imbalance};
use observed::{hot_slots, node_view, token_loads};
use order::migration_batches;
pub use slot_reading::SlotSplit;
use slot_reading::{SlotReader, SlotReading};
pub use step::{
    MoveSummary, PlannedMove, StepOutcome, StepPlan, slot_range_count, summarise_moves,
};
use step::{
    confirmed_moves, key_weighted_ring, nothing_moves_because, planned_moves, predicted_gain,
};

/// Everything the controller needs to know besides the cluster.
#[derive(Clone, Debug)]
pub struct ControlOptions {
    /// The algorithm: an entry of the catalogue (`ach_baselines::catalogue`), built with the
    /// masters' relative weights as capacities, [`ControlOptions::ach`] and
    /// [`ControlOptions::parameters`]. An algorithm that routes requests its own way (CH-BL)
    /// cannot run: a Redis cluster serves every key at its slot's owner.
    pub algorithm: Entry,
    /// The algorithm's parameters by name (`ach_f.window`); the others keep their defaults.
    pub parameters: Vec<(String, f64)>,
    /// `--weight NODE=W` as given (NODE: address, node id or a unique id prefix).
    pub weights: Vec<(String, f64)>,
    /// How INFO samples become readings.
    pub rules: ReadingRules,
    /// `--idle-cpu NODE=CORES` as given: a master's cpu use without clients, in cores, taken
    /// off its cpu reading, which becomes the use of the rest of its allowance
    /// (`cpu_per_weight` times its relative weight): the cluster bus, the timers and the
    /// readings cost a node the same whatever slots it owns. Masters not named keep their
    /// whole reading.
    pub idle_cpu: Vec<(String, f64)>,
    /// `--request-capacity NODE=REQUESTS_PER_S` as given: a master's data commands per second
    /// at saturation; its cpu part becomes its data commands per second over this (see
    /// [`CpuBasis`]). Masters not named keep their cpu reading.
    pub request_capacity: Vec<(String, f64)>,
    /// Smoothing and composite load.
    pub telemetry: TelemetryConfig,
    /// ACH's parameters (budget included).
    pub ach: AchConfig,
    /// How slots are migrated.
    pub migration: MigrationOptions,
    /// Planned moves of slots holding fewer keys are skipped (not migrated, not confirmed, so
    /// not charged). The default 1 skips empty slots: under the model moving one changes no
    /// load, and every move costs a protocol round and a configuration epoch bump.
    pub min_slot_keys: u64,
    /// How the per-slot statistics are read (Valkey).
    pub slot_stats: SlotStatsReading,
    /// Which per-slot counter splits a master's load among its slots (Valkey).
    pub slot_split: SlotSplit,
}

impl ControlOptions {
    /// The options of `algorithm` with the command line's defaults: its own parameters, no
    /// weights, idle cpu or request capacity given, the default [`ReadingRules`], the paper's
    /// telemetry, [`AchConfig::live`], migrations by default, empty slots skipped
    /// (`min_slot_keys` 1) and the per-slot statistics read and split by default.
    pub fn new(algorithm: Entry) -> ControlOptions {
        ControlOptions {
            algorithm,
            parameters: Vec::new(),
            weights: Vec::new(),
            rules: ReadingRules::default(),
            idle_cpu: Vec::new(),
            request_capacity: Vec::new(),
            telemetry: TelemetryConfig::paper(),
            ach: live_ach_config(),
            migration: MigrationOptions::default(),
            min_slot_keys: 1,
            slot_stats: SlotStatsReading::default(),
            slot_split: SlotSplit::default(),
        }
    }

    /// The algorithm's balancer for masters of these relative weights.
    fn build(&self, weights: &[f64]) -> Result<Box<dyn Balancer + Send>, Error> {
        let mut context = Context::new(weights, &self.ach);
        for (name, value) in &self.parameters {
            context = context.with_parameter(name, *value);
        }
        self.algorithm
            .balancer(&context)
            .map_err(|e| Error::Input(e.to_string()))
    }
}

/// The controller: its algorithm, its load tracker and its telemetry source with the previous
/// samples.
pub struct Controller {
    options: ControlOptions,
    balancer: Option<Box<dyn Balancer>>,
    tracker: Option<LoadTracker>,
    master_ids: Vec<String>,
    nodes: NodeReader,
    /// The per-slot reading and its counters.
    slots: SlotReader,
    step: u64,
    /// ACH's state beside it, to say why a step moves nothing (`--algorithm ach` only).
    explainer: Option<Explainer>,
    slot_choice: SlotChoice,
    /// The step at which each slot was last switched by this controller, for the cool-down of
    /// the slots compaction chooses.
    switched_at: Vec<Option<u64>>,
    /// What the drain of drained masters moved, by step.
    drain: DrainLedger,
    /// Whether a drained master that owns no slot is still observed.
    drained_view: DrainedView,
}

/// Whether a drained master that owns no slot (and has none open) is observed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum DrainedView {
    /// Left out: planning and the log see the other masters only (`plan`, `rebalance`).
    #[default]
    Hidden,
    /// Observed like the others (`status`).
    Shown,
}

impl Controller {
    /// A controller; fails when a configuration is invalid.
    pub fn new(options: ControlOptions) -> Result<Controller, Error> {
        options
            .telemetry
            .validate()
            .map_err(|e| Error::Input(format!("telemetry: {e}")))?;
        options
            .ach
            .validate()
            .map_err(|e| Error::Input(format!("ACH configuration: {e}")))?;
        let algorithm = &options.algorithm;
        if algorithm.routes() {
            return Err(Error::Input(format!(
                "--algorithm {}: it routes requests its own way, and a Redis cluster serves every \
                 key at its slot's owner; choose an algorithm that moves slots",
                algorithm.name()
            )));
        }
        // Built once now, so that a bad parameter is an error before anything is observed.
        options.build(&[1.0])?;
        let slots = SlotReader::new(options.slot_split, &options.slot_stats);
        Ok(Controller {
            options,
            balancer: None,
            tracker: None,
            master_ids: Vec::new(),
            nodes: NodeReader::default(),
            slots,
            step: 0,
            explainer: None,
            slot_choice: SlotChoice::default(),
            switched_at: vec![None; SLOT_COUNT],
            drain: DrainLedger::default(),
            drained_view: DrainedView::default(),
        })
    }

    /// Observes drained masters that own no slot too (`status`); by default they are left
    /// out once drained, so that the algorithm never sees them.
    pub fn showing_drained_masters(mut self) -> Controller {
        self.drained_view = DrainedView::Shown;
        self
    }

    /// The relative weight of every master (weight over the mean weight of the masters not
    /// drained; a drained master's is 0); fails on a `--weight` naming no master, and when
    /// every master is drained.
    pub fn relative_weights(&self, snapshot: &Snapshot) -> Result<Vec<f64>, Error> {
        Ok(relative(&self.given_weights(snapshot)?))
    }

    /// The drained masters (weight 0) of `snapshot` that still own slots, each with its slot
    /// ranges: empty when every drain is done (or a `--weight` names no master).
    pub fn drains_left(&self, snapshot: &Snapshot) -> Vec<String> {
        let Ok(weights) = self.given_weights(snapshot) else {
            return Vec::new();
        };
        let slots = snapshot.slots_of();
        weights
            .iter()
            .enumerate()
            .filter(|&(i, w)| *w == 0.0 && !slots[i].is_empty())
            .map(|(i, _)| {
                format!(
                    "{} still owns {} slot{} ({})",
                    snapshot.masters[i].address,
                    slots[i].len(),
                    if slots[i].len() == 1 { "" } else { "s" },
                    format_slot_ranges(&slots[i])
                )
            })
            .collect()
    }

    /// The weight of every master as `--weight` gives it (1 for a master not named); fails on
    /// a `--weight` naming no master.
    pub fn given_weights(&self, snapshot: &Snapshot) -> Result<Vec<f64>, Error> {
        let mut weights = vec![1.0; snapshot.masters.len()];
        for (name, weight) in &self.options.weights {
            match named(snapshot, "--weight", name, *weight)? {
                Named::Master(index) => weights[index] = *weight,
                // A drained master that lost its last slot is a replica now (Redis and Valkey
                // turn it into one of the master that took that slot:
                // cluster-allow-replica-migration): its drain is done.
                Named::Replica if *weight == 0.0 => {}
                Named::Replica => return Err(no_master(snapshot, "--weight", name, *weight)),
            }
        }
        if weights.iter().all(|w| *w == 0.0) {
            return Err(Error::Input(format!(
                "every master is drained (--weight NODE=0 or --drain NODE on all {}): no master \
                 is left to receive their slots; leave at least one with a weight > 0",
                weights.len()
            )));
        }
        Ok(weights)
    }

    /// The snapshot to observe and its masters' weights as given: without the drained
    /// masters once none owns a slot or has one open (unless they are shown), so that the
    /// algorithm plans on the other masters only.
    fn view(&self, full: Snapshot, given: Vec<f64>) -> (Snapshot, Vec<f64>) {
        let drained: Vec<bool> = given.iter().map(|w| *w == 0.0).collect();
        if self.drained_view == DrainedView::Shown || !drained.contains(&true) {
            return (full, given);
        }
        match full.without(&drained) {
            Some(view) => {
                let kept = given.into_iter().filter(|w| *w != 0.0).collect();
                (view, kept)
            }
            None => (full, given),
        }
    }

    /// Chooses the slots of each step as `choice` says (default: [`SlotChoice::Planned`], the
    /// algorithm's own slots; `ach-redis` passes `--slot-choice`, compact by default).
    pub fn with_slot_choice(mut self, choice: SlotChoice) -> Controller {
        self.slot_choice = choice;
        self
    }

    /// Reads the per-node telemetry from `source` instead of INFO (the default).
    pub fn with_node_telemetry(mut self, source: NodeTelemetry) -> Controller {
        self.nodes = NodeReader::new(source);
        self
    }

    /// Where the per-node readings come from.
    pub fn node_telemetry(&self) -> &NodeTelemetry {
        &self.nodes.source
    }

    /// Checks that the telemetry source answers for the masters of `snapshot` (Prometheus
    /// unreachable, or a query without series: [`Error::Input`]), before anything moves.
    pub fn check_telemetry(&self, snapshot: &Snapshot) -> Result<(), Error> {
        self.nodes.check(snapshot)
    }

    /// Takes an INFO and `LATENCY HISTOGRAM` sample of every master; a node that does not
    /// answer gets `None`.
    pub fn sample(
        &mut self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
    ) -> Vec<Option<NodeSample>> {
        info_samples(cluster, snapshot)
    }

    /// Takes the first samples (INFO, latency histograms and per-slot cpu) as the base of the
    /// next observation's readings: call once, an interval before the first
    /// [`observe`](Self::observe).
    pub fn prime(&mut self, cluster: &mut Cluster, snapshot: &Snapshot) -> Result<(), Error> {
        self.slots
            .prime(cluster, snapshot, &self.options.slot_stats)?;
        self.nodes.prime(cluster, snapshot)
    }

    /// Remembers samples as the base of the next cpu reading (call once before the first
    /// observation, and an interval before [`observe`](Self::observe)).
    pub fn remember(&mut self, snapshot: &Snapshot, samples: &[Option<NodeSample>]) {
        self.nodes.remember(snapshot, samples);
    }

    /// Observes the cluster: shape, keys per slot, telemetry, loads. Returns the snapshot's
    /// problems as [`Error::Degraded`] when the cluster is not healthy.
    pub fn observe(&mut self, cluster: &mut Cluster) -> Result<Observed, Error> {
        let full = cluster.snapshot()?;
        if !full.healthy() {
            return Err(Error::Degraded(full.problems.clone()));
        }
        let given = self.given_weights(&full)?;
        let (snapshot, given) = self.view(full, given);
        let weights = relative(&given);
        let ids: Vec<String> = snapshot.masters.iter().map(|m| m.id.clone()).collect();
        let seeding = ids != self.master_ids || self.tracker.is_none();
        if seeding {
            self.seed(ids, &weights)?;
        }
        let backend = cluster.backend().kind();
        let SlotReading {
            figures,
            cpu: slot_cpu,
            split: slot_split,
            split_total: slot_split_total,
            age: slot_figures_age,
        } = self
            .slots
            .observe(cluster, &snapshot, &self.options.slot_stats)?;
        let readings = self.nodes.read(cluster, &snapshot, &self.options.rules)?;
        let bases = cpu_bases(
            &self.options.idle_cpu,
            &self.options.request_capacity,
            &snapshot,
            &weights,
            self.options.rules.cpu_per_weight,
        )?;
        let slots = snapshot.slots_of();
        let slot_keys = figures.keys.clone();
        let weights_of = NodeWeights {
            relative: &weights,
            given: &given,
        };
        let (nodes, total_load) =
            self.track_loads(&snapshot, readings, &bases, weights_of, &slots, &slot_keys);
        if seeding {
            self.restart_tracker()?;
        }
        let hot_slots = slot_cpu
            .as_deref()
            .map(|rates| hot_slots(&snapshot, &slot_keys, rates, 5))
            .unwrap_or_default();
        let loads: Vec<f64> = nodes.iter().map(|n| n.load).collect();
        Ok(Observed {
            imbalance: undrained_imbalance(&nodes, &loads),
            total_load,
            signals: Signals::of(
                backend,
                &figures,
                &self.nodes.source,
                &bases,
                (self.options.slot_split, &self.options.slot_stats),
            ),
            hot_slots,
            slot_figures_age,
            token_loads: slot_split
                .map(|split| token_loads(&slots, &split, slot_split_total.as_deref(), &loads)),
            snapshot,
            slot_keys,
            nodes,
        })
    }

    /// Each master's view of the step with its load: its reading over its base and weight
    /// recorded in the tracker, whose step gives the loads and their total.
    fn track_loads(
        &mut self,
        snapshot: &Snapshot,
        readings: Vec<NodeReading>,
        bases: &[CpuBasis],
        weights: NodeWeights<'_>,
        slots: &[Vec<u16>],
        slot_keys: &[u64],
    ) -> (Vec<NodeView>, f64) {
        let tracker = self.tracker.as_mut().expect("created by observe");
        let mut nodes = Vec::with_capacity(snapshot.masters.len());
        // The cpu reading stays the node's (INFO's or the exporter's) even with per-slot
        // statistics: `cpu-usec` counts only the time commands execute, measured at 4 to 10 %
        // of the process's cpu under a GET/SET workload (docs/redis.md), so it splits a node's
        // load among its slots but does not measure it.
        for (index, (master, read)) in snapshot.masters.iter().zip(readings).enumerate() {
            let relative = weights.relative[index];
            let weighted = bases[index].weighted(read.reading, relative, read.data_ops_per_sec);
            tracker
                .record(index, weighted)
                .expect("one tracker entry per master");
            let keys = slots[index]
                .iter()
                .map(|&s| slot_keys[usize::from(s)])
                .sum();
            let weight = (relative, weights.given[index]);
            nodes.push(node_view(
                master,
                read,
                weighted,
                weight,
                keys,
                &self.options.rules,
            ));
        }
        let step = tracker.finish_step();
        for (node, load) in nodes.iter_mut().zip(step.loads) {
            node.load = *load;
        }
        (nodes, step.total_load)
    }

    /// After the first step of a new set of masters, which the tracker smoothed with beta = 1
    /// ([`Self::seed`]), goes on from its state with the configured beta.
    fn restart_tracker(&mut self) -> Result<(), Error> {
        let state = self.tracker.as_ref().expect("created by observe").state();
        self.tracker = Some(
            LoadTracker::from_state(self.options.telemetry, &state)
                .map_err(|e| Error::Input(format!("telemetry: {e}")))?,
        );
        Ok(())
    }

    /// The algorithm's balancer. Under [`SlotChoice::Compact`] the controller keeps the
    /// cool-down itself, on the slots that really moved: the algorithm's own would hold the
    /// slots it planned and that compaction left at their source, and in a few steps hold them
    /// all.
    fn make_balancer(&self, weights: &[f64]) -> Result<Box<dyn Balancer>, Error> {
        match self.slot_choice {
            SlotChoice::Planned => Ok(self.options.build(weights)?),
            SlotChoice::Compact => {
                let mut options = self.options.clone();
                options.ach.cooldown = 0;
                Ok(options.build(weights)?)
            }
        }
    }

    /// Plans one step on an observation (nothing moves): a drain step while a drained master
    /// owns slots, nothing while the drain's last moves are in the horizon window, the
    /// algorithm's step otherwise.
    pub fn plan(&mut self, observed: &Observed) -> Result<StepPlan, Error> {
        if observed.draining() {
            return self.plan_drain(observed);
        }
        if let Some(reason) = self.algorithm_waits() {
            self.step += 1;
            return Ok(self.empty_plan(observed, reason));
        }
        let snapshot = &observed.snapshot;
        let ring = key_weighted_ring(observed)?;
        let loads: Vec<f64> = observed.nodes.iter().map(|n| n.load).collect();
        let live_nodes = vec![true; loads.len()];
        let observation = Observation {
            step: self.step,
            loads: &loads,
            total_load: observed.total_load,
            live: &live_nodes,
            token_loads: observed.token_loads.as_deref(),
        };
        let balancer = self.balancer.as_mut().expect("created by observe");
        let plan = balancer.plan(&ring, &observation);
        let algorithm = balancer.name();
        let diagnosis = self
            .explainer
            .as_mut()
            .map(|explainer| explainer.step(&self.options.ach, &loads, observed.total_load));
        self.step += 1;
        let total_keys: u64 = observed.slot_keys.iter().sum();
        let (groups, skipped_moves) = self.groups(observed, &plan);
        let (moves, predicted_loads) = planned_moves(observed, &groups);
        let keys_to_copy = moves.iter().map(|m| m.keys).sum();
        let nothing_moves_because = moves.is_empty().then(|| {
            let names: Vec<String> = snapshot.masters.iter().map(|m| m.address.clone()).collect();
            nothing_moves_because(
                algorithm,
                diagnosis.as_ref(),
                &names,
                skipped_moves,
                self.options.min_slot_keys,
                plan.withheld,
            )
        });
        let budget_keys = diagnosis.as_ref().map(|d| d.budget * total_keys as f64);
        let predicted_gain = predicted_gain(&ring, &plan, &observation);
        Ok(StepPlan {
            notable_slots: notable_slots(observed, budget_keys),
            summary: summarise_moves(&moves, observed.token_loads.as_deref()),
            nothing_moves_because,
            diagnosis,
            algorithm,
            moves,
            imbalance_now: observed.imbalance,
            imbalance_predicted: imbalance(&predicted_loads),
            predicted_loads,
            keys_to_copy,
            skipped_moves,
            planned_fraction: if total_keys == 0 {
                plan.m_keys
            } else {
                keys_to_copy as f64 / total_keys as f64
            },
            predicted_gain,
            budget_bound: plan.budget_bound,
            plan,
            ring: Some(ring),
            slot_choice: self.slot_choice,
            drain: None,
            groups,
        })
    }

    /// The algorithm's moves of `plan` as groups to migrate (compacted or as planned, slots in
    /// their cool-down left out), and how many moves were skipped for `--min-slot-keys`.
    fn groups(&self, observed: &Observed, plan: &Plan) -> (Vec<GroupPlan>, usize) {
        let min_slot_keys = self.options.min_slot_keys;
        let (executable, skipped): (Vec<TokenMove>, Vec<TokenMove>) = plan
            .moves
            .iter()
            .filter(|mv| mv.from != mv.to)
            .partition(|mv| observed.slot_keys[mv.token] >= min_slot_keys);
        let (step, cooldown, switched_at) =
            (self.step - 1, self.options.ach.cooldown, &self.switched_at);
        let blocked = |slot: u16| {
            switched_at[usize::from(slot)].is_some_and(|at| step.saturating_sub(at) < cooldown)
        };
        let groups = group_moves(
            &executable,
            self.slot_choice,
            &CompactInputs {
                slot_keys: &observed.slot_keys,
                owners: &observed.snapshot.owners,
                token_loads: observed.token_loads.as_deref(),
                blocked: &blocked,
                min_slot_keys,
            },
        );
        (groups, skipped.len())
    }

    /// Why the algorithm may not plan this step, if it may not: a drained master still
    /// observed (one with a slot open), or the drain's last moves within the horizon window.
    fn algorithm_waits(&self) -> Option<String> {
        if self.balancer.is_none() {
            return Some(
                "a drained master is still observed (a slot of it is open): the algorithm plans \
                 once it is out"
                    .into(),
            );
        }
        let ach = &self.options.ach;
        let resumes = self.drain.algorithm_resumes_at(ach)?;
        (self.step < resumes).then(|| {
            format!(
                "the drain moved keys at step {}, inside the horizon window of {} steps: the \
                 algorithm plans from step {resumes} on, so that no window spends past M_H",
                resumes - ach.horizon as u64,
                ach.horizon
            )
        })
    }

    /// A plan that moves nothing, for `reason`.
    fn empty_plan(&self, observed: &Observed, reason: String) -> StepPlan {
        let loads: Vec<f64> = observed.nodes.iter().map(|n| n.load).collect();
        StepPlan {
            // The balancer's name; none exists while a drained master is observed.
            algorithm: self.balancer.as_ref().map_or("drain", |b| b.name()),
            moves: Vec::new(),
            imbalance_now: observed.imbalance,
            imbalance_predicted: observed.imbalance,
            predicted_loads: loads,
            keys_to_copy: 0,
            skipped_moves: 0,
            planned_fraction: 0.0,
            predicted_gain: None,
            budget_bound: None,
            summary: Vec::new(),
            nothing_moves_because: Some(reason),
            diagnosis: None,
            notable_slots: Vec::new(),
            plan: Plan::default(),
            ring: None,
            slot_choice: self.slot_choice,
            drain: None,
            groups: Vec::new(),
        }
    }

    /// A drain step ([`crate::drain::drain_plan`]).
    fn plan_drain(&mut self, observed: &Observed) -> Result<StepPlan, Error> {
        let step = self.step;
        self.step += 1;
        let base = self.empty_plan(observed, String::new());
        drain_plan(observed, &self.drain, &self.options.ach, step, base)
    }

    /// Migrates every planned slot through the cluster's backend, group by group in the plan's
    /// order except where that would empty a master that keeps slots (`migration_batches`),
    /// then confirms the moves whose slot was switched. Stops when `stop` is set (a running
    /// atomic job is cancelled) and at the first error.
    pub fn execute(
        &mut self,
        cluster: &mut Cluster,
        observed: &Observed,
        step_plan: &StepPlan,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&SlotMigration),
    ) -> StepOutcome {
        let mut outcome = StepOutcome::default();
        let plan_step = self.step.saturating_sub(1);
        let backend = cluster.backend();
        let groups = &step_plan.groups;
        let mut switched: Vec<Vec<u16>> = vec![Vec::new(); groups.len()];
        let batches = migration_batches(
            groups,
            &observed.snapshot.owners,
            observed.snapshot.masters.len(),
        );
        for batch in batches {
            if stop.load(Ordering::SeqCst) {
                outcome.interrupted = true;
                break;
            }
            let planned = &groups[batch.group];
            let keys = batch
                .slots
                .iter()
                .map(|&slot| observed.slot_keys[usize::from(slot)])
                .sum();
            let group = MoveGroup {
                from: planned.from,
                to: planned.to,
                slots: batch.slots,
                keys,
            };
            let result = backend.migrate(
                cluster,
                &observed.snapshot,
                &group,
                &self.options.migration,
                stop,
                progress,
            );
            self.add_batch(&mut outcome, &mut switched[batch.group], result, plan_step);
            if outcome.interrupted || !outcome.errors.is_empty() {
                break;
            }
        }
        let done: Vec<TokenMove> = groups
            .iter()
            .zip(&switched)
            .flat_map(|(group, switched)| confirmed_moves(group, switched, &observed.slot_keys))
            .collect();
        if step_plan.drain.is_some() {
            self.charge_drain(observed, &outcome, plan_step);
        }
        self.confirm(step_plan, &done, &mut outcome);
        outcome
    }
}

impl Controller {
    /// Adds what one batch of a group did to the step's outcome: its keys moved, migrations,
    /// errors and interruption, and its switched slots to the group's `switched` (each
    /// remembered as switched at `plan_step`, for the cool-down).
    fn add_batch(
        &mut self,
        outcome: &mut StepOutcome,
        switched: &mut Vec<u16>,
        result: GroupOutcome,
        plan_step: u64,
    ) {
        outcome.keys_moved += result
            .migrations
            .iter()
            .filter(|m| m.succeeded())
            .map(|m| m.keys)
            .sum::<u64>();
        outcome.migrations.extend(result.migrations);
        for &slot in &result.switched {
            self.switched_at[usize::from(slot)] = Some(plan_step);
        }
        switched.extend(result.switched);
        outcome.errors.extend(result.errors);
        if result.interrupted {
            outcome.interrupted = true;
        }
    }

    /// Confirms to the algorithm the moves `done` of the step's plan (its budget is charged
    /// what really moved); a refusal is one of the outcome's errors.
    fn confirm(&mut self, step_plan: &StepPlan, done: &[TokenMove], outcome: &mut StepOutcome) {
        let (Some(balancer), Some(ring)) = (self.balancer.as_mut(), step_plan.ring.as_ref()) else {
            return;
        };
        match live::confirm(balancer.as_mut(), ring, &step_plan.plan, done) {
            Ok(m_keys) => {
                if let Some(explainer) = self.explainer.as_mut() {
                    explainer.charge(m_keys);
                }
            }
            Err(error) => outcome.errors.push(format!("confirm: {error}")),
        }
    }

    /// Charges the drain's ledger with what a drain step really moved: its keys over all keys
    /// at observation, and its switched slots.
    fn charge_drain(&mut self, observed: &Observed, outcome: &StepOutcome, step: u64) {
        let total_keys: u64 = observed.slot_keys.iter().sum();
        let switched = outcome
            .migrations
            .iter()
            .filter(|m| m.succeeded())
            .map(|m| m.slots.len())
            .sum();
        let fraction = if total_keys == 0 {
            0.0
        } else {
            outcome.keys_moved as f64 / total_keys as f64
        };
        self.drain
            .charge(&self.options.ach, step, fraction, switched);
    }

    /// A new load tracker (its first step unsmoothed) and balancer for the masters `ids` of
    /// these relative weights; no balancer while a drained master (weight 0) is observed.
    fn seed(&mut self, ids: Vec<String>, weights: &[f64]) -> Result<(), Error> {
        // A new tracker starts with beta = 1 for its first step, so that the smoothing is
        // seeded with the first reading (not with zero, which would read an idle cluster for
        // the first steps); from the second step on it smooths with the configured beta.
        let first_step = TelemetryConfig {
            beta: 1.0,
            ..self.options.telemetry
        };
        self.tracker = Some(
            LoadTracker::new(ids.len(), first_step)
                .map_err(|e| Error::Input(format!("telemetry: {e}")))?,
        );
        // No algorithm plans while a drained master is observed: it would divide by its
        // weight 0; the drain plans those steps.
        let drained = weights.contains(&0.0);
        self.balancer = if drained {
            None
        } else {
            Some(self.make_balancer(weights)?)
        };
        self.explainer =
            (!drained && self.options.algorithm.name() == names::ACH).then(Explainer::default);
        self.master_ids = ids;
        Ok(())
    }
}

/// What a node name of an option (`--weight`, `--idle-cpu`, `--request-capacity`) names.
enum Named {
    /// The master of this index.
    Master(usize),
    /// A replica, no master.
    Replica,
}

/// What `name` of `OPTION NAME=VALUE` names in `snapshot`: one master or a replica; an error
/// naming the option when it names no node or more than one master.
fn named(snapshot: &Snapshot, option: &str, name: &str, value: f64) -> Result<Named, Error> {
    let matches: Vec<usize> = snapshot
        .masters
        .iter()
        .enumerate()
        .filter(|(_, m)| names_node(name, &m.address, &m.id))
        .map(|(i, _)| i)
        .collect();
    match matches.as_slice() {
        [index] => Ok(Named::Master(*index)),
        [] if snapshot
            .masters
            .iter()
            .flat_map(|m| &m.replicas)
            .any(|r| names_node(name, &r.address, &r.id)) =>
        {
            Ok(Named::Replica)
        }
        [] => Err(no_master(snapshot, option, name, value)),
        _ => Err(Error::Input(format!(
            "{option} {name}={value}: {name:?} names more than one master"
        ))),
    }
}

/// The error of `OPTION NAME=VALUE` whose name is no master, listing the masters.
fn no_master(snapshot: &Snapshot, option: &str, name: &str, value: f64) -> Error {
    let known: Vec<String> = snapshot
        .masters
        .iter()
        .map(|m| format!("{} ({})", m.address, short(&m.id)))
        .collect();
    Error::Input(format!(
        "{option} {name}={value}: no master {name:?} in the cluster; the masters are {}",
        known.join(", ")
    ))
}

/// True when `name` (of `--weight` or `--drain`) names the node of this address and id: the
/// address, or a prefix of at least 4 characters of the id.
fn names_node(name: &str, address: &str, id: &str) -> bool {
    address == name || (name.len() >= 4 && id.starts_with(name))
}

/// Weights over the mean weight of the masters not drained (weight > 0); a drained master's
/// stays 0.
fn relative(weights: &[f64]) -> Vec<f64> {
    let kept: Vec<f64> = weights.iter().copied().filter(|w| *w > 0.0).collect();
    let mean = kept.iter().sum::<f64>() / kept.len().max(1) as f64;
    if mean > 0.0 {
        weights.iter().map(|w| w / mean).collect()
    } else {
        weights.to_vec()
    }
}

/// Observes the cluster once over `sample`: an INFO sample, a wait, then an observation, so
/// that the cpu reading covers that wait. Give the controller `beta = 1` for loads that are the
/// readings of that interval (no smoothing). Fails when the cluster is degraded or a
/// `--weight` names no master.
pub fn observe_once(
    mut controller: Controller,
    cluster: &mut Cluster,
    sample: std::time::Duration,
) -> Result<(Controller, Observed), Error> {
    let snapshot = cluster.snapshot()?;
    if !snapshot.healthy() {
        return Err(Error::Degraded(snapshot.problems));
    }
    controller.relative_weights(&snapshot)?;
    controller.prime(cluster, &snapshot)?;
    std::thread::sleep(sample);
    let observed = controller.observe(cluster)?;
    Ok((controller, observed))
}

/// ACH's configuration for a live cluster (`AchConfig::live()`).
pub fn live_ach_config() -> AchConfig {
    live::ach_config()
}

/// The masters' weights in a step, one entry each: relative (over the mean weight of the
/// masters not drained) and as given (0 for a drained master).
#[derive(Clone, Copy)]
struct NodeWeights<'a> {
    relative: &'a [f64],
    given: &'a [f64],
}
