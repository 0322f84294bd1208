//! One algorithm's arm of a run: its ring, telemetry, plan and commit at each step, and its
//! records.

use ach_control::{Balancer, Observation, Plan, Router, Served, StepLoad, TokenLoadNeed};
use ach_ring::{InvariantCheck, InvariantViolation, JoinRule, LeaveRule, NodeId, TokenRing};
use ach_telemetry::{Metrics, StepDraws, TelemetryPipeline, numpy_sum, raw_metrics_for_cluster};

use super::route::ArmRoute;
use super::{Cluster, MAX_VIOLATION_DETAILS};
use crate::algorithms::Algorithm;
use crate::config::SeriesConfig;
use crate::pacing::Pacer;
use crate::phases::{Phase, PhaseProbe};
use crate::reading::NodeReading;
use crate::record::{
    Aggregates, AlgorithmRecord, ViolationRecord, coefficient_of_variation, forwarded_fraction,
    mean_after_warmup,
};
use crate::token_loads::TokenTelemetry;
use crate::workload::{packed_requests, packed_writes};

/// Why an arm could not be set up or could not take a step; a run reports it as
/// [`SimError::Internal`], in these words.
#[derive(Debug, thiserror::Error)]
pub(super) enum ArmError {
    /// The telemetry refused its configuration or a step's readings.
    #[error(transparent)]
    Telemetry(#[from] ach_telemetry::TelemetryError),
    /// The algorithm could not be built for the series.
    #[error(transparent)]
    Build(#[from] ach_baselines::catalogue::BuildError),
    /// A plan could not be committed to the ring.
    #[error(transparent)]
    Ring(#[from] ach_ring::RingError),
    /// A committed plan could not be confirmed.
    #[error("confirm: {0}")]
    Confirm(#[from] ach_control::ConfirmError),
}

/// The routing of an algorithm that routes requests its own way, and what it forwarded.
struct Forwarding {
    router: Box<dyn Router + Send>,
    served: Served,
    /// Requests forwarded past their token's owner, every step.
    forwarded: Vec<u64>,
    /// Requests of the step, every step.
    requests: Vec<u64>,
}

/// One algorithm's arm of a run: its ring, its telemetry and its records.
pub(super) struct Arm {
    balancer: Box<dyn Balancer + Send>,
    /// `None` for the model's routing (every request to its token's owner).
    forwarding: Option<Forwarding>,
    /// Which per-token figures the balancer asked for (once, when the arm was built).
    pub(super) token_load_need: TokenLoadNeed,
    /// Per-token telemetry, for an algorithm that asks for observed per-token loads.
    token_telemetry: Option<TokenTelemetry>,
    pub(super) ring: TokenRing,
    /// The live clock of a paced algorithm (`None`: the paper's instant switch).
    pacer: Option<Pacer>,
    /// Every node's reading, `(offset, scale)` of its load (`None`: the load itself).
    readings: Option<Vec<NodeReading>>,
    /// The readings of the last step.
    read_loads: Vec<f64>,
    pub(super) telemetry: TelemetryPipeline,
    truth: Option<TelemetryPipeline>,
    /// The model's routing of the arm: its per-node sums of the packed request counts.
    pub(super) route: ArmRoute,
    requests: Vec<u64>,
    writes: Vec<u64>,
    raw: Vec<Metrics>,
    d: Vec<f64>,
    d_true: Vec<f64>,
    /// Coefficient of variation of the true loads, every step; `None` unless the series sets
    /// `report_cv`.
    cv_true: Option<Vec<f64>>,
    m: Vec<f64>,
    violations: Vec<ViolationRecord>,
    n_violations: u64,
    /// Violations found by the last full check of the ring (they persist while it is unchanged).
    standing_violations: u64,
    pub(super) needs_check: bool,
}

impl Arm {
    /// A fresh arm for `algorithm`, named `name` in the series, on `ring`, with the series'
    /// telemetry and pacing.
    pub(super) fn new(
        name: &str,
        algorithm: &Algorithm,
        config: &SeriesConfig,
        ring: TokenRing,
    ) -> Result<Arm, ArmError> {
        let n0 = config.cluster.classes.len();
        let steps = config.steps as usize;
        let distortion = config.noise.distortion();
        let readings = crate::reading::per_node(&config.readings, n0);
        // The algorithms read their own pipeline; the truth needs one of its own when what
        // they read differs from it (distortion, readings, or their own smoothing factor).
        let noisy = !distortion.is_none()
            || readings.is_some()
            || config.telemetry.controller_beta.is_some();
        let telemetry = TelemetryPipeline::new(n0, config.telemetry.controllers(), distortion)?;
        let truth = if noisy {
            Some(TelemetryPipeline::noise_free(
                n0,
                config.telemetry.config(),
            )?)
        } else {
            None
        };
        let forwarding = match algorithm.router(config) {
            None => None,
            Some(router) => Some(Forwarding {
                router: router?,
                served: Served::default(),
                forwarded: Vec::with_capacity(steps),
                requests: Vec::with_capacity(steps),
            }),
        };
        let balancer = algorithm.balancer(config)?;
        let token_load_need = balancer.token_load_need();
        let token_telemetry = (token_load_need == TokenLoadNeed::Observed)
            .then(|| TokenTelemetry::new(ring.len(), config));
        Ok(Arm {
            balancer,
            forwarding,
            token_load_need,
            token_telemetry,
            ring,
            pacer: config
                .pacing
                .iter()
                .find(|pacing| pacing.algorithms.iter().any(|a| a == name))
                .map(|pacing| Pacer::new(pacing, config.keys)),
            readings,
            read_loads: Vec::with_capacity(n0),
            telemetry,
            truth,
            route: ArmRoute::default(),
            requests: vec![0; n0],
            writes: vec![0; n0],
            raw: Vec::with_capacity(n0),
            d: Vec::with_capacity(steps),
            d_true: if noisy {
                Vec::with_capacity(steps)
            } else {
                Vec::new()
            },
            cv_true: config.report_cv.then(|| Vec::with_capacity(steps)),
            m: Vec::with_capacity(steps),
            violations: Vec::new(),
            n_violations: 0,
            standing_violations: 0,
            needs_check: true,
        })
    }

    /// Whether the algorithm routes requests its own way (else to each token's owner).
    pub(super) fn routes_its_own_way(&self) -> bool {
        self.forwarding.is_some()
    }

    /// The record of this arm, the algorithm `name`'s, over the steps after `warmup`.
    pub(super) fn into_record(self, name: &str, warmup: usize) -> AlgorithmRecord {
        let mut aggregates =
            Aggregates::of(&self.d, &self.d_true, &self.m, warmup, self.n_violations);
        aggregates.cv_true_mean = self
            .cv_true
            .as_deref()
            .map(|cv| mean_after_warmup(cv, warmup));
        aggregates.forwarded_fraction = self
            .forwarding
            .as_ref()
            .map(|f| forwarded_fraction(&f.forwarded, &f.requests, warmup));
        AlgorithmRecord {
            name: name.to_string(),
            aggregates,
            d_trace: self.d,
            d_true_trace: self.d_true,
            m_trace: self.m,
            violations: self.violations,
        }
    }

    /// Hands the tokens of a leaving `node` on by `rule`.
    pub(super) fn leave(&mut self, node: NodeId, rule: LeaveRule<'_>) {
        let moves = self.ring.leave_moves(node, rule);
        self.ring
            .apply(&moves)
            .expect("moves are built from the ring's own owners");
    }

    /// Gives a joining node `new` its tokens by `rule`, in a cluster of `n` nodes with it.
    pub(super) fn join(&mut self, new: NodeId, rule: JoinRule, n: usize) {
        let moves = self.ring.join_moves(new, rule);
        self.ring
            .apply(&moves)
            .expect("moves are built from the ring's own owners");
        self.telemetry.resize(n);
        if let Some(truth) = &mut self.truth {
            truth.resize(n);
        }
    }

    fn record_violation(&mut self, t: u32, kind: &str, detail: String) {
        self.n_violations += 1;
        if self.violations.len() < MAX_VIOLATION_DETAILS {
            self.violations.push(ViolationRecord {
                t,
                kind: kind.to_string(),
                detail,
            });
        }
    }
}

/// Imbalance `D = max - mean` over the nodes in `mask`.
pub(super) fn imbalance(loads: &[f64], mask: &[bool], scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend(loads.iter().zip(mask).filter(|&(_, &m)| m).map(|(&l, _)| l));
    if scratch.is_empty() {
        return 0.0;
    }
    let max = scratch.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    max - numpy_sum(scratch) / scratch.len() as f64
}

/// What the algorithm reads of each node: its load through the node's reading, off its line
/// by the node's deviation (a joining node, past the readings, reads its load).
fn read_through(readings: &[NodeReading], loads: &[f64], deviations: &[f64], out: &mut Vec<f64>) {
    out.clear();
    out.extend(loads.iter().enumerate().map(|(i, &load)| {
        let reading = readings.get(i).unwrap_or(&NodeReading::IDENTITY);
        reading.read(load) + deviations.get(i).copied().unwrap_or(0.0)
    }));
}

/// This step's per-token counts, for an algorithm with its own routing.
pub(super) struct StepRequests<'a> {
    /// Requests (reads and writes) per token.
    pub(super) requests_per_token: &'a [u64],
    /// Writes per token.
    pub(super) writes_per_token: &'a [u64],
    /// Every token's expected work of the next step, when some arm asks for it (else empty).
    pub(super) expected_work: &'a [f64],
}

impl Arm {
    /// One step of this arm once its requests are routed ([`super::route::route`]): telemetry, plan, commit,
    /// metrics, invariants; `deviations` are the readings' deviations from their lines this
    /// step (empty when none scatter), `probe` is told each phase, `index` is the arm's
    /// algorithm's.
    #[allow(clippy::too_many_arguments)] // The step's inputs, one each; a struct would only wrap them.
    pub(super) fn step<P: PhaseProbe>(
        &mut self,
        t: u32,
        cluster: &Cluster,
        requests: &StepRequests<'_>,
        draws: &StepDraws<'_>,
        deviations: &[f64],
        v_min: usize,
        scratch: &mut Vec<f64>,
        probe: &mut P,
        index: usize,
    ) -> Result<(), ArmError> {
        probe.enter(Phase::Telemetry);
        self.count_node_requests(cluster, requests, probe);
        raw_metrics_for_cluster(
            &self.requests,
            &self.writes,
            &cluster.service_rate,
            &mut self.raw,
        )?;
        self.observe_truth(cluster, scratch)?;
        let alpha = self.telemetry.config().alpha;
        let mut observed = self.telemetry.observe(&self.raw, draws)?;
        if let Some(readings) = &self.readings {
            read_through(readings, observed.loads, deviations, &mut self.read_loads);
            observed = ach_telemetry::StepLoads {
                loads: &self.read_loads,
                total_load: ach_telemetry::total_load(&self.read_loads, alpha),
            };
        }
        if self.truth.is_none()
            && let Some(cv) = &mut self.cv_true
        {
            // Without distortion the observed loads are the true ones.
            cv.push(coefficient_of_variation(
                observed.loads,
                &cluster.usable,
                scratch,
            ));
        }
        self.d
            .push(imbalance(observed.loads, &cluster.usable, scratch));
        let token_loads = match self.token_load_need {
            TokenLoadNeed::None => None,
            TokenLoadNeed::Observed => self.token_telemetry.as_mut().map(|tokens| {
                tokens.observe(
                    &self.ring,
                    requests.requests_per_token,
                    requests.writes_per_token,
                    draws.missing,
                    observed.loads,
                )
            }),
            TokenLoadNeed::ExpectedWork => Some(requests.expected_work),
        };
        let observation = Observation {
            step: u64::from(t),
            loads: observed.loads,
            total_load: observed.total_load,
            live: &cluster.usable,
            token_loads,
        };
        if self.pacer.as_ref().is_some_and(|pacer| !pacer.plans_at(t)) {
            // A paced arm between control steps: its last plan's jobs run, or it waits.
            self.m.push(0.0);
            return self.check_invariants(t, cluster, v_min, probe);
        }
        probe.enter(Phase::Plan { arm: index });
        let plan = self.balancer.plan(&self.ring, &observation);
        probe.enter(Phase::Commit);
        self.commit(t, &plan)?;
        self.check_invariants(t, cluster, v_min, probe)
    }

    /// Each node's requests and writes of the step: routed by the algorithm itself, over the
    /// cluster's capacities and members, or summed by the model's routing.
    #[inline(always)]
    fn count_node_requests<P: PhaseProbe>(
        &mut self,
        cluster: &Cluster,
        requests: &StepRequests<'_>,
        probe: &mut P,
    ) {
        let n = cluster.capacity.len();
        if let Some(forwarding) = &mut self.forwarding {
            probe.enter(Phase::Route);
            // An algorithm's own routing, over the cluster's capacities as the scenario has set
            // them (degradations applied, 0 for a removed node) and its members.
            let load = StepLoad {
                ring: &self.ring,
                requests: requests.requests_per_token,
                writes: requests.writes_per_token,
                capacities: &cluster.capacity,
                live: &cluster.member,
            };
            let forwarded = forwarding.router.route(&load, &mut forwarding.served);
            forwarding.forwarded.push(forwarded);
            forwarding
                .requests
                .push(requests.requests_per_token.iter().sum());
            self.requests.clone_from(&forwarding.served.requests);
            self.requests.resize(n, 0);
            self.writes.clone_from(&forwarding.served.writes);
            self.writes.resize(n, 0);
            probe.enter(Phase::Telemetry);
        } else {
            // The model's routing, summed by `super::route::route`: every request to its token's owner.
            self.requests.clear();
            self.requests
                .extend(self.route.sums.iter().map(|&p| packed_requests(p)));
            self.writes.clear();
            self.writes
                .extend(self.route.sums.iter().map(|&p| packed_writes(p)));
        }
    }

    /// The true loads' imbalance (and their coefficient of variation) of the step, when the
    /// algorithm reads something else.
    #[inline(always)]
    fn observe_truth(&mut self, cluster: &Cluster, scratch: &mut Vec<f64>) -> Result<(), ArmError> {
        if let Some(truth) = &mut self.truth {
            let loads = truth.observe(&self.raw, &StepDraws::none())?;
            self.d_true
                .push(imbalance(loads.loads, &cluster.usable, scratch));
            if let Some(cv) = &mut self.cv_true {
                cv.push(coefficient_of_variation(
                    loads.loads,
                    &cluster.usable,
                    scratch,
                ));
            }
        }
        Ok(())
    }

    /// Commits the plan of step `t` (or schedules a paced one's jobs) and records its cost,
    /// and a violation if the plan spent past its budget.
    #[inline(always)]
    fn commit(&mut self, t: u32, plan: &Plan) -> Result<(), ArmError> {
        if let Some(pacer) = &mut self.pacer {
            // A paced plan switches job by job ([`Arm::switch_ended_jobs`]).
            pacer.schedule(t, plan, &self.ring);
        } else {
            // The plan's `M_keys` is what the run records: the ring need not measure it again.
            self.ring.apply_unmeasured(&plan.moves)?;
            // A simulated switch is instantaneous: the plan is confirmed as soon as it is
            // committed.
            self.balancer.confirm(plan)?;
            if !plan.moves.is_empty() {
                self.needs_check = true;
            }
        }
        self.m.push(plan.m_keys);
        if !plan.within_budget() {
            let bound = plan.budget_bound.unwrap_or(f64::INFINITY);
            self.record_violation(
                t,
                "budget",
                format!("M_keys = {} > m + |O| max L = {bound}", plan.m_keys),
            );
        }
        Ok(())
    }

    /// Switches the moves of the paced jobs that have ended before step `t`'s requests are
    /// routed, and tells the algorithm (nothing for an arm that is not paced).
    pub(super) fn switch_ended_jobs(&mut self, t: u32) -> Result<(), ArmError> {
        let Some(plan) = self
            .pacer
            .as_mut()
            .and_then(|pacer| pacer.take_switched(t, &self.ring))
        else {
            return Ok(());
        };
        self.ring.apply_unmeasured(&plan.moves)?;
        self.balancer.confirm(&plan)?;
        self.needs_check = true;
        Ok(())
    }

    /// The invariants of the ring after step `t`, recorded as violations.
    fn check_invariants<P: PhaseProbe>(
        &mut self,
        t: u32,
        cluster: &Cluster,
        v_min: usize,
        probe: &mut P,
    ) -> Result<(), ArmError> {
        let n = cluster.capacity.len();
        // The five invariants are a function of the ring and the membership only: a step that
        // changed neither has exactly the violations of the last check.
        probe.enter(Phase::Invariants);
        if self.needs_check {
            let check = InvariantCheck {
                n_nodes: n,
                live: &cluster.member,
                v_min,
            };
            // Positions never change, so invariants 1, 4 and 5 are checked in full at the first
            // step only; the owner invariants after every change.
            let violations = if t == 0 {
                self.ring.check_invariants(&check)
            } else {
                self.ring.check_owner_invariants(&check)
            };
            self.standing_violations = violations.len() as u64;
            for v in violations {
                let (kind, detail) = describe_violation(&v);
                self.record_violation(t, kind, detail);
            }
            self.needs_check = false;
        } else {
            for _ in 0..self.standing_violations {
                self.record_violation(t, "invariant", "unchanged since the last step".into());
            }
        }
        Ok(())
    }
}

fn describe_violation(v: &InvariantViolation) -> (&'static str, String) {
    match v {
        InvariantViolation::ArcSum { sum } => ("arc-sum", format!("arcs sum to {sum}")),
        InvariantViolation::TooFewTokens { node, count, v_min } => (
            "v_min",
            format!("{node} owns {count} tokens < v_min = {v_min}"),
        ),
        InvariantViolation::InvalidOwner { token, owner, .. } => {
            ("owner", format!("token {token} owned by unknown {owner}"))
        }
        InvariantViolation::Unsorted { index } => ("sorted", format!("position {index} unsorted")),
        InvariantViolation::EmptyArc { token, length } => {
            ("arc", format!("token {token} has arc {length}"))
        }
    }
}
