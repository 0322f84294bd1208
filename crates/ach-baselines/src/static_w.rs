//! A0 Static-W and A1 Static-Wt: owners that never adapt.

use ach_control::apportion::round_half_even_fixed_total;
use ach_control::{Balancer, Observation, Plan};
use ach_ring::{NodeId, TokenMove, TokenRing};

/// A0 Static-W: keeps the round-robin owners it is given; never moves a token.
#[derive(Clone, Debug, Default)]
pub struct StaticW;

impl Balancer for StaticW {
    fn name(&self) -> &'static str {
        crate::catalogue::names::STATIC_W
    }

    fn plan(&mut self, _ring: &TokenRing, _observation: &Observation<'_>) -> Plan {
        Plan::none()
    }
}

/// A1 Static-Wt: on its first step, sets owners proportional to the capacities of the initial
/// cluster, then never changes.
///
/// Target counts are `round(V * c_i / sum c)` (half to even); the difference to `V` is fixed by
/// adding one to the largest fractional parts (or removing one from the smallest). Tokens are
/// then handed out in contiguous blocks: the first `target_0` tokens to node 0, the next
/// `target_1` to node 1, and so on.
#[derive(Clone, Debug)]
pub struct StaticWt {
    capacities: Vec<f64>,
    done: bool,
}

impl StaticWt {
    /// A1 for a cluster with these capacities (one per node of the initial cluster).
    pub fn new(capacities: Vec<f64>) -> StaticWt {
        StaticWt {
            capacities,
            done: false,
        }
    }

    /// Target token counts for `v` tokens.
    pub fn targets(&self, v: usize) -> Vec<i64> {
        let sum: f64 = self.capacities.iter().sum();
        let raw: Vec<f64> = self.capacities.iter().map(|c| v as f64 * c / sum).collect();
        round_half_even_fixed_total(v, &raw)
    }
}

impl Balancer for StaticWt {
    fn name(&self) -> &'static str {
        crate::catalogue::names::STATIC_WT
    }

    fn plan(&mut self, ring: &TokenRing, _observation: &Observation<'_>) -> Plan {
        if self.done {
            return Plan::none();
        }
        self.done = true;
        let mut moves = Vec::new();
        let mut token = 0;
        for (node, &target) in self.targets(ring.len()).iter().enumerate() {
            for _ in 0..target.max(0) {
                if token >= ring.len() {
                    break;
                }
                let to = NodeId(node as u32);
                let from = ring.owner(token);
                if from != to {
                    moves.push(TokenMove { token, from, to });
                }
                token += 1;
            }
        }
        Plan::from_moves(ring, moves)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{even_ring, observe};
    use ach_control::commit;

    #[test]
    fn static_w_never_moves_a_token() {
        let ring = even_ring(30, 3);
        let mut a0 = StaticW;
        for loads in [[0.9, 0.1, 0.5], [0.0, 0.0, 0.0], [1.0, 1.0, 0.2]] {
            let plan = a0.plan(&ring, &observe(&loads, &[true; 3]));
            assert_eq!(plan, Plan::none());
        }
    }

    #[test]
    fn static_wt_sets_capacity_proportional_blocks_once() {
        let mut ring = even_ring(8, 2);
        let mut a1 = StaticWt::new(vec![1.0, 3.0]);
        assert_eq!(a1.targets(8), vec![2, 6]);
        let plan = a1.plan(&ring, &observe(&[0.5, 0.5], &[true; 2]));
        commit(&mut ring, &plan).unwrap();
        let owners: Vec<u32> = ring.owners().iter().map(|o| o.0).collect();
        assert_eq!(owners, [0, 0, 1, 1, 1, 1, 1, 1]);
        // Round robin owned 0, 2, 4, 6 by node 0: tokens 2, 4, 6 move to node 1, token 1 to 0.
        assert_eq!(plan.moves.len(), 4);
        // Whatever it observes later, it never changes again.
        let later = a1.plan(&ring, &observe(&[1.0, 0.0], &[true; 2]));
        assert_eq!(later, Plan::none());
    }

    #[test]
    fn static_wt_targets_keep_the_token_count() {
        let a1 = StaticWt::new(vec![1.0, 1.0, 1.0]);
        let targets = a1.targets(10);
        assert_eq!(targets.iter().sum::<i64>(), 10);
        assert!(targets.iter().all(|&t| t == 3 || t == 4), "{targets:?}");
        let a1 = StaticWt::new(vec![2.0, 1.0, 1.0]);
        assert_eq!(a1.targets(8), vec![4, 2, 2]);
    }
}
