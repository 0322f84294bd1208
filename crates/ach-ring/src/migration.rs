//! What a change of owners means for the data: the exact ranges of key hashes to copy.

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

use crate::key::{DROPPED_BITS, POSITION_SCALE, last_index_at_or_below};
use crate::token_ring::{NodeId, TokenMove, TokenRing};

/// The data one token move migrates: the keys whose [`crate::key_hash`] lies in `ranges` pass
/// from node `from` to node `to`.
///
/// The ranges are exact: a key changes owner when the move is committed if and only if its hash
/// lies in one of them. They are in increasing order and disjoint; token 0's arc, which wraps
/// round 0, gives two ranges (one ending at `u64::MAX`, one starting at 0) unless it is the only
/// token. A token whose arc holds no representable key position (narrower than `2^-53`) has no
/// range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    /// The token that changes owner.
    pub token: usize,
    /// Its owner before the move: the node that holds the data now.
    pub from: NodeId,
    /// Its owner after the move: the node the data must be copied to before the commit.
    pub to: NodeId,
    /// The key hashes that move, as inclusive ranges.
    pub ranges: Vec<RangeInclusive<u64>>,
}

impl TokenRing {
    /// The key hashes token `token` owns, as inclusive ranges in increasing order (see
    /// [`Migration`]). Empty for a token out of range.
    ///
    /// ```
    /// use ach_ring::TokenRing;
    /// let ring = TokenRing::evenly_spaced(4, 2).unwrap();
    /// let ranges = ring.hash_ranges(1); // the arc (0.125, 0.375]
    /// assert_eq!(ranges.len(), 1);
    /// assert_eq!(ring.lookup_hash(*ranges[0].start()), 1);
    /// assert_eq!(ring.lookup_hash(*ranges[0].end()), 1);
    /// assert_eq!(ring.lookup_hash(ranges[0].start() - 1), 0);
    /// ```
    pub fn hash_ranges(&self, token: usize) -> Vec<RangeInclusive<u64>> {
        let positions = self.positions();
        let (Some(&end), Some(&last)) = (positions.get(token), positions.last()) else {
            return Vec::new();
        };
        if positions.len() == 1 {
            return vec![0..=u64::MAX];
        }
        // Position index k (a key lies at k / 2^53) -> the 2048 hashes with that top.
        let first_hash = |k: u64| k << DROPPED_BITS;
        let last_hash = |k: u64| (k << DROPPED_BITS) | ((1 << DROPPED_BITS) - 1);
        let top = (POSITION_SCALE as u64) - 1;
        // Positions are in [0, 1), so the indices below exist.
        let end_k = last_index_at_or_below(end).unwrap_or(0);
        if token == 0 {
            // (pos[V-1], 1) and [0, pos[0]].
            let mut ranges = vec![0..=last_hash(end_k)];
            let after_last = last_index_at_or_below(last).unwrap_or(0) + 1;
            if after_last <= top {
                ranges.push(first_hash(after_last)..=u64::MAX);
            }
            return ranges;
        }
        let start_k = last_index_at_or_below(positions[token - 1]).unwrap_or(0) + 1;
        if start_k > end_k {
            return Vec::new();
        }
        vec![first_hash(start_k)..=last_hash(end_k)]
    }

    /// One [`Migration`] per move that changes an owner (`from != to`), in the order given.
    /// Moves naming a token the ring does not have are skipped ([`TokenRing::apply`] rejects
    /// them).
    pub fn migrations(&self, moves: &[TokenMove]) -> Vec<Migration> {
        moves
            .iter()
            .filter(|mv| mv.from != mv.to && mv.token < self.len())
            .map(|mv| Migration {
                token: mv.token,
                from: mv.from,
                to: mv.to,
                ranges: self.hash_ranges(mv.token),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key_hash;

    fn random_hashes(count: usize) -> impl Iterator<Item = u64> {
        (0..count as u64).map(|i| key_hash(&i.to_le_bytes()))
    }

    #[test]
    fn ranges_cover_every_hash_exactly_once() {
        // Hashed positions, evenly spaced ones, and a ring with a position at exactly 0.
        let hashed: Vec<f64> = {
            let mut p: Vec<f64> = (0..97u32)
                .map(|i| crate::key_position(format!("t{i}").as_bytes()))
                .collect();
            p.sort_by(f64::total_cmp);
            p.dedup();
            p
        };
        let rings = [
            TokenRing::round_robin(hashed, 5).unwrap(),
            TokenRing::evenly_spaced(64, 3).unwrap(),
            TokenRing::round_robin(vec![0.0, 0.5], 2).unwrap(),
            TokenRing::evenly_spaced(1, 1).unwrap(),
        ];
        for ring in &rings {
            let all: Vec<Vec<RangeInclusive<u64>>> =
                (0..ring.len()).map(|s| ring.hash_ranges(s)).collect();
            let mut covered: u128 = 0;
            for ranges in &all {
                for r in ranges {
                    covered += (*r.end() - *r.start()) as u128 + 1;
                }
            }
            assert_eq!(covered, 1u128 << 64, "the ranges partition the hash space");
            let edges = [0u64, 1, 0x7FF, 0x800, u64::MAX, u64::MAX - 0x7FF, 1 << 63];
            for h in random_hashes(20_000).chain(edges) {
                let owner = ring.lookup_hash(h);
                assert!(all[owner].iter().any(|r| r.contains(&h)), "hash {h:#x}");
            }
            for ranges in &all {
                for r in ranges {
                    for h in [*r.start(), *r.end()] {
                        assert!(all[ring.lookup_hash(h)].iter().any(|o| o.contains(&h)));
                    }
                }
            }
        }
    }

    #[test]
    fn migrations_skip_moves_that_change_nothing() {
        let ring = TokenRing::evenly_spaced(8, 2).unwrap();
        let moves = [
            TokenMove {
                token: 0,
                from: NodeId(0),
                to: NodeId(1),
            },
            TokenMove {
                token: 3,
                from: NodeId(1),
                to: NodeId(1),
            },
            TokenMove {
                token: 99,
                from: NodeId(1),
                to: NodeId(0),
            },
        ];
        let migrations = ring.migrations(&moves);
        assert_eq!(migrations.len(), 1);
        assert_eq!(migrations[0].ranges.len(), 2, "token 0 wraps round 0");
    }
}
