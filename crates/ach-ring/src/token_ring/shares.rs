//! The share of the key space each node owns, kept per node as owners change when the arcs
//! allow it to be kept exactly.
//!
//! A node's share is the sum of its arcs in token index order ([`TokenRing::shares`]). Summing
//! floating-point numbers in another order, or keeping the sum as tokens come and go, would in
//! general round differently. But when every arc is a whole number of *units* of `2^-53` and
//! all of them together make at most `2^53` units, every sum of some of them is a whole number
//! of units no larger than `2^53`, which a `f64` holds exactly. Then every addition of the
//! ordered sum is exact, and the ordered sum equals the sum of the units, whatever the order.
//!
//! The positions the simulator draws are such: a uniform `f64` of `rand` is a whole number of
//! units (53 random bits scaled by `2^-53`), so each arc, a difference of two of them (token
//! 0's wrapped round by adding 1), is one as well, and the arcs tile the circle: `2^53` units
//! in all. Such a ring keeps each node's units as owners change, from its first change of
//! owners on, and [`TokenRing::shares`] then costs `O(n_nodes)`, not `O(V)`; other rings are
//! summed by a pass.

use super::{Geometry, NodeId, TokenRing};

/// `2^53`: how many units make the whole circle.
const UNITS_PER_CIRCLE: f64 = 9_007_199_254_740_992.0;

/// The size of a unit, `2^-53`.
const UNIT: f64 = 1.0 / UNITS_PER_CIRCLE;

/// Whether every arc is a whole number of units and all of them together make at most the
/// whole circle.
pub(super) fn whole_units(arcs: &[f64]) -> bool {
    let mut total: u64 = 0;
    for &arc in arcs {
        // Scaling by a power of two is exact, so this is the arc's value in units.
        let scaled = arc * UNITS_PER_CIRCLE;
        if !((1.0..=UNITS_PER_CIRCLE).contains(&scaled) && scaled.fract() == 0.0) {
            return false;
        }
        total += scaled as u64;
        if total > 1 << 53 {
            return false;
        }
    }
    true
}

/// The units of an arc that is a whole number of them (exact). Through `i64`, whose conversion
/// is one instruction: the units are at most `2^53`.
#[inline(always)]
fn units_of(arc: f64) -> u64 {
    (arc * UNITS_PER_CIRCLE) as i64 as u64
}

impl Geometry {
    /// [`whole_units`] of the arcs, found at the first call.
    pub(super) fn arcs_are_whole_units(&self) -> bool {
        *self.whole_units.get_or_init(|| whole_units(&self.arcs))
    }
}

impl TokenRing {
    /// Share of the key space owned by each of the nodes `0..n_nodes` (sum of its arcs, in
    /// token index order). Owners outside that range are not counted.
    ///
    /// `O(n_nodes)` once the owners have changed when the arcs are whole units of `2^-53` (as
    /// the simulator's random positions are: the ring then keeps each node's sum as owners
    /// change, and the values are those of the ordered sum, see the module documentation),
    /// else `O(V)`.
    pub fn shares(&self, n_nodes: usize) -> Vec<f64> {
        if let Some(node_units) = self.node_units(n_nodes) {
            return (0..n_nodes)
                .map(|i| node_units.get(i).map_or(0.0, |&units| units as f64 * UNIT))
                .collect();
        }
        self.summed_shares(n_nodes)
    }

    /// The shares of the nodes `0..n_nodes` by a pass over the tokens: each node's arcs summed
    /// in token index order, the values [`TokenRing::shares`] stands for.
    fn summed_shares(&self, n_nodes: usize) -> Vec<f64> {
        let mut shares = vec![0.0; n_nodes];
        for (owner, arc) in self.owners.iter().zip(self.arcs().iter()) {
            if let Some(s) = shares.get_mut(owner.index()) {
                *s += arc;
            }
        }
        shares
    }

    /// The units of each node of id below [`TokenRing::counted_ids`], when they can give the
    /// shares of the nodes `0..n_nodes`: the arcs are whole units, and no node of a larger id
    /// is asked for while one owns a token. Built at the first call after the owners first
    /// changed: a ring whose shares are asked for once, as `ach-redis` builds one at every
    /// control step, is summed by a pass, which costs less than finding its units.
    fn node_units(&self, n_nodes: usize) -> Option<&[u64]> {
        if n_nodes > self.counted_ids() && self.uncounted_tokens > 0 {
            return None;
        }
        if self.owner_changes == 0 && self.node_units.get().is_none() {
            return None;
        }
        if !self.geometry.arcs_are_whole_units() {
            return None;
        }
        let node_units = self.node_units.get_or_init(|| {
            let mut node_units = Vec::new();
            for (owner, &arc) in self.owners.iter().zip(self.arcs()) {
                add_units(&mut node_units, self.counted_ids(), *owner, units_of(arc));
            }
            node_units
        });
        Some(node_units)
    }
}

/// Moves the units of a token of arc `arc` (whole units) from `from`, which owned it, to `to`
/// in `node_units`, the units of the ids below `counted_ids`.
pub(super) fn move_units(
    node_units: &mut Vec<u64>,
    counted_ids: usize,
    from: NodeId,
    to: NodeId,
    arc: f64,
) {
    let units = units_of(arc);
    // A counted owner has an entry: it was added when the units were built or later.
    if let Some(held) = node_units.get_mut(from.index()) {
        *held -= units;
    }
    add_units(node_units, counted_ids, to, units);
}

/// Adds `units` to `owner`'s entry of `node_units`, growing it, if the id is below
/// `counted_ids`.
fn add_units(node_units: &mut Vec<u64>, counted_ids: usize, owner: NodeId, units: u64) {
    let i = owner.index();
    if i >= counted_ids {
        return;
    }
    if i >= node_units.len() {
        node_units.resize(i + 1, 0);
    }
    node_units[i] += units;
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::TokenMove;

    #[test]
    fn units_need_whole_units_that_fit_the_circle() {
        assert!(whole_units(&[0.25, 0.75]));
        assert_eq!(units_of(0.75), 3 << 51);
        assert!(whole_units(&[UNIT, 1.0 - UNIT]));
        assert_eq!(units_of(1.0 - UNIT), (1 << 53) - 1);
        // A third is no whole number of units.
        assert!(!whole_units(&[1.0 / 3.0, 2.0 / 3.0]));
        // Half a unit is not a whole one.
        assert!(!whole_units(&[UNIT / 2.0, 1.0 - UNIT / 2.0]));
        // More than the circle could round once summed, even by one unit.
        assert!(!whole_units(&[0.75, 0.75]));
        assert!(!whole_units(&[0.5, 0.5, UNIT]));
        assert!(whole_units(&[0.5, 0.5 - UNIT, UNIT]));
    }

    /// A ring of positions made from `raw` as the simulator draws them (whole units), with
    /// `owners` in turn.
    fn unit_ring(raw: &[u64], owners: &[u32]) -> Option<TokenRing> {
        let mut positions: Vec<f64> = raw.iter().map(|&r| (r >> 11) as f64 * UNIT).collect();
        positions.sort_by(f64::total_cmp);
        positions.dedup();
        let owners = (0..positions.len())
            .map(|s| NodeId(owners[s % owners.len()]))
            .collect();
        TokenRing::new(positions, owners).ok()
    }

    /// The bits of each share: equal shares are the same `f64`, not merely equal ones.
    fn bits(shares: &[f64]) -> Vec<u64> {
        shares.iter().map(|s| s.to_bits()).collect()
    }

    proptest! {
        /// Kept units give, bit for bit, the shares of the ordered sum, before and after any
        /// moves (sparse owner ids included).
        #[test]
        fn kept_units_give_the_ordered_sums(
            raw in prop::collection::vec(any::<u64>(), 1..200),
            owners in prop::collection::vec(0u32..6, 1..8),
            moves in prop::collection::vec((any::<prop::sample::Index>(), 0u32..7), 0..60),
            sparse_id in prop::sample::select(vec![6u32, 5_000]),
        ) {
            let Some(mut ring) = unit_ring(&raw, &owners) else { return Ok(()) };
            prop_assert!(ring.geometry.arcs_are_whole_units());
            // Units are kept from the first change of owners on.
            let first = TokenMove { token: 0, from: ring.owner(0), to: ring.owner(0) };
            ring.apply(&[first]).unwrap();
            for n in [0, 3, 6, 8] {
                prop_assert_eq!(bits(&ring.shares(n)), bits(&ring.summed_shares(n)));
            }
            for (index, to) in moves {
                let token = index.index(ring.len());
                let to = if to == 6 { NodeId(sparse_id) } else { NodeId(to) };
                let mv = TokenMove { token, from: ring.owner(token), to };
                ring.apply(&[mv]).unwrap();
                for n in [3, 6, 8, 6_000] {
                    prop_assert_eq!(bits(&ring.shares(n)), bits(&ring.summed_shares(n)));
                }
            }
        }
    }

    #[test]
    fn rings_without_whole_units_sum_by_a_pass() {
        // The second arc is about 1.5 units.
        let positions = vec![3e-17, 2e-16, 0.5];
        let ring = TokenRing::new(positions, vec![NodeId(0), NodeId(1), NodeId(0)]).unwrap();
        assert!(!ring.geometry.arcs_are_whole_units());
        assert_eq!(ring.shares(2), ring.summed_shares(2));
    }
}
