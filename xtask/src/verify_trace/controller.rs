//! Replay of recorded controller traces: one algorithm on one run, step by step.

use ach_baselines::catalogue::{Catalogue, Context, names};
use ach_control::{Ach, AchConfig, Balancer, Observation, Plan, commit};
use ach_ring::{NodeId, TokenMove, TokenRing};
use serde::Deserialize;

use super::{Divergence, Verdict, compare_value};

/// A recorded controller trace (format: `shared/golden/README.md`).
#[derive(Debug, Deserialize)]
pub struct ControllerTrace {
    /// Which algorithm was recorded: `Static-W`, `Static-Wt`, `Dynamic-R`, `Bounded-Loads`, `ACH`.
    pub algorithm: String,
    /// Series, seed and configuration of the run.
    pub params: Params,
    /// Sorted token positions.
    pub positions: Vec<f64>,
    /// Owner of every token before step 0.
    pub initial_assignment: Vec<u32>,
    /// One entry per step.
    pub steps: Vec<Step>,
}

/// The run's parameters as recorded.
#[derive(Debug, Deserialize)]
pub struct Params {
    /// Series name.
    pub series: String,
    /// Seed of the run.
    pub seed: u64,
    /// The series configuration (only the fields replay needs are read).
    pub config: RecordedConfig,
}

/// The parts of the recorded configuration that replay needs.
#[derive(Debug, Deserialize)]
pub struct RecordedConfig {
    /// Capacities of the initial cluster (A1 needs them).
    pub capacities: Vec<f64>,
    /// ACH parameters.
    pub ach: RecordedAch,
}

/// ACH parameters with the names of the published simulation.
#[derive(Debug, Deserialize)]
#[allow(non_snake_case)]
pub struct RecordedAch {
    ell_star: f64,
    eps_on: f64,
    eps_off: f64,
    tau: f64,
    tau_min: f64,
    kappa: f64,
    M_max: f64,
    M_H: f64,
    H: usize,
    v_min: usize,
}

/// One recorded step.
#[derive(Debug, Deserialize)]
pub struct Step {
    /// Step index.
    pub t: usize,
    /// Number of nodes this step.
    pub n_nodes: usize,
    /// Owner changes made by the scenario before this step, `[token, node]`.
    pub edits: Vec<(usize, u32)>,
    /// The observed load vector.
    pub ell: Vec<f64>,
    /// The observed total load.
    pub total_load: f64,
    /// Owner changes made by the algorithm, `[token, from, to]`.
    pub moves: Vec<(usize, u32, u32)>,
    /// `M_keys` the algorithm reported.
    pub m_keys: f64,
    /// ACH only: intensity after the step.
    #[serde(rename = "C")]
    pub c: Option<f64>,
    /// ACH only: budget after the step.
    pub m: Option<f64>,
    /// ACH only: hysteresis states after the step.
    pub sigma: Option<Vec<i8>>,
}

impl ControllerTrace {
    /// A short description: algorithm, series and seed.
    pub fn describe(&self) -> String {
        format!(
            "controller {} {} seed {}",
            self.params.series, self.algorithm, self.params.seed
        )
    }
}

/// The algorithm under replay: ACH is kept concrete so its internals can be compared.
enum Algorithm {
    Ach(Box<Ach>),
    Other(Box<dyn Balancer + Send>),
}

fn algorithm(trace: &ControllerTrace) -> Result<Algorithm, Divergence> {
    let setup_error = |what: &str, got: String| {
        Divergence::new(0, what, "a known algorithm with valid parameters", got)
    };
    let catalogue = Catalogue::built_in();
    let entry = catalogue
        .get(&trace.algorithm)
        .filter(|entry| !entry.routes())
        .ok_or_else(|| setup_error("algorithm", trace.algorithm.clone()))?;
    let a = &trace.params.config.ach;
    let config = AchConfig {
        ell_star: a.ell_star,
        eps_on: a.eps_on,
        eps_off: a.eps_off,
        tau: a.tau,
        tau_min: a.tau_min,
        kappa: a.kappa,
        m_max: a.M_max,
        m_horizon: a.M_H,
        horizon: a.H,
        v_min: a.v_min,
        ..AchConfig::paper()
    };
    if entry.name() == names::ACH {
        let ach = Ach::new(config).map_err(|e| setup_error("params.config.ach", e.to_string()))?;
        return Ok(Algorithm::Ach(Box::new(ach)));
    }
    let context = Context::new(&trace.params.config.capacities, &config);
    let balancer = entry
        .balancer(&context)
        .map_err(|e| setup_error("algorithm", e.to_string()))?;
    Ok(Algorithm::Other(balancer))
}

/// Replays the trace through this project's algorithm and ring.
pub fn replay(trace: &ControllerTrace) -> Verdict {
    let owners = trace
        .initial_assignment
        .iter()
        .map(|&o| NodeId(o))
        .collect();
    let mut ring = TokenRing::new(trace.positions.clone(), owners).map_err(|e| {
        Divergence::new(
            0,
            "positions / initial_assignment",
            "a valid ring",
            e.to_string(),
        )
    })?;
    let mut algorithm = algorithm(trace)?;
    let mut live = Vec::new();
    for step in &trace.steps {
        let t = step.t;
        apply_edits(&mut ring, step)?;
        if step.ell.len() != step.n_nodes {
            return Err(Divergence::new(
                t,
                "ell",
                format!("{} loads", step.n_nodes),
                format!("{} loads", step.ell.len()),
            ));
        }
        live.resize(step.n_nodes, true);
        let observation = Observation {
            step: t as u64,
            loads: &step.ell,
            total_load: step.total_load,
            live: &live,
            token_loads: None,
        };
        let plan: Plan = match &mut algorithm {
            Algorithm::Ach(ach) => ach.plan(&ring, &observation),
            Algorithm::Other(balancer) => balancer.plan(&ring, &observation),
        };
        compare_moves(step, &plan)?;
        compare_value(t, "m_keys", step.m_keys, plan.m_keys)?;
        if let Algorithm::Ach(ach) = &algorithm {
            compare_ach(step, ach, &plan)?;
        }
        commit(&mut ring, &plan)
            .map_err(|e| Divergence::new(t, "commit", "applicable moves", e.to_string()))?;
        // The recorded simulation switched every plan at once: confirm it, as the simulator does.
        let confirmed = match &mut algorithm {
            Algorithm::Ach(ach) => ach.confirm(&plan),
            Algorithm::Other(balancer) => balancer.confirm(&plan),
        };
        confirmed
            .map_err(|e| Divergence::new(t, "confirm", "the plan just made", e.to_string()))?;
    }
    Ok(trace.steps.len())
}

/// The step's recorded edits of the ring, made before it is observed.
fn apply_edits(ring: &mut TokenRing, step: &Step) -> Result<(), Divergence> {
    for &(token, node) in &step.edits {
        if token >= ring.len() {
            return Err(Divergence::new(
                step.t,
                "edits",
                format!("a token below {}", ring.len()),
                token.to_string(),
            ));
        }
        let edit = TokenMove {
            token,
            from: ring.owner(token),
            to: NodeId(node),
        };
        ring.apply(&[edit])
            .map_err(|e| Divergence::new(step.t, "edits", "applicable edits", e.to_string()))?;
    }
    Ok(())
}

/// The plan's moves against the recorded ones, in token order.
fn compare_moves(step: &Step, plan: &Plan) -> Result<(), Divergence> {
    let mut expected_moves = step.moves.clone();
    expected_moves.sort_unstable();
    let got_moves: Vec<(usize, u32, u32)> = plan
        .moves
        .iter()
        .map(|mv| (mv.token, mv.from.0, mv.to.0))
        .collect();
    if got_moves != expected_moves {
        return Err(Divergence::new(
            step.t,
            "moves",
            format!("{expected_moves:?}"),
            format!("{got_moves:?}"),
        ));
    }
    Ok(())
}

/// ACH's intensity, budget and hysteresis against the recorded ones (where the trace has
/// them), and its budget invariant.
fn compare_ach(step: &Step, ach: &Ach, plan: &Plan) -> Result<(), Divergence> {
    let t = step.t;
    let last = ach.last_step();
    if let Some(c) = step.c {
        compare_value(t, "C", c, last.intensity.c)?;
    }
    if let Some(m) = step.m {
        compare_value(t, "m", m, last.budget)?;
    }
    if let Some(sigma) = &step.sigma
        && sigma.as_slice() != ach.hysteresis()
    {
        return Err(Divergence::new(
            t,
            "sigma",
            format!("{sigma:?}"),
            format!("{:?}", ach.hysteresis()),
        ));
    }
    if !plan.within_budget() {
        return Err(Divergence::new(
            t,
            "budget invariant",
            format!("M_keys <= {:?}", last.bound),
            format!("{:?}", plan.m_keys),
        ));
    }
    Ok(())
}
