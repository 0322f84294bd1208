//! A3 Bounded-Loads, as the published simulation implements it.

use ach_control::planner::{ArcOrder, take_in_arc_order};
use ach_control::{Balancer, Observation, Plan};
use ach_ring::{NodeId, TokenMove, TokenRing};

use crate::{V_MIN, nodes_where};

/// A3 Bounded-Loads (spec section 5), the published simulation's token-moving heuristic:
/// `O = {l_i > l* + high}`, `U = {l_j < l* - low}`; nothing if either is empty. Each source
/// (increasing id) with more than `v_min` tokens moves its `min(2, count - v_min)` longest
/// tokens to the single least-loaded node of `U`.
///
/// Note: the paper cites consistent hashing with bounded loads (Mirrokni, Thorup,
/// Zadimoghaddam 2018), which forwards requests past full nodes instead; this is not that.
#[derive(Clone, Debug)]
pub struct BoundedLoads {
    /// Target load `l*`.
    pub target: f64,
    /// A node is a source above `l* + high`.
    pub high: f64,
    /// A node is a receiver below `l* - low`.
    pub low: f64,
    /// Tokens a source moves per step at most.
    pub tokens_per_source: usize,
}

impl BoundedLoads {
    /// The published parameters: `l* = 0.65`, high 0.12, low 0.05, two tokens per source.
    pub fn paper() -> BoundedLoads {
        BoundedLoads {
            target: 0.65,
            high: 0.12,
            low: 0.05,
            tokens_per_source: 2,
        }
    }
}

impl Balancer for BoundedLoads {
    fn name(&self) -> &'static str {
        "Bounded-Loads"
    }

    fn plan(&mut self, ring: &TokenRing, obs: &Observation<'_>) -> Plan {
        let sources = nodes_where(obs, |l| l > self.target + self.high);
        let receivers = nodes_where(obs, |l| l < self.target - self.low);
        let Some(&receiver) = receivers
            .iter()
            .min_by(|&&a, &&b| obs.loads[a].total_cmp(&obs.loads[b]).then(a.cmp(&b)))
        else {
            return Plan::none();
        };
        let counts = ring.counts(obs.n_nodes());
        // Sources with more than v_min tokens, and how many tokens each gives.
        let givers: Vec<(usize, usize)> = sources
            .iter()
            .filter_map(|&i| {
                let owned = counts.get(i).copied().unwrap_or(0);
                (owned > V_MIN).then(|| (i, self.tokens_per_source.min(owned - V_MIN)))
            })
            .collect();
        let nodes: Vec<usize> = givers.iter().map(|&(i, _)| i).collect();
        let mut left: Vec<usize> = givers.iter().map(|&(_, n)| n).collect();
        let taken = take_in_arc_order(ring, ArcOrder::LongestFirst, &nodes, |k, _| {
            let more = left[k] > 0;
            left[k] = left[k].saturating_sub(1);
            more
        });
        let mut moves = Vec::new();
        for (&i, tokens) in nodes.iter().zip(&taken) {
            moves.extend(tokens.iter().map(|&token| TokenMove {
                token,
                from: NodeId(i as u32),
                to: NodeId(receiver as u32),
            }));
        }
        Plan::from_moves(ring, moves)
    }
}
