//! A0 Static-W and A1 Static-Wt: owners that never adapt.

use ach_control::apportion::round_half_even_fixed_total;
use ach_control::{Balancer, Observation, Plan};
use ach_ring::{NodeId, TokenMove, TokenRing};

/// A0 Static-W: keeps the round-robin owners it is given; never moves a token.
#[derive(Clone, Debug, Default)]
pub struct StaticW;

impl Balancer for StaticW {
    fn name(&self) -> &'static str {
        "Static-W"
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
        "Static-Wt"
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
