//! The order `redis-cli --cluster rebalance` took the nodes in, read back from the transfers
//! it printed, for the calibrated simulator's `redis-cli`
//! ([`ach_baselines::RedisCliRebalance::listed`]).
//!
//! `redis-cli` sorts the nodes by balance and moves slots from the last node with slots to
//! give to the first with slots to get. Nodes of equal weight and equal slots tie, and which
//! of them comes first follows from the order it read the nodes in (their random ids) and its
//! `qsort`: two weak masters of the live cluster tie, and the one that gives its slots first
//! decides how far the run gets in a minute. The transfers it printed, `Moving N slots from
//! SOURCE to TARGET`, show its sorted order: the targets in the order they first appear, and
//! the sources in the reverse of it.

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

/// The order `transfers` show over the simulator's `nodes` nodes: the targets in the order
/// they first appear, the nodes that neither give nor take in node order, the sources in the
/// reverse of the order they first appear. `None` when there are no transfers or one names a
/// master whose simulator node is not known.
pub fn listing(
    transfers: &[Transfer<'_>],
    masters: &[RunNode<'_>],
    nodes: usize,
) -> Option<Vec<u32>> {
    if transfers.is_empty() {
        return None;
    }
    let node_of = |address: &str| {
        masters
            .iter()
            .find(|m| m.address == address)
            .and_then(|m| m.simulator_node)
    };
    let mut targets: Vec<u32> = Vec::new();
    let mut sources: Vec<u32> = Vec::new();
    for transfer in transfers {
        let (from, to) = (node_of(transfer.from)?, node_of(transfer.to)?);
        if !targets.contains(&to) {
            targets.push(to);
        }
        if !sources.contains(&from) {
            sources.push(from);
        }
    }
    let listed = |node: &u32| targets.contains(node) || sources.contains(node);
    let idle = (0..nodes as u32).filter(|node| !listed(node));
    let order: Vec<u32> = targets
        .iter()
        .copied()
        .chain(idle)
        .chain(sources.iter().rev().copied())
        .collect();
    (order.len() == nodes).then_some(order)
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
        assert_eq!(
            listing(&transfers, &masters, 6),
            Some(vec![0, 1, 3, 2, 5, 4])
        );
        let unknown = [RunNode {
            simulator_node: None,
            ..masters[0]
        }];
        let masters_one_unknown: Vec<RunNode<'_>> =
            unknown.iter().chain(&masters[1..]).copied().collect();
        assert_eq!(listing(&transfers, &masters_one_unknown, 6), None);
        assert_eq!(listing(&[], &masters, 6), None);
        // Only colour codes may come before a transfer.
        assert!(super::transfers("note: Moving 3 slots from a to b").is_empty());
        assert!(super::transfers("Moving x slots from a to b").is_empty());
    }

    #[test]
    fn the_simulators_redis_cli_so_listed_makes_the_transfers_redis_cli_printed() {
        use ach_baselines::RedisCliRebalance;
        use ach_control::{Balancer, Observation, Plan, commit};
        use ach_ring::{NodeId, TokenRing};
        use ach_sim::config::InitialLayout;

        use crate::experiment::LiveConfig;

        let slots = ach_redis::slot::SLOT_COUNT;
        let positions = (0..slots)
            .map(|s| (s as f64 + 0.5) / slots as f64)
            .collect();
        let owners = InitialLayout::Contiguous.owners(slots, 6);
        let mut ring = TokenRing::new(positions, owners).unwrap();
        // The live cluster's weights: its classes' capacities (total 3.60).
        let classes = LiveConfig::default().classes();
        let weights: Vec<f64> = classes.iter().map(|c| c.capacity()).collect();
        assert_eq!(weights.len(), 6);
        let listing = vec![0, 1, 3, 2, 5, 4].into_iter().map(NodeId).collect();
        let mut rebalance = RedisCliRebalance::listed(weights, listing).unwrap();
        let (loads, live) = ([0.5; 6], [true; 6]);
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
                break;
            }
            let first = plan.moves[0];
            made.push((plan.moves.len() as u32, first.from.0, first.to.0));
            commit(&mut ring, &plan).unwrap();
        }
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

    #[test]
    fn a_master_maps_to_the_simulator_node_of_its_initial_range() {
        let ranges = ach_redis::local::even_slot_ranges(6);
        assert_eq!(simulator_node(Some(ranges[4]), 6), Some(4));
        assert_eq!(simulator_node(Some((0, 5)), 6), None);
        assert_eq!(simulator_node(None, 6), None);
    }
}
