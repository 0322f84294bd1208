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
        crate::catalogue::names::BOUNDED_LOADS
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{moved, observe};

    /// `v` tokens with arcs growing with the index; node `s % 2` owns token `s`.
    fn uneven_ring(v: u32) -> TokenRing {
        let total = f64::from(v * (v + 1) / 2);
        let mut positions = Vec::new();
        let mut at = 0.0;
        for s in 0..v {
            at += f64::from(s + 1) / total;
            positions.push(at - 1.0 / total);
        }
        let owners = (0..v).map(|s| NodeId(s % 2)).collect();
        TokenRing::new(positions, owners).unwrap()
    }

    #[test]
    fn each_source_sends_its_two_longest_tokens_to_the_least_loaded_receiver() {
        let ring = even_ring_of_three();
        let mut a3 = BoundedLoads::paper();
        // Source: node 0 (0.9 > 0.77). Receivers: 1 and 2 (< 0.60); the least loaded is 1.
        let plan = a3.plan(&ring, &observe(&[0.9, 0.5, 0.55], &[true; 3]));
        assert_eq!(moved(&plan, 0, 1), 2);
        assert_eq!(plan.moves.len(), 2);
        let ring = uneven_ring(12);
        let plan = a3.plan(&ring, &observe(&[0.9, 0.4], &[true; 2]));
        let mut tokens: Vec<usize> = plan.moves.iter().map(|mv| mv.token).collect();
        tokens.sort();
        let mut longest: Vec<usize> = ring
            .tokens_longest_first()
            .iter()
            .copied()
            .filter(|&s| ring.owner(s) == NodeId(0))
            .take(2)
            .collect();
        longest.sort();
        assert_eq!(tokens, longest);
    }

    #[test]
    fn ties_go_to_the_lower_id_and_v_min_is_kept() {
        let ring = even_ring_of_three();
        let mut a3 = BoundedLoads::paper();
        let plan = a3.plan(&ring, &observe(&[0.9, 0.5, 0.5], &[true; 3]));
        assert_eq!(moved(&plan, 0, 1), 2);
        assert_eq!(moved(&plan, 0, 2), 0);
        // Node 0 owns four of eight tokens: with V_MIN = 3 it gives one.
        let ring = uneven_ring(8);
        let plan = a3.plan(&ring, &observe(&[0.9, 0.4], &[true; 2]));
        assert_eq!(plan.moves.len(), 1);
    }

    #[test]
    fn nothing_moves_without_a_receiver() {
        let ring = even_ring_of_three();
        let mut a3 = BoundedLoads::paper();
        let plan = a3.plan(&ring, &observe(&[0.9, 0.61, 0.7], &[true; 3]));
        assert_eq!(plan, Plan::none());
    }

    fn even_ring_of_three() -> TokenRing {
        crate::test_support::even_ring(30, 3)
    }
}
