//! A2 Dynamic-R: dynamic reweighting without a budget.

use ach_control::apportion::round_half_even_fixed_total;
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
        "Dynamic-R"
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
        let shares = ring.shares(n);
        let targets: Vec<(usize, f64)> = sources
            .iter()
            .map(|&i| (i, self.rate * shares.get(i).copied().unwrap_or(0.0)))
            .collect();
        let taken_by_source = take_shares(
            ring,
            ArcOrder::ShortestFirst,
            &targets,
            &ring.counts(n),
            V_MIN,
        );
        let mut moves = Vec::new();
        for (&i, taken) in sources.iter().zip(&taken_by_source) {
            let node = NodeId(i as u32);
            // Each source's tokens are split among the receivers on their own (this is what the
            // published simulation does; pooling them first would round differently).
            let n = taken.len();
            let raw: Vec<f64> = needs.iter().map(|r| n as f64 * (r / need_sum)).collect();
            let quota = round_half_even_fixed_total(n, &raw);
            let mut next = taken.iter().copied();
            for (&j, &q) in receivers.iter().zip(&quota) {
                for token in next.by_ref().take(q.max(0) as usize) {
                    moves.push(TokenMove {
                        token,
                        from: node,
                        to: NodeId(j as u32),
                    });
                }
            }
        }
        Plan::from_moves(ring, moves)
    }
}
