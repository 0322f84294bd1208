//! Properties of the ring, the ACH controller and the four baselines over random inputs.
//!
//! Every case builds a random ring (random positions and owners) and runs a random sequence of
//! control steps (random load vectors, total loads and live sets, including loads that are
//! negative, infinite or NaN), committing each plan. After every step:
//!
//! * nothing panicked, and `commit` succeeded;
//! * the plan's `M_keys` equals the change the ring measures, and the change computed from
//!   the owners before and after;
//! * the plan moves each token at most once, in token order, between valid node ids, and never
//!   from or to a node that is not live (nor changes what such a node owns);
//! * the ring's structural invariants hold (arcs sum to 1, valid owners, sorted positions,
//!   positive arcs), and every live node that had at least `v_min` tokens still has them;
//! * ACH's plan respects its budget bound (`Plan::within_budget`) and ACH counts no violation.
//!
//! The ring is also checked on its own: random move lists (valid and invalid) are applied and
//! compared with a plain model, lookups agree with the reference binary search, and random
//! position lists are accepted exactly when they are valid. ACH configurations, valid or not,
//! are accepted exactly when they validate.
//!
//! The cases add up to 12 500 (see each `with_cases`); small rings (20 to 200 tokens) keep the
//! whole file to a few seconds.

use ach_baselines::{BoundedLoads, DynamicR, StaticW, StaticWt, V_MIN};
use ach_control::{Ach, AchConfig, Balancer, Observation, Plan, commit};
use ach_ring::{InvariantCheck, NodeId, RingError, TokenMove, TokenRing};
use proptest::prelude::*;

/// One control step: the load of every node, the total load and which nodes are live.
#[derive(Clone, Debug)]
struct Step {
    loads: Vec<f64>,
    total_load: f64,
    live: Vec<bool>,
}

/// A random ring and a random sequence of steps over its nodes.
#[derive(Clone, Debug)]
struct Scenario {
    n_nodes: usize,
    positions: Vec<f64>,
    owners: Vec<NodeId>,
    steps: Vec<Step>,
}

impl Scenario {
    fn ring(&self) -> TokenRing {
        TokenRing::new(self.positions.clone(), self.owners.clone())
            .expect("generated positions are strictly increasing in [0, 1)")
    }
}

/// A load: mostly an ordinary value around the target, sometimes a value no telemetry should
/// produce but a caller can pass.
fn load() -> impl Strategy<Value = f64> {
    prop_oneof![
        20 => 0.0f64..1.5,
        1 => prop::sample::select(vec![
            0.0,
            -0.5,
            1e9,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            0.65,
        ]),
    ]
}

/// Strictly increasing positions in `[0, 1)`: distinct 32-bit values scaled by `2^-32`.
fn positions(tokens: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::btree_set(any::<u32>(), tokens).prop_map(|set| {
        set.into_iter()
            .map(|x| f64::from(x) / 4_294_967_296.0)
            .collect()
    })
}

fn step(n_nodes: usize) -> impl Strategy<Value = Step> {
    (
        prop::collection::vec(load(), n_nodes),
        load(),
        // Live nodes: mostly all of them, sometimes a random subset (possibly empty).
        prop_oneof![
            3 => Just(vec![true; n_nodes]),
            1 => prop::collection::vec(any::<bool>(), n_nodes),
        ],
    )
        .prop_map(|(loads, total_load, live)| Step {
            loads,
            total_load,
            live,
        })
}

fn scenario(max_steps: usize) -> impl Strategy<Value = Scenario> {
    (1usize..=10, 20usize..=200)
        .prop_flat_map(move |(n_nodes, tokens)| {
            (
                Just(n_nodes),
                positions(tokens),
                // Owners: round-robin (every node above v_min) or random (some may be below).
                prop_oneof![
                    Just((0..tokens).map(|s| NodeId((s % n_nodes) as u32)).collect()),
                    prop::collection::vec((0..n_nodes as u32).prop_map(NodeId), tokens),
                ],
                prop::collection::vec(step(n_nodes), 1..=max_steps),
            )
        })
        .prop_map(|(n_nodes, positions, owners, steps)| Scenario {
            n_nodes,
            positions,
            owners,
            steps,
        })
}

/// A valid ACH configuration around the paper's, `v_min` from 0 to 4, `v_max` sometimes set.
fn valid_ach_config() -> impl Strategy<Value = AchConfig> {
    (
        (0.05f64..0.95, 0.005f64..0.4, 0.01f64..0.99),
        (0.0f64..0.95, 0.001f64..0.6, 0.001f64..1.0),
        (0.0001f64..0.3, 0.001f64..2.0, 1usize..200),
        (0usize..=4, prop::option::of(0usize..=60)),
    )
        .prop_map(
            |(
                (ell_star, eps_on, off_ratio),
                (tau_min, tau_gap, kappa),
                (m_max, m_horizon, horizon),
                (v_min, v_max_extra),
            )| AchConfig {
                ell_star,
                eps_on,
                eps_off: eps_on * off_ratio,
                tau: tau_min + tau_gap,
                tau_min,
                kappa,
                m_max,
                m_horizon,
                horizon,
                v_min,
                v_max: v_max_extra.map(|extra| v_min + extra),
                ..AchConfig::paper()
            },
        )
}

/// Any configuration, valid or not: every field drawn from a set of ordinary and broken values.
fn any_ach_config() -> impl Strategy<Value = AchConfig> {
    let number = || {
        prop_oneof![
            4 => -0.5f64..1.5,
            1 => prop::sample::select(vec![0.0, 1.0, -0.0, f64::NAN, f64::INFINITY, -1e300]),
        ]
    };
    (
        (number(), number(), number(), number()),
        (number(), number(), number(), number()),
        (0usize..5, 0usize..6, prop::option::of(0usize..6)),
    )
        .prop_map(
            |(
                (ell_star, eps_on, eps_off, tau),
                (tau_min, kappa, m_max, m_horizon),
                (horizon, v_min, v_max),
            )| AchConfig {
                ell_star,
                eps_on,
                eps_off,
                tau,
                tau_min,
                kappa,
                m_max,
                m_horizon,
                horizon,
                v_min,
                v_max,
                ..AchConfig::live()
            },
        )
}

/// Capacities of the simulation's node classes (strong, medium, weak).
fn class_capacities(n_nodes: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(prop::sample::select(vec![1.0, 0.55, 0.25]), n_nodes)
}

/// What the checks of one step need to know about the algorithm.
#[derive(Clone, Copy)]
struct Rules {
    /// Minimum tokens a mover keeps on a node that has at least that many.
    v_min: usize,
    /// Whether the algorithm must leave nodes that are not live alone (A1 does not look at
    /// liveness: it sets the initial cluster's owners once).
    respects_liveness: bool,
}

/// Commits `plan` to `ring` and checks every property of one step; returns a description of
/// the first broken one.
fn commit_and_check(
    ring: &mut TokenRing,
    plan: &Plan,
    step: &Step,
    n_nodes: usize,
    rules: Rules,
) -> Result<(), TestCaseError> {
    let before = ring.clone();
    let counts_before = before.counts(n_nodes);
    for pair in plan.moves.windows(2) {
        prop_assert!(
            pair[0].token < pair[1].token,
            "moves not sorted by token or a token moved twice: {:?}",
            pair
        );
    }
    for mv in &plan.moves {
        prop_assert!(mv.to.index() < n_nodes, "move to an unknown node: {:?}", mv);
        if rules.respects_liveness {
            prop_assert!(
                step.live[mv.from.index()] && step.live[mv.to.index()],
                "move from or to a node that is not live: {:?}, live {:?}",
                mv,
                step.live
            );
        }
    }
    let measured = match commit(ring, plan) {
        Ok(measured) => measured,
        Err(error) => return Err(TestCaseError::fail(format!("commit failed: {error}"))),
    };
    let from_owners = before.m_keys_to(ring.owners());
    prop_assert!(
        (plan.m_keys - measured).abs() <= 1e-12 && (measured - from_owners).abs() <= 1e-12,
        "M_keys of the plan {} != measured {} (owners say {})",
        plan.m_keys,
        measured,
        from_owners
    );
    prop_assert!(
        plan.within_budget(),
        "budget broken: M_keys {} > bound {:?}",
        plan.m_keys,
        plan.budget_bound
    );
    let structural = ring.check_invariants(&InvariantCheck {
        n_nodes,
        live: &step.live,
        v_min: 0,
    });
    prop_assert!(structural.is_empty(), "ring invariants: {:?}", structural);
    let counts_after = ring.counts(n_nodes);
    for node in 0..n_nodes {
        if step.live[node] {
            prop_assert!(
                counts_after[node] >= counts_before[node].min(rules.v_min),
                "live node {} went from {} to {} tokens, below v_min = {}",
                node,
                counts_before[node],
                counts_after[node],
                rules.v_min
            );
        } else if rules.respects_liveness {
            prop_assert_eq!(
                counts_after[node],
                counts_before[node],
                "node {} is not live but its tokens changed",
                node
            );
        }
    }
    Ok(())
}

/// Runs every step of `scenario` through `balancer`, committing each plan.
fn run_steps(
    scenario: &Scenario,
    balancer: &mut dyn Balancer,
    rules: Rules,
) -> Result<TokenRing, TestCaseError> {
    let mut ring = scenario.ring();
    for (t, step) in scenario.steps.iter().enumerate() {
        let observation = Observation {
            step: t as u64,
            loads: &step.loads,
            total_load: step.total_load,
            live: &step.live,
            token_loads: None,
        };
        let plan = balancer.plan(&ring, &observation);
        commit_and_check(&mut ring, &plan, step, scenario.n_nodes, rules)?;
        prop_assert_eq!(balancer.confirm(&plan), Ok(plan.m_keys));
    }
    Ok(ring)
}

/// The model of `TokenRing::apply`: the owners after the moves, or `None` if one is invalid.
fn apply_model(owners: &[NodeId], moves: &[TokenMove]) -> Option<Vec<NodeId>> {
    let mut owners = owners.to_vec();
    for mv in moves {
        if owners.get(mv.token) != Some(&mv.from) {
            return None;
        }
        owners[mv.token] = mv.to;
    }
    Some(owners)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// ACH over random rings, configurations and load sequences.
    #[test]
    fn ach_steps_keep_the_ring_sound_and_the_budget(
        scenario in scenario(8),
        config in valid_ach_config(),
    ) {
        let mut ach = Ach::new(config.clone()).expect("a valid configuration");
        let rules = Rules { v_min: config.v_min, respects_liveness: true };
        run_steps(&scenario, &mut ach, rules)?;
        prop_assert_eq!(ach.budget_violations(), 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A2 Dynamic-R and A3 Bounded-Loads, with the paper's parameters, over random rings and
    /// load sequences.
    #[test]
    fn movers_keep_the_ring_sound_and_v_min(scenario in scenario(8)) {
        let rules = Rules { v_min: V_MIN, respects_liveness: true };
        run_steps(&scenario, &mut DynamicR::paper(), rules)?;
        run_steps(&scenario, &mut BoundedLoads::paper(), rules)?;
    }

    /// A0 never moves; A1 sets the capacity-proportional owners once, exactly its targets.
    #[test]
    fn static_owners_are_set_once(
        (scenario, capacities) in scenario(3).prop_flat_map(|s| {
            let n = s.n_nodes;
            (Just(s), class_capacities(n))
        }),
    ) {
        let before = scenario.ring();
        let rules = Rules { v_min: 0, respects_liveness: false };
        let after = run_steps(&scenario, &mut StaticW, rules)?;
        prop_assert_eq!(after.owners(), before.owners());
        let mut a1 = StaticWt::new(capacities);
        let targets = a1.targets(before.len());
        let after = run_steps(&scenario, &mut a1, rules)?;
        let counts: Vec<i64> = after
            .counts(scenario.n_nodes)
            .into_iter()
            .map(|c| c as i64)
            .collect();
        prop_assert_eq!(counts, targets);
    }

    /// The ring alone: random move lists, valid or not, against a plain model.
    #[test]
    fn ring_moves_match_the_model(
        (ring_positions, n_nodes, owners, moves, hashes) in (20usize..=200, 1usize..=8)
            .prop_flat_map(|(tokens, n_nodes)| {
                let node = move || (0..n_nodes as u32).prop_map(NodeId);
                (
                    positions(tokens),
                    Just(n_nodes),
                    prop::collection::vec(node(), tokens),
                    prop::collection::vec(
                        (0..tokens + 3, node(), node())
                            .prop_map(|(token, from, to)| TokenMove { token, from, to }),
                        0..12,
                    ),
                    prop::collection::vec(
                        prop_oneof![
                            8 => 0.0f64..1.0,
                            1 => prop::sample::select(vec![-1.0, 1.0, 2.0, f64::NAN, 0.0]),
                        ],
                        8,
                    ),
                )
            }),
        repair in any::<bool>(),
    ) {
        let mut ring = TokenRing::new(ring_positions, owners).expect("valid positions");
        // Half of the cases fix every `from` to the owner at that point, so that long valid
        // sequences (including a token moved twice) are common.
        let mut moves = moves;
        if repair {
            let mut model = ring.owners().to_vec();
            for mv in &mut moves {
                if let Some(owner) = model.get(mv.token) {
                    mv.from = *owner;
                    model[mv.token] = mv.to;
                }
            }
        }
        let before = ring.clone();
        let expected = apply_model(before.owners(), &moves);
        match (ring.apply(&moves), expected) {
            (Ok(m_keys), Some(owners)) => {
                prop_assert_eq!(ring.owners(), owners.as_slice());
                let from_owners = before.m_keys_to(ring.owners());
                prop_assert!((m_keys - from_owners).abs() <= 1e-12);
            }
            (Err(error), None) => {
                prop_assert_eq!(&ring, &before, "a failed apply changed the ring ({})", error);
            }
            (result, expected) => {
                return Err(TestCaseError::fail(format!(
                    "apply gave {result:?}, the model {expected:?}"
                )));
            }
        }
        let live = vec![true; n_nodes];
        let violations =
            ring.check_invariants(&InvariantCheck { n_nodes, live: &live, v_min: 0 });
        prop_assert!(violations.is_empty(), "{:?}", violations);
        for h in hashes {
            prop_assert_eq!(ring.lookup(h), ring.lookup_binary_search(h));
        }
    }

    /// Building a ring from any positions gives a ring exactly when they are valid, else a
    /// typed error; never a panic.
    #[test]
    fn ring_construction_accepts_exactly_valid_positions(
        raw_positions in prop::collection::vec(
            prop_oneof![
                8 => 0.0f64..1.0,
                1 => prop::sample::select(vec![-0.0, 1.0, -0.25, f64::NAN, f64::INFINITY]),
            ],
            0..30,
        ),
        sorted in any::<bool>(),
        n_nodes in 0usize..4,
    ) {
        let mut candidate = raw_positions;
        if sorted {
            candidate.sort_by(f64::total_cmp);
        }
        let valid = !candidate.is_empty()
            && candidate.iter().all(|p| (0.0..1.0).contains(p))
            && candidate.windows(2).all(|w| w[0] < w[1]);
        match TokenRing::round_robin(candidate.clone(), n_nodes) {
            Ok(ring) => {
                prop_assert!(valid && n_nodes > 0, "accepted {:?}", candidate);
                prop_assert_eq!(ring.len(), candidate.len());
            }
            Err(RingError::NoNodes) => prop_assert_eq!(n_nodes, 0),
            Err(error) => prop_assert!(!valid, "rejected valid positions: {}", error),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    /// Any ACH configuration is accepted exactly when it validates; an accepted one plans
    /// within its budget on a fixed ring.
    #[test]
    fn ach_accepts_exactly_valid_configurations(
        config in any_ach_config(),
        scenario in scenario(3),
    ) {
        match Ach::new(config.clone()) {
            Ok(mut ach) => {
                prop_assert!(config.validate().is_ok());
                let rules = Rules { v_min: config.v_min, respects_liveness: true };
                run_steps(&scenario, &mut ach, rules)?;
                prop_assert_eq!(ach.budget_violations(), 0);
            }
            // Compared as text: a NaN value makes the errors themselves unequal.
            Err(error) => prop_assert_eq!(
                config.validate().map_err(|e| e.to_string()),
                Err(error.to_string())
            ),
        }
    }
}
