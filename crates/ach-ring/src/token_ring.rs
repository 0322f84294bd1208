//! The token ring of the ACH model (spec section 1).

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use arc_order::{arc_orders, ranks};
pub use rank_sets::RankSets;

/// Identifier of a node (a server) of the cluster.
///
/// Node ids are dense: a cluster of `n` nodes uses ids `0..n`. Ids are never reused; a removed
/// node keeps its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as an index into per-node vectors.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl From<NodeId> for usize {
    fn from(node: NodeId) -> usize {
        node.index()
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {}", self.0)
    }
}

/// One owner change: token `token` passes from node `from` to node `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenMove {
    /// Index of the token (into the sorted positions).
    pub token: usize,
    /// Owner before the move.
    pub from: NodeId,
    /// Owner after the move.
    pub to: NodeId,
}

/// Why a ring could not be built or a change could not be applied.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RingError {
    /// A ring needs at least one token.
    #[error("a ring needs at least one token")]
    NoTokens,
    /// A ring needs at least one node.
    #[error("a ring needs at least one node")]
    NoNodes,
    /// A position is not a finite number in `[0, 1)`.
    #[error("position {index} = {value} is not in [0, 1)")]
    PositionOutOfRange {
        /// Index of the position.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// Positions must be strictly increasing (every arc > 0).
    #[error("positions must be strictly increasing: position {index} = {value} follows {previous}")]
    PositionsNotIncreasing {
        /// Index of the position that is not greater than its predecessor.
        index: usize,
        /// Its value.
        value: f64,
        /// The value of its predecessor.
        previous: f64,
    },
    /// There must be exactly one owner per token.
    #[error("{owners} owners given for {tokens} tokens")]
    OwnerCountMismatch {
        /// Number of tokens (positions).
        tokens: usize,
        /// Number of owners given.
        owners: usize,
    },
    /// A move names a token the ring does not have.
    #[error("move names token {token}, but the ring has {tokens} tokens")]
    TokenOutOfRange {
        /// The token named by the move.
        token: usize,
        /// Number of tokens of the ring.
        tokens: usize,
    },
    /// A capacity or weight is not a finite number > 0.
    #[error("{what} {index} = {value} must be a finite number > 0")]
    NotPositive {
        /// What the number is (`capacity of node`, `weight of token`).
        what: &'static str,
        /// Index of the node or token.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A saved state has a version this release cannot read.
    #[error("saved ring state has version {found}; this release reads version {supported}")]
    UnsupportedStateVersion {
        /// The version found in the state.
        found: u32,
        /// The version this release writes and reads.
        supported: u32,
    },
    /// A move says the token comes from a node that does not own it.
    #[error("move of token {token} says it comes from {claimed}, but {actual} owns it")]
    WrongSource {
        /// The token named by the move.
        token: usize,
        /// The owner the move claims.
        claimed: NodeId,
        /// The actual owner.
        actual: NodeId,
    },
}

/// One broken correctness invariant (spec section 1), as returned by
/// [`TokenRing::check_invariants`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum InvariantViolation {
    /// Invariant 1: the arcs do not sum to 1 (within 1e-9).
    ArcSum {
        /// The sum of the arcs.
        sum: f64,
    },
    /// Invariant 2: a live node owns fewer than `v_min` tokens.
    TooFewTokens {
        /// The node.
        node: NodeId,
        /// How many tokens it owns.
        count: usize,
        /// The minimum.
        v_min: usize,
    },
    /// Invariant 3: a token is owned by an id that is not a node of the cluster.
    InvalidOwner {
        /// The token.
        token: usize,
        /// Its owner.
        owner: NodeId,
        /// Number of nodes of the cluster (valid ids are `0..n_nodes`).
        n_nodes: usize,
    },
    /// Invariant 4: positions are not sorted.
    Unsorted {
        /// Index of the first position smaller than its predecessor.
        index: usize,
    },
    /// Invariant 5: an arc is not positive.
    EmptyArc {
        /// The token whose arc is not positive.
        token: usize,
        /// Its length.
        length: f64,
    },
}

/// What [`TokenRing::check_invariants`] needs to know about the cluster.
#[derive(Clone, Copy, Debug)]
pub struct InvariantCheck<'a> {
    /// Number of nodes; valid owner ids are `0..n_nodes`.
    pub n_nodes: usize,
    /// `live[i]` is true when node `i` is a member of the cluster (not removed). Only live nodes
    /// must own `v_min` tokens. Must have `n_nodes` entries.
    pub live: &'a [bool],
    /// Minimum number of tokens every live node owns.
    pub v_min: usize,
}

/// The first value that is not a finite number > 0, as a [`RingError::NotPositive`].
fn check_positive(what: &'static str, values: &[f64]) -> Result<(), RingError> {
    // NaN fails both comparisons. The first pass has no early exit, so the compiler can
    // vectorize it; the index is looked for only when some value fails.
    let positive = |v: f64| (v > 0.0) & (v < f64::INFINITY);
    if values.iter().fold(true, |ok, &v| ok & positive(v)) {
        return Ok(());
    }
    match values.iter().position(|&v| !positive(v)) {
        Some(index) => Err(RingError::NotPositive {
            what,
            index,
            value: values[index],
        }),
        None => Ok(()),
    }
}

/// Positions `(s + 0.5) / V` for `s` in `0..V`.
fn evenly_spaced_positions(tokens: usize) -> Vec<f64> {
    let v = tokens as f64;
    (0..tokens).map(|s| (s as f64 + 0.5) / v).collect()
}

/// Splits `total` items in proportion to `weights` (all > 0): `floor(total * w_i / sum w)` each,
/// then one more to the largest fractional parts (ties: lower index).
fn largest_remainder(total: usize, weights: &[f64]) -> Vec<usize> {
    let sum: f64 = weights.iter().sum();
    let raw: Vec<f64> = weights.iter().map(|w| total as f64 * w / sum).collect();
    let mut counts: Vec<usize> = raw.iter().map(|r| r.floor() as usize).collect();
    let given: usize = counts.iter().sum();
    let mut by_fraction: Vec<usize> = (0..weights.len()).collect();
    by_fraction.sort_by(|&a, &b| {
        let fa = raw[a] - raw[a].floor();
        let fb = raw[b] - raw[b].floor();
        fb.total_cmp(&fa).then(a.cmp(&b))
    });
    for &i in by_fraction.iter().cycle().take(total.saturating_sub(given)) {
        counts[i] += 1;
    }
    counts
}

/// The token ring: fixed sorted positions on the unit circle and one owner per token.
///
/// Token `s` owns the arc that ends at its position: a key with hash `h` belongs to the first
/// token whose position is `>= h`, or to token 0 when there is none (wrap-around).
///
/// Lookup ([`TokenRing::lookup`]) is `O(1)` expected: a bucket index over the circle, built at
/// the first lookup, narrows the search to the few positions that fall in the bucket of `h`.
/// [`TokenRing::lookup_binary_search`] is the plain binary search it is tested against.
///
/// Positions never change, so everything derived from them (arcs, token orders, bucket index) is
/// shared between clones: cloning a ring copies only its owners (and their copies in arc order,
/// once asked for, see [`TokenRing::owners_longest_first`], and its shares in units when it
/// keeps them, see [`TokenRing::shares`]). That keeps the copy a commit of
/// [`crate::shared::SharedRing`] makes small, and its readers' caches warm.
///
/// Two rings are equal when their positions and owners are: everything else is derived from
/// them.
#[derive(Clone, Debug)]
pub struct TokenRing {
    /// The positions and what is derived from them alone, shared by every clone.
    geometry: Arc<Geometry>,
    owners: Vec<NodeId>,
    /// The owners in shortest-first order (entry `r` owns token `shortest_first[r]`), built
    /// when first asked for and kept up to date from then on.
    owners_shortest_first: OnceLock<Vec<NodeId>>,
    /// The owners in longest-first order, as `owners_shortest_first`.
    owners_longest_first: OnceLock<Vec<NodeId>>,
    /// Each node's tokens as ranks in shortest-first order (module `rank_sets`), built when
    /// first asked for and kept up to date from then on (`None`: too large to keep).
    rank_sets_shortest_first: OnceLock<Option<RankSets>>,
    /// The same in longest-first order.
    rank_sets_longest_first: OnceLock<Option<RankSets>>,
    /// `node_counts[i]`: how many tokens node `i` owns, for the ids below its length (the
    /// largest counted owner id plus one; ids of [`TokenRing::counted_ids`] or more are not
    /// counted here).
    node_counts: Vec<usize>,
    /// How many tokens have an owner id of [`TokenRing::counted_ids`] or more (never in a ring
    /// whose ids are dense, as they are meant to be).
    uncounted_tokens: usize,
    /// For the ids counted in `node_counts`, the sum of the arc units of each node's tokens
    /// (module `shares`), built when the shares are first asked for after the owners first
    /// changed and kept up to date from then on; never built for a ring whose arcs are not
    /// whole units.
    node_units: OnceLock<Vec<u64>>,
    /// [`TokenRing::owner_changes`].
    owner_changes: u64,
}

/// A ring's positions and what depends on them alone. Positions never change, so a ring's
/// clones share one. What only some uses need is built when first asked for, once for every
/// ring that shares it: `ach-redis` builds a ring of 16384 slots at every control step and
/// never looks a hash up, the simulator looks hashes up and never needs the ranks unless an
/// algorithm keeps owners in arc order.
#[derive(Debug)]
struct Geometry {
    positions: Vec<f64>,
    /// `arcs[s] = positions[s] - positions[s - 1]`, token 0's wrapping round 0.
    arcs: Vec<f64>,
    /// Token indices by arc length, shortest first; ties in increasing index order.
    shortest_first: Vec<usize>,
    /// Token indices by arc length, longest first; ties in increasing index order.
    longest_first: Vec<usize>,
    /// Where each token stands in the two orders, for [`TokenRing::set_owners`].
    ranks: OnceLock<ArcRanks>,
    /// For [`TokenRing::lookup`].
    bucket_index: OnceLock<BucketIndex>,
    /// Whether the arcs are whole units of `2^-53` (module `shares`), found when first asked
    /// for.
    whole_units: OnceLock<bool>,
}

/// Where each token stands in the two arc orders of a [`Geometry`].
#[derive(Debug)]
struct ArcRanks {
    /// `shortest[s]`: where token `s` stands in `shortest_first`.
    shortest: Vec<usize>,
    /// `longest[s]`: where token `s` stands in `longest_first`.
    longest: Vec<usize>,
}

impl Geometry {
    /// The geometry of strictly increasing positions in `[0, 1)` (checked by the caller).
    fn new(positions: Vec<f64>) -> Geometry {
        let arcs = arc_lengths(&positions);
        // Positions never change, so neither do these orders: computed once, they spare every
        // algorithm a sort of its tokens at every step. Stable sorts keep ties by index.
        let (shortest_first, longest_first) = arc_orders(&arcs);
        Geometry {
            positions,
            arcs,
            shortest_first,
            longest_first,
            ranks: OnceLock::new(),
            bucket_index: OnceLock::new(),
            whole_units: OnceLock::new(),
        }
    }

    /// The bucket index, built at the first call. A lookup's own code is only the check that
    /// it exists: building it is kept out of line.
    #[inline]
    fn bucket_index(&self) -> &BucketIndex {
        match self.bucket_index.get() {
            Some(index) => index,
            None => self.build_bucket_index(),
        }
    }

    #[cold]
    #[inline(never)]
    fn build_bucket_index(&self) -> &BucketIndex {
        self.bucket_index
            .get_or_init(|| BucketIndex::new(&self.positions))
    }

    /// The ranks, built at the first call: at the first change of owners of a ring that keeps
    /// its owners in an arc order.
    fn ranks(&self) -> &ArcRanks {
        self.ranks.get_or_init(|| ArcRanks {
            shortest: ranks(&self.shortest_first),
            longest: ranks(&self.longest_first),
        })
    }
}

impl PartialEq for TokenRing {
    fn eq(&self, other: &TokenRing) -> bool {
        self.positions() == other.positions() && self.owners == other.owners
    }
}

/// How many positions of a bucket [`TokenRing::lookup`] counts without a branch on their
/// number (the sum in `lookup` counts this many).
const BRANCHLESS_CANDIDATES: usize = 4;

/// How many positions of a bucket [`TokenRing::lookup`] compares one by one; it binary-searches
/// larger buckets.
const LINEAR_SCAN_LIMIT: usize = 8;

/// A bucket index over the unit circle, in front of the sorted positions.
///
/// The circle is cut into `B = 2^k` equal buckets (`B >= 2 V`). Bucket `b` covers
/// `[b / B, (b + 1) / B)` and `starts[b]` is the index of the first position `>= b / B`
/// (`starts[B] = V`). Because `B` is a power of two, `h * B` and `b / B` are exact in `f64`, so the
/// answer for any `h` in bucket `b` lies in `starts[b]..=starts[b + 1]` without rounding doubt.
///
/// The index depends only on the positions, which never change, so rings are compared by
/// their positions (and owners), not by their indexes.
struct BucketIndex {
    /// `B` as an `f64`, to scale a hash into a bucket number.
    bucket_count_f64: f64,
    /// `starts[b]`: index of the first position `>= b / B`; `B + 1` entries.
    starts: Vec<usize>,
}

impl std::fmt::Debug for BucketIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The starts are derived from the positions; printing them would only bury the positions.
        f.debug_struct("BucketIndex")
            .field("buckets", &(self.starts.len() - 1))
            .finish_non_exhaustive()
    }
}

impl BucketIndex {
    /// Builds the index of sorted positions in `[0, 1)`.
    fn new(positions: &[f64]) -> Self {
        let bucket_count = (2 * positions.len()).next_power_of_two();
        let bucket_count_f64 = bucket_count as f64;
        // Bucket `b` starts at the first position `p` with `p * B >= b`, that is with
        // `floor(p * B) >= b` (`b` is an integer, and `p * B` is exact): each position starts
        // the buckets after the last one started up to its own, and the buckets after the last
        // position's start at `V`.
        let mut starts = vec![positions.len(); bucket_count + 1];
        let mut bucket = 0;
        for (index, &position) in positions.iter().enumerate() {
            let last = (position * bucket_count_f64) as usize;
            while bucket <= last {
                starts[bucket] = index;
                bucket += 1;
            }
        }
        BucketIndex {
            bucket_count_f64,
            starts,
        }
    }
}

impl TokenRing {
    /// Builds a ring from strictly increasing positions in `[0, 1)` and one owner per token.
    pub fn new(positions: Vec<f64>, owners: Vec<NodeId>) -> Result<Self, RingError> {
        if positions.is_empty() {
            return Err(RingError::NoTokens);
        }
        if owners.len() != positions.len() {
            return Err(RingError::OwnerCountMismatch {
                tokens: positions.len(),
                owners: owners.len(),
            });
        }
        for (index, &value) in positions.iter().enumerate() {
            if !(0.0..1.0).contains(&value) {
                return Err(RingError::PositionOutOfRange { index, value });
            }
            if index > 0 && value <= positions[index - 1] {
                return Err(RingError::PositionsNotIncreasing {
                    index,
                    value,
                    previous: positions[index - 1],
                });
            }
        }
        let mut ring = TokenRing {
            geometry: Arc::new(Geometry::new(positions)),
            owners: Vec::new(),
            owners_shortest_first: OnceLock::new(),
            owners_longest_first: OnceLock::new(),
            rank_sets_shortest_first: OnceLock::new(),
            rank_sets_longest_first: OnceLock::new(),
            node_counts: Vec::new(),
            uncounted_tokens: 0,
            node_units: OnceLock::new(),
            owner_changes: 0,
        };
        for &owner in &owners {
            ring.count_in(owner);
        }
        ring.owners = owners;
        Ok(ring)
    }

    /// Builds a ring with round-robin owners: token `s` goes to node `s mod n_nodes`.
    pub fn round_robin(positions: Vec<f64>, n_nodes: usize) -> Result<Self, RingError> {
        if n_nodes == 0 {
            return Err(RingError::NoNodes);
        }
        let owners = (0..positions.len())
            .map(|s| NodeId((s % n_nodes) as u32))
            .collect();
        TokenRing::new(positions, owners)
    }

    /// `tokens` evenly spaced tokens, at positions `(s + 0.5) / V`, owned round-robin by
    /// `nodes` nodes: every arc is `1 / V`, the ring a live deployment starts from when it has
    /// no reason to prefer other positions.
    ///
    /// ```
    /// let ring = ach_ring::TokenRing::evenly_spaced(4, 2).unwrap();
    /// assert_eq!(ring.positions(), &[0.125, 0.375, 0.625, 0.875]);
    /// assert_eq!(ring.counts(2), vec![2, 2]);
    /// ```
    pub fn evenly_spaced(tokens: usize, nodes: usize) -> Result<Self, RingError> {
        TokenRing::round_robin(evenly_spaced_positions(tokens), nodes)
    }

    /// `tokens` evenly spaced tokens (as [`TokenRing::evenly_spaced`]) whose owners are
    /// apportioned to `capacities` by largest remainder (`floor(V * c_i / sum c)`, the tokens
    /// left over to the largest fractional parts, ties to the lower node id) and interleaved
    /// round the ring: node `i`'s `k_i` tokens sit near the fractions `(j + 0.5) / k_i` of the
    /// circle, so every node's tokens are spread evenly and no node owns one long stretch.
    ///
    /// Fails when there is no token or no node, or a capacity is not a finite number > 0.
    ///
    /// ```
    /// let ring = ach_ring::TokenRing::capacity_weighted(8, &[3.0, 1.0]).unwrap();
    /// assert_eq!(ring.counts(2), vec![6, 2]);
    /// ```
    pub fn capacity_weighted(tokens: usize, capacities: &[f64]) -> Result<Self, RingError> {
        if capacities.is_empty() {
            return Err(RingError::NoNodes);
        }
        check_positive("capacity of node", capacities)?;
        let counts = largest_remainder(tokens, capacities);
        // Each node's tokens aim at the fractions (j + 0.5) / k_i of the circle; walking all the
        // aims in order (ties: lower node id) interleaves the nodes round the ring.
        let mut aims: Vec<(f64, usize)> = counts
            .iter()
            .enumerate()
            .flat_map(|(node, &k)| (0..k).map(move |j| ((j as f64 + 0.5) / k as f64, node)))
            .collect();
        aims.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let owners = aims.iter().map(|&(_, node)| NodeId(node as u32)).collect();
        TokenRing::new(evenly_spaced_positions(tokens), owners)
    }

    /// A ring whose arcs are proportional to `weights`: token `s` owns `weights[s] / sum` of the
    /// circle (up to the rounding of the positions), token 0's arc wrapping round `0`.
    ///
    /// Use it when the cost of moving a token is not a share of a hash space: a Redis Cluster
    /// slot `s` holding `keys[s]` keys, say, with `weights[s] = keys[s]` (and a small positive
    /// floor for empty slots). ACH's budget, `M_keys` and every share are then measured in that
    /// weight. Fails when there is no token, a weight is not a finite number > 0, a weight is
    /// too small against the total to give a distinct position (below about `1e-16` of it), or
    /// the owners do not match the weights.
    ///
    /// ```
    /// use ach_ring::{NodeId, TokenRing};
    /// let ring = TokenRing::from_arc_weights(&[2.0, 1.0, 1.0], vec![NodeId(0); 3]).unwrap();
    /// assert!((ring.arcs()[0] - 0.5).abs() < 1e-15);
    /// assert!((ring.arcs()[2] - 0.25).abs() < 1e-15);
    /// ```
    pub fn from_arc_weights(weights: &[f64], owners: Vec<NodeId>) -> Result<Self, RingError> {
        check_positive("weight of token", weights)?;
        let Some(&first) = weights.first() else {
            return Err(RingError::NoTokens);
        };
        let total: f64 = weights.iter().sum();
        // Token s ends at its cumulative weight, shifted back by half of token 0's weight so
        // that token 0's arc wraps round 0 and the last position stays below 1.
        let mut cumulative = 0.0;
        let positions = weights
            .iter()
            .map(|&w| {
                cumulative += w;
                (cumulative - first / 2.0) / total
            })
            .collect();
        TokenRing::new(positions, owners)
    }

    /// Number of tokens `V`.
    pub fn len(&self) -> usize {
        self.positions().len()
    }

    /// Always false: a ring has at least one token.
    pub fn is_empty(&self) -> bool {
        self.positions().is_empty()
    }

    /// The sorted token positions.
    pub fn positions(&self) -> &[f64] {
        &self.geometry.positions
    }

    /// Arc lengths: `L[s] = pos[s] - pos[s-1]`, `L[0] = pos[0] - pos[V-1] + 1`.
    pub fn arcs(&self) -> &[f64] {
        &self.geometry.arcs
    }

    /// The owner of every token.
    pub fn owners(&self) -> &[NodeId] {
        &self.owners
    }

    /// The owner of token `token`. Panics if `token >= len()`.
    pub fn owner(&self, token: usize) -> NodeId {
        self.owners[token]
    }

    /// Every token index ordered by arc length, shortest first (ties: lower index first).
    pub fn tokens_shortest_first(&self) -> &[usize] {
        &self.geometry.shortest_first
    }

    /// Every token index ordered by arc length, longest first (ties: lower index first).
    pub fn tokens_longest_first(&self) -> &[usize] {
        &self.geometry.longest_first
    }

    /// The owners in the order of [`TokenRing::tokens_shortest_first`]: entry `r` is the owner
    /// of token `tokens_shortest_first()[r]`. Kept up to date by every change of owners, so a
    /// walk over the tokens in arc order reads their owners one after the other instead of
    /// jumping about [`TokenRing::owners`].
    ///
    /// The first call builds this copy of the owners (`O(V)`); from then on every change of
    /// owners keeps it up to date. A ring that is never asked for it never pays for it.
    pub fn owners_shortest_first(&self) -> &[NodeId] {
        self.owners_shortest_first.get_or_init(|| {
            self.tokens_shortest_first()
                .iter()
                .map(|&s| self.owners[s])
                .collect()
        })
    }

    /// The owners in the order of [`TokenRing::tokens_longest_first`] (see
    /// [`TokenRing::owners_shortest_first`]).
    pub fn owners_longest_first(&self) -> &[NodeId] {
        self.owners_longest_first.get_or_init(|| {
            self.tokens_longest_first()
                .iter()
                .map(|&s| self.owners[s])
                .collect()
        })
    }

    /// How many times an owner was set since the ring was built (a clone carries the count
    /// on). Equal counts of one ring at two moments mean equal owners, so a caller can keep
    /// what it derived from the owners until the count changes. Undoing a failed
    /// [`TokenRing::apply`] counts too.
    pub fn owner_changes(&self) -> u64 {
        self.owner_changes
    }

    /// The longest arc: the first in longest-first order (`O(1)`; the arcs are positive).
    pub fn max_arc(&self) -> f64 {
        self.tokens_longest_first()
            .first()
            .map_or(0.0, |&token| self.arcs()[token])
    }

    /// The token that owns hash `h`: the first token whose position is `>= h`, wrapping around
    /// to token 0 when there is none. A hash exactly equal to a position belongs to that token.
    ///
    /// `O(1)` expected for positions spread over the circle (a bucket index narrows the search
    /// to one bucket, about half a token on average), `O(log V)` in the worst case. Returns the
    /// same token as [`TokenRing::lookup_binary_search`] for every `f64`, and never panics:
    ///
    /// * `h` in `[0, pos[0]]` (including `-0.0`) and `h > pos[V-1]`: token 0;
    /// * `h < 0`, including `-inf`: token 0 (every position is `>= h`, the first is token 0);
    /// * `h >= 1`, including `+inf`: token 0 (no position is `>= h`: wrap-around);
    /// * `NaN`: token 0 (no position compares below `NaN`, as in the binary search).
    #[inline]
    pub fn lookup(&self, h: f64) -> usize {
        // Every input outside the open interval (0, 1), NaN included, belongs to token 0 (see
        // above); inside it, `h * B` is exact (B is a power of two) and below B.
        if !(h > 0.0 && h < 1.0) {
            return 0;
        }
        let index = self.geometry.bucket_index();
        let bucket = (h * index.bucket_count_f64) as usize;
        let (Some(&first), Some(&end)) = (index.starts.get(bucket), index.starts.get(bucket + 1))
        else {
            // Unreachable for h in (0, 1); answer like the reference rather than panic.
            return self.lookup_binary_search(h);
        };
        // The candidates are the positions inside the bucket, about half a token on average.
        // Up to four are counted without a branch on how many there are (which varies from
        // bucket to bucket, so that a loop over them would end mispredicted): the sorted
        // candidates below `h` are those before the first that is not. More are compared one
        // by one, unless positions cluster and a binary search is cheaper.
        let positions = self.positions();
        if end - first <= BRANCHLESS_CANDIDATES {
            let below = |j: usize| {
                let position = positions.get(first + j).copied().unwrap_or(f64::INFINITY);
                usize::from((first + j < end) & (position < h))
            };
            let token = first + below(0) + below(1) + below(2) + below(3);
            return if token == positions.len() { 0 } else { token };
        }
        let candidates = positions.get(first..end).unwrap_or(&[]);
        let offset = if candidates.len() <= LINEAR_SCAN_LIMIT {
            candidates
                .iter()
                .position(|&p| p >= h)
                .unwrap_or(candidates.len())
        } else {
            candidates.partition_point(|&p| p < h)
        };
        let token = first + offset;
        if token == self.positions().len() {
            0
        } else {
            token
        }
    }

    /// The token that owns `key`: [`TokenRing::lookup`] of [`crate::key_position`], the
    /// documented, platform-stable position of the key.
    ///
    /// ```
    /// let ring = ach_ring::TokenRing::evenly_spaced(64, 4).unwrap();
    /// let token = ring.lookup_key(b"session:9f2c");
    /// assert_eq!(token, ring.lookup(ach_ring::key_position(b"session:9f2c")));
    /// ```
    #[inline]
    pub fn lookup_key(&self, key: &[u8]) -> usize {
        self.lookup(crate::key_position(key))
    }

    /// The token that owns a key whose [`crate::key_hash`] is `hash`.
    #[inline]
    pub fn lookup_hash(&self, hash: u64) -> usize {
        self.lookup(crate::hash_position(hash))
    }

    /// The reference lookup: the same answer as [`TokenRing::lookup`] for every `f64` (see there
    /// for inputs outside `[0, 1)` and `NaN`), found by a plain binary search over all positions,
    /// `O(log V)`. Obviously correct; the tests compare the fast lookup with it.
    pub fn lookup_binary_search(&self, h: f64) -> usize {
        let s = self.positions().partition_point(|&p| p < h);
        if s == self.positions().len() { 0 } else { s }
    }

    /// Number of tokens owned by each of the nodes `0..n_nodes`. Owners outside that range are
    /// not counted (they break invariant 3).
    ///
    /// `O(n_nodes)`: the ring keeps the counts as owners change.
    pub fn counts(&self, n_nodes: usize) -> Vec<usize> {
        if n_nodes > self.counted_ids() && self.uncounted_tokens > 0 {
            return self.counts_by_scan(n_nodes);
        }
        let mut counts = vec![0; n_nodes];
        let known = n_nodes.min(self.node_counts.len());
        counts[..known].copy_from_slice(&self.node_counts[..known]);
        counts
    }

    /// [`TokenRing::counts`] by a pass over the owners (for ids beyond the kept counts).
    fn counts_by_scan(&self, n_nodes: usize) -> Vec<usize> {
        let mut counts = vec![0; n_nodes];
        for owner in &self.owners {
            if let Some(c) = counts.get_mut(owner.index()) {
                *c += 1;
            }
        }
        counts
    }

    /// Number of tokens owned by `node`.
    pub fn count(&self, node: NodeId) -> usize {
        if node.index() < self.counted_ids() {
            return self.node_counts.get(node.index()).copied().unwrap_or(0);
        }
        self.owners.iter().filter(|&&o| o == node).count()
    }

    /// [`TokenRing::counts`] and [`TokenRing::shares`] (the same values, the shares summed in
    /// the same order).
    pub fn counts_and_shares(&self, n_nodes: usize) -> (Vec<usize>, Vec<f64>) {
        (self.counts(n_nodes), self.shares(n_nodes))
    }

    /// Share of the key space owned by `node`.
    pub fn share(&self, node: NodeId) -> f64 {
        self.owners
            .iter()
            .zip(self.arcs().iter())
            .filter(|&(&o, _)| o == node)
            .map(|(_, a)| a)
            .sum()
    }

    /// The tokens owned by `node`, in increasing index order.
    pub fn tokens_of(&self, node: NodeId) -> Vec<usize> {
        (0..self.owners.len())
            .filter(|&s| self.owners[s] == node)
            .collect()
    }

    /// `M_keys` of changing the owners of this ring to `other`: the sum of the arcs of the tokens
    /// whose owners differ. Panics if `other` does not have one owner per token.
    pub fn m_keys_to(&self, other: &[NodeId]) -> f64 {
        assert_eq!(other.len(), self.owners.len(), "one owner per token");
        self.owners
            .iter()
            .zip(other)
            .zip(self.arcs().iter())
            .filter(|((a, b), _)| a != b)
            .map(|(_, arc)| arc)
            .sum()
    }

    /// Checks the five correctness invariants of spec section 1 and returns every violation
    /// found (an empty vector when the ring is sound), in the order of the invariants.
    pub fn check_invariants(&self, check: &InvariantCheck<'_>) -> Vec<InvariantViolation> {
        let mut violations = Vec::new();
        let sum: f64 = self.arcs().iter().sum();
        if (sum - 1.0).abs() >= 1e-9 {
            violations.push(InvariantViolation::ArcSum { sum });
        }
        violations.extend(self.check_owner_invariants(check));
        if let Some(index) =
            (1..self.positions().len()).find(|&s| self.positions()[s] < self.positions()[s - 1])
        {
            violations.push(InvariantViolation::Unsorted { index });
        }
        for (token, &length) in self.arcs().iter().enumerate() {
            if length.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                violations.push(InvariantViolation::EmptyArc { token, length });
            }
        }
        violations
    }

    /// Checks invariants 2 (every live node owns `v_min` tokens) and 3 (every owner is a node)
    /// only: the two that depend on the owners. Invariants 1, 4 and 5 depend on the positions
    /// alone, which no operation of this type changes, so a caller that has checked them once
    /// for a ring may check only these after each change of owners.
    ///
    /// `O(n_nodes)` on a sound ring (the ring keeps its counts per node); the owners are
    /// scanned only when some token's owner is not a node.
    pub fn check_owner_invariants(&self, check: &InvariantCheck<'_>) -> Vec<InvariantViolation> {
        let mut violations = Vec::new();
        let counts = self.counts(check.n_nodes);
        for (i, &count) in counts.iter().enumerate() {
            let live = check.live.get(i).copied().unwrap_or(true);
            if live && count < check.v_min {
                violations.push(InvariantViolation::TooFewTokens {
                    node: NodeId(i as u32),
                    count,
                    v_min: check.v_min,
                });
            }
        }
        let beyond = self.node_counts.get(check.n_nodes..).unwrap_or(&[]);
        if self.uncounted_tokens == 0 && beyond.iter().all(|&c| c == 0) {
            return violations;
        }
        for (token, &owner) in self.owners.iter().enumerate() {
            if owner.index() >= check.n_nodes {
                violations.push(InvariantViolation::InvalidOwner {
                    token,
                    owner,
                    n_nodes: check.n_nodes,
                });
            }
        }
        violations
    }
}

/// Arc lengths of sorted positions on the unit circle.
fn arc_lengths(positions: &[f64]) -> Vec<f64> {
    let v = positions.len();
    (0..v)
        .map(|s| {
            if s == 0 {
                positions[0] - positions[v - 1] + 1.0
            } else {
                positions[s] - positions[s - 1]
            }
        })
        .collect()
}

mod arc_order;
mod owner_changes;
mod rank_sets;
mod shares;
#[cfg(test)]
mod tests;
