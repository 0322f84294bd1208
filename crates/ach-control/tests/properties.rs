//! Properties of ACH over random rings and load vectors: the budget invariant always holds and
//! no node that starts with at least `v_min` tokens is left below it.

use ach_control::{Ach, AchConfig, Balancer, Observation, commit};
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
    )
        .prop_map(
            |(ell_star, eps_on, ratio, tau, kappa, m_max, m_h, h, v_min)| AchConfig {
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
                ..AchConfig::paper()
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
    ) {
        let mut ring = ring_from(&gaps, n, owner_seed);
        let mut ach = Ach::new(config.clone()).expect("valid by construction");
        let live = vec![true; n];
        let v_min = config.v_min;
        let before: Vec<usize> = ring.counts(n);
        for (t, (loads, total)) in steps.iter().enumerate() {
            let loads = &loads[..n];
            let observation = Observation { step: t as u64, loads, total_load: *total, live: &live };
            let plan = ach.plan(&ring, &observation);
            prop_assert!(plan.within_budget(), "budget broken at step {t}: {plan:?}");
            let bound = ach.last_step().budget + ach.last_step().n_sources as f64 * ring.max_arc();
            prop_assert!(plan.m_keys <= bound + 1e-9);
            let measured = commit(&mut ring, &plan).expect("a plan applies to its own ring");
            prop_assert!((measured - plan.m_keys).abs() < 1e-12);
            prop_assert_eq!(ach.confirm(&plan), Ok(plan.m_keys));
            let counts = ring.counts(n);
            for i in 0..n {
                if before[i] >= v_min {
                    prop_assert!(counts[i] >= v_min, "node {i} fell to {} < v_min {v_min}", counts[i]);
                }
            }
        }
        prop_assert_eq!(ach.budget_violations(), 0);
    }
}
