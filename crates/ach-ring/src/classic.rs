//! The classic consistent-hash ring with byte-string keys and weighted virtual nodes.
//!
//! # The hash
//!
//! Keys and virtual nodes are placed on the ring `[0, 2^64)` by **XXH3-64 with seed 0** (the
//! default secret), see [`key_hash`]. XXH3 is a published, frozen algorithm: the same bytes give
//! the same hash on every platform, in every process and in every release of this crate (unlike
//! the randomly seeded hasher of `std`). The tests pin test vectors, among them XXH3's published
//! value for the empty input, `0x2D06800538D394C2`.
//!
//! # Virtual nodes
//!
//! A node named `name` with weight `w` has `w` virtual nodes. Virtual node `i` (for `i` in
//! `0..w`) sits at `key_hash(label)` where `label` is the UTF-8 string `"{name}#{i}"`, `i` in
//! decimal without leading zeros (see [`vnode_hash`]). This encoding is injective: a decimal
//! number contains no `#`, so splitting a label at its last `#` gives back `name` and `i`. Two
//! virtual nodes can therefore only meet at the same position through a genuine 64-bit hash
//! collision. Such ties are broken deterministically: virtual nodes are ordered by position,
//! then by node name (byte-wise), then by virtual-node index, and at equal positions the first in
//! that order owns the arc; the others own nothing.
//!
//! # Ownership
//!
//! A key with hash `h` belongs to the first virtual node whose position is `>= h` (a hash equal
//! to a position belongs to that virtual node), wrapping around to the first virtual node of the
//! ring when there is none. This is the convention of the token ring ([`crate::TokenRing`]).
//!
//! # Example
//!
//! ```
//! use ach_ring::classic::{ClassicRing, DEFAULT_WEIGHT};
//!
//! let mut ring = ClassicRing::new();
//! assert_eq!(ring.lookup(b"user:42"), None); // An empty ring owns nothing.
//!
//! ring.add_node("cache-a", DEFAULT_WEIGHT).unwrap();
//! ring.add_node("cache-b", DEFAULT_WEIGHT).unwrap();
//! let owner = ring.lookup(b"user:42").unwrap();
//! assert!(owner == "cache-a" || owner == "cache-b");
//!
//! // Two replicas on distinct nodes, the owner first (a short list: no allocation).
//! let replicas = ring.lookup_n(b"user:42", 2);
//! assert_eq!(replicas.as_slice(), [owner, replicas[1]]);
//! assert_ne!(replicas[0], replicas[1]);
//! drop(replicas); // the list borrows the ring
//!
//! // Adding a node moves key ranges to it, and only to it.
//! let change = ring.add_node("cache-c", DEFAULT_WEIGHT).unwrap();
//! assert!(change.moved_ranges.iter().all(|moved| moved.new_owner.as_deref() == Some("cache-c")));
//! assert!(change.moved_fraction() > 0.1 && change.moved_fraction() < 0.6);
//!
//! // The state is a short, versioned list of nodes from which the ring is rebuilt identically.
//! let state = ring.state();
//! assert_eq!(ClassicRing::from_state(&state).unwrap(), ring);
//! ```

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use self::bucket_index::{Buckets, SINGLE_OWNER_MAX_VNODES, SingleOwnerBuckets};

mod bucket_index;

/// The weight (number of virtual nodes) of a node when none is given, as in the Go consistent-hash
/// rings the seeds describe.
pub const DEFAULT_WEIGHT: u32 = 150;

/// The version of [`RingState`] this crate writes and the only one it reads.
pub const STATE_FORMAT_VERSION: u32 = 1;

/// The number of hashes on the ring, `2^64`.
pub const HASH_SPACE_SIZE: u128 = 1 << 64;

/// The most virtual nodes a ring holds, `2^31 - 1` (the lookup index stores virtual-node
/// indices in 31 bits).
pub const MAX_VNODES: u32 = (1 << 31) - 1;

/// How many positions a lookup in an overflowing bucket compares one by one before it falls
/// back to a binary search.
const LINEAR_SCAN_LIMIT: usize = 8;

/// The largest lookup index has `2^MAX_BUCKET_BITS` buckets (256 MiB); larger rings fall back
/// to a scan or binary search of the positions in crowded buckets, which stays correct.
const MAX_BUCKET_BITS: u32 = 24;

pub use crate::key::key_hash;

/// How many replica names [`ClassicRing::lookup_n`] returns without allocating.
pub const REPLICAS_INLINE: usize = 4;

/// The replica list of [`ClassicRing::lookup_n`]: owner first, inline up to
/// [`REPLICAS_INLINE`] names.
pub type ReplicaList<'a> = SmallVec<[&'a str; REPLICAS_INLINE]>;

/// The position of virtual node `vnode` of the node named `name`: [`key_hash`] of the UTF-8
/// string `"{name}#{vnode}"` (`vnode` in decimal).
pub fn vnode_hash(name: &str, vnode: u32) -> u64 {
    let mut label = String::with_capacity(name.len() + 11);
    write_vnode_label(&mut label, name, vnode);
    key_hash(label.as_bytes())
}

/// Writes `"{name}#{vnode}"` into `label`, replacing its contents.
fn write_vnode_label(label: &mut String, name: &str, vnode: u32) {
    label.clear();
    label.push_str(name);
    label.push('#');
    // Writing into a `String` cannot fail.
    let _ = write!(label, "{vnode}");
}

/// Why a change to a [`ClassicRing`] or a [`RingState`] was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassicRingError {
    /// A node of that name is already on the ring.
    #[error("node {name:?} is already on the ring")]
    DuplicateNode {
        /// The name.
        name: String,
    },
    /// No node of that name is on the ring.
    #[error("node {name:?} is not on the ring")]
    UnknownNode {
        /// The name.
        name: String,
    },
    /// A node needs at least one virtual node.
    #[error("node {name:?} has weight 0; a node needs at least one virtual node")]
    ZeroWeight {
        /// The name.
        name: String,
    },
    /// The ring would hold more than [`MAX_VNODES`] virtual nodes.
    #[error("the ring would hold {total} virtual nodes, more than {MAX_VNODES}")]
    TooManyVirtualNodes {
        /// The total weight the change would give.
        total: u64,
    },
    /// A [`RingState`] written in a format this version does not read.
    #[error("ring state format version {found} is not supported (this version reads {supported})")]
    UnsupportedFormatVersion {
        /// The version found in the state.
        found: u32,
        /// The version this crate reads, [`STATE_FORMAT_VERSION`].
        supported: u32,
    },
}

/// One node of a [`RingState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    /// The node's name.
    pub name: String,
    /// Its weight (number of virtual nodes), at least 1.
    pub weight: u32,
}

/// The serializable state of a [`ClassicRing`]: everything needed to rebuild it identically.
///
/// Virtual-node positions are not stored: they are a pure function of the names and weights.
/// [`ClassicRing::state`] lists the nodes sorted by name; [`ClassicRing::from_state`] accepts
/// them in any order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingState {
    /// The format version, [`STATE_FORMAT_VERSION`] when written by this crate.
    pub format_version: u32,
    /// The nodes with their weights.
    pub nodes: Vec<NodeState>,
}

/// A range of key hashes `start <= h < end` (half-open, never wrapping around).
///
/// `end` is a `u128` so that a range can reach the top of the hash space: `end` is at most
/// [`HASH_SPACE_SIZE`] (`2^64`), and `start < end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HashRange {
    /// The first hash of the range.
    pub start: u64,
    /// One past the last hash of the range.
    pub end: u128,
}

impl HashRange {
    /// The number of hashes in the range (0 if `end <= start`).
    pub fn len(&self) -> u128 {
        self.end.saturating_sub(u128::from(self.start))
    }

    /// True when the range holds no hash (never the case for ranges this crate returns).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `hash` lies in the range.
    pub fn contains(&self, hash: u64) -> bool {
        hash >= self.start && u128::from(hash) < self.end
    }
}

/// A range of key hashes whose owner changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovedRange {
    /// The hashes.
    pub range: HashRange,
    /// The owner before the change (`None` if the ring was empty).
    pub previous_owner: Option<String>,
    /// The owner after the change (`None` if the ring is now empty).
    pub new_owner: Option<String>,
}

/// The key ranges a change of the ring moved, and how much key space that is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingChange {
    /// Every range of hashes whose owner changed, in increasing order of hash, disjoint, adjacent
    /// ranges with the same previous and new owner merged.
    pub moved_ranges: Vec<MovedRange>,
    /// The number of hashes that changed owner: the sum of the lengths of `moved_ranges`,
    /// exact.
    pub moved_hashes: u128,
}

impl RingChange {
    /// The fraction of the key space that changed owner (`M_keys`): `moved_hashes / 2^64`.
    pub fn moved_fraction(&self) -> f64 {
        self.moved_hashes as f64 / HASH_SPACE_SIZE as f64
    }

    /// The owner change of hash `hash`, if it moved: `(previous owner, new owner)`.
    pub fn moved_owner_of(&self, hash: u64) -> Option<(Option<&str>, Option<&str>)> {
        let index = self
            .moved_ranges
            .partition_point(|moved| moved.range.end <= u128::from(hash));
        let moved = self.moved_ranges.get(index)?;
        moved
            .range
            .contains(hash)
            .then_some((moved.previous_owner.as_deref(), moved.new_owner.as_deref()))
    }
}

/// A node of the ring.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NodeEntry {
    name: String,
    weight: u32,
}

/// The lookup index in front of the sorted virtual-node positions (see [`bucket_index`]).
#[derive(Clone, Debug, PartialEq, Eq)]
enum HashBucketIndex {
    /// At most [`SINGLE_OWNER_MAX_VNODES`] virtual nodes: a small index of 4-byte entries, most
    /// of them the single owner of their bucket (the lookup is compute bound, and this is the
    /// shortest path).
    Small(SingleOwnerBuckets),
    /// More virtual nodes, at most `2^16` nodes: 16-byte entries with `u16` owner slots, one
    /// cache line per lookup (the lookup is bound by cache misses).
    Narrow(Buckets<u16>),
    /// More virtual nodes and more nodes: 32-byte entries with `u32` owner slots.
    Wide(Buckets<u32>),
}

impl Default for HashBucketIndex {
    /// The index of an empty ring: no bucket.
    fn default() -> Self {
        HashBucketIndex::Narrow(Buckets {
            shift: 63,
            entries: Vec::new(),
        })
    }
}

impl HashBucketIndex {
    /// Builds the index of sorted positions and their owner slots (at most [`MAX_VNODES`]).
    fn new(positions: &[u64], owners: &[u32]) -> Self {
        if positions.is_empty() {
            return HashBucketIndex::default();
        }
        if positions.len() <= SINGLE_OWNER_MAX_VNODES {
            return HashBucketIndex::Small(SingleOwnerBuckets::new(positions, owners));
        }
        match Buckets::new(positions, owners) {
            Some(narrow) => HashBucketIndex::Narrow(narrow),
            None => HashBucketIndex::Wide(
                Buckets::new(positions, owners).expect("every u32 slot fits in a u32"),
            ),
        }
    }
}

/// The classic consistent-hash ring: nodes with weighted virtual nodes on `[0, 2^64)`, byte-string
/// keys hashed with the stable [`key_hash`]. See the [module documentation](self) for the exact
/// placement and ownership rules.
///
/// Virtual nodes are stored as a sorted `Vec<u64>` of positions with parallel owner arrays (no
/// pointer chasing). [`ClassicRing::lookup`] is `O(1)` expected: a bucket index on the top bits of
/// the hash answers most lookups from one entry. Small rings (at most 4096 virtual nodes) use
/// 4-byte entries that hold the owner of single-owner buckets; larger rings use 16-byte entries
/// that hold up to three owner changes of their bucket (15-bit fractions of the boundaries,
/// compared at once) and their owners, so that a lookup reads one cache line. Rare crowded
/// buckets and undecided comparisons fall back to a scan or binary search of the positions.
/// [`ClassicRing::lookup_hash_binary_search`] is the plain binary search it is tested against.
/// Adding or removing a node costs `O(V)` for `V` virtual nodes on the ring.
///
/// Two rings with the same nodes and weights are equal, whatever order the nodes were added in.
/// With serde, the ring (de)serializes as its [`RingState`].
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "RingState", into = "RingState")]
pub struct ClassicRing {
    /// The nodes, sorted by name; a node's index here is its slot.
    nodes: Vec<NodeEntry>,
    /// Virtual-node positions, sorted by (position, owner slot, virtual-node index).
    positions: Vec<u64>,
    /// The slot of the owner of each virtual node.
    owners: Vec<u32>,
    /// The index of each virtual node within its node (`i` of `"{name}#{i}"`).
    vnode_indices: Vec<u32>,
    /// The lookup index over `positions`.
    bucket_index: HashBucketIndex,
}

impl std::fmt::Debug for ClassicRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The virtual nodes follow from the nodes; listing them would bury the nodes.
        f.debug_struct("ClassicRing")
            .field("nodes", &self.nodes)
            .field("vnodes", &self.positions.len())
            .finish_non_exhaustive()
    }
}

impl ClassicRing {
    /// An empty ring.
    pub fn new() -> Self {
        ClassicRing::default()
    }

    /// Builds a ring holding the given nodes, in one go (`O(V log V)`, cheaper than adding the
    /// nodes one by one). The order of the nodes does not matter.
    pub fn with_nodes(nodes: &[NodeState]) -> Result<Self, ClassicRingError> {
        let mut entries: Vec<NodeEntry> = Vec::with_capacity(nodes.len());
        let mut total: u64 = 0;
        for node in nodes {
            if node.weight == 0 {
                return Err(ClassicRingError::ZeroWeight {
                    name: node.name.clone(),
                });
            }
            total += u64::from(node.weight);
            entries.push(NodeEntry {
                name: node.name.clone(),
                weight: node.weight,
            });
        }
        check_total_weight(total)?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(pair) = entries.windows(2).find(|pair| pair[0].name == pair[1].name) {
            return Err(ClassicRingError::DuplicateNode {
                name: pair[0].name.clone(),
            });
        }
        let mut vnodes: Vec<(u64, u32, u32)> = Vec::with_capacity(total as usize);
        let mut label = String::new();
        for (slot, entry) in entries.iter().enumerate() {
            for vnode in 0..entry.weight {
                write_vnode_label(&mut label, &entry.name, vnode);
                vnodes.push((key_hash(label.as_bytes()), slot as u32, vnode));
            }
        }
        // Slots are in name order, so this is the documented (position, name, index) order.
        vnodes.sort_unstable();
        Ok(ClassicRing::from_parts(entries, vnodes))
    }

    /// Rebuilds a ring from its state. Fails on an unknown format version, a duplicate node
    /// name or a weight of 0.
    pub fn from_state(state: &RingState) -> Result<Self, ClassicRingError> {
        if state.format_version != STATE_FORMAT_VERSION {
            return Err(ClassicRingError::UnsupportedFormatVersion {
                found: state.format_version,
                supported: STATE_FORMAT_VERSION,
            });
        }
        ClassicRing::with_nodes(&state.nodes)
    }

    /// The state of the ring, from which [`ClassicRing::from_state`] rebuilds it identically:
    /// the current format version and the nodes sorted by name.
    pub fn state(&self) -> RingState {
        RingState {
            format_version: STATE_FORMAT_VERSION,
            nodes: self
                .nodes
                .iter()
                .map(|entry| NodeState {
                    name: entry.name.clone(),
                    weight: entry.weight,
                })
                .collect(),
        }
    }

    /// Adds a node with `weight` virtual nodes and returns the key ranges that moved (all of them
    /// to the new node). Fails, leaving the ring unchanged, if the name is already on the ring,
    /// the weight is 0 or the ring would exceed [`MAX_VNODES`] virtual nodes.
    pub fn add_node(&mut self, name: &str, weight: u32) -> Result<RingChange, ClassicRingError> {
        if weight == 0 {
            return Err(ClassicRingError::ZeroWeight {
                name: name.to_owned(),
            });
        }
        let slot = match self.slot_of(name) {
            Ok(_) => {
                return Err(ClassicRingError::DuplicateNode {
                    name: name.to_owned(),
                });
            }
            Err(slot) => slot,
        };
        check_total_weight(self.positions.len() as u64 + u64::from(weight))?;

        let mut entries = self.nodes.clone();
        entries.insert(
            slot,
            NodeEntry {
                name: name.to_owned(),
                weight,
            },
        );
        let slot = slot as u32;
        let mut added: Vec<(u64, u32, u32)> = Vec::with_capacity(weight as usize);
        let mut label = String::new();
        for vnode in 0..weight {
            write_vnode_label(&mut label, name, vnode);
            added.push((key_hash(label.as_bytes()), slot, vnode));
        }
        added.sort_unstable();
        // Existing virtual nodes keep their order; the slots after the new one shift by one,
        // which keeps slot order equal to name order.
        let existing = self.vnode_triples().map(|(position, owner, vnode)| {
            let owner = if owner >= slot { owner + 1 } else { owner };
            (position, owner, vnode)
        });
        let merged = merge_sorted(
            existing,
            added.into_iter(),
            self.positions.len() + weight as usize,
        );
        let after = ClassicRing::from_parts(entries, merged);
        let change = ClassicRing::changes_between(self, &after);
        *self = after;
        Ok(change)
    }

    /// Adds a node with [`DEFAULT_WEIGHT`] virtual nodes; see [`ClassicRing::add_node`].
    pub fn add_node_with_default_weight(
        &mut self,
        name: &str,
    ) -> Result<RingChange, ClassicRingError> {
        self.add_node(name, DEFAULT_WEIGHT)
    }

    /// Removes a node and returns the key ranges that moved (all of them away from the removed
    /// node). Fails, leaving the ring unchanged, if no node of that name is on the ring.
    pub fn remove_node(&mut self, name: &str) -> Result<RingChange, ClassicRingError> {
        let Ok(slot) = self.slot_of(name) else {
            return Err(ClassicRingError::UnknownNode {
                name: name.to_owned(),
            });
        };
        let mut entries = self.nodes.clone();
        entries.remove(slot);
        let slot = slot as u32;
        let remaining: Vec<(u64, u32, u32)> = self
            .vnode_triples()
            .filter(|&(_, owner, _)| owner != slot)
            .map(|(position, owner, vnode)| {
                let owner = if owner > slot { owner - 1 } else { owner };
                (position, owner, vnode)
            })
            .collect();
        let after = ClassicRing::from_parts(entries, remaining);
        let change = ClassicRing::changes_between(self, &after);
        *self = after;
        Ok(change)
    }

    /// The key ranges whose owner differs between `before` and `after`, and how much key space
    /// that is: the `M_keys` of any change, not only of one add or remove. `O(V)` in the number
    /// of virtual nodes of both rings.
    pub fn changes_between(before: &ClassicRing, after: &ClassicRing) -> RingChange {
        let mut change = RingChange::default();
        let (old, new) = (&before.positions, &after.positions);
        // `old_next` and `new_next` index the first position `>= segment_start` of each ring;
        // the owner function of each ring is constant on `[segment_start, next boundary]`.
        let mut segment_start: u128 = 0;
        let mut old_next = 0usize;
        let mut new_next = 0usize;
        while segment_start < HASH_SPACE_SIZE {
            let boundary = match (old.get(old_next), new.get(new_next)) {
                (Some(&a), Some(&b)) => u128::from(a.min(b)),
                (Some(&a), None) => u128::from(a),
                (None, Some(&b)) => u128::from(b),
                (None, None) => HASH_SPACE_SIZE - 1,
            };
            let previous_owner = before.owner_name_at(old_next);
            let new_owner = after.owner_name_at(new_next);
            if previous_owner != new_owner {
                change.record(segment_start, boundary + 1, previous_owner, new_owner);
            }
            segment_start = boundary + 1;
            while old
                .get(old_next)
                .is_some_and(|&p| u128::from(p) < segment_start)
            {
                old_next += 1;
            }
            while new
                .get(new_next)
                .is_some_and(|&p| u128::from(p) < segment_start)
            {
                new_next += 1;
            }
        }
        change
    }

    /// The node that owns `key`, or `None` if the ring is empty. `O(1)` expected.
    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Option<&str> {
        self.lookup_hash(key_hash(key))
    }

    /// The node that owns the key hash `hash` (see [`key_hash`]), or `None` if the ring is
    /// empty. `O(1)` expected; the same answer as [`ClassicRing::lookup_hash_binary_search`].
    #[inline]
    pub fn lookup_hash(&self, hash: u64) -> Option<&str> {
        let slot = self.owner_slot_of_hash(hash)?;
        self.nodes
            .get(slot as usize)
            .map(|entry| entry.name.as_str())
    }

    /// The reference lookup: the node that owns `hash`, found by a plain binary search over all
    /// virtual nodes, `O(log V)`. Obviously correct; the tests compare the fast lookup with it.
    pub fn lookup_hash_binary_search(&self, hash: u64) -> Option<&str> {
        if self.positions.is_empty() {
            return None;
        }
        let index = self.positions.partition_point(|&p| p < hash);
        let vnode = if index == self.positions.len() {
            0
        } else {
            index
        };
        self.owner_name_of_vnode(vnode)
    }

    /// Up to `n` distinct nodes for `key`, for replicas: its owner first, then the owners of the
    /// following virtual nodes clockwise, skipping nodes already listed. Returns
    /// `min(n, node_count())` names; an empty list for an empty ring or `n = 0`. Replica lists
    /// are short: up to [`REPLICAS_INLINE`] names are returned without allocating.
    pub fn lookup_n(&self, key: &[u8], n: usize) -> ReplicaList<'_> {
        self.lookup_n_hash(key_hash(key), n)
    }

    /// [`ClassicRing::lookup_n`] for a key hash.
    pub fn lookup_n_hash(&self, hash: u64, n: usize) -> ReplicaList<'_> {
        let wanted = n.min(self.nodes.len());
        let mut result = ReplicaList::new();
        if self.positions.is_empty() {
            return result;
        }
        let index = self.positions.partition_point(|&p| p < hash);
        let first = if index == self.positions.len() {
            0
        } else {
            index
        };
        let vnode_count = self.positions.len();
        // Every node owns at least one virtual node, so one turn of the ring finds them all.
        // The list is short, so checking it for a slot costs less than allocating a bitmap.
        let mut slots: SmallVec<[u32; REPLICAS_INLINE]> = SmallVec::new();
        for step in 0..vnode_count {
            if result.len() == wanted {
                break;
            }
            let slot = self.owners[(first + step) % vnode_count];
            if !slots.contains(&slot) {
                slots.push(slot);
                result.push(self.nodes[slot as usize].name.as_str());
            }
        }
        result
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of virtual nodes (the sum of the weights).
    pub fn vnode_count(&self) -> usize {
        self.positions.len()
    }

    /// True when the ring has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// True when a node of that name is on the ring.
    pub fn contains_node(&self, name: &str) -> bool {
        self.slot_of(name).is_ok()
    }

    /// The weight of the node `name`, or `None` if it is not on the ring.
    pub fn weight(&self, name: &str) -> Option<u32> {
        let slot = self.slot_of(name).ok()?;
        Some(self.nodes[slot].weight)
    }

    /// The nodes and their weights, sorted by name.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
        self.nodes
            .iter()
            .map(|entry| (entry.name.as_str(), entry.weight))
    }

    /// The virtual nodes in ring order: `(position, node name, virtual-node index)`.
    pub fn vnodes(&self) -> impl Iterator<Item = (u64, &str, u32)> + '_ {
        self.vnode_triples().map(|(position, slot, vnode)| {
            (position, self.nodes[slot as usize].name.as_str(), vnode)
        })
    }

    /// The fraction of the key space each node owns, sorted by name.
    pub fn shares(&self) -> Vec<(&str, f64)> {
        let mut owned = vec![0u128; self.nodes.len()];
        let change = ClassicRing::changes_between(&ClassicRing::new(), self);
        for moved in &change.moved_ranges {
            let slot = moved.new_owner.as_deref().map(|name| self.slot_of(name));
            if let Some(Ok(slot)) = slot {
                owned[slot] += moved.range.len();
            }
        }
        self.nodes
            .iter()
            .zip(owned)
            .map(|(entry, hashes)| (entry.name.as_str(), hashes as f64 / HASH_SPACE_SIZE as f64))
            .collect()
    }

    /// Assembles a ring from nodes sorted by name and virtual nodes sorted by
    /// (position, slot, index).
    fn from_parts(nodes: Vec<NodeEntry>, vnodes: Vec<(u64, u32, u32)>) -> Self {
        let positions: Vec<u64> = vnodes.iter().map(|v| v.0).collect();
        let owners: Vec<u32> = vnodes.iter().map(|v| v.1).collect();
        let vnode_indices = vnodes.iter().map(|v| v.2).collect();
        let bucket_index = HashBucketIndex::new(&positions, &owners);
        ClassicRing {
            nodes,
            positions,
            owners,
            vnode_indices,
            bucket_index,
        }
    }

    /// The virtual nodes as `(position, owner slot, virtual-node index)`, in ring order.
    fn vnode_triples(&self) -> impl Iterator<Item = (u64, u32, u32)> + '_ {
        self.positions
            .iter()
            .zip(&self.owners)
            .zip(&self.vnode_indices)
            .map(|((&position, &owner), &vnode)| (position, owner, vnode))
    }

    /// The slot of the node `name`, or where it would be inserted.
    fn slot_of(&self, name: &str) -> Result<usize, usize> {
        self.nodes
            .binary_search_by(|entry| entry.name.as_str().cmp(name))
    }

    /// The slot of the node that owns `hash`, through the bucket index.
    #[inline]
    fn owner_slot_of_hash(&self, hash: u64) -> Option<u32> {
        match &self.bucket_index {
            HashBucketIndex::Small(index) => index.owner_slot(hash, &self.positions, &self.owners),
            HashBucketIndex::Narrow(index) => index.owner_slot(hash, &self.positions, &self.owners),
            HashBucketIndex::Wide(index) => index.owner_slot(hash, &self.positions, &self.owners),
        }
    }

    /// The name of the owner of virtual node `vnode`.
    #[inline]
    fn owner_name_of_vnode(&self, vnode: usize) -> Option<&str> {
        let slot = *self.owners.get(vnode)? as usize;
        self.nodes.get(slot).map(|entry| entry.name.as_str())
    }

    /// The owner of the hashes just before position index `next` (the first position at or
    /// after them), wrapping around to virtual node 0 past the end; `None` for an empty ring.
    fn owner_name_at(&self, next: usize) -> Option<&str> {
        let vnode = if next < self.positions.len() { next } else { 0 };
        self.owner_name_of_vnode(vnode)
    }
}

impl RingChange {
    /// Records that the hashes `start..end` moved, merging with the previous range when it ends
    /// at `start` and has the same owners.
    fn record(&mut self, start: u128, end: u128, previous: Option<&str>, new: Option<&str>) {
        self.moved_hashes += end - start;
        if let Some(last) = self.moved_ranges.last_mut() {
            let extends_last = last.range.end == start
                && last.previous_owner.as_deref() == previous
                && last.new_owner.as_deref() == new;
            if extends_last {
                last.range.end = end;
                return;
            }
        }
        self.moved_ranges.push(MovedRange {
            // Segments start below 2^64.
            range: HashRange {
                start: start as u64,
                end,
            },
            previous_owner: previous.map(str::to_owned),
            new_owner: new.map(str::to_owned),
        });
    }
}

impl TryFrom<RingState> for ClassicRing {
    type Error = ClassicRingError;

    fn try_from(state: RingState) -> Result<Self, Self::Error> {
        ClassicRing::from_state(&state)
    }
}

impl From<ClassicRing> for RingState {
    fn from(ring: ClassicRing) -> Self {
        ring.state()
    }
}

/// Fails if a ring of `total` virtual nodes would be too large for the lookup index.
fn check_total_weight(total: u64) -> Result<(), ClassicRingError> {
    if total > u64::from(MAX_VNODES) {
        return Err(ClassicRingError::TooManyVirtualNodes { total });
    }
    Ok(())
}

/// Merges two sorted sequences of virtual nodes into one sorted vector.
fn merge_sorted(
    left: impl Iterator<Item = (u64, u32, u32)>,
    right: impl Iterator<Item = (u64, u32, u32)>,
    capacity: usize,
) -> Vec<(u64, u32, u32)> {
    let mut merged = Vec::with_capacity(capacity);
    let mut left = left.peekable();
    let mut right = right.peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some(a), Some(b)) => a <= b,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        merged.extend(next);
    }
    merged
}

#[cfg(test)]
mod tests;
