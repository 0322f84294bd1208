//! The model's routing: every request to its token's owner, summed per node for every arm.
//!
//! A step's requests are drawn once as one packed word per token ([`crate::workload::pack`]:
//! requests in the high 32 bits, writes in the low 32 bits), and every arm sums them over the
//! tokens of each node. The configuration caps the request rate so that no node's count of a
//! step reaches 2^32, so one addition of packed words sums both counts; and integer sums do
//! not depend on the order of the additions, which leaves the routing free to add them up in
//! whatever order is fastest. Two orders are used:
//!
//! - **In full**: every token's word added to its owner's sum. Owners laid out round robin
//!   or in blocks (the initial ring, Static-Wt's) are summed by their layout, many words per
//!   instruction ([`layout`]); others word by word, chunk by chunk and arm by arm, in a small
//!   cluster into [`LANES`] partial sums per node (token `s` to lane `s % LANES`, so that
//!   tokens of one owner in a row do not each wait for the previous addition's store).
//! - **From the reference**: the arms of a run all start from one ring, the *reference*, and
//!   most move few tokens from it (a budgeted ACH, a sweep's ACH arms, an algorithm that
//!   never moves). Such an arm's sums are the reference's sums, plus each word of a token
//!   whose owner differs added to its owner and taken from its reference owner. The tokens
//!   that differ are found again only when the arm's owners changed
//!   ([`TokenRing::owner_changes`]).
//!
//! Either order gives the same integers, so the choice (from the reference when at most a
//! quarter of the tokens differ) changes the time of a step, never its values.

use ach_ring::{NodeId, TokenRing};

mod layout;

use layout::Layout;

/// Tokens routed by every arm in turn before the next ones: a chunk of the packed counts
/// (16 KiB) stays in the first-level cache while each arm reads it.
const CHUNK: usize = 2048;

/// Partial sums per node that routing in full keeps, for a cluster of at most
/// [`LANES_UP_TO_NODES`] nodes; larger clusters keep one sum per node (their tokens seldom
/// share an owner with the token before, and four sums per node would crowd the cache).
const LANES: usize = 4;

/// The largest cluster routed into [`LANES`] partial sums per node.
const LANES_UP_TO_NODES: usize = 64;

/// An arm is routed from the reference when at most `1 / FROM_REFERENCE_AT_MOST` of the
/// tokens differ (a differing token costs about two tokens routed in full, and the reference
/// itself is routed in full once a step for all such arms).
const FROM_REFERENCE_AT_MOST: usize = 4;

/// The reference ring's owners and this step's sums of them.
pub(super) struct Reference {
    owners: Vec<NodeId>,
    layout: Layout,
    lanes: Vec<u64>,
    sums: Vec<u64>,
}

impl Reference {
    /// The reference of arms that all start from `ring`.
    pub(super) fn new(ring: &TokenRing) -> Reference {
        Reference {
            owners: ring.owners().to_vec(),
            layout: Layout::of(ring.owners()),
            lanes: Vec::new(),
            sums: Vec::new(),
        }
    }
}

/// One arm routed in full: its owners, their layout, and its partial and whole sums.
struct FullRoute<'a> {
    owners: &'a [NodeId],
    layout: &'a Layout,
    lanes: &'a mut Vec<u64>,
    sums: &'a mut Vec<u64>,
}

/// One arm's routing state: its per-node sums and how its owners differ from the reference.
#[derive(Default)]
pub(super) struct ArmRoute {
    /// Per-node sums of this step's packed words.
    pub(super) sums: Vec<u64>,
    lanes: Vec<u64>,
    /// The tokens whose owner differs from the reference's, when they are few enough to route
    /// from the reference (else empty, with `differs_a_lot`).
    differing: Vec<u32>,
    differs_a_lot: bool,
    /// How many tokens differed when they were last counted.
    differing_count: usize,
    /// The ring's [`TokenRing::owner_changes`] when they were last counted (`None`: never).
    counted_at: Option<u64>,
    /// The layout of the ring's owners, found again when the arm is routed in full and its
    /// owners changed.
    layout: Layout,
    /// The ring's [`TokenRing::owner_changes`] when its layout was found (`None`: never).
    layout_at: Option<u64>,
}

impl ArmRoute {
    /// Finds the tokens of `ring` whose owner differs from the reference's again if that can
    /// have changed the routing; true when the arm is routed from the reference.
    fn routes_from_reference(&mut self, ring: &TokenRing, reference: &Reference) -> bool {
        let changes = ring.owner_changes();
        let owners = ring.owners();
        let limit = owners.len() / FROM_REFERENCE_AT_MOST;
        match self.counted_at {
            Some(at) if at == changes => return !self.differs_a_lot,
            // A change of owner changes the count by one at most: an arm that differed by far
            // more than the limit still differs by more, without a look.
            Some(at) if self.differs_a_lot => {
                let changed_since = usize::try_from(changes - at).unwrap_or(usize::MAX);
                if self.differing_count.saturating_sub(changed_since) > limit {
                    return false;
                }
            }
            _ => {}
        }
        self.counted_at = Some(changes);
        // Counting first is a pass the compiler vectorises; the list is made only when it
        // will be used.
        self.differing_count = owners
            .iter()
            .zip(&reference.owners)
            .filter(|(a, b)| a != b)
            .count();
        self.differing.clear();
        self.differs_a_lot = self.differing_count > limit || owners.len() != reference.owners.len();
        if !self.differs_a_lot {
            // Every token is written at the end of the list, which grows only past those that
            // differ: no branch on whether a token differs (a few in ten do, at random).
            self.differing.resize(owners.len(), 0);
            let mut found = 0;
            for (token, (owner, was)) in (0..).zip(owners.iter().zip(&reference.owners)) {
                self.differing[found] = token;
                found += usize::from(owner != was);
            }
            self.differing.truncate(found);
        }
        !self.differs_a_lot
    }
}

/// Sums this step's packed words `packed` per node into the `sums` of every arm in `arms`
/// (each with its ring), for `n` nodes.
pub(super) fn route(
    reference: &mut Reference,
    arms: &mut [(&TokenRing, &mut ArmRoute)],
    packed: &[u64],
    n: usize,
) {
    let mut from_reference_count = 0;
    for (ring, route) in arms.iter_mut() {
        if route.routes_from_reference(ring, reference) {
            from_reference_count += 1;
        }
    }
    if from_reference_count > 0 {
        let mut full = [FullRoute {
            owners: &reference.owners,
            layout: &reference.layout,
            lanes: &mut reference.lanes,
            sums: &mut reference.sums,
        }];
        sum_in_full(&mut full, packed, n);
    }
    let mut full = super::ArmList::new();
    let mut from_reference = super::ArmList::new();
    for (ring, route) in arms.iter_mut() {
        if route.differs_a_lot {
            let changes = ring.owner_changes();
            if route.layout_at != Some(changes) {
                route.layout = Layout::of(ring.owners());
                route.layout_at = Some(changes);
            }
            full.push(FullRoute {
                owners: ring.owners(),
                layout: &route.layout,
                lanes: &mut route.lanes,
                sums: &mut route.sums,
            });
        } else {
            from_reference.push((ring.owners(), &mut **route));
        }
    }
    sum_in_full(&mut full, packed, n);
    for (owners, route) in from_reference {
        route.sums.clone_from(&reference.sums);
        // Local slices, so that the loop does not reload the vectors' pointers after a store.
        let (sums, was) = (route.sums.as_mut_slice(), reference.owners.as_slice());
        for &token in &route.differing {
            let token = token as usize;
            let word = packed[token];
            let (to, from) = (owners[token].index(), was[token].index());
            sums[to] = sums[to].wrapping_add(word);
            sums[from] = sums[from].wrapping_sub(word);
        }
    }
}

/// Routes in full: each arm gets in its `sums` the per-node sums of `packed` over its owners,
/// for `n` nodes; an arm whose owners have a layout ([`Layout`]) sums them by it, the others
/// word by word.
fn sum_in_full(arms: &mut [FullRoute<'_>], packed: &[u64], n: usize) {
    let mut scattered = super::ArmList::new();
    for arm in arms.iter_mut() {
        if !arm.layout.sums(arm.owners, packed, n, arm.sums, arm.lanes) {
            scattered.push((arm.owners, &mut *arm.lanes, &mut *arm.sums));
        }
    }
    sum_scattered(&mut scattered, packed, n);
}

/// Routes in full word by word: each `(owners, lanes, sums)` gets in `sums` the per-node sums
/// of `packed` over its owners, for `n` nodes.
fn sum_scattered(arms: &mut [(&[NodeId], &mut Vec<u64>, &mut Vec<u64>)], packed: &[u64], n: usize) {
    if arms.is_empty() {
        return;
    }
    if n > LANES_UP_TO_NODES {
        for (_, _, sums) in arms.iter_mut() {
            sums.clear();
            sums.resize(n, 0);
        }
        for (index, chunk) in packed.chunks(CHUNK).enumerate() {
            let start = index * CHUNK;
            for (owners, _, sums) in arms.iter_mut() {
                sum_per_owner(sums, &owners[start..start + chunk.len()], chunk);
            }
        }
        return;
    }
    for (_, lanes, _) in arms.iter_mut() {
        lanes.clear();
        lanes.resize(LANES * n, 0);
    }
    for (index, chunk) in packed.chunks(CHUNK).enumerate() {
        let start = index * CHUNK;
        for (owners, lanes, _) in arms.iter_mut() {
            sum_per_owner_in_lanes(lanes, n, &owners[start..start + chunk.len()], chunk);
        }
    }
    for (_, lanes, sums) in arms.iter_mut() {
        let (first, rest) = lanes.split_at(n);
        sums.clear();
        sums.extend_from_slice(first);
        for lane in rest.chunks_exact(n) {
            for (sum, &partial) in sums.iter_mut().zip(lane) {
                *sum += partial;
            }
        }
    }
}

/// Adds `packed[s]` to `sums[owners[s]]` for every token `s` of the chunk, four tokens per
/// round.
#[inline(always)]
fn sum_per_owner(sums: &mut [u64], owners: &[NodeId], packed: &[u64]) {
    let mut owner_quads = owners.chunks_exact(4);
    let mut packed_quads = packed.chunks_exact(4);
    for (o, p) in (&mut owner_quads).zip(&mut packed_quads) {
        sums[o[0].index()] += p[0];
        sums[o[1].index()] += p[1];
        sums[o[2].index()] += p[2];
        sums[o[3].index()] += p[3];
    }
    for (owner, &p) in owner_quads.remainder().iter().zip(packed_quads.remainder()) {
        sums[owner.index()] += p;
    }
}

/// Adds `packed[s]` to the partial sum of `owners[s]` in lane `s % LANES` of `lanes` (each
/// lane `n` sums, one per node) for every token `s` of the chunk (whose length, but for the
/// last chunk, is a multiple of the lane count).
#[inline(always)]
fn sum_per_owner_in_lanes(lanes: &mut [u64], n: usize, owners: &[NodeId], packed: &[u64]) {
    let (lane_0, rest) = lanes.split_at_mut(n);
    let (lane_1, rest) = rest.split_at_mut(n);
    let (lane_2, lane_3) = rest.split_at_mut(n);
    let mut owner_quads = owners.chunks_exact(LANES);
    let mut packed_quads = packed.chunks_exact(LANES);
    for (o, p) in (&mut owner_quads).zip(&mut packed_quads) {
        lane_0[o[0].index()] += p[0];
        lane_1[o[1].index()] += p[1];
        lane_2[o[2].index()] += p[2];
        lane_3[o[3].index()] += p[3];
    }
    for (owner, &p) in owner_quads.remainder().iter().zip(packed_quads.remainder()) {
        lane_0[owner.index()] += p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every request to its token's owner, one token at a time.
    fn naive_sums(owners: &[NodeId], packed: &[u64], n: usize) -> Vec<u64> {
        let mut sums = vec![0; n];
        for (owner, &word) in owners.iter().zip(packed) {
            sums[owner.index()] += word;
        }
        sums
    }

    proptest! {
        /// Arms routed in full and from the reference get the sums of routing every token, as
        /// their owners change from step to step (few changes or many, nodes joining).
        #[test]
        fn both_orders_sum_every_token_to_its_owner(
            tokens in 1_usize..300,
            nodes in prop_oneof![1_u32..12, 60_u32..80],
            steps in proptest::collection::vec(
                (proptest::collection::vec((any::<u16>(), any::<u32>()), 0..3), 0_u32..200, 0_usize..3),
                1..6,
            ),
        ) {
            let positions: Vec<f64> = (0..tokens).map(|s| s as f64 / tokens as f64).collect();
            let initial = TokenRing::round_robin(positions, nodes as usize).unwrap();
            let mut reference = Reference::new(&initial);
            let mut rings = vec![initial.clone(); 4];
            let mut routes: Vec<ArmRoute> = (0..4).map(|_| ArmRoute::default()).collect();
            let mut n = nodes as usize;
            for (step, (changes, spread, joined)) in steps.iter().enumerate() {
                n += joined;
                // Arm 0 never moves; arm 1 moves the few tokens drawn; arms 2 and 3 move `spread`
                // (so that none, one or two arms are routed in full beside the reference).
                let mut moves: Vec<ach_ring::TokenMove> = changes
                    .iter()
                    .map(|&(token, to)| {
                        let token = usize::from(token) % tokens;
                        let to = NodeId(to % n as u32);
                        ach_ring::TokenMove { token, from: rings[1].owner(token), to }
                    })
                    .collect();
                moves.dedup_by_key(|mv| mv.token);
                rings[1].apply(&moves).unwrap();
                let spread_moves: Vec<ach_ring::TokenMove> = (0..(*spread as usize).min(tokens))
                    .map(|token| ach_ring::TokenMove {
                        token,
                        from: rings[2].owner(token),
                        to: NodeId(((token + step) % n) as u32),
                    })
                    .collect();
                rings[2].apply(&spread_moves).unwrap();
                let spread_moves: Vec<ach_ring::TokenMove> = (0..(*spread as usize).min(tokens))
                    .map(|token| ach_ring::TokenMove {
                        token,
                        from: rings[3].owner(token),
                        to: NodeId(((token * 3 + step + 1) % n) as u32),
                    })
                    .collect();
                rings[3].apply(&spread_moves).unwrap();
                let packed: Vec<u64> = (0..tokens)
                    // At least 5 requests, so that the writes (fewer than 5) are some of them.
                    .map(|s| crate::workload::pack((s * 7 + step) as u64 % 50 + 5, (s + step) as u64 % 5))
                    .collect();
                let mut arms: Vec<(&TokenRing, &mut ArmRoute)> =
                    rings.iter().zip(routes.iter_mut()).collect();
                route(&mut reference, &mut arms, &packed, n);
                for (ring, arm) in rings.iter().zip(&routes) {
                    prop_assert_eq!(&arm.sums, &naive_sums(ring.owners(), &packed, n));
                }
            }
        }
    }
}
