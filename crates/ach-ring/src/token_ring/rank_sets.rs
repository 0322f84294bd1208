//! Each node's tokens as a set of ranks in one arc order, kept as bits, so that a walk over one
//! node's tokens in arc order visits only that node's tokens.
//!
//! A walk over every token in arc order that looks only at some nodes' tokens (taking a share
//! of each of them, as Dynamic-R and ACH do at every step) branches at every rank on whether
//! its owner is one of them, and that branch follows the owners, which look random to the
//! processor. A node's set of ranks walks the same tokens in the same order with one branch a
//! token it owns. The sets are kept up to date by every change of owners, two bits a move.

use std::sync::OnceLock;

use super::{NodeId, TokenRing};

/// The most words (of 64 ranks) the sets of one order may take: 512 KiB. A ring of more nodes
/// times tokens (1000 nodes of 100 tokens each take 1.56 M words) keeps none; its walks read
/// the owners in arc order instead.
const MAX_WORDS: usize = 1 << 16;

/// For every node id below [`RankSets::node_slots`], the ranks (in one arc order) of the
/// tokens it owns: bit `r % 64` of word `r / 64` of its words is set when it owns the token of
/// rank `r`.
#[derive(Clone, Debug)]
pub struct RankSets {
    words_per_node: usize,
    /// The node ids covered: `bits` holds `node_slots * words_per_node` words.
    node_slots: usize,
    bits: Vec<u64>,
}

impl RankSets {
    /// The sets of owners listed in arc order (`owners_in_order[r]` owns the token of rank
    /// `r`), or `None` when they would take more than [`MAX_WORDS`].
    pub(super) fn of(
        owners_in_order: impl ExactSizeIterator<Item = NodeId> + Clone,
    ) -> Option<RankSets> {
        let words_per_node = owners_in_order.len().div_ceil(64);
        let node_slots = owners_in_order
            .clone()
            .map(|o| o.index() + 1)
            .max()
            .unwrap_or(0);
        if node_slots.checked_mul(words_per_node)? > MAX_WORDS {
            return None;
        }
        let mut sets = RankSets {
            words_per_node,
            node_slots,
            bits: vec![0; node_slots * words_per_node],
        };
        for (rank, owner) in owners_in_order.enumerate() {
            sets.bits[owner.index() * words_per_node + rank / 64] |= 1 << (rank % 64);
        }
        Some(sets)
    }

    /// How many node ids the sets cover: `0..node_slots()`. Larger ids own no token.
    pub fn node_slots(&self) -> usize {
        self.node_slots
    }

    /// The words of `node`'s set (empty for an id the sets do not cover, which owns no token):
    /// bit `r % 64` of word `r / 64` is set when `node` owns the token of rank `r`.
    pub fn words_of(&self, node: NodeId) -> &[u64] {
        let start = node.index().saturating_mul(self.words_per_node);
        self.bits
            .get(start..start.saturating_add(self.words_per_node))
            .unwrap_or(&[])
    }

    /// The ranks `node` owns, in increasing order.
    pub fn ranks_of(&self, node: NodeId) -> impl Iterator<Item = usize> + '_ {
        self.words_of(node)
            .iter()
            .enumerate()
            .flat_map(|(word_index, &word)| SetBits(word).map(move |bit| word_index * 64 + bit))
    }

    /// Covers the ids `0..node_slots` (or more); false (and nothing changed) when that would
    /// take more than [`MAX_WORDS`].
    #[inline]
    pub(super) fn cover(&mut self, node_slots: usize) -> bool {
        node_slots <= self.node_slots || self.grow(node_slots)
    }

    /// [`RankSets::cover`] of ids that are not covered yet.
    #[cold]
    fn grow(&mut self, node_slots: usize) -> bool {
        match node_slots.checked_mul(self.words_per_node) {
            Some(words) if words <= MAX_WORDS => {
                self.bits.resize(words, 0);
                self.node_slots = node_slots;
                true
            }
            _ => false,
        }
    }

    /// Moves the token of `rank` from `from` to `to`, both covered ([`RankSets::cover`]).
    #[inline]
    pub(super) fn move_rank(&mut self, rank: usize, from: NodeId, to: NodeId) {
        let (word, bit) = (rank / 64, 1u64 << (rank % 64));
        self.bits[from.index() * self.words_per_node + word] &= !bit;
        self.bits[to.index() * self.words_per_node + word] |= bit;
    }
}

/// The set bits of a word, lowest first.
struct SetBits(u64);

impl Iterator for SetBits {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let bit = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(bit)
    }
}

impl TokenRing {
    /// Each node's tokens as ranks in [`TokenRing::tokens_shortest_first`] order, or `None`
    /// while the ring keeps none. The first call after the ring's first change of owners
    /// builds them (`O(V)`), and from then on every change of owners keeps them up to date; a
    /// ring whose owners never changed keeps none, since a ring built for one plan (as
    /// `ach-redis` builds one per control step) would spend more on building them than a walk
    /// over every token costs. A ring of too many nodes times tokens (more than 512 KiB of
    /// bits) when they are built, or when a change of owners would grow them past that, keeps
    /// none either.
    pub fn rank_sets_shortest_first(&self) -> Option<&RankSets> {
        self.rank_sets_in(&self.rank_sets_shortest_first, self.tokens_shortest_first())
    }

    /// Each node's tokens as ranks in [`TokenRing::tokens_longest_first`] order (see
    /// [`TokenRing::rank_sets_shortest_first`]).
    pub fn rank_sets_longest_first(&self) -> Option<&RankSets> {
        self.rank_sets_in(&self.rank_sets_longest_first, self.tokens_longest_first())
    }

    /// The rank sets kept in `kept` over the arc order `order`, built at the first call after
    /// the first change of owners.
    fn rank_sets_in<'a>(
        &'a self,
        kept: &'a OnceLock<Option<RankSets>>,
        order: &[usize],
    ) -> Option<&'a RankSets> {
        if self.owner_changes == 0 && kept.get().is_none() {
            return None;
        }
        kept.get_or_init(|| RankSets::of(order.iter().map(|&s| self.owners[s])))
            .as_ref()
    }
}
