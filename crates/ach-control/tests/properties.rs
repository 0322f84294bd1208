//! Properties of ACH over random rings and load vectors, under the paper's rules and the live
//! ones: the budget bound holds (recomputed here from the spec, not read from the controller),
//! the paper's horizon closes the budget once `H` steps spent `M_H`, the live horizon holds over
//! every window, no node that starts with at least `v_min` tokens is left below it, and no node
//! that starts at or below `v_max` is pushed above it. The same hold for the per-token planner
//! (`SelectRule::ByTokenLoad`) with random per-token loads, which also never makes a receiver
//! as hot as the hottest node was before the plan.

use ach_control::{
    Ach, AchConfig, Balancer, HorizonRule, Observation, SelectRule, StepRule, commit,
};
use ach_ring::{NodeId, TokenRing};
use proptest::prelude::*;

/// A ring of `gaps.len()` tokens at the normalised prefix sums of `gaps`, owners round-robin
/// over `n` nodes shuffled by `owner_seed`.
fn ring_from(gaps: &[f64], n: usize, owner_seed: u64) -> TokenRing {
    let total: f64 = gaps.iter().sum();
    let mut acc = 0.0;
    let mut positions = Vec::with_capacity(gaps.len());
    for g in gaps {
        positions.push(acc / total);
        acc += g;
    }
    let mut state = owner_seed | 1;
    let mut owners: Vec<NodeId> = (0..gaps.len()).map(|s| NodeId((s % n) as u32)).collect();
    for s in (1..owners.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        owners.swap(s, (state % (s as u64 + 1)) as usize);
    }
    TokenRing::new(positions, owners).expect("strictly increasing positions")
}

/// `tokens` per-token loads from `seed`: with a uniform `u` in [0, 1) per token, `hot * u` when
/// `u > hot_above` (a hot token), `0.02 * u` otherwise.
fn random_token_loads(seed: u64, tokens: usize, hot_above: f64, hot: f64) -> Vec<f64> {
    let mut state = seed | 1;
    (0..tokens)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            if u > hot_above { hot * u } else { 0.02 * u }
        })
        .collect()
}

fn config_strategy() -> impl Strategy<Value = AchConfig> {
    (
        0.3f64..0.8,
        0.05f64..0.3,
        0.1f64..0.9,
        0.5f64..1.0,
        0.01f64..0.5,
        0.0005f64..0.1,
        0.01f64..1.0,
        1usize..50,
        1usize..4,
        (prop::option::of(0usize..40), any::<bool>(), 0u64..5),
    )
        .prop_map(
            |(
                ell_star,
                eps_on,
                ratio,
                tau,
                kappa,
                m_max,
                m_h,
                h,
                v_min,
                (v_max, live, cooldown),
            )| AchConfig {
                ell_star,
                eps_on,
                eps_off: eps_on * ratio,
                tau,
                tau_min: tau * 0.5,
                kappa,
                m_max,
                m_horizon: m_h,
                horizon: h,
                v_min,
                v_max: v_max.map(|extra| v_min + extra),
                cooldown,
                ..if live {
                    AchConfig::live()
                } else {
                    AchConfig::paper()
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ach_keeps_the_budget_and_v_min(
        gaps in prop::collection::vec(0.01f64..1.0, 24..160),
        n in 2usize..8,
        owner_seed in any::<u64>(),
        config in config_strategy(),
        steps in prop::collection::vec((prop::collection::vec(0.0f64..1.0, 8), 0.0f64..1.0), 1..12),
        per_token in any::<bool>(),
        token_load_seed in any::<u64>(),
    ) {
        let mut ring = ring_from(&gaps, n, owner_seed);
        let config = AchConfig {
            select_rule: if per_token { SelectRule::ByTokenLoad } else { SelectRule::Paper },
            ..config
        };
        // Random per-token loads, some of them hot (up to half a node's load).
        let token_loads = random_token_loads(token_load_seed, ring.len(), 0.95, 0.5);
        let mut ach = Ach::new(config.clone()).expect("valid by construction");
        let live = vec![true; n];
        let v_min = config.v_min;
        let before: Vec<usize> = ring.counts(n);
        let live_rules = config.horizon_rule == HorizonRule::Sliding;
        let mut spent: Vec<f64> = Vec::new();
        for (t, (loads, total)) in steps.iter().enumerate() {
            let loads = &loads[..n];
            let observation = Observation {
                step: t as u64,
                loads,
                total_load: *total,
                live: &live,
                token_loads: per_token.then_some(token_loads.as_slice()),
            };
            let plan = ach.plan(&ring, &observation);
            if per_token {
                // Project the plan's token loads: no receiver reaches the hottest load before it.
                let mut projected = loads.to_vec();
                for mv in &plan.moves {
                    projected[mv.from.index()] -= token_loads[mv.token];
                    projected[mv.to.index()] += token_loads[mv.token];
                }
                let hottest = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                for mv in &plan.moves {
                    prop_assert!(projected[mv.to.index()] < hottest, "step {t}: receiver {} ends at {} >= {hottest}", mv.to, projected[mv.to.index()]);
                }
            }
            prop_assert!(plan.within_budget(), "budget broken at step {t}: {plan:?}");
            // The spec's bound, from the parameters alone: C < 1, so m < the step cap, and each
            // source that gave tokens may overshoot by one arc under the paper's step rule.
            let givers = {
                let mut from: Vec<_> = plan.moves.iter().map(|mv| mv.from).collect();
                from.sort();
                from.dedup();
                from.len() as f64
            };
            let cap = if live_rules { config.m_max } else { config.m_max.min(config.m_horizon / config.horizon as f64) };
            let overshoot = if config.step_rule == StepRule::Strict { 0.0 } else { givers * ring.max_arc() };
            prop_assert!(plan.m_keys <= cap + overshoot + 1e-9, "step {t}: {} > {cap} + {overshoot}", plan.m_keys);
            let h = config.horizon;
            if !live_rules && spent.len() >= h && spent[spent.len() - h..].iter().sum::<f64>() >= config.m_horizon - 1e-9 {
                prop_assert!(plan.moves.is_empty(), "step {t}: the horizon is spent but {plan:?}");
            }
            spent.push(plan.m_keys);
            if live_rules {
                let window = &spent[spent.len().saturating_sub(h)..];
                prop_assert!(window.iter().sum::<f64>() <= config.m_horizon + 1e-9, "window over M_H at step {t}");
            }
            let measured = commit(&mut ring, &plan).expect("a plan applies to its own ring");
            prop_assert!((measured - plan.m_keys).abs() < 1e-12);
            prop_assert_eq!(ach.confirm(&plan), Ok(plan.m_keys));
            let counts = ring.counts(n);
            for i in 0..n {
                if before[i] >= v_min {
                    prop_assert!(counts[i] >= v_min, "node {i} fell to {} < v_min {v_min}", counts[i]);
                }
                if let Some(v_max) = config.v_max
                    && before[i] <= v_max
                {
                    prop_assert!(counts[i] <= v_max, "node {i} rose to {} > v_max {v_max}", counts[i]);
                }
            }
        }
        prop_assert_eq!(ach.budget_violations(), 0);
    }
}

/// The load above `target` of the nodes, after `moves` of tokens carrying `token_loads` (a
/// token's load leaves its owner and joins its receiver), recomputed here from the definition.
fn excess_after(
    loads: &[f64],
    moves: &[ach_ring::TokenMove],
    token_loads: &[f64],
    target: f64,
) -> f64 {
    let mut after = loads.to_vec();
    for mv in moves {
        after[mv.from.index()] -= token_loads[mv.token];
        after[mv.to.index()] += token_loads[mv.token];
    }
    after.iter().map(|l| (l - target).max(0.0)).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// With `min_gain`, a step carries out exactly the plan it makes without it when that plan
    /// removes at least `min_gain` of the load above the target, and nothing otherwise (saying
    /// so in `withheld`).
    #[test]
    fn min_gain_carries_out_only_plans_that_gain_enough(
        gaps in prop::collection::vec(0.01f64..1.0, 24..120),
        n in 2usize..8,
        owner_seed in any::<u64>(),
        config in config_strategy(),
        min_gain in 0.01f64..0.6,
        steps in prop::collection::vec((prop::collection::vec(0.0f64..1.0, 8), 0.0f64..1.0), 1..10),
        token_load_seed in any::<u64>(),
    ) {
        let mut ring = ring_from(&gaps, n, owner_seed);
        let config = AchConfig { select_rule: SelectRule::ByTokenLoad, min_gain, ..config };
        let token_loads = random_token_loads(token_load_seed, ring.len(), 0.9, 0.3);
        let mut ach = Ach::new(config.clone()).expect("valid by construction");
        let live = vec![true; n];
        for (t, (loads, total)) in steps.iter().enumerate() {
            let observation = Observation {
                step: t as u64,
                loads: &loads[..n],
                total_load: *total,
                live: &live,
                token_loads: Some(&token_loads),
            };
            let mut without = ach.clone();
            without.set_config(AchConfig { min_gain: 0.0, ..config.clone() }).unwrap();
            let unfiltered = without.plan(&ring, &observation);
            let plan = ach.plan(&ring, &observation);
            let target = ach.last_step().target;
            let before: f64 = loads[..n].iter().map(|l| (l - target).max(0.0)).sum();
            if unfiltered.moves.is_empty() {
                prop_assert!(plan.moves.is_empty() && plan.withheld.is_none());
            } else {
                let gain = 1.0 - excess_after(&loads[..n], &unfiltered.moves, &token_loads, target) / before;
                if gain >= min_gain + 1e-9 {
                    prop_assert_eq!(&plan.moves, &unfiltered.moves, "step {}: gain {} >= {}", t, gain, min_gain);
                } else if gain < min_gain - 1e-9 {
                    prop_assert!(plan.moves.is_empty(), "step {t}: gain {gain} < {min_gain} but {plan:?}");
                    let withheld = plan.withheld.expect("a held-back plan says so");
                    prop_assert_eq!(withheld.moves, unfiltered.moves.len());
                    prop_assert!((withheld.gain - gain).abs() < 1e-9);
                }
            }
            commit(&mut ring, &plan).expect("a plan applies to its own ring");
            ach.confirm(&plan).unwrap();
        }
    }
}
