//! A ring shared between threads for read-mostly use: many readers look keys up while one
//! writer at a time commits changes.
//!
//! A [`SharedRing`] holds the current ring as an immutable, versioned [`Snapshot`]. Readers
//! take the current snapshot ([`SharedRing::load`] for one request, [`SharedRing::snapshot`]
//! to keep it longer, or a per-thread [`RingReader`] that re-checks the version with one atomic
//! load) and look keys up in it; taking a snapshot is lock-free and allocates nothing (it is an
//! [`arc_swap::ArcSwap`] load), so readers never wait for a writer nor for each other. A writer builds the next ring from a copy of the current one
//! ([`SharedRing::commit`], or the ring-specific [`SharedRing::apply`],
//! [`SharedRing::add_node`], [`SharedRing::remove_node`]) and publishes it in one atomic store,
//! with the next version number. A reader therefore sees either the whole old ring or the whole
//! new one, never a half-applied change, and a snapshot keeps answering from its own version
//! for as long as it is held. An old ring is freed when the last reader holding it lets it go.
//!
//! Writers are serialised by a mutex that readers never touch: commits never interleave, so
//! versions are published in order `0, 1, 2, ...` and no change is lost. A commit copies the
//! ring (`O(size of the ring)`); it is meant for changes that come every few milliseconds or
//! less often, not for every request.
//!
//! # Example
//!
//! ```
//! use ach_ring::shared::{RouteKey, SharedRing};
//! use ach_ring::{NodeId, TokenMove, TokenRing};
//!
//! let ring = TokenRing::round_robin(vec![0.1, 0.4, 0.6, 0.9], 2).unwrap();
//! let shared = SharedRing::new(ring);
//!
//! // A request: one snapshot, one or more lookups in it, the version that answered.
//! let snapshot = shared.load();
//! let owner: NodeId = snapshot.route(b"user:42");
//! assert_eq!(snapshot.version(), 0);
//!
//! // The controller commits a confirmed plan (here: every token of the owner moves to the other
//! // node); the next snapshot sees it, the snapshot taken before does not.
//! let to = NodeId(1 - owner.0);
//! let moves: Vec<TokenMove> =
//!     snapshot.tokens_of(owner).into_iter().map(|token| TokenMove { token, from: owner, to }).collect();
//! let commit = shared.apply(&moves).unwrap();
//! assert_eq!(commit.version, 1);
//! assert_eq!(snapshot.route(b"user:42"), owner);
//! assert_eq!(shared.load().route(b"user:42"), to);
//!
//! // A plan that does not match the ring (its sources are stale) is rejected; nothing is
//! // published.
//! assert!(shared.apply(&moves).is_err());
//! assert_eq!(shared.version(), 1);
//! ```

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::{ArcSwap, Cache, Guard};

use crate::classic::{ClassicRing, ClassicRingError, RingChange};
use crate::named::{MembershipChange, NamedRing, NamedRingError, Node, NodeSpec};
use crate::{NodeId, RingError, TokenMove, TokenRing};

/// A ring that knows which node owns a key: what a router asks of every ring it can share.
pub trait RouteKey {
    /// The answer of a lookup: a [`NodeId`] for a [`TokenRing`], the [`Node`] (name, address,
    /// id) for a [`NamedRing`], the node's name (or `None` on an empty ring) for a
    /// [`ClassicRing`].
    type Route<'a>
    where
        Self: 'a;

    /// The node that owns `key`, hashed with the crate's stable key hash ([`crate::key_hash`],
    /// XXH3-64 seed 0).
    fn route(&self, key: &[u8]) -> Self::Route<'_>;
}

impl RouteKey for TokenRing {
    type Route<'a> = NodeId;

    fn route(&self, key: &[u8]) -> NodeId {
        self.owner(self.lookup_key(key))
    }
}

impl RouteKey for NamedRing {
    type Route<'a> = &'a Node;

    fn route(&self, key: &[u8]) -> &Node {
        self.lookup_key(key)
    }
}

impl RouteKey for ClassicRing {
    type Route<'a> = Option<&'a str>;

    fn route(&self, key: &[u8]) -> Option<&str> {
        self.lookup(key)
    }
}

/// A ring whose token owners change by [`TokenMove`]s: what [`SharedRing::apply`] commits.
pub trait ApplyMoves {
    /// Why a set of moves was rejected.
    type Error;

    /// Applies the moves in order and returns their `M_keys`, or fails and changes nothing
    /// (see [`TokenRing::apply`] and [`NamedRing::apply`]).
    fn apply_moves(&mut self, moves: &[TokenMove]) -> Result<f64, Self::Error>;
}

impl ApplyMoves for TokenRing {
    type Error = RingError;

    fn apply_moves(&mut self, moves: &[TokenMove]) -> Result<f64, RingError> {
        self.apply(moves)
    }
}

impl ApplyMoves for NamedRing {
    type Error = NamedRingError;

    fn apply_moves(&mut self, moves: &[TokenMove]) -> Result<f64, NamedRingError> {
        self.apply(moves)
    }
}

/// One published version of a shared ring: the ring and its version number. Immutable; it
/// dereferences to the ring, so every lookup of the ring works on it.
#[derive(Debug)]
pub struct Snapshot<R> {
    version: u64,
    ring: R,
    live: SnapshotCounter,
}

impl<R> Snapshot<R> {
    fn new(version: u64, ring: R, live: &SnapshotCounter) -> Self {
        live.count.fetch_add(1, Ordering::Relaxed);
        Snapshot {
            version,
            ring,
            live: live.clone(),
        }
    }

    /// The version of this snapshot: 0 for the ring the handle was built with, then one more
    /// for every published commit.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The ring of this version.
    pub fn ring(&self) -> &R {
        &self.ring
    }
}

impl<R: RouteKey> Snapshot<R> {
    /// The node that owns `key` in this version (see [`RouteKey::route`]).
    #[inline]
    pub fn route(&self, key: &[u8]) -> R::Route<'_> {
        self.ring.route(key)
    }
}

impl<R> Deref for Snapshot<R> {
    type Target = R;

    fn deref(&self) -> &R {
        &self.ring
    }
}

impl<R> Drop for Snapshot<R> {
    fn drop(&mut self) {
        self.live.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The number of snapshots of one [`SharedRing`] still in memory: the current one plus every
/// old one that a reader still holds. It outlives the handle, so a test or a monitor can see
/// that every snapshot was freed (the count drops to 0 once the handle and all readers are
/// gone).
#[derive(Clone, Debug, Default)]
pub struct SnapshotCounter {
    count: Arc<AtomicUsize>,
}

impl SnapshotCounter {
    /// How many snapshots are alive now.
    pub fn live(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

/// A snapshot taken for a short while (one request): dereferences to the [`Snapshot`].
///
/// Taking it is lock-free and allocation-free. A thread should hold only a few of these at a
/// time (beyond a handful, taking one gets slower, still without locking); use
/// [`SharedRing::snapshot`] for a snapshot kept across requests.
pub struct SnapshotGuard<R> {
    guard: Guard<Arc<Snapshot<R>>>,
}

impl<R> Deref for SnapshotGuard<R> {
    type Target = Snapshot<R>;

    #[inline]
    fn deref(&self) -> &Snapshot<R> {
        &self.guard
    }
}

impl<R: std::fmt::Debug> std::fmt::Debug for SnapshotGuard<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SnapshotGuard").field(&**self.guard).finish()
    }
}

/// A reading thread's own view of a [`SharedRing`], for threads that serve request after
/// request: [`RingReader::load`] costs one atomic load when the version has not changed (no
/// atomic write, so readers on different cores do not contend for a cache line at all), and
/// takes the new snapshot when it has.
///
/// The reader keeps the last snapshot it loaded alive until its next `load` or its drop: an
/// idle reader holds one old version in memory.
pub struct RingReader<'a, R> {
    cache: Cache<&'a ArcSwap<Snapshot<R>>, Arc<Snapshot<R>>>,
}

impl<R> RingReader<'_, R> {
    /// The current snapshot (the one this reader held if no commit came since).
    #[inline]
    pub fn load(&mut self) -> &Snapshot<R> {
        self.cache.load()
    }
}

impl<R: std::fmt::Debug> std::fmt::Debug for RingReader<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingReader").finish_non_exhaustive()
    }
}

/// What a published commit returns: the version readers will see it under and what the change
/// itself returned.
#[derive(Clone, Debug, PartialEq)]
pub struct Commit<T> {
    /// The version published by this commit (unchanged if the commit published nothing, see
    /// [`SharedRing::apply`]).
    pub version: u64,
    /// The change's own result (for example `M_keys` of a token-ring plan).
    pub outcome: T,
}

/// A ring shared by many reading threads and changed by commits (see the [module
/// documentation](self)).
///
/// `SharedRing<R>` is `Send + Sync` when `R` is; share it with an `Arc` or a scoped borrow.
pub struct SharedRing<R> {
    current: ArcSwap<Snapshot<R>>,
    /// Serialises commits: held from reading the current ring until the next one is published.
    writer: Mutex<()>,
    live: SnapshotCounter,
}

impl<R: std::fmt::Debug> std::fmt::Debug for SharedRing<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRing")
            .field("current", &**self.current.load())
            .field("live_snapshots", &self.live.live())
            .finish()
    }
}

impl<R> SharedRing<R> {
    /// Shares `ring` as version 0.
    pub fn new(ring: R) -> Self {
        let live = SnapshotCounter::default();
        let first = Snapshot::new(0, ring, &live);
        SharedRing {
            current: ArcSwap::from_pointee(first),
            writer: Mutex::new(()),
            live,
        }
    }

    /// The current snapshot, for one request: lock-free, allocation-free, never waits for a
    /// commit. Look up every key of the request in it so that they all answer from one version.
    #[inline]
    pub fn load(&self) -> SnapshotGuard<R> {
        SnapshotGuard {
            guard: self.current.load(),
        }
    }

    /// A reader for one thread that looks keys up again and again (see [`RingReader`]): the
    /// cheapest way to read when a thread serves many requests.
    pub fn reader(&self) -> RingReader<'_, R> {
        RingReader {
            cache: Cache::new(&self.current),
        }
    }

    /// The current snapshot as an owned `Arc`, to keep across requests (one atomic increment;
    /// the snapshot's ring stays in memory until the last clone is dropped).
    pub fn snapshot(&self) -> Arc<Snapshot<R>> {
        self.current.load_full()
    }

    /// The version readers see now.
    pub fn version(&self) -> u64 {
        self.current.load().version
    }

    /// The number of snapshots alive now (the current one plus old ones still held).
    pub fn live_snapshots(&self) -> usize {
        self.live.live()
    }

    /// A counter of this handle's live snapshots that outlives the handle.
    pub fn snapshot_counter(&self) -> SnapshotCounter {
        self.live.clone()
    }

    /// Publishes `ring` as the next version, whatever the current ring is (for example a ring
    /// rebuilt from a saved state), and returns that version.
    pub fn publish(&self, ring: R) -> u64 {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let version = self.current.load().version + 1;
        self.current
            .store(Arc::new(Snapshot::new(version, ring, &self.live)));
        version
    }
}

impl<R: Clone> SharedRing<R> {
    /// Commits one change: copies the current ring, runs `change` on the copy and, if it
    /// succeeds, publishes the copy as the next version. If `change` fails, nothing is
    /// published and its error is returned; readers never see the copy.
    ///
    /// Commits are serialised: a second writer waits until the first has published. A
    /// `change` that panics publishes nothing and leaves the handle usable.
    pub fn commit<T, E>(
        &self,
        change: impl FnOnce(&mut R) -> Result<T, E>,
    ) -> Result<Commit<T>, E> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.current.load_full();
        let mut next = current.ring.clone();
        let outcome = change(&mut next)?;
        let version = current.version + 1;
        // Release the old snapshot before publishing so that, once no reader holds it, the
        // store below frees it.
        drop(current);
        self.current
            .store(Arc::new(Snapshot::new(version, next, &self.live)));
        Ok(Commit { version, outcome })
    }
}

impl<R: ApplyMoves + Clone> SharedRing<R> {
    /// Applies moves (a confirmed plan, or the moves of a join or leave once their data is
    /// copied) and publishes the result; the outcome is their `M_keys`. Moves the ring rejects
    /// (a token out of range, a stale source: the ring changed since they were planned)
    /// publish nothing. An empty set of moves publishes nothing either and returns the current
    /// version.
    pub fn apply(&self, moves: &[TokenMove]) -> Result<Commit<f64>, R::Error> {
        if moves.is_empty() {
            return Ok(Commit {
                version: self.version(),
                outcome: 0.0,
            });
        }
        self.commit(|ring| ring.apply_moves(moves))
    }
}

impl SharedRing<NamedRing> {
    /// Plans a node's join (see [`NamedRing::join`]) and publishes the node table with the new
    /// node. No token moves yet, so lookups answer as before; copy the data named by the
    /// change's migrations, then commit its moves with [`SharedRing::apply`], after which
    /// readers see the new owner.
    pub fn join(&self, spec: NodeSpec) -> Result<Commit<MembershipChange>, NamedRingError> {
        self.commit(|ring| ring.join(spec))
    }

    /// Plans a node's leave (see [`NamedRing::leave`]) and publishes the node table with the
    /// node marked as leaving. Lookups keep answering with it until the change's moves are
    /// committed with [`SharedRing::apply`] (after its data is copied to the new owners).
    pub fn leave(&self, name: &str) -> Result<Commit<MembershipChange>, NamedRingError> {
        self.commit(|ring| ring.leave(name))
    }
}

impl SharedRing<ClassicRing> {
    /// Adds a node (see [`ClassicRing::add_node`]) and publishes the result; the outcome is the
    /// key ranges that moved.
    pub fn add_node(
        &self,
        name: &str,
        weight: u32,
    ) -> Result<Commit<RingChange>, ClassicRingError> {
        self.commit(|ring| ring.add_node(name, weight))
    }

    /// Removes a node (see [`ClassicRing::remove_node`]) and publishes the result; the outcome
    /// is the key ranges that moved.
    pub fn remove_node(&self, name: &str) -> Result<Commit<RingChange>, ClassicRingError> {
        self.commit(|ring| ring.remove_node(name))
    }
}

/// The guide `docs/router.md` ("Using the ring in a router"): its example runs as a doc test of
/// this crate, so the guide cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/router.md")]
pub struct RouterGuide;

#[cfg(test)]
mod tests;
