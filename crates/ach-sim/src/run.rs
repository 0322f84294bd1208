//! One run: a scenario driven step by step through every algorithm (spec sections 2, 5, 6).

use ach_control::{Balancer, Observation, Router, Served, StepLoad, TokenLoadNeed};
use ach_ring::{InvariantCheck, InvariantViolation, JoinRule, LeaveRule, NodeId, TokenRing};
use ach_telemetry::{Metrics, StepDraws, TelemetryPipeline, numpy_sum, raw_metrics_for_cluster};
use rand::Rng;
use rand_distr::{Distribution, Normal};

use crate::algorithms::{Algorithm, Registry};
use crate::config::{Profile, SeriesConfig, SweepPoint};
use crate::keys::RunKeys;
use crate::pacing::Pacer;
use crate::phases::{NoProbe, Phase, PhaseProbe};
use crate::reading::ScatterDraws;
use crate::record::{
    Aggregates, AlgorithmRecord, RunRecord, ViolationRecord, coefficient_of_variation,
    forwarded_fraction, mean_after_warmup,
};
use crate::streams::{Stream, stream};
use crate::token_loads::{TokenTelemetry, expected_work};
use crate::workload::{packed_requests, packed_writes};
use route::ArmRoute;

/// A list with an entry per arm of a step (or fewer), on the stack: a run has a handful of
/// arms, and the lists are made at every step.
type ArmList<T> = smallvec::SmallVec<[T; 8]>;

mod route;

/// At most this many violations are kept in detail per algorithm and run (all are counted).
pub const MAX_VIOLATION_DETAILS: usize = 20;

/// What to run: a series (already set to its sweep point, if any), a profile and a run index.
#[derive(Clone, Debug)]
pub struct RunSpec<'a> {
    /// The series configuration, validated.
    pub config: &'a SeriesConfig,
    /// The sweep point this configuration is at, if any (recorded, not applied).
    pub point: Option<&'a SweepPoint>,
    /// Modelling profile.
    pub profile: Profile,
    /// Index of the run within its series (or sweep point).
    pub run_index: u32,
}

/// Why a run could not be carried out.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The configuration breaks a rule (see [`SeriesConfig::validate`]).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The random token positions collided (two equal draws); practically impossible.
    #[error("run {run} of series {series}: the ring could not be built: {detail}")]
    Ring {
        /// The series.
        series: String,
        /// The run.
        run: u32,
        /// What the ring said.
        detail: String,
    },
    /// An internal step failed; a bug.
    #[error("run {run} of series {series}, step {step}: {detail}")]
    Internal {
        /// The series.
        series: String,
        /// The run.
        run: u32,
        /// The step.
        step: u32,
        /// What failed.
        detail: String,
    },
}

/// Why an arm could not be set up or could not take a step; a run reports it as
/// [`SimError::Internal`], in these words.
#[derive(Debug, thiserror::Error)]
enum ArmError {
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

/// The cluster as the scenario changes it.
struct Cluster {
    capacity: Vec<f64>,
    service_rate: Vec<f64>,
    /// Members of the cluster (not removed).
    member: Vec<bool>,
    /// What the algorithms may use: every node in the paper profile, members in the corrected.
    usable: Vec<bool>,
    profile: Profile,
}

impl Cluster {
    /// The initial cluster of a series.
    fn new(config: &SeriesConfig, profile: Profile) -> Cluster {
        let capacity: Vec<f64> = config
            .cluster
            .classes
            .iter()
            .map(|c| c.capacity())
            .collect();
        let n0 = capacity.len();
        Cluster {
            service_rate: capacity
                .iter()
                .map(|c| c * config.cluster.mu_base)
                .collect(),
            capacity,
            member: vec![true; n0],
            usable: vec![true; n0],
            profile,
        }
    }
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
struct Arm {
    balancer: Box<dyn Balancer + Send>,
    /// `None` for the model's routing (every request to its token's owner).
    forwarding: Option<Forwarding>,
    /// Which per-token figures the balancer asked for (once, when the arm was built).
    token_load_need: TokenLoadNeed,
    /// Per-token telemetry, for an algorithm that asks for observed per-token loads.
    token_telemetry: Option<TokenTelemetry>,
    ring: TokenRing,
    /// The live clock of a paced algorithm (`None`: the paper's instant switch).
    pacer: Option<Pacer>,
    /// Every node's reading, `(offset, scale)` of its load (`None`: the load itself).
    readings: Option<Vec<crate::reading::NodeReading>>,
    /// The readings of the last step.
    read_loads: Vec<f64>,
    telemetry: TelemetryPipeline,
    truth: Option<TelemetryPipeline>,
    /// The model's routing of the arm: its per-node sums of the packed request counts.
    route: ArmRoute,
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
    needs_check: bool,
}

impl Arm {
    /// A fresh arm for `algorithm`, named `name` in the series, on `ring`, with the series'
    /// telemetry and pacing.
    fn new(
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
fn imbalance(loads: &[f64], mask: &[bool], scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend(loads.iter().zip(mask).filter(|&(_, &m)| m).map(|(&l, _)| l));
    if scratch.is_empty() {
        return 0.0;
    }
    let max = scratch.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    max - numpy_sum(scratch) / scratch.len() as f64
}

/// Runs one simulation. A pure function of the configuration, the profile and the run index.
pub fn simulate(spec: &RunSpec<'_>) -> Result<RunRecord, SimError> {
    simulate_with(spec, &Registry::built_in())
}

/// [`simulate`] with the algorithms of `registry` (the series name theirs).
pub fn simulate_with(spec: &RunSpec<'_>, registry: &Registry) -> Result<RunRecord, SimError> {
    simulate_group_with(std::slice::from_ref(spec), registry)
        .pop()
        .expect("one result per spec")
}

/// [`simulate`], telling `probe` each time the run enters a phase (see [`crate::phases`]):
/// the same record, for a caller that times where a run's time goes.
pub fn simulate_probed<P: PhaseProbe>(
    spec: &RunSpec<'_>,
    probe: &mut P,
) -> Result<RunRecord, SimError> {
    let registry = Registry::built_in();
    spec.config.validate_with(spec.profile, &registry)?;
    let mut records = simulate_members(&[spec], &registry, probe)?;
    Ok(records.pop().expect("one record per spec"))
}

/// The part of a configuration that fixes a run's requests and cluster events. Runs that agree
/// on it, on the seed and on the profile draw exactly the same requests.
#[derive(serde::Serialize)]
struct SharedScenario<'a> {
    tokens: usize,
    keys: usize,
    zipf_s: f64,
    write_fraction: f64,
    steps: u32,
    cluster: &'a crate::config::ClusterConfig,
    load: &'a crate::config::LoadProfile,
    degradation: &'a [crate::config::Degradation],
    churn: &'a [crate::config::Churn],
    v_min: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    hot_keys: &'a Option<crate::config::HotKeys>,
    #[serde(skip_serializing_if = "crate::config::InitialLayout::is_round_robin")]
    initial_layout: crate::config::InitialLayout,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_table: &'a Option<crate::keys::KeyTable>,
}

/// A key that is equal for runs that can share one workload: same scenario, seed and profile.
pub fn shared_workload_key(spec: &RunSpec<'_>) -> String {
    let c = spec.config;
    let scenario = SharedScenario {
        tokens: c.tokens,
        keys: c.keys,
        zipf_s: c.zipf_s,
        write_fraction: c.write_fraction,
        steps: c.steps,
        cluster: &c.cluster,
        load: &c.load,
        degradation: &c.degradation,
        churn: &c.churn,
        v_min: c.ach.v_min,
        hot_keys: &c.hot_keys,
        initial_layout: c.initial_layout,
        key_table: &c.key_table,
    };
    format!(
        "{}|{}|{}",
        serde_json::to_string(&scenario).expect("a scenario serialises"),
        c.seed(spec.run_index),
        spec.profile.name()
    )
}

/// One run of a group: its arms and its own telemetry noise.
struct Member<'a> {
    spec: &'a RunSpec<'a>,
    seed: u64,
    arms: Vec<Arm>,
    noise_rng: rand_pcg::Pcg64Mcg,
    gauss: Option<Normal<f64>>,
    p_miss: Option<f64>,
    gauss_draws: Vec<Metrics>,
    missing_draws: Vec<[bool; 3]>,
    /// The readings' deviations from their lines, when some scatter.
    scatter: Option<ScatterDraws>,
}

/// Runs several simulations that share one workload in a single pass: the requests are drawn
/// once and every run's arms route them. Each record is exactly the record [`simulate`] gives
/// for its spec alone (the runs do not interact); sharing only saves the drawing. Specs whose
/// [`shared_workload_key`] differs from the first's are simulated on their own.
pub fn simulate_group(specs: &[RunSpec<'_>]) -> Vec<Result<RunRecord, SimError>> {
    simulate_group_with(specs, &Registry::built_in())
}

/// [`simulate_group`] with the algorithms of `registry` (the series name theirs).
pub fn simulate_group_with(
    specs: &[RunSpec<'_>],
    registry: &Registry,
) -> Vec<Result<RunRecord, SimError>> {
    let Some(first) = specs.first() else {
        return Vec::new();
    };
    let key = shared_workload_key(first);
    let mut results: Vec<Option<Result<RunRecord, SimError>>> = vec![None; specs.len()];
    let mut members = Vec::new();
    for (k, spec) in specs.iter().enumerate() {
        if let Err(e) = spec.config.validate_with(spec.profile, registry) {
            results[k] = Some(Err(e.into()));
        } else if k > 0 && shared_workload_key(spec) != key {
            results[k] = simulate_group_with(std::slice::from_ref(spec), registry).pop();
        } else {
            members.push(k);
        }
    }
    if !members.is_empty() {
        let group: Vec<&RunSpec<'_>> = members.iter().map(|&k| &specs[k]).collect();
        match simulate_members(&group, registry, &mut NoProbe) {
            Ok(records) => {
                for (&k, record) in members.iter().zip(records) {
                    results[k] = Some(Ok(record));
                }
            }
            Err(e) => {
                for &k in &members {
                    results[k] = Some(Err(e.clone()));
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.expect("every spec has a result"))
        .collect()
}

/// The shared pass of [`simulate_group`] over validated specs with one workload key.
fn simulate_members<P: PhaseProbe>(
    specs: &[&RunSpec<'_>],
    registry: &Registry,
    probe: &mut P,
) -> Result<Vec<RunRecord>, SimError> {
    probe.enter(Phase::Setup);
    let lead = specs[0];
    let config = lead.config;
    let seed = config.seed(lead.run_index);
    let internal = |spec: &RunSpec<'_>, step: u32, detail: String| SimError::Internal {
        series: spec.config.name.clone(),
        run: spec.run_index,
        step,
        detail,
    };

    let (positions, hashes) = positions_and_hashes(config, seed, lead.profile);
    let n0 = config.cluster.classes.len();
    let owners = config.initial_layout.owners(config.tokens, n0);
    let initial_ring = TokenRing::new(positions.clone(), owners).map_err(|e| SimError::Ring {
        series: config.name.clone(),
        run: lead.run_index,
        detail: e.to_string(),
    })?;
    let keys = RunKeys::new(config, &positions, &hashes);
    drop(hashes);
    let mut workload = keys.workload(config, positions.len());
    let mut hot_workload = config
        .hot_keys
        .as_ref()
        .map(|hot| keys.hot_phase_workload(config, hot, &initial_ring));
    drop(keys);
    let mut cluster = Cluster::new(config, lead.profile);

    let mut members = Vec::with_capacity(specs.len());
    for &spec in specs {
        let c = spec.config;
        let mut arms = Vec::with_capacity(c.algorithms.len());
        for name in &c.algorithms {
            let algorithm = registry.get(name).ok_or_else(|| {
                internal(spec, 0, format!("algorithm {name:?} is not registered"))
            })?;
            arms.push(
                Arm::new(name, algorithm, c, initial_ring.clone())
                    .map_err(|e| internal(spec, 0, e.to_string()))?,
            );
        }
        let distortion = c.noise.distortion();
        let gauss = if distortion.uses_gauss() {
            Some(Normal::new(0.0, distortion.sigma).map_err(|e| internal(spec, 0, e.to_string()))?)
        } else {
            None
        };
        members.push(Member {
            spec,
            seed,
            arms,
            noise_rng: stream(seed, Stream::Noise),
            gauss,
            p_miss: distortion.uses_missing().then_some(distortion.p_miss),
            gauss_draws: Vec::new(),
            missing_draws: Vec::new(),
            scatter: ScatterDraws::new(&c.readings, n0, seed),
        });
    }

    let mut request_rng = stream(seed, Stream::Requests);
    // An algorithm with its own routing, and the per-token telemetry of an algorithm that
    // observes per-token loads, read the step's counts unpacked; every other arm routes the
    // packed words.
    let any_forwarding = members.iter().any(|m| {
        m.arms
            .iter()
            .any(|a| a.forwarding.is_some() || a.token_load_need == TokenLoadNeed::Observed)
    });
    let unpacked_len = if any_forwarding { config.tokens } else { 0 };
    let mut token_requests = vec![0u64; unpacked_len];
    let mut token_writes = vec![0u64; unpacked_len];
    let mut packed = vec![0u64; config.tokens];
    let mut reference = route::Reference::new(&initial_ring);
    let mut scratch = Vec::new();
    let v_min = config.ach.v_min;
    // The Oracle's full knowledge, computed only when some arm asks for it.
    let wants_expected = members
        .iter()
        .flat_map(|m| &m.arms)
        .any(|arm| arm.token_load_need == TokenLoadNeed::ExpectedWork);
    let mut expected = Vec::new();

    for t in 0..config.steps {
        probe.enter(Phase::Events);
        for member in &mut members {
            for arm in &mut member.arms {
                arm.switch_ended_jobs(t)
                    .map_err(|e| internal(member.spec, t, e.to_string()))?;
            }
        }
        let mut all_arms: ArmList<&mut Arm> =
            members.iter_mut().flat_map(|m| &mut m.arms).collect();
        if apply_events(config, t, &mut cluster, &mut all_arms) {
            for arm in &mut all_arms {
                arm.needs_check = true;
            }
        }
        let n = cluster.capacity.len();
        probe.enter(Phase::Draw);
        let workload = match (&config.hot_keys, &mut hot_workload) {
            (Some(hot), Some(hot_workload)) if hot.active(t) => hot_workload,
            _ => &mut workload,
        };
        workload.draw_packed(config.load.rate(t), &mut request_rng, &mut packed);
        probe.enter(Phase::Route);
        if any_forwarding {
            // Only an algorithm with its own routing or per-token telemetry reads them unpacked.
            for ((word, r), w) in packed
                .iter()
                .zip(&mut token_requests)
                .zip(&mut token_writes)
            {
                *r = packed_requests(*word);
                *w = packed_writes(*word);
            }
        }
        let mut owner_routed: ArmList<(&TokenRing, &mut ArmRoute)> = all_arms
            .iter_mut()
            .filter(|arm| arm.forwarding.is_none())
            .map(|arm| (&arm.ring, &mut arm.route))
            .collect();
        route::route(&mut reference, &mut owner_routed, &packed, n);
        drop(owner_routed);
        drop(all_arms);
        if wants_expected {
            expected_work(config, t, workload.token_probability(), &mut expected);
        }
        let requests = StepRequests {
            requests_per_token: &token_requests,
            writes_per_token: &token_writes,
            expected_work: &expected,
        };
        for member in &mut members {
            // One set of telemetry draws per step, shared by every algorithm of the run.
            probe.enter(Phase::Telemetry);
            member.draw_noise(n);
            let draws = StepDraws {
                gauss: member.gauss.as_ref().map(|_| member.gauss_draws.as_slice()),
                missing: member.p_miss.map(|_| member.missing_draws.as_slice()),
            };
            let deviations = match &mut member.scatter {
                Some(scatter) => {
                    scatter.advance();
                    scatter.deviations()
                }
                None => &[],
            };
            for (index, arm) in member.arms.iter_mut().enumerate() {
                arm.step(
                    t,
                    &cluster,
                    &requests,
                    &draws,
                    deviations,
                    v_min,
                    &mut scratch,
                    probe,
                    index,
                )
                .map_err(|e| internal(member.spec, t, e.to_string()))?;
            }
        }
    }

    probe.enter(Phase::Records);
    Ok(members.into_iter().map(Member::into_record).collect())
}

/// The token positions (sorted) and the key hashes of a run with seed `seed` (spec section 2,
/// the coupling quirk in the paper profile: the first keys' hashes are the positions).
pub(crate) fn positions_and_hashes(
    config: &SeriesConfig,
    seed: u64,
    profile: Profile,
) -> (Vec<f64>, Vec<f64>) {
    let mut ring_rng = stream(seed, Stream::Ring);
    match profile {
        Profile::Paper => {
            let hashes: Vec<f64> = (0..config.keys).map(|_| ring_rng.random()).collect();
            let mut positions = hashes[..config.tokens].to_vec();
            positions.sort_by(f64::total_cmp);
            (positions, hashes)
        }
        Profile::Corrected => {
            let mut positions: Vec<f64> = (0..config.tokens).map(|_| ring_rng.random()).collect();
            positions.sort_by(f64::total_cmp);
            let mut key_rng = stream(seed, Stream::Keys);
            let hashes: Vec<f64> = (0..config.keys).map(|_| key_rng.random()).collect();
            (positions, hashes)
        }
    }
}

/// This step's per-token counts, for an algorithm with its own routing.
struct StepRequests<'a> {
    /// Requests (reads and writes) per token.
    requests_per_token: &'a [u64],
    /// Writes per token.
    writes_per_token: &'a [u64],
    /// Every token's expected work of the next step, when some arm asks for it (else empty).
    expected_work: &'a [f64],
}

impl Member<'_> {
    /// Draws this step's Gaussian deltas and missing-data mask for `n` nodes.
    fn draw_noise(&mut self, n: usize) {
        if let Some(normal) = &self.gauss {
            let rng = &mut self.noise_rng;
            self.gauss_draws.clear();
            self.gauss_draws.extend(
                (0..n).map(|_| [normal.sample(rng), normal.sample(rng), normal.sample(rng)]),
            );
        }
        if let Some(p) = self.p_miss {
            let rng = &mut self.noise_rng;
            self.missing_draws.clear();
            self.missing_draws.extend((0..n).map(|_| {
                [
                    rng.random::<f64>() < p,
                    rng.random::<f64>() < p,
                    rng.random::<f64>() < p,
                ]
            }));
        }
    }

    fn into_record(self) -> RunRecord {
        let config = self.spec.config;
        let warmup = config.warmup as usize;
        let algorithms = config
            .algorithms
            .iter()
            .zip(self.arms)
            .map(|(name, arm)| {
                let mut aggregates =
                    Aggregates::of(&arm.d, &arm.d_true, &arm.m, warmup, arm.n_violations);
                aggregates.cv_true_mean = arm
                    .cv_true
                    .as_deref()
                    .map(|cv| mean_after_warmup(cv, warmup));
                aggregates.forwarded_fraction = arm
                    .forwarding
                    .as_ref()
                    .map(|f| forwarded_fraction(&f.forwarded, &f.requests, warmup));
                AlgorithmRecord {
                    name: name.clone(),
                    aggregates,
                    d_trace: arm.d,
                    d_true_trace: arm.d_true,
                    m_trace: arm.m,
                    violations: arm.violations,
                }
            })
            .collect();
        RunRecord {
            series: config.name.clone(),
            point: self.spec.point.cloned(),
            run_index: self.spec.run_index,
            seed: self.seed,
            profile: self.spec.profile,
            fingerprint: crate::record::fingerprint(config, self.spec.profile),
            algorithms,
        }
    }
}

impl Arm {
    /// One step of this arm once its requests are routed ([`route::route`]): telemetry, plan, commit,
    /// metrics, invariants; `deviations` are the readings' deviations from their lines this
    /// step (empty when none scatter), `probe` is told each phase, `index` is the arm's
    /// algorithm's.
    #[allow(clippy::too_many_arguments)] // The step's inputs, one each; a struct would only wrap them.
    fn step<P: PhaseProbe>(
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
        let n = cluster.capacity.len();
        probe.enter(Phase::Telemetry);
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
            // The model's routing, summed by `route::route`: every request to its token's owner.
            self.requests.clear();
            self.requests
                .extend(self.route.sums.iter().map(|&p| packed_requests(p)));
            self.writes.clear();
            self.writes
                .extend(self.route.sums.iter().map(|&p| packed_writes(p)));
        }
        raw_metrics_for_cluster(
            &self.requests,
            &self.writes,
            &cluster.service_rate,
            &mut self.raw,
        )?;
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
        let alpha = self.telemetry.config().alpha;
        let mut observed = self.telemetry.observe(&self.raw, draws)?;
        if let Some(readings) = &self.readings {
            // What the algorithm reads of each node, off its line by the node's deviation (a
            // joining node reads its load).
            self.read_loads.clear();
            self.read_loads
                .extend(observed.loads.iter().enumerate().map(|(i, &load)| {
                    let reading = readings
                        .get(i)
                        .unwrap_or(&crate::reading::NodeReading::IDENTITY);
                    reading.read(load) + deviations.get(i).copied().unwrap_or(0.0)
                }));
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
        if let Some(pacer) = &mut self.pacer {
            // A paced plan switches job by job ([`Arm::switch_ended_jobs`]).
            pacer.schedule(t, &plan, &self.ring);
        } else {
            // The plan's `M_keys` is what the run records: the ring need not measure it again.
            self.ring.apply_unmeasured(&plan.moves)?;
            // A simulated switch is instantaneous: the plan is confirmed as soon as it is
            // committed.
            self.balancer.confirm(&plan)?;
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
        self.check_invariants(t, cluster, v_min, probe)
    }

    /// Switches the moves of the paced jobs that have ended before step `t`'s requests are
    /// routed, and tells the algorithm (nothing for an arm that is not paced).
    fn switch_ended_jobs(&mut self, t: u32) -> Result<(), ArmError> {
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

/// Applies the scenario events of step `t`; returns true if any happened.
fn apply_events(
    config: &SeriesConfig,
    t: u32,
    cluster: &mut Cluster,
    arms: &mut [&mut Arm],
) -> bool {
    let mut happened = false;
    for d in config.degradation.iter().filter(|d| d.t == t) {
        for &node in &d.nodes {
            let i = node as usize;
            cluster.capacity[i] *= d.factor;
            cluster.service_rate[i] *= d.factor;
        }
        happened = true;
    }
    for churn in config.churn.iter().filter(|c| c.t == t) {
        for &node in &churn.remove {
            remove_node(NodeId(node), cluster, arms);
        }
        for class in &churn.add {
            join_node(class.capacity(), config, cluster, arms);
        }
        happened = true;
    }
    happened
}

/// Removes a node (spec section 7 for the paper profile, section 9 for the corrected one).
fn remove_node(node: NodeId, cluster: &mut Cluster, arms: &mut [&mut Arm]) {
    let profile = cluster.profile;
    let i = node.index();
    cluster.capacity[i] = 0.0;
    cluster.service_rate[i] = 0.0;
    cluster.member[i] = false;
    if profile == Profile::Corrected {
        cluster.usable[i] = false;
    }
    // The paper hands every token to node 0; the corrected profile to the next live owner
    // clockwise (classic consistent hashing), the ring's own rules for a leave.
    let rule = match profile {
        Profile::Paper => LeaveRule::AllTo(NodeId(0)),
        Profile::Corrected => LeaveRule::NextLiveClockwise {
            live: &cluster.member,
        },
    };
    for arm in arms {
        let moves = arm.ring.leave_moves(node, rule);
        arm.ring
            .apply(&moves)
            .expect("moves are built from the ring's own owners");
    }
}

/// A node joins: it gets `v_min` tokens, the lowest-indexed tokens of the node that owns the
/// most (ties: lower id), if that node owns more than `v_min`.
fn join_node(capacity: f64, config: &SeriesConfig, cluster: &mut Cluster, arms: &mut [&mut Arm]) {
    let new = NodeId(cluster.capacity.len() as u32);
    cluster.capacity.push(capacity);
    cluster.service_rate.push(capacity * config.cluster.mu_base);
    cluster.member.push(true);
    cluster.usable.push(true);
    let n = cluster.capacity.len();
    let v_min = config.ach.v_min;
    for arm in arms {
        let moves = arm
            .ring
            .join_moves(new, JoinRule::FromLargestOwner { n_nodes: n, v_min });
        arm.ring
            .apply(&moves)
            .expect("moves are built from the ring's own owners");
        arm.telemetry.resize(n);
        if let Some(truth) = &mut arm.truth {
            truth.resize(n);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
