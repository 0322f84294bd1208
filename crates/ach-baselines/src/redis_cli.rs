//! `redis-cli --cluster rebalance` on a ring: the slot moves of Redis' own rebalancer, with the
//! tokens as the slots (the live experiment's arm of that name, in the simulator).

use ach_control::{Balancer, Observation, Plan};
use ach_ring::{NodeId, TokenMove, TokenRing};

use crate::catalogue::BuildError;

/// The percentage `redis-cli --cluster rebalance` leaves alone (`--cluster-threshold`, 2 by
/// default): no node's slots differ from its expected number by more than it, nothing moves.
pub const REDIS_CLI_THRESHOLD: f32 = 2.0;

/// `redis-cli --cluster rebalance` with weights: Redis 7's `clusterManagerCommandRebalance`,
/// one (source, target) transfer per plan, in its order.
///
/// On its first plan it computes each node's balance, `slots - expected` with `expected =
/// (int)(V / total_weight * weight)` in single precision (as `redis-cli` does; nodes that own
/// no token are left out); if no node is off its expected number by more than
/// [`REDIS_CLI_THRESHOLD`] percent, it never moves. Otherwise the receivers' balances absorb
/// the rounding (one each, in listing order, until the balances sum to zero), the nodes are
/// sorted by balance (a stable sort: ties in listing order), and each plan takes the next
/// transfer: from the last node with slots to give to the first with slots to get, `min` of
/// the two balances, the source's lowest-indexed tokens (`redis-cli` takes a source's slots
/// from the lowest). `redis-cli` runs the transfers one after another; so does a paced
/// simulation of this balancer, which plans the next transfer once the last one's slots have
/// moved.
///
/// The listing order is node order ([`RedisCliRebalance::new`]) unless given
/// ([`RedisCliRebalance::listed`]). `redis-cli` lists the nodes as it read them from the
/// cluster (an order that follows the nodes' random ids) and its `qsort` leaves ties in an
/// order of its own, so which of two equal nodes gives or takes first differs from cluster to
/// cluster; the order it printed its transfers in shows the one it took.
#[derive(Clone, Debug)]
pub struct RedisCliRebalance {
    weights: Vec<f64>,
    listing: Vec<NodeId>,
    /// The plan's transfers still to make, the next one last.
    transfers: Option<Vec<Transfer>>,
}

impl RedisCliRebalance {
    /// The rebalancer for a cluster with these weights (one per node of the initial cluster;
    /// the live experiment gives the capacities).
    pub fn new(weights: Vec<f64>) -> RedisCliRebalance {
        let listing = (0..weights.len() as u32).map(NodeId).collect();
        RedisCliRebalance {
            weights,
            listing,
            transfers: None,
        }
    }

    /// The rebalancer with the nodes listed in `listing` order (every node of `weights` once),
    /// which decides the order of ties; refused when `listing` is not such an order.
    pub fn listed(
        weights: Vec<f64>,
        listing: Vec<NodeId>,
    ) -> Result<RedisCliRebalance, BuildError> {
        let mut seen = vec![false; weights.len()];
        for node in &listing {
            match seen.get_mut(node.index()) {
                Some(seen) if !*seen => *seen = true,
                _ => {
                    return Err(BuildError::refused(format!(
                        "listing {listing:?}: every node 0 to {} must appear once",
                        weights.len().saturating_sub(1)
                    )));
                }
            }
        }
        if listing.len() != weights.len() {
            return Err(BuildError::refused(format!(
                "listing {listing:?}: {} nodes listed, {} weighted",
                listing.len(),
                weights.len()
            )));
        }
        Ok(RedisCliRebalance {
            weights,
            listing,
            transfers: None,
        })
    }
}

/// One transfer of `redis-cli`'s plan: `slots` from `from` to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Slots (tokens) moved.
    pub slots: u64,
    /// The source.
    pub from: NodeId,
    /// The target.
    pub to: NodeId,
}

impl RedisCliRebalance {
    /// The listing that makes this rebalancer plan exactly `transfers` (the ones `redis-cli`
    /// printed, its nodes as indices of `weights`) for nodes that own `counts` slots: `None`
    /// when no listing does.
    ///
    /// The transfers show the sorted order: the targets in the order they first appear, the
    /// nodes that neither give nor take, the sources in the reverse of the order they first
    /// appear. The listing also decides which receivers absorb the rounding (the first ones
    /// listed), and the balances the transfers end show which did; those come first.
    pub fn listing_for(
        weights: &[f64],
        counts: &[usize],
        transfers: &[Transfer],
    ) -> Option<Vec<NodeId>> {
        let n = weights.len();
        if counts.len() != n || transfers.is_empty() {
            return None;
        }
        let mut takers: Vec<NodeId> = Vec::new();
        let mut givers: Vec<NodeId> = Vec::new();
        let mut finals = vec![0i64; n];
        for transfer in transfers {
            let (from, to) = (transfer.from.index(), transfer.to.index());
            if from >= n || to >= n {
                return None;
            }
            let slots = i64::try_from(transfer.slots).ok()?;
            finals[from] += slots;
            finals[to] -= slots;
            if !takers.contains(&transfer.to) {
                takers.push(transfer.to);
            }
            if !givers.contains(&transfer.from) {
                givers.push(transfer.from);
            }
        }
        let listed = |node: &NodeId| takers.contains(node) || givers.contains(node);
        let idle = (0..n as u32).map(NodeId).filter(|node| !listed(node));
        let observed: Vec<NodeId> = takers
            .iter()
            .copied()
            .chain(idle)
            .chain(givers.iter().rev().copied())
            .collect();
        // How many of the rounding's slots each receiver took: the first receivers listed
        // took one more than the others.
        let slots = counts.iter().sum();
        let (raw, _) = raw_balances(weights, &observed, counts, slots);
        let absorbed: Vec<(NodeId, i64)> = raw
            .iter()
            .filter(|&&(_, balance)| balance <= 0)
            .map(|&(node, balance)| (node, balance - finals[node.index()]))
            .collect();
        let most = absorbed.iter().map(|&(_, d)| d).max().unwrap_or(0);
        let fewest = absorbed.iter().map(|&(_, d)| d).min().unwrap_or(0);
        let first =
            |node: &NodeId| most > fewest && absorbed.iter().any(|&(n, d)| n == *node && d == most);
        let listing: Vec<NodeId> = observed
            .iter()
            .filter(|node| first(node))
            .chain(observed.iter().filter(|node| !first(node)))
            .copied()
            .collect();
        (plan_transfers(weights, &listing, counts, slots) == transfers).then_some(listing)
    }
}

/// The balances `slots - expected` of the nodes that own slots (`counts[node]` of `slots`),
/// under `weights`, in `listing` order, before the rounding is absorbed; and whether any node
/// is off its expected number by more than the threshold.
fn raw_balances(
    weights: &[f64],
    listing: &[NodeId],
    counts: &[usize],
    slots: usize,
) -> (Vec<(NodeId, i64)>, bool) {
    let slots = slots as f32;
    let involved: Vec<(NodeId, usize, f32)> = listing
        .iter()
        .map(|&node| (node, counts[node.index()], weights[node.index()] as f32))
        .filter(|&(_, count, _)| count > 0)
        .collect();
    let total_weight: f32 = involved.iter().map(|&(_, _, w)| w).sum();
    let mut over_threshold = false;
    let mut nodes: Vec<(NodeId, i64)> = Vec::with_capacity(involved.len());
    for &(node, count, weight) in &involved {
        let expected = ((slots / total_weight) * weight) as i64;
        let off_by = (100.0 - 100.0 * expected as f64 / count as f64).abs();
        over_threshold |= off_by > f64::from(REDIS_CLI_THRESHOLD);
        nodes.push((node, count as i64 - expected));
    }
    (nodes, over_threshold)
}

/// The plan of nodes that own `counts` of `slots` slots, taken in `listing` order: its
/// transfers in order (none when every node is within the threshold).
fn plan_transfers(
    weights: &[f64],
    listing: &[NodeId],
    counts: &[usize],
    slots: usize,
) -> Vec<Transfer> {
    let (mut nodes, over_threshold) = raw_balances(weights, listing, counts, slots);
    if !over_threshold {
        return Vec::new();
    }
    // The receivers absorb the rounding, one slot each in listing order, until the balances
    // sum to zero.
    let mut total: i64 = nodes.iter().map(|&(_, balance)| balance).sum();
    while total > 0 {
        for (_, balance) in &mut nodes {
            if *balance <= 0 && total > 0 {
                *balance -= 1;
                total -= 1;
            }
        }
    }
    nodes.sort_by_key(|&(_, balance)| balance);
    let mut transfers = Vec::new();
    let (mut dst, mut src) = (0, nodes.len().saturating_sub(1));
    while dst < src {
        let slots = nodes[dst].1.abs().min(nodes[src].1.abs());
        nodes[dst].1 += slots;
        nodes[src].1 -= slots;
        if slots > 0 {
            transfers.push(Transfer {
                slots: slots as u64,
                from: nodes[src].0,
                to: nodes[dst].0,
            });
        }
        if nodes[dst].1 == 0 {
            dst += 1;
        }
        if nodes[src].1 == 0 {
            src -= 1;
        }
    }
    transfers
}

impl Balancer for RedisCliRebalance {
    fn name(&self) -> &'static str {
        "redis-cli"
    }

    fn plan(&mut self, ring: &TokenRing, _observation: &Observation<'_>) -> Plan {
        let transfers = self.transfers.get_or_insert_with(|| {
            let counts = ring.counts(self.weights.len());
            plan_transfers(&self.weights, &self.listing, &counts, ring.len())
                .into_iter()
                .rev()
                .collect()
        });
        let Some(transfer) = transfers.pop() else {
            return Plan::none();
        };
        let moves = (0..ring.len())
            .filter(|&token| ring.owner(token) == transfer.from)
            .take(transfer.slots as usize)
            .map(|token| TokenMove {
                token,
                from: transfer.from,
                to: transfer.to,
            })
            .collect();
        Plan::from_moves(ring, moves)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{even_ring, observe};
    use ach_control::commit;

    fn moves(plan: &Plan) -> Vec<(usize, u32, u32)> {
        plan.moves
            .iter()
            .map(|mv| (mv.token, mv.from.0, mv.to.0))
            .collect()
    }

    #[test]
    fn transfers_go_from_the_last_giver_to_the_first_taker_one_per_plan() {
        // 12 tokens over 3 nodes (4 each), weights 1, 1, 2: expected 3, 3, 6, balances +1, +1,
        // -2. Sorted: node 2, node 0, node 1; node 1 gives first, its lowest token (1).
        let mut ring = even_ring(12, 3);
        let mut rebalance = RedisCliRebalance::new(vec![1.0, 1.0, 2.0]);
        let observation = observe(&[0.5; 3], &[true; 3]);
        let first = rebalance.plan(&ring, &observation);
        assert_eq!(moves(&first), [(1, 1, 2)]);
        commit(&mut ring, &first).unwrap();
        let second = rebalance.plan(&ring, &observation);
        assert_eq!(moves(&second), [(0, 0, 2)]);
        commit(&mut ring, &second).unwrap();
        assert_eq!(ring.counts(3), vec![3, 3, 6]);
        assert_eq!(rebalance.plan(&ring, &observation), Plan::none());
    }

    #[test]
    fn the_rounding_is_absorbed_by_the_takers_in_node_order() {
        // 10 tokens, equal weights: expected 3 each, balances +1, 0, 0; node 1 takes the one
        // slot that rounding leaves over, from node 0's lowest token.
        let ring = even_ring(10, 3);
        let mut rebalance = RedisCliRebalance::new(vec![1.0; 3]);
        let observation = observe(&[0.5; 3], &[true; 3]);
        assert_eq!(moves(&rebalance.plan(&ring, &observation)), [(0, 0, 1)]);
        assert_eq!(rebalance.plan(&ring, &observation), Plan::none());
    }

    #[test]
    fn ties_go_in_listing_order() {
        // 12 tokens over 4 nodes (3 each), weights 1, 1, 2, 2: expected 2, 2, 4, 4, balances
        // +1, +1, -1, -1. Node order: node 1 gives to node 2 first, then node 0 to node 3.
        // Listed 3, 2, 0, 1: node 1 gives to node 3 first (sorted 3, 2, 0, 1), then node 0 to
        // node 2.
        let observation = observe(&[0.5; 4], &[true; 4]);
        let weights = vec![1.0, 1.0, 2.0, 2.0];
        let transfers = |mut rebalance: RedisCliRebalance| {
            let mut ring = even_ring(12, 4);
            let mut all = Vec::new();
            loop {
                let plan = rebalance.plan(&ring, &observation);
                if plan == Plan::none() {
                    return all;
                }
                all.extend(moves(&plan));
                commit(&mut ring, &plan).unwrap();
            }
        };
        let listing = [3, 2, 0, 1].map(NodeId).to_vec();
        assert_eq!(
            transfers(RedisCliRebalance::new(weights.clone())),
            [(1, 1, 2), (0, 0, 3)]
        );
        assert_eq!(
            transfers(RedisCliRebalance::listed(weights.clone(), listing).unwrap()),
            [(1, 1, 3), (0, 0, 2)]
        );
        for bad in [
            vec![0, 1, 2],
            vec![0, 1, 2, 2],
            vec![0, 1, 2, 4],
            vec![0, 1, 2, 3, 0],
        ] {
            let listing = bad.into_iter().map(NodeId).collect();
            let error = RedisCliRebalance::listed(weights.clone(), listing).unwrap_err();
            assert!(error.to_string().contains("listing"), "{error}");
        }
    }

    #[test]
    fn nodes_within_the_threshold_never_move() {
        let ring = even_ring(300, 3);
        // Expected 100, 100, 100 for weights within 1 % of each other: nothing to do.
        let mut rebalance = RedisCliRebalance::new(vec![1.0, 1.005, 0.995]);
        let observation = observe(&[0.9, 0.1, 0.1], &[true; 3]);
        assert_eq!(rebalance.plan(&ring, &observation), Plan::none());
    }
}
