//! The order `redis-cli --cluster rebalance` took the nodes in, read back from the transfers
//! it printed, for the calibrated simulator's `redis-cli`
//! ([`ach_baselines::RedisCliRebalance::listed`]).
//!
//! `redis-cli` sorts the nodes by balance and moves slots from the last node with slots to
//! give to the first with slots to get. Nodes of equal weight and equal slots tie, and which
//! of them comes first follows from the order it read the nodes in (their random ids) and its
//! `qsort`: two weak masters of the live cluster tie, and the one that gives its slots first
//! decides how far the run gets in a minute. The transfers it printed, `Moving N slots from
//! SOURCE to TARGET`, show its sorted order (the targets in the order they first appear, and
//! the sources in the reverse of it) and, by the balances they end, which receivers absorbed
//! the plan's rounding (the first ones it listed).

use ach_baselines::{RedisCliRebalance, RedisCliTransfer};
use ach_ring::NodeId;

/// One transfer `redis-cli` printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer<'a> {
    /// Slots moved.
    pub slots: u32,
    /// The source's `host:port`.
    pub from: &'a str,
    /// The target's `host:port`.
    pub to: &'a str,
}

/// The transfers of `output`, `redis-cli --cluster rebalance`'s standard output, in order.
pub fn transfers(output: &str) -> Vec<Transfer<'_>> {
    output.lines().filter_map(transfer).collect()
}

/// `Moving N slots from SOURCE to TARGET`, after the colour codes `redis-cli` may put first
/// (it ends the colour of the line before at the start of the next: `ESC[0m`).
fn transfer(line: &str) -> Option<Transfer<'_>> {
    let start = line.find("Moving ")?;
    let colours = &line[..start];
    if !colours
        .split('\x1b')
        .all(|code| code.is_empty() || is_colour(code))
    {
        return None;
    }
    let rest = &line[start + "Moving ".len()..];
    let (slots, rest) = rest.split_once(" slots from ")?;
    let (from, to) = rest.split_once(" to ")?;
    Some(Transfer {
        slots: slots.parse().ok()?,
        from,
        to: to.trim(),
    })
}

/// `[0m`, `[29;1m`: a colour code after its escape.
fn is_colour(code: &str) -> bool {
    code.strip_prefix('[')
        .and_then(|code| code.strip_suffix('m'))
        .is_some_and(|digits| digits.chars().all(|c| c.is_ascii_digit() || c == ';'))
}

/// The simulator's `redis-cli` listing of one repeat.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Listing {
    /// The repeat (the simulator's run of the same index takes it).
    pub repeat: u32,
    /// Simulator nodes in the order `redis-cli` took them.
    pub nodes: Vec<u32>,
}

/// One master of a run, as the listing needs it.
#[derive(Clone, Copy, Debug)]
pub struct RunNode<'a> {
    /// `host:port`.
    pub address: &'a str,
    /// Its node in the simulator (`None`: not known, in a run that did not record it).
    pub simulator_node: Option<u32>,
}

/// The listing that makes the simulator's `redis-cli` plan `transfers` on the live cluster
/// of nodes weighted `weights` (simulator node `i` weighted `weights[i]`, each starting with
/// its equal slot range): [`RedisCliRebalance::listing_for`]. `None` when there are no
/// transfers, one names a master whose simulator node is not known, or no listing plans
/// them.
pub fn listing(
    transfers: &[Transfer<'_>],
    masters: &[RunNode<'_>],
    weights: &[f64],
) -> Option<Vec<u32>> {
    let node_of = |address: &str| {
        masters
            .iter()
            .find(|m| m.address == address)
            .and_then(|m| m.simulator_node)
            .map(NodeId)
    };
    let planned = transfers
        .iter()
        .map(|t| {
            Some(RedisCliTransfer {
                slots: u64::from(t.slots),
                from: node_of(t.from)?,
                to: node_of(t.to)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let counts: Vec<usize> = ach_redis::local::even_slot_ranges(weights.len())
        .iter()
        .map(|&(first, last)| usize::from(last - first) + 1)
        .collect();
    let listing = RedisCliRebalance::listing_for(weights, &counts, &planned)?;
    Some(listing.into_iter().map(|node| node.0).collect())
}

/// The simulator node of a master that started with the slots `initial_slots`: the index of
/// that range among the equal ranges of `nodes` masters, which is the node the simulator's
/// contiguous layout gives the same tokens.
pub fn simulator_node(initial_slots: Option<(u16, u16)>, nodes: usize) -> Option<u32> {
    let range = initial_slots?;
    ach_redis::local::even_slot_ranges(nodes)
        .iter()
        .position(|&r| r == range)
        .map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The output of a run of the live experiment (requests-r8, repeat 2), with its colours.
    const OUTPUT: &str = "\
\x1b[29;1m>>> Performing Cluster Check (using node 127.0.0.1:46865)
\x1b[0m\x1b[32;1m[OK] All nodes agree about slots configuration.
\x1b[0m\x1b[29;1m>>> Rebalancing across 6 nodes. Total weight = 3.60
\x1b[0mMoving 1594 slots from 127.0.0.1:44693 to 127.0.0.1:46865
################################################
Moving 228 slots from 127.0.0.1:44475 to 127.0.0.1:46865
Moving 1366 slots from 127.0.0.1:44475 to 127.0.0.1:41365
Moving 228 slots from 127.0.0.1:37245 to 127.0.0.1:41365
Moving 227 slots from 127.0.0.1:42829 to 127.0.0.1:41365
";

    /// The live cluster's weights: its classes' capacities (total 3.60).
    fn live_weights() -> Vec<f64> {
        let classes = crate::experiment::LiveConfig::default().classes();
        let weights: Vec<f64> = classes.iter().map(|c| c.capacity()).collect();
        assert_eq!(weights.len(), 6);
        weights
    }

    #[test]
    fn reads_the_transfers_and_their_order() {
        let transfers = transfers(OUTPUT);
        assert_eq!(transfers.len(), 5);
        assert_eq!(
            transfers[0],
            Transfer {
                slots: 1594,
                from: "127.0.0.1:44693",
                to: "127.0.0.1:46865"
            }
        );
        // Started with: 46865 and 41365 strong (nodes 0 and 1), 37245 and 42829 medium (2
        // and 3), 44693 and 44475 weak (4 and 5).
        let masters = [
            ("127.0.0.1:37245", 2),
            ("127.0.0.1:41365", 1),
            ("127.0.0.1:42829", 3),
            ("127.0.0.1:44475", 5),
            ("127.0.0.1:44693", 4),
            ("127.0.0.1:46865", 0),
        ]
        .map(|(address, node)| RunNode {
            address,
            simulator_node: Some(node),
        });
        // Sorted by balance: the strong ones (0 takes first), then the sources from the last
        // to give: 3, 2, 5, then 4, which gave first.
        let weights = live_weights();
        assert_eq!(
            listing(&transfers, &masters, &weights),
            Some(vec![0, 1, 3, 2, 5, 4])
        );
        let unknown = [RunNode {
            simulator_node: None,
            ..masters[0]
        }];
        let masters_one_unknown: Vec<RunNode<'_>> =
            unknown.iter().chain(&masters[1..]).copied().collect();
        assert_eq!(listing(&transfers, &masters_one_unknown, &weights), None);
        assert_eq!(listing(&[], &masters, &weights), None);
        // Transfers no listing plans.
        let mut other = transfers.clone();
        other[0].slots = 1000;
        assert_eq!(listing(&other, &masters, &weights), None);
        // Only colour codes may come before a transfer.
        assert!(super::transfers("note: Moving 3 slots from a to b").is_empty());
        assert!(super::transfers("Moving x slots from a to b").is_empty());
    }

    #[test]
    fn the_simulators_redis_cli_so_listed_makes_the_transfers_redis_cli_printed() {
        let made = simulated_transfers(&live_weights(), &[0, 1, 3, 2, 5, 4], SLOTS);
        // OUTPUT's transfers, its masters as simulator nodes (see the test above).
        assert_eq!(
            made,
            [
                (1594, 4, 0),
                (228, 5, 0),
                (1366, 5, 1),
                (228, 2, 1),
                (227, 3, 1)
            ]
        );
    }

    /// The transfers the simulator's `redis-cli` makes on `tokens` contiguous tokens over
    /// nodes of `weights`, taking the nodes in `listing` order: `(slots, from, to)`.
    fn simulated_transfers(
        weights: &[f64],
        listing: &[u32],
        tokens: usize,
    ) -> Vec<(u32, u32, u32)> {
        use ach_baselines::RedisCliRebalance;
        use ach_control::{Balancer, Observation, Plan, commit};
        use ach_ring::{NodeId, TokenRing};
        use ach_sim::config::InitialLayout;

        let positions = (0..tokens)
            .map(|s| (s as f64 + 0.5) / tokens as f64)
            .collect();
        let owners = InitialLayout::Contiguous.owners(tokens, weights.len());
        let mut ring = TokenRing::new(positions, owners).unwrap();
        let listing = listing.iter().copied().map(NodeId).collect();
        let mut rebalance = RedisCliRebalance::listed(weights.to_vec(), listing).unwrap();
        let loads = vec![0.5; weights.len()];
        let live = vec![true; weights.len()];
        let observation = Observation {
            step: 0,
            loads: &loads,
            total_load: 0.5,
            live: &live,
            token_loads: None,
        };
        let mut made = Vec::new();
        loop {
            let plan = rebalance.plan(&ring, &observation);
            if plan == Plan::none() {
                return made;
            }
            let first = plan.moves[0];
            made.push((plan.moves.len() as u32, first.from.0, first.to.0));
            commit(&mut ring, &plan).unwrap();
        }
    }

    const SLOTS: usize = ach_redis::slot::SLOT_COUNT;

    proptest::proptest! {
        /// Whatever order `redis-cli` took the nodes in, the order read back from the transfers
        /// it printed makes the simulator's `redis-cli` print the same transfers (nodes of the
        /// three classes, ties and rounding of every kind).
        #[test]
        fn the_listing_read_back_makes_the_same_transfers(
            classes in proptest::collection::vec(0usize..3, 3..9),
            seed in proptest::prelude::any::<u64>(),
        ) {
            let weights: Vec<f64> = classes.iter().map(|&c| [1.0, 0.55, 0.25][c]).collect();
            let n = weights.len() as u32;
            // A permutation of the nodes from the seed (a Fisher-Yates shuffle by a small LCG).
            let mut taken: Vec<u32> = (0..n).collect();
            let mut state = seed;
            for i in (1..taken.len()).rev() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                taken.swap(i, (state >> 33) as usize % (i + 1));
            }
            let made = simulated_transfers(&weights, &taken, SLOTS);
            let addresses: Vec<String> = (0..n).map(|i| format!("127.0.0.1:{}", 7000 + i)).collect();
            let output: String = made
                .iter()
                .map(|&(slots, from, to)| {
                    format!("Moving {slots} slots from {} to {}\n", addresses[from as usize], addresses[to as usize])
                })
                .collect();
            let masters: Vec<RunNode<'_>> = addresses
                .iter()
                .enumerate()
                .map(|(i, address)| RunNode { address, simulator_node: Some(i as u32) })
                .collect();
            let read = listing(&transfers(&output), &masters, &weights);
            match read {
                None => proptest::prop_assert!(made.is_empty()),
                Some(read) => {
                    proptest::prop_assert_eq!(simulated_transfers(&weights, &read, SLOTS), made);
                }
            }
        }
    }

    #[test]
    fn a_master_maps_to_the_simulator_node_of_its_initial_range() {
        let ranges = ach_redis::local::even_slot_ranges(6);
        assert_eq!(simulator_node(Some(ranges[4]), 6), Some(4));
        assert_eq!(simulator_node(Some((0, 5)), 6), None);
        assert_eq!(simulator_node(None, 6), None);
    }
}
