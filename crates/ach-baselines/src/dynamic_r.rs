//! A2 Dynamic-R: dynamic reweighting without a budget.

use ach_control::apportion::RoundHalfEvenSplit;
use ach_control::planner::{ArcOrder, take_shares};
use ach_control::{Balancer, Observation, Plan};
use ach_ring::{NodeId, TokenMove, TokenRing};

use crate::{V_MIN, nodes_where};

/// A2 Dynamic-R (spec section 5): every overloaded node gives `rate` of its share of key space
/// per step, shortest tokens first, to the underloaded nodes in proportion to their need.
///
/// `O = {l_i > l* + dead_band}`, `U = {l_j < l* - dead_band}`; nothing if either is empty.
/// Receiver weights `r_j = max(l* - l_j, 0)` normalised (nothing if their sum is < 1e-12). For
/// each source (increasing id) the target is `rate * share(i)`; its tokens are taken shortest
/// arc first while the arc taken is below the target and it keeps more than `v_min`. The `n`
/// tokens taken from one source are split by `round(n * r_j)` (half to even), the total fixed
/// to `n` by largest (or smallest) fractional part, and handed out walking `U` in id order.
/// The split is per source, as in the recorded traces of the published simulation (the spec's
/// wording, "split the n taken tokens over U", reads as one pooled split; the traces show one
/// split per source).
#[derive(Clone, Debug)]
pub struct DynamicR {
    /// Target load `l*`.
    pub target: f64,
    /// Dead band around the target.
    pub dead_band: f64,
    /// Fraction of its share a source gives per step.
    pub rate: f64,
}

impl DynamicR {
    /// The published parameters: `l* = 0.65`, dead band 0.03, rate 0.05.
    pub fn paper() -> DynamicR {
        DynamicR {
            target: 0.65,
            dead_band: 0.03,
            rate: 0.05,
        }
    }
}

impl Balancer for DynamicR {
    fn name(&self) -> &'static str {
        crate::catalogue::names::DYNAMIC_R
    }

    fn plan(&mut self, ring: &TokenRing, obs: &Observation<'_>) -> Plan {
        let sources = nodes_where(obs, |l| l > self.target + self.dead_band);
        let receivers = nodes_where(obs, |l| l < self.target - self.dead_band);
        if sources.is_empty() || receivers.is_empty() {
            return Plan::none();
        }
        let needs: Vec<f64> = receivers
            .iter()
            .map(|&j| (self.target - obs.loads[j]).max(0.0))
            .collect();
        let need_sum: f64 = needs.iter().sum();
        if need_sum < 1e-12 {
            return Plan::none();
        }
        let n = obs.n_nodes();
        // The share of a node is summed in token index order, as `shares` does.
        let (counts, shares) = ring.counts_and_shares(n);
        let targets: Vec<(usize, f64)> = sources
            .iter()
            .map(|&i| (i, self.rate * shares.get(i).copied().unwrap_or(0.0)))
            .collect();
        let taken_by_source = take_shares(ring, ArcOrder::ShortestFirst, &targets, &counts, V_MIN);
        let weights: Vec<f64> = needs.iter().map(|r| r / need_sum).collect();
        let split = RoundHalfEvenSplit::new(&weights);
        // The split of n tokens depends only on n and the weights, so sources that give as
        // many tokens share it: with hundreds of sources and receivers the step's rounding costs
        // O(distinct n x n log n), with the same result; a split lists only the receivers that
        // get tokens, so handing them out costs O(n) per source, not O(receivers).
        let mut quota_of: Vec<Option<Vec<(usize, u64)>>> = Vec::new();
        let mut moves = Vec::with_capacity(taken_by_source.iter().map(Vec::len).sum());
        for (&i, taken) in sources.iter().zip(&taken_by_source) {
            let node = NodeId(i as u32);
            // Each source's tokens are split among the receivers on their own (this is what the
            // published simulation does; pooling them first would round differently).
            let n = taken.len();
            if quota_of.len() <= n {
                quota_of.resize(n + 1, None);
            }
            let quota = quota_of[n].get_or_insert_with(|| split.positive_counts(n));
            let mut next = taken.iter().copied();
            for &(receiver, count) in quota.iter() {
                for token in next.by_ref().take(count as usize) {
                    moves.push(TokenMove {
                        token,
                        from: node,
                        to: NodeId(receivers[receiver] as u32),
                    });
                }
            }
        }
        Plan::from_moves(ring, moves)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{even_ring, moved, observe};

    #[test]
    fn nothing_moves_without_both_sources_and_receivers() {
        let ring = even_ring(60, 3);
        let mut a2 = DynamicR::paper();
        // 0.66 is inside the dead band (0.62, 0.68): no receiver.
        let plan = a2.plan(&ring, &observe(&[0.9, 0.66, 0.66], &[true; 3]));
        assert_eq!(plan, Plan::none());
        // Nobody above 0.68: no source.
        let plan = a2.plan(&ring, &observe(&[0.68, 0.2, 0.3], &[true; 3]));
        assert_eq!(plan, Plan::none());
    }

    #[test]
    fn a_source_gives_its_rate_of_share_split_by_need() {
        let ring = even_ring(60, 3);
        let mut a2 = DynamicR {
            rate: 0.22,
            ..DynamicR::paper()
        };
        // Node 0 (share 1/3) gives until it has given 0.22 / 3 = 0.0733 of the key space: five
        // tokens of 1/60. Needs are 0.65 - 0.35 = 0.30 and 0.65 - 0.55 = 0.10, so the split is
        // round(5 * 0.75) = 4 and round(5 * 0.25) = 1.
        let plan = a2.plan(&ring, &observe(&[0.9, 0.35, 0.55], &[true; 3]));
        assert_eq!(plan.moves.len(), 5);
        assert_eq!(moved(&plan, 0, 1), 4);
        assert_eq!(moved(&plan, 0, 2), 1);
        assert!((plan.m_keys - 5.0 / 60.0).abs() < 1e-12);
    }

    #[test]
    fn a_source_keeps_v_min_tokens_and_dead_nodes_are_ignored() {
        // Node 0 owns 4 tokens of 8: it may give one at most, whatever the rate.
        let ring = even_ring(8, 2);
        let mut a2 = DynamicR {
            rate: 1.0,
            ..DynamicR::paper()
        };
        let plan = a2.plan(&ring, &observe(&[0.95, 0.1], &[true; 2]));
        assert_eq!(moved(&plan, 0, 1), 1);
        // A receiver that is not live gets nothing.
        let plan = a2.plan(&ring, &observe(&[0.95, 0.1], &[true, false]));
        assert_eq!(plan, Plan::none());
    }
}
