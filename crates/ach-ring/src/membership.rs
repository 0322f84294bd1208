//! Nodes joining and leaving a [`TokenRing`]: which tokens change owner.
//!
//! These functions only compute moves; nothing changes until the caller applies them (after
//! copying the data, in a live deployment). The simulator uses them too, with the published
//! simulation's rules behind its `paper` profile.

use crate::token_ring::{NodeId, TokenMove, TokenRing};

/// Where the tokens of a leaving node go.
#[derive(Clone, Copy, Debug)]
pub enum LeaveRule<'a> {
    /// Classic consistent hashing: each token goes to the owner of the next token clockwise
    /// held by a live node other than the leaving one (`live[i]` says whether node `i` is live;
    /// a node missing from `live` counts as live). Only the leaving node's key space moves,
    /// the minimum any rule can move. If no other live node owns a token, the tokens go to
    /// node 0.
    NextLiveClockwise {
        /// Which nodes are live.
        live: &'a [bool],
    },
    /// Every token goes to one heir. The published simulation hands them all to node 0.
    AllTo(NodeId),
}

/// Which tokens a joining node gets.
#[derive(Clone, Copy, Debug)]
pub enum JoinRule {
    /// The published simulation: the `v_min` lowest-indexed tokens of the node that owns the
    /// most tokens among `0..n_nodes` (ties: lower id), if it owns more than `v_min`; nothing
    /// otherwise.
    FromLargestOwner {
        /// Number of nodes, the joining one included.
        n_nodes: usize,
        /// Tokens to hand over, and the minimum the donor keeps.
        v_min: usize,
    },
    /// The least key space that gives the new node `tokens` tokens: the shortest arcs whose
    /// owners keep at least `v_min` tokens (ties: lower token index). ACH then hands the node
    /// more as its load shows room.
    ShortestArcs {
        /// Number of nodes, the joining one included.
        n_nodes: usize,
        /// Tokens the new node gets (fewer if the ring cannot spare them).
        tokens: usize,
        /// The minimum every donor keeps.
        v_min: usize,
    },
}

impl TokenRing {
    /// The moves that hand every token of `node` to other nodes under `rule`, in increasing
    /// token order.
    pub fn leave_moves(&self, node: NodeId, rule: LeaveRule<'_>) -> Vec<TokenMove> {
        let owners = self.owners();
        let v = owners.len();
        let is_live = |o: NodeId| match rule {
            LeaveRule::NextLiveClockwise { live } => live.get(o.index()).copied().unwrap_or(true),
            LeaveRule::AllTo(_) => true,
        };
        (0..v)
            .filter(|&s| owners[s] == node)
            .map(|s| {
                let to = match rule {
                    LeaveRule::AllTo(heir) => heir,
                    LeaveRule::NextLiveClockwise { .. } => (1..v)
                        .map(|k| owners[(s + k) % v])
                        .find(|&o| o != node && is_live(o))
                        .unwrap_or(NodeId(0)),
                };
                TokenMove {
                    token: s,
                    from: node,
                    to,
                }
            })
            .collect()
    }

    /// The moves that give the new node `new` its first tokens under `rule`.
    pub fn join_moves(&self, new: NodeId, rule: JoinRule) -> Vec<TokenMove> {
        let owners = self.owners();
        let give = |token: usize| TokenMove {
            token,
            from: owners[token],
            to: new,
        };
        match rule {
            JoinRule::FromLargestOwner { n_nodes, v_min } => {
                let counts = self.counts(n_nodes);
                let Some((donor, &most)) = counts
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
                else {
                    return Vec::new();
                };
                if most <= v_min {
                    return Vec::new();
                }
                self.tokens_of(NodeId(donor as u32))
                    .into_iter()
                    .take(v_min)
                    .map(give)
                    .collect()
            }
            JoinRule::ShortestArcs {
                n_nodes,
                tokens,
                v_min,
            } => {
                let mut counts = self.counts(n_nodes.max(new.index() + 1));
                let mut moves = Vec::with_capacity(tokens);
                for &token in self.tokens_shortest_first() {
                    if moves.len() == tokens {
                        break;
                    }
                    let owner = owners[token];
                    let Some(count) = counts.get_mut(owner.index()) else {
                        continue;
                    };
                    if owner != new && *count > v_min {
                        *count -= 1;
                        moves.push(give(token));
                    }
                }
                moves.sort_by_key(|mv| mv.token);
                moves
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaving_hands_each_token_to_the_next_live_owner() {
        // Owners 0,1,2,0,1,2; node 1 leaves while node 2 is not live.
        let ring = TokenRing::evenly_spaced(6, 3).unwrap();
        let moves = ring.leave_moves(
            NodeId(1),
            LeaveRule::NextLiveClockwise {
                live: &[true, true, false],
            },
        );
        let to: Vec<(usize, u32)> = moves.iter().map(|m| (m.token, m.to.0)).collect();
        assert_eq!(to, vec![(1, 0), (4, 0)]);
        let moves = ring.leave_moves(NodeId(1), LeaveRule::NextLiveClockwise { live: &[] });
        let to: Vec<(usize, u32)> = moves.iter().map(|m| (m.token, m.to.0)).collect();
        assert_eq!(to, vec![(1, 2), (4, 2)]);
        let mut after = ring.clone();
        let moved = after.apply(&moves).unwrap();
        assert!(
            (moved - ring.share(NodeId(1))).abs() < 1e-15,
            "only its share moves"
        );
    }

    #[test]
    fn joining_takes_the_shortest_spare_arcs() {
        let weights = [5.0, 1.0, 4.0, 2.0, 3.0, 6.0];
        let owners = [0, 0, 0, 0, 1, 1].map(NodeId).to_vec();
        let ring = TokenRing::from_arc_weights(&weights, owners).unwrap();
        let moves = ring.join_moves(
            NodeId(2),
            JoinRule::ShortestArcs {
                n_nodes: 3,
                tokens: 3,
                v_min: 2,
            },
        );
        // Node 0 can spare two (tokens 1 and 3, the shortest), node 1 none.
        assert_eq!(
            moves.iter().map(|m| m.token).collect::<Vec<_>>(),
            vec![1, 3]
        );
        let paper = ring.join_moves(
            NodeId(2),
            JoinRule::FromLargestOwner {
                n_nodes: 3,
                v_min: 2,
            },
        );
        assert_eq!(
            paper.iter().map(|m| m.token).collect::<Vec<_>>(),
            vec![0, 1]
        );
    }
}
