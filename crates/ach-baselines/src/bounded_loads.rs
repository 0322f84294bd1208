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
        let arcs = ring.arcs();
        let mut moves = Vec::new();
        let mut tokens_by_node = ring.tokens_by_node(obs.n_nodes());
        for &i in &sources {
            let node = NodeId(i as u32);
            let mut tokens = std::mem::take(&mut tokens_by_node[i]);
            if tokens.len() <= V_MIN {
                continue;
            }
            let n = self.tokens_per_source.min(tokens.len() - V_MIN);
            let mut left = n;
            let count = take_in_arc_order(&mut tokens, arcs, ArcOrder::LongestFirst, |_| {
                let more = left > 0;
                left = left.saturating_sub(1);
                more
            });
            moves.extend(tokens[..count].iter().map(|&token| TokenMove {
                token,
                from: node,
                to: NodeId(receiver as u32),
            }));
        }
        Plan::from_moves(ring, moves)
    }
}
