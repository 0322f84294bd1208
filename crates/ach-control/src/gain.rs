//! What a plan is predicted to gain: the cut it makes in the load above the target.
//!
//! ACH's `min_gain` ([`crate::AchConfig::min_gain`]) holds back a plan whose predicted gain is
//! below it. The gain is measured on the *excess*, the sum over the live nodes of their load
//! above the target `l*`: the load that sits where it should not. A move from a node above the
//! target to one below it cuts the excess by the load moved; a move that lifts its receiver
//! above the target cuts it by less. Unlike `D = max - mean`, the excess sees a move between
//! two nodes that are not the hottest, and a move out of one of two equally hot nodes.

use ach_ring::{TokenMove, TokenRing};

/// Below this, an excess counts as zero: nothing to gain.
const NEGLIGIBLE: f64 = 1e-12;

/// The load above `target` of the live nodes: `sum_i max(l_i - target, 0)` over the live nodes
/// with a finite load.
pub fn excess(loads: &[f64], live: &[bool], target: f64) -> f64 {
    loads
        .iter()
        .enumerate()
        .filter(|&(i, l)| live.get(i).copied().unwrap_or(true) && l.is_finite())
        .map(|(_, &l)| (l - target).max(0.0))
        .sum()
}

/// The loads predicted after `moves`: each moved token's load leaves its owner and joins the
/// receiver, in the loads' own units (as ACH's planner predicts them). A token's load is
/// `token_loads[token]` when given (one per token), and otherwise its owner's load times the
/// token's share of the owner's key space.
pub fn predicted_loads(
    ring: &TokenRing,
    moves: &[TokenMove],
    loads: &[f64],
    token_loads: Option<&[f64]>,
) -> Vec<f64> {
    let mut after = loads.to_vec();
    let shares = match token_loads {
        Some(_) => Vec::new(),
        None => ring.counts_and_shares(loads.len()).1,
    };
    for mv in moves.iter().filter(|mv| mv.from != mv.to) {
        let (from, to) = (mv.from.index(), mv.to.index());
        if from >= loads.len() || to >= loads.len() {
            continue;
        }
        let load = match token_loads {
            Some(token_loads) => token_loads.get(mv.token).copied().unwrap_or(0.0),
            None => {
                let arc = ring.arcs().get(mv.token).copied().unwrap_or(0.0);
                let share = shares.get(from).copied().unwrap_or(0.0);
                if share > 0.0 {
                    loads[from] * arc / share
                } else {
                    0.0
                }
            }
        };
        if load.is_finite() {
            after[from] -= load;
            after[to] += load;
        }
    }
    after
}

/// The fraction of the excess over `target` that `moves` are predicted to remove:
/// `1 - excess(after) / excess(before)`, 0 when there is no excess, negative when the moves
/// would add to it.
pub fn predicted_gain(
    ring: &TokenRing,
    moves: &[TokenMove],
    loads: &[f64],
    live: &[bool],
    token_loads: Option<&[f64]>,
    target: f64,
) -> f64 {
    let before = excess(loads, live, target);
    if before.is_nan() || before < NEGLIGIBLE {
        return 0.0;
    }
    let after = predicted_loads(ring, moves, loads, token_loads);
    1.0 - excess(&after, live, target) / before
}

#[cfg(test)]
mod tests {
    use super::*;
    use ach_ring::NodeId;

    fn ring_of(owners: &[u32]) -> TokenRing {
        let n = owners.len();
        let positions = (0..n).map(|s| s as f64 / n as f64).collect();
        TokenRing::new(positions, owners.iter().map(|&o| NodeId(o)).collect()).unwrap()
    }

    fn mv(token: usize, from: u32, to: u32) -> TokenMove {
        TokenMove {
            token,
            from: NodeId(from),
            to: NodeId(to),
        }
    }

    #[test]
    fn excess_sums_the_live_loads_above_the_target() {
        let loads = [0.9, 0.5, 0.7, f64::NAN];
        assert!((excess(&loads, &[true; 4], 0.6) - 0.4).abs() < 1e-12);
        assert!((excess(&loads, &[true, true, false, true], 0.6) - 0.3).abs() < 1e-12);
    }

    #[test]
    fn a_move_to_a_node_below_the_target_cuts_the_excess_by_its_load() {
        let ring = ring_of(&[0, 0, 1, 1]);
        let loads = [0.8, 0.4];
        let token_loads = [0.3, 0.1, 0.2, 0.2];
        // Token 1 (load 0.1) from node 0 to node 1: the excess over 0.6 goes from 0.2 to 0.1.
        let gain = predicted_gain(
            &ring,
            &[mv(1, 0, 1)],
            &loads,
            &[true; 2],
            Some(&token_loads),
            0.6,
        );
        assert!((gain - 0.5).abs() < 1e-12, "{gain}");
        // Token 0 (load 0.3) overshoots: node 1 ends at 0.7, so the excess is still 0.1.
        let gain = predicted_gain(
            &ring,
            &[mv(0, 0, 1)],
            &loads,
            &[true; 2],
            Some(&token_loads),
            0.6,
        );
        assert!((gain - 0.5).abs() < 1e-12, "{gain}");
    }

    #[test]
    fn without_token_loads_a_token_carries_its_share_of_its_owners_load() {
        // Node 0 owns half the ring in two equal arcs: each carries half its load.
        let ring = ring_of(&[0, 0, 1, 1]);
        let after = predicted_loads(&ring, &[mv(0, 0, 1)], &[0.8, 0.4], None);
        assert!((after[0] - 0.4).abs() < 1e-12 && (after[1] - 0.8).abs() < 1e-12);
        let gain = predicted_gain(&ring, &[mv(0, 0, 1)], &[0.8, 0.4], &[true; 2], None, 0.6);
        assert!(
            gain.abs() < 1e-12,
            "the excess moves from node 0 to node 1: {gain}"
        );
    }

    #[test]
    fn no_excess_means_no_gain_and_a_harmful_move_a_negative_one() {
        let ring = ring_of(&[0, 1]);
        let token_loads = [0.5, 0.5];
        let gain = predicted_gain(
            &ring,
            &[mv(0, 0, 1)],
            &[0.5, 0.5],
            &[true; 2],
            Some(&token_loads),
            0.5,
        );
        assert_eq!(gain, 0.0);
        let gain = predicted_gain(
            &ring,
            &[mv(1, 1, 0)],
            &[0.7, 0.5],
            &[true; 2],
            Some(&token_loads),
            0.6,
        );
        assert!(gain < 0.0, "{gain}");
    }
}
