//! How the owners of a ring's tokens change: moves checked and made in every order the ring
//! keeps, and the counts of tokens per node (and the shares in units, module `shares`) kept
//! with them.

use std::sync::OnceLock;

use super::shares::move_units;
use super::{NodeId, RankSets, RingError, TokenMove, TokenRing};

impl TokenRing {
    /// Owner ids below this are counted per node as owners change (so [`TokenRing::counts`]
    /// costs `O(n_nodes)`, not `O(V)`); tokens of larger ids, which only a ring with sparse
    /// ids has, are counted by a scan when asked for.
    pub(super) fn counted_ids(&self) -> usize {
        self.positions().len() + 1024
    }

    /// Counts one more token of `owner`.
    pub(super) fn count_in(&mut self, owner: NodeId) {
        let i = owner.index();
        if i >= self.counted_ids() {
            self.uncounted_tokens += 1;
            return;
        }
        if i >= self.node_counts.len() {
            self.node_counts.resize(i + 1, 0);
        }
        self.node_counts[i] += 1;
    }

    /// Counts one token fewer of `owner` (which owns one). A count may drop to zero at the
    /// end of the list: [`TokenRing::trim_counts`] drops those once the owners are set.
    fn count_out(&mut self, owner: NodeId) {
        match self.node_counts.get_mut(owner.index()) {
            Some(count) => *count -= 1,
            None => self.uncounted_tokens -= 1,
        }
    }

    /// Drops the counts of zero at the end of the list, so that the counts end at the largest
    /// id that owns a token and equal owners give equal rings.
    fn trim_counts(&mut self) {
        while self.node_counts.last() == Some(&0) {
            self.node_counts.pop();
        }
    }

    /// Sets the owner of `token` (in range) in every order the ring keeps, and the counts.
    fn set_owner(&mut self, token: usize, owner: NodeId) {
        let from = self.owners[token];
        self.set_owners(&[TokenMove {
            token,
            from,
            to: owner,
        }]);
    }

    /// Sets the owner of each move's token (in range) to its `to`, in order, in every order
    /// the ring keeps and in the counts (and the shares in units, once the ring keeps them);
    /// each kept order is updated in a pass of its own.
    fn set_owners(&mut self, moves: &[TokenMove]) {
        let counted_ids = self.counted_ids();
        for mv in moves {
            let from = std::mem::replace(&mut self.owners[mv.token], mv.to);
            // Both callers check (or build) each move's `from` against the owner, and the rank
            // sets rely on it.
            debug_assert_eq!(from, mv.from);
            self.count_out(from);
            self.count_in(mv.to);
            // The shares in units, once the ring keeps them (module `shares`), move with the
            // counts.
            if let Some(node_units) = self.node_units.get_mut() {
                move_units(
                    node_units,
                    counted_ids,
                    from,
                    mv.to,
                    self.geometry.arcs[mv.token],
                );
            }
        }
        self.trim_counts();
        self.owner_changes += moves.len() as u64;
        if let Some(owners) = self.owners_shortest_first.get_mut() {
            let ranks = &self.geometry.ranks().shortest;
            for mv in moves {
                owners[ranks[mv.token]] = mv.to;
            }
        }
        if let Some(owners) = self.owners_longest_first.get_mut() {
            let ranks = &self.geometry.ranks().longest;
            for mv in moves {
                owners[ranks[mv.token]] = mv.to;
            }
        }
        let geometry = &self.geometry;
        move_ranks(&mut self.rank_sets_shortest_first, moves, || {
            &geometry.ranks().shortest
        });
        move_ranks(&mut self.rank_sets_longest_first, moves, || {
            &geometry.ranks().longest
        });
    }

    /// Applies a set of owner changes in order and returns their `M_keys`: the sum of the arcs
    /// of the tokens whose owner at the end differs from their owner at the start. A token moved
    /// away and back costs nothing.
    ///
    /// Fails, leaving the ring unchanged, if a move names a token out of range or a `from` that
    /// does not own the token at that point of the sequence.
    pub fn apply(&mut self, moves: &[TokenMove]) -> Result<f64, RingError> {
        if distinct_in_token_order(moves) {
            self.apply_distinct(moves)?;
            // Each token moves once: the arcs of the moves that change an owner, in token
            // order, as the general case sums them.
            Ok(moves
                .iter()
                .filter(|mv| mv.from != mv.to)
                .map(|mv| self.arcs()[mv.token])
                .sum())
        } else {
            self.apply_in_order(moves)
        }
    }

    /// [`TokenRing::apply`] without measuring `M_keys`, for a caller that has it from the plan
    /// (a simulated run): the same owners and the same errors.
    pub fn apply_unmeasured(&mut self, moves: &[TokenMove]) -> Result<(), RingError> {
        if distinct_in_token_order(moves) {
            self.apply_distinct(moves)
        } else {
            self.apply_in_order(moves).map(|_| ())
        }
    }

    /// [`TokenRing::apply`] of any moves: each move is checked and made in turn, and undone
    /// on the first failure.
    pub(super) fn apply_in_order(&mut self, moves: &[TokenMove]) -> Result<f64, RingError> {
        let mut before: Vec<(usize, NodeId)> = Vec::with_capacity(moves.len());
        for (k, mv) in moves.iter().enumerate() {
            if let Err(error) = self.check_move(mv) {
                // Undo in reverse order so that a token moved twice gets its first owner back.
                for &(token, owner) in before.iter().rev() {
                    self.set_owner(token, owner);
                }
                debug_assert_eq!(before.len(), k);
                return Err(error);
            }
            before.push((mv.token, mv.from));
            self.set_owner(mv.token, mv.to);
        }
        // The first recorded owner of a token is its owner at the start.
        before.sort_by_key(|&(token, _)| token);
        before.dedup_by_key(|&mut (token, _)| token);
        let m_keys = before
            .iter()
            .filter(|&&(token, owner)| self.owners[token] != owner)
            .map(|&(token, _)| self.arcs()[token])
            .sum();
        Ok(m_keys)
    }

    /// Whether `mv` can be made now: its token is in range and owned by its `from`.
    fn check_move(&self, mv: &TokenMove) -> Result<(), RingError> {
        let Some(&actual) = self.owners.get(mv.token) else {
            return Err(RingError::TokenOutOfRange {
                token: mv.token,
                tokens: self.owners.len(),
            });
        };
        if actual != mv.from {
            return Err(RingError::WrongSource {
                token: mv.token,
                claimed: mv.from,
                actual,
            });
        }
        Ok(())
    }

    /// The owners of [`TokenRing::apply`] of moves in increasing token order, each token once
    /// (as a plan has them): every move is checked against the owners before any is made, so
    /// nothing needs undoing.
    fn apply_distinct(&mut self, moves: &[TokenMove]) -> Result<(), RingError> {
        for mv in moves {
            self.check_move(mv)?;
        }
        self.set_owners(moves);
        Ok(())
    }
}

/// Makes `moves` (each token's `from` its owner when the move is made) in the rank sets of one
/// arc order, once they are kept; drops them when a move's `to` would make them too large
/// (they are built again when next asked for, or found too large). Every `from` owns a token,
/// so the sets cover it already.
///
/// `ranks` gives where each token stands in that order; it is asked for only when the sets are
/// kept.
fn move_ranks<'a>(
    sets: &mut OnceLock<Option<RankSets>>,
    moves: &[TokenMove],
    ranks: impl FnOnce() -> &'a [usize],
) {
    let Some(Some(kept)) = sets.get_mut() else {
        return;
    };
    let ranks = ranks();
    let covered = moves.iter().all(|mv| {
        let covered = kept.cover(mv.to.index() + 1);
        if covered {
            kept.move_rank(ranks[mv.token], mv.from, mv.to);
        }
        covered
    });
    if !covered {
        *sets = OnceLock::new();
    }
}

/// Whether `moves` name distinct tokens in increasing order (as a plan has them), so that
/// [`TokenRing::apply`] may check them all before making any.
fn distinct_in_token_order(moves: &[TokenMove]) -> bool {
    moves.windows(2).all(|pair| pair[0].token < pair[1].token)
}
