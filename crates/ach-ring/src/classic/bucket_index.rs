//! The lookup index of [`ClassicRing`](super::ClassicRing): one 16-byte entry per bucket of the
//! hash space that usually answers a lookup on its own, in one cache line.
//!
//! The hash space `[0, 2^64)` is cut into `2^bits` equal buckets, addressed by the top `bits`
//! bits of a hash. Inside a bucket the owner is a step function of the hash: owner `o_0` up to
//! and including boundary `b_0`, `o_1` up to `b_1`, ..., and the last owner up to the end of the
//! bucket. When a bucket has at most [`MAX_BOUNDARIES`] boundaries, its entry stores the 15 bits
//! of each boundary just below the bucket prefix (its *fraction*) and the owners: the owner of
//! hash `h` is `o_r` with `r` the number of fractions below the fraction of `h`. The comparisons
//! are done at once on the fractions packed in one `u64` (four 16-bit lanes, SWAR), without a
//! branch. When the fraction of `h` equals one of the fractions, the comparison is undecided
//! (the lower bits would decide it) and the lookup takes the exact path, a binary search
//! (probability about `2^-15` per boundary). A bucket with more boundaries (rare: there are about
//! as many buckets as virtual nodes) stores the index of its first virtual node; the lookup scans
//! the sorted positions from there.

use super::{LINEAR_SCAN_LIMIT, MAX_BUCKET_BITS};

/// The most owner changes ("boundaries") inside one bucket that its entry holds itself.
pub(super) const MAX_BOUNDARIES: usize = 3;

/// The number of bits of a fraction.
const FRACTION_BITS: u32 = 15;

/// The largest fraction, also the fraction of an unused boundary: no fraction is above it, so it
/// never counts.
pub(super) const UNUSED_FRACTION: u16 = (1 << FRACTION_BITS) - 1;

/// The top bit of each 16-bit lane of a `u64`.
const LANE_HIGH_BITS: u64 = 0x8000_8000_8000_8000;

/// 1 in each 16-bit lane of a `u64`.
const LANE_ONES: u64 = 0x0001_0001_0001_0001;

/// 1 in each of the [`MAX_BOUNDARIES`] fraction lanes of a `u64` (lanes 0 to 2).
const FRACTION_LANE_ONES: u64 = 0x0000_0001_0001_0001;

/// Lane 3 of the packed word of a compact bucket: 1 (0 marks an overflow bucket).
const COMPACT_MARK: u64 = 1 << 48;

/// The slot of a node as stored in the index: `u16` when the ring has at most `2^16` nodes (a
/// 16-byte entry), `u32` otherwise (a 32-byte entry).
pub(super) trait OwnerSlot: Copy + Eq + Default + std::fmt::Debug {
    /// The stored form of a slot; `None` if it does not fit.
    fn from_slot(slot: u32) -> Option<Self>;
    /// The slot.
    fn slot(self) -> u32;
}

impl OwnerSlot for u16 {
    #[inline]
    fn from_slot(slot: u32) -> Option<Self> {
        u16::try_from(slot).ok()
    }

    #[inline]
    fn slot(self) -> u32 {
        u32::from(self)
    }
}

impl OwnerSlot for u32 {
    #[inline]
    fn from_slot(slot: u32) -> Option<Self> {
        Some(slot)
    }

    #[inline]
    fn slot(self) -> u32 {
        self
    }
}

/// The entry of one bucket.
///
/// `packed` holds four 16-bit lanes:
///
/// * a *compact* bucket: lanes 0 to 2 are the fractions of its boundaries in increasing order,
///   [`UNUSED_FRACTION`] past the last one, and lane 3 is 1; `owners[r]` is the owner of the
///   hashes above `r` boundaries (`owners` past the last boundary repeat the last owner);
/// * an *overflow* bucket (more than [`MAX_BOUNDARIES`] boundaries): lanes 0 to 2 hold the index
///   of the first position `>=` the start of the bucket, 15 bits per lane (so that, as in a
///   compact bucket, no lane has its top bit set), and lane 3 is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub(super) struct Bucket<O> {
    /// The packed fractions and mark, or the first position index.
    pub(super) packed: u64,
    /// The owners of the segments of a compact bucket.
    pub(super) owners: [O; MAX_BOUNDARIES + 1],
}

impl<O: OwnerSlot> Bucket<O> {
    /// True for an overflow bucket.
    pub(super) fn is_overflow(&self) -> bool {
        self.packed & (0xFFFF << 48) == 0
    }

    /// The fraction of boundary `rank` of a compact bucket ([`UNUSED_FRACTION`] if unused).
    pub(super) fn fraction(&self, rank: usize) -> u16 {
        (self.packed >> (16 * rank)) as u16
    }

    /// The index of the first position of an overflow bucket.
    pub(super) fn first_position(&self) -> usize {
        (0..MAX_BOUNDARIES).fold(0, |index, lane| {
            index | usize::from(self.fraction(lane)) << (FRACTION_BITS as usize * lane)
        })
    }

    /// The overflow bucket whose first position has index `first` (below `2^45`).
    pub(super) fn overflow(first: usize) -> Self {
        let mut packed = 0;
        for lane in 0..MAX_BOUNDARIES {
            let chunk =
                (first >> (FRACTION_BITS as usize * lane)) as u64 & u64::from(UNUSED_FRACTION);
            packed |= chunk << (16 * lane);
        }
        Bucket {
            packed,
            owners: [O::default(); MAX_BOUNDARIES + 1],
        }
    }
}

/// The bucket index, generic over how owner slots are stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Buckets<O> {
    /// `64 - bits`: `hash >> shift` is the bucket of `hash`.
    pub(super) shift: u32,
    /// `2^bits` entries; empty for an empty ring.
    pub(super) entries: Vec<Bucket<O>>,
}

impl<O: OwnerSlot> Buckets<O> {
    /// The index of sorted positions and their owner slots (at most
    /// [`MAX_VNODES`](super::MAX_VNODES)); `None` if a slot does not fit in `O`.
    pub(super) fn new(positions: &[u64], owners: &[u32]) -> Option<Self> {
        if positions.is_empty() {
            return Some(Buckets {
                shift: 63,
                entries: Vec::new(),
            });
        }
        let bits = bucket_bits(positions.len());
        let shift = 64 - bits;
        let bucket_count = 1usize << bits;
        let mut entries = Vec::with_capacity(bucket_count);
        // The boundaries of the current bucket: `bounds[i]` is the last hash owned by
        // `segment_owners[i]`; the last segment owner (when there is one more) owns the rest.
        let mut bounds: Vec<u64> = Vec::new();
        let mut segment_owners: Vec<u32> = Vec::new();
        // `first` is the first position `>=` the start of the bucket, `next` the first position
        // `>=` the start of the next bucket.
        let mut first = 0usize;
        for bucket in 0..bucket_count {
            let bucket_end = (bucket as u128 + 1) << shift;
            let mut next = first;
            while next < positions.len() && u128::from(positions[next]) < bucket_end {
                next += 1;
            }
            bounds.clear();
            segment_owners.clear();
            let mut previous: Option<u64> = None;
            for (&position, &owner) in positions[first..next].iter().zip(&owners[first..next]) {
                // A virtual node at the same position as the previous one owns nothing.
                if previous == Some(position) {
                    continue;
                }
                previous = Some(position);
                match (segment_owners.last(), bounds.last_mut()) {
                    (Some(&last_owner), Some(last_bound)) if last_owner == owner => {
                        *last_bound = position;
                    }
                    _ => {
                        segment_owners.push(owner);
                        bounds.push(position);
                    }
                }
            }
            // Past the last position of the bucket, the next virtual node (wrapping around).
            let after = owners[if next == positions.len() { 0 } else { next }];
            if segment_owners.last() == Some(&after) {
                bounds.pop();
            } else if bounds
                .last()
                .is_some_and(|&bound| u128::from(bound) + 1 == bucket_end)
            {
                // The last segment ends with the bucket: the next owner owns none of it.
                bounds.pop();
            } else {
                segment_owners.push(after);
            }
            let entry = if bounds.len() <= MAX_BOUNDARIES {
                let mut packed = COMPACT_MARK;
                for rank in 0..MAX_BOUNDARIES {
                    let fraction = bounds
                        .get(rank)
                        .map_or(UNUSED_FRACTION, |&bound| fraction(bound, shift));
                    packed |= u64::from(fraction) << (16 * rank);
                }
                let last = *segment_owners.last()?;
                let mut owners = [O::default(); MAX_BOUNDARIES + 1];
                for (index, slot) in owners.iter_mut().enumerate() {
                    *slot = O::from_slot(segment_owners.get(index).copied().unwrap_or(last))?;
                }
                Bucket { packed, owners }
            } else {
                // Below 2^31: the ring holds at most MAX_VNODES virtual nodes.
                Bucket::overflow(first)
            };
            entries.push(entry);
            first = next;
        }
        Some(Buckets { shift, entries })
    }

    /// The slot of the owner of `hash`; `None` for an empty ring. The same answer as a binary
    /// search of `positions` (sorted, with their owner slots `owners`).
    #[inline]
    pub(super) fn owner_slot(&self, hash: u64, positions: &[u64], owners: &[u32]) -> Option<u32> {
        // Only an empty ring has no bucket.
        let entry = self.entries.get((hash >> self.shift) as usize)?;
        let x = u64::from(fraction(hash, self.shift));
        // Lane `i` of `diff` is `0x8000 + x - fraction_i` (no borrow between lanes: fractions
        // have 15 bits); its top bit says `x >= fraction_i`, and that of `diff - 1` says
        // `x > fraction_i`. Lane 3 is `0x8000 - mark`: its top bit is set only in an overflow
        // bucket (mark 0), and never after subtracting 1.
        let diff = ((x * FRACTION_LANE_ONES) | LANE_HIGH_BITS) - entry.packed;
        let at_least = diff & LANE_HIGH_BITS;
        let above = (diff - LANE_ONES) & LANE_HIGH_BITS;
        if at_least != above {
            // `x` equals a fraction (undecided), or an overflow bucket.
            return exact_owner_slot(hash, entry, positions, owners);
        }
        // The fractions increase, so the lanes with `x > fraction` are a prefix: lanes `0..r`,
        // and the highest set bit is bit `16 r - 1`.
        let rank = (u64::BITS - above.leading_zeros()) / 16;
        Some(entry.owners[rank as usize & MAX_BOUNDARIES].slot())
    }
}

/// The fraction of `hash` in a bucket of `2^shift` hashes: the [`FRACTION_BITS`] bits below the
/// bucket number (`shift >= 64 - MAX_BUCKET_BITS > FRACTION_BITS`).
#[inline]
pub(super) fn fraction(hash: u64, shift: u32) -> u16 {
    ((hash >> (shift - FRACTION_BITS)) as u16) & UNUSED_FRACTION
}

/// The number of bits of the bucket number for a ring of `vnode_count >= 1` virtual nodes: about
/// one bucket per virtual node (between 1 and 2), so that few buckets overflow.
fn bucket_bits(vnode_count: usize) -> u32 {
    let vnode_bits = usize::BITS - (vnode_count - 1).leading_zeros();
    vnode_bits.clamp(1, MAX_BUCKET_BITS)
}

/// The slow path of [`Buckets::owner_slot`]: an overflow bucket or an undecided comparison.
#[cold]
#[inline(never)]
fn exact_owner_slot<O: OwnerSlot>(
    hash: u64,
    entry: &Bucket<O>,
    positions: &[u64],
    owners: &[u32],
) -> Option<u32> {
    let index = if entry.is_overflow() {
        // Positions from `first` on are sorted and the first of them `>= hash` is the answer;
        // it is usually within a few steps, so scan, and fall back to a binary search if not.
        let first = entry.first_position();
        let tail = positions.get(first..).unwrap_or(&[]);
        let offset = match tail.iter().take(LINEAR_SCAN_LIMIT).position(|&p| p >= hash) {
            Some(offset) => offset,
            None => tail.partition_point(|&p| p < hash),
        };
        first + offset
    } else {
        positions.partition_point(|&p| p < hash)
    };
    let vnode = if index == positions.len() { 0 } else { index };
    owners.get(vnode).copied()
}

/// Marks an entry of a [`SingleOwnerBuckets`] index that holds an owner slot rather than a
/// virtual-node index.
pub(super) const SINGLE_OWNER_FLAG: u32 = 1 << 31;

/// Base-2 logarithm of the number of buckets of a [`SingleOwnerBuckets`] index per virtual node,
/// rounded up: between 8 and 16 buckets per virtual node, so that most buckets have a single
/// owner and a lookup is one load and one well-predicted branch.
const SINGLE_OWNER_BUCKETS_PER_VNODE_LOG2: u32 = 3;

/// The index of small rings (at most [`SINGLE_OWNER_MAX_VNODES`] virtual nodes), small enough
/// (at most 128 KiB) to stay in cache, where the lookup is bound by instructions rather than by
/// cache misses.
///
/// Entry `b` describes bucket `b`, the hashes `[b << shift, (b + 1) << shift)`:
///
/// * when every hash of the bucket has the same owner, the entry is `SINGLE_OWNER_FLAG | slot`;
/// * otherwise it is the index of the first position `>= b << shift`, from which the lookup
///   scans forward.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SingleOwnerBuckets {
    /// `64 - bits`.
    pub(super) shift: u32,
    /// `2^bits` entries.
    pub(super) entries: Vec<u32>,
}

/// The most virtual nodes of a ring indexed by [`SingleOwnerBuckets`].
pub(super) const SINGLE_OWNER_MAX_VNODES: usize = 1 << 12;

impl SingleOwnerBuckets {
    /// The index of sorted positions (at least one, at most [`SINGLE_OWNER_MAX_VNODES`]) and
    /// their owner slots (below `2^31`).
    pub(super) fn new(positions: &[u64], owners: &[u32]) -> Self {
        let vnode_bits = usize::BITS - (positions.len().max(1) - 1).leading_zeros();
        let bits = (vnode_bits + SINGLE_OWNER_BUCKETS_PER_VNODE_LOG2).clamp(1, MAX_BUCKET_BITS);
        let shift = 64 - bits;
        let bucket_count = 1usize << bits;
        let mut entries = Vec::with_capacity(bucket_count);
        let mut first = 0usize;
        for bucket in 0..bucket_count {
            let bucket_end = (bucket as u128 + 1) << shift;
            let mut next = first;
            while next < positions.len() && u128::from(positions[next]) < bucket_end {
                next += 1;
            }
            // The hashes of the bucket are owned by the virtual nodes `first..=next` (index
            // `positions.len()` wrapping around to 0).
            let owner_of = |index: usize| owners[if index == positions.len() { 0 } else { index }];
            let single_owner = owner_of(first);
            let entry = if (first..=next).all(|index| owner_of(index) == single_owner) {
                SINGLE_OWNER_FLAG | single_owner
            } else {
                first as u32
            };
            entries.push(entry);
            first = next;
        }
        SingleOwnerBuckets { shift, entries }
    }

    /// The slot of the owner of `hash`; the same answer as a binary search.
    #[inline]
    pub(super) fn owner_slot(&self, hash: u64, positions: &[u64], owners: &[u32]) -> Option<u32> {
        let entry = *self.entries.get((hash >> self.shift) as usize)?;
        if entry & SINGLE_OWNER_FLAG != 0 {
            return Some(entry & !SINGLE_OWNER_FLAG);
        }
        let first = entry as usize;
        let tail = positions.get(first..).unwrap_or(&[]);
        let offset = match tail.iter().take(LINEAR_SCAN_LIMIT).position(|&p| p >= hash) {
            Some(offset) => offset,
            None => tail.partition_point(|&p| p < hash),
        };
        let index = first + offset;
        let vnode = if index == positions.len() { 0 } else { index };
        owners.get(vnode).copied()
    }
}
