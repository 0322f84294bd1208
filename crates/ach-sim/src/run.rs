//! One run: a scenario driven step by step through every algorithm (spec sections 2, 5, 6).

use ach_control::TokenLoadNeed;
use ach_ring::{JoinRule, LeaveRule, NodeId, TokenRing};
use ach_telemetry::{Metrics, StepDraws};
use rand::Rng;
use rand_distr::{Distribution, Normal};

use crate::algorithms::Registry;
use crate::config::{Profile, SeriesConfig, SweepPoint};
use crate::keys::RunKeys;
use crate::phases::{NoProbe, Phase, PhaseProbe};
use crate::reading::ScatterDraws;
use crate::record::RunRecord;
use crate::streams::{Stream, stream};
use crate::token_loads::expected_work;
use crate::workload::{packed_requests, packed_writes};
use route::ArmRoute;

/// A list with an entry per arm of a step (or fewer), on the stack: a run has a handful of
/// arms, and the lists are made at every step.
type ArmList<T> = smallvec::SmallVec<[T; 8]>;

mod arm;
mod route;

use arm::{Arm, StepRequests};

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
    let mut members = specs
        .iter()
        .map(|&spec| Member::new(spec, registry, seed, &initial_ring))
        .collect::<Result<Vec<_>, _>>()?;
    let mut request_rng = stream(seed, Stream::Requests);
    let mut counts = StepCounts::new(config, &members, &initial_ring);
    let mut scratch = Vec::new();

    for t in 0..config.steps {
        probe.enter(Phase::Events);
        step_events(config, t, &mut cluster, &mut members)?;
        let n = cluster.capacity.len();
        probe.enter(Phase::Draw);
        let workload = match (&config.hot_keys, &mut hot_workload) {
            (Some(hot), Some(hot_workload)) if hot.active(t) => hot_workload,
            _ => &mut workload,
        };
        workload.draw_packed(config.load.rate(t), &mut request_rng, &mut counts.packed);
        probe.enter(Phase::Route);
        counts.route(&mut members, n);
        if counts.wants_expected {
            expected_work(
                config,
                t,
                workload.token_probability(),
                &mut counts.expected,
            );
        }
        let requests = counts.requests();
        for member in &mut members {
            member.step(t, &cluster, &requests, &mut scratch, probe)?;
        }
    }

    probe.enter(Phase::Records);
    Ok(members.into_iter().map(Member::into_record).collect())
}

/// A run's failure at step `step` of `spec`, a bug: what failed, in `detail`.
fn internal(spec: &RunSpec<'_>, step: u32, detail: String) -> SimError {
    SimError::Internal {
        series: spec.config.name.clone(),
        run: spec.run_index,
        step,
        detail,
    }
}

/// Step `t`'s events: the paced jobs that ended switch, then the scenario's degradations and
/// churn change the cluster and every arm's ring.
fn step_events(
    config: &SeriesConfig,
    t: u32,
    cluster: &mut Cluster,
    members: &mut [Member<'_>],
) -> Result<(), SimError> {
    for member in members.iter_mut() {
        for arm in &mut member.arms {
            arm.switch_ended_jobs(t)
                .map_err(|e| internal(member.spec, t, e.to_string()))?;
        }
    }
    let mut all_arms: ArmList<&mut Arm> = members.iter_mut().flat_map(|m| &mut m.arms).collect();
    if apply_events(config, t, cluster, &mut all_arms) {
        for arm in &mut all_arms {
            arm.needs_check = true;
        }
    }
    Ok(())
}

/// The step's per-token counts, shared by every arm of the group, and each arm's routing of
/// them.
struct StepCounts {
    /// Every token's packed requests and writes ([`crate::workload::pack`]).
    packed: Vec<u64>,
    /// The same unpacked, when some arm reads them so (else empty).
    token_requests: Vec<u64>,
    token_writes: Vec<u64>,
    /// The routing of the initial ring, which the arms near it start from.
    reference: route::Reference,
    /// Whether some arm asks for the Oracle's knowledge, and that knowledge of the step.
    wants_expected: bool,
    expected: Vec<f64>,
}

impl StepCounts {
    /// The counts of a run of `config` whose arms start from `initial_ring`.
    fn new(config: &SeriesConfig, members: &[Member<'_>], initial_ring: &TokenRing) -> StepCounts {
        let arms = || members.iter().flat_map(|m| &m.arms);
        // An algorithm with its own routing, and the per-token telemetry of an algorithm that
        // observes per-token loads, read the step's counts unpacked; every other arm routes the
        // packed words.
        let unpacked =
            arms().any(|a| a.routes_its_own_way() || a.token_load_need == TokenLoadNeed::Observed);
        let unpacked_len = if unpacked { config.tokens } else { 0 };
        StepCounts {
            packed: vec![0; config.tokens],
            token_requests: vec![0; unpacked_len],
            token_writes: vec![0; unpacked_len],
            reference: route::Reference::new(initial_ring),
            // The Oracle's full knowledge, computed only when some arm asks for it.
            wants_expected: arms().any(|arm| arm.token_load_need == TokenLoadNeed::ExpectedWork),
            expected: Vec::new(),
        }
    }

    /// Routes the step's counts to the owners of every arm that routes by owner, over `n`
    /// nodes, and unpacks them for the others.
    #[inline(always)]
    fn route(&mut self, members: &mut [Member<'_>], n: usize) {
        // Only an algorithm with its own routing or per-token telemetry reads them unpacked.
        for ((word, r), w) in self
            .packed
            .iter()
            .zip(&mut self.token_requests)
            .zip(&mut self.token_writes)
        {
            *r = packed_requests(*word);
            *w = packed_writes(*word);
        }
        let mut owner_routed: ArmList<(&TokenRing, &mut ArmRoute)> = members
            .iter_mut()
            .flat_map(|m| &mut m.arms)
            .filter(|arm| !arm.routes_its_own_way())
            .map(|arm| (&arm.ring, &mut arm.route))
            .collect();
        route::route(&mut self.reference, &mut owner_routed, &self.packed, n);
    }

    /// The counts as an algorithm with its own routing reads them.
    fn requests(&self) -> StepRequests<'_> {
        StepRequests {
            requests_per_token: &self.token_requests,
            writes_per_token: &self.token_writes,
            expected_work: &self.expected,
        }
    }
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

impl<'a> Member<'a> {
    /// The run of `spec` in a group: its arms, each on a copy of `initial_ring`, and its own
    /// telemetry noise.
    fn new(
        spec: &'a RunSpec<'a>,
        registry: &Registry,
        seed: u64,
        initial_ring: &TokenRing,
    ) -> Result<Member<'a>, SimError> {
        let c = spec.config;
        let n0 = c.cluster.classes.len();
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
        Ok(Member {
            spec,
            seed,
            arms,
            noise_rng: stream(seed, Stream::Noise),
            gauss,
            p_miss: distortion.uses_missing().then_some(distortion.p_miss),
            gauss_draws: Vec::new(),
            missing_draws: Vec::new(),
            scatter: ScatterDraws::new(&c.readings, n0, seed),
        })
    }

    /// Step `t` of every arm of this run once the requests are routed, with one set of
    /// telemetry draws shared by all of them.
    fn step<P: PhaseProbe>(
        &mut self,
        t: u32,
        cluster: &Cluster,
        requests: &StepRequests<'_>,
        scratch: &mut Vec<f64>,
        probe: &mut P,
    ) -> Result<(), SimError> {
        let n = cluster.capacity.len();
        probe.enter(Phase::Telemetry);
        self.draw_noise(n);
        let draws = StepDraws {
            gauss: self.gauss.as_ref().map(|_| self.gauss_draws.as_slice()),
            missing: self.p_miss.map(|_| self.missing_draws.as_slice()),
        };
        let deviations = match &mut self.scatter {
            Some(scatter) => {
                scatter.advance();
                scatter.deviations()
            }
            None => &[],
        };
        let v_min = self.spec.config.ach.v_min;
        for (index, arm) in self.arms.iter_mut().enumerate() {
            arm.step(
                t, cluster, requests, &draws, deviations, v_min, scratch, probe, index,
            )
            .map_err(|e| internal(self.spec, t, e.to_string()))?;
        }
        Ok(())
    }
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
            .map(|(name, arm)| arm.into_record(name, warmup))
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
        arm.leave(node, rule);
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
        arm.join(new, JoinRule::FromLargestOwner { n_nodes: n, v_min }, n);
    }
}

#[cfg(test)]
pub(crate) mod tests;
