//! `ach-ring`: the ring of adaptive consistent hashing (ACH).
//!
//! The crate has two rings:
//!
//! * [`TokenRing`], the ring of the ACH model: `V` tokens at fixed, sorted positions on the unit
//!   circle `[0, 1)`, each owned by a node. Adaptation never moves a position; it only changes
//!   which node owns a token. The cost of a change is `M_keys`, the fraction of key space whose
//!   owner changed (see [`TokenRing::apply`]).
//! * The classic consistent-hash ring (module [`classic`]): string keys hashed with a stable,
//!   documented 64-bit hash, nodes added and removed by name with a weight (virtual nodes).
//!
//! Either ring can be shared between threads with a [`shared::SharedRing`]: readers look keys
//! up in lock-free, versioned snapshots while a writer commits plans, joins and leaves.
//!
//! Both rings look keys up in `O(1)` expected time through a bucket index in front of their
//! sorted positions, and keep a plain binary search (`lookup_binary_search`,
//! `lookup_hash_binary_search`) as the obviously correct reference the tests compare them with.
//!
//! # What the crate must not do
//!
//! It depends on no other `ach-*` crate (the controller, baselines and simulator depend on it,
//! not the other way round). It does no I/O, reads no clock and draws no random numbers: every
//! function is a pure function of its inputs, and the classic ring's hash is stable across
//! platforms, processes and releases. It does not panic on caller input: bad input gives a typed
//! error ([`RingError`], [`classic::ClassicRingError`]) or a documented answer (a lookup on an
//! empty classic ring is `None`; a token-ring lookup of a hash outside `[0, 1)` or `NaN` is token
//! 0). The only panics are the documented preconditions of [`TokenRing::owner`] (a token index
//! in range) and [`TokenRing::m_keys_to`] (one owner per token).
//!
//! # Example: the token ring
//!
//! ```
//! use ach_ring::{NodeId, TokenMove, TokenRing};
//!
//! // Four tokens, two nodes, round-robin owners: tokens 0 and 2 to node 0, 1 and 3 to node 1.
//! let mut ring = TokenRing::round_robin(vec![0.1, 0.4, 0.6, 0.9], 2).unwrap();
//! assert_eq!(ring.owner(ring.lookup(0.5)), NodeId(0)); // 0.5 belongs to the token at 0.6.
//! assert_eq!(ring.lookup(0.95), 0); // past the last token: wrap around to token 0.
//!
//! // Token 2 owns the arc (0.4, 0.6]; handing it to node 1 migrates 20 % of the key space.
//! let m_keys = ring.apply(&[TokenMove { token: 2, from: NodeId(0), to: NodeId(1) }]).unwrap();
//! assert!((m_keys - 0.2).abs() < 1e-12);
//! assert_eq!(ring.counts(2), vec![1, 3]);
//!
//! // The fast lookup and the reference binary search agree everywhere, NaN included.
//! for h in [0.0, 0.1, 0.35, 0.9, 0.99, -1.0, 2.0, f64::NAN] {
//!     assert_eq!(ring.lookup(h), ring.lookup_binary_search(h));
//! }
//! ```
//!
//! # Example: the classic ring
//!
//! ```
//! use ach_ring::classic::{ClassicRing, RingState, key_hash};
//!
//! let mut ring = ClassicRing::new();
//! ring.add_node("db-1", 150).unwrap();
//! ring.add_node("db-2", 150).unwrap();
//! let owner = ring.lookup(b"order:1234").unwrap().to_owned();
//! assert_eq!(ring.lookup_hash(key_hash(b"order:1234")), Some(owner.as_str()));
//!
//! // Removing a node moves exactly its key ranges, and nothing else.
//! let change = ring.remove_node("db-1").unwrap();
//! assert!(change.moved_ranges.iter().all(|moved| moved.previous_owner.as_deref() == Some("db-1")));
//! assert!((change.moved_fraction() - 0.5).abs() < 0.15);
//!
//! // The ring serializes as a versioned list of nodes and is rebuilt identically.
//! let json = serde_json::to_string(&ring.state()).unwrap();
//! let state: RingState = serde_json::from_str(&json).unwrap();
//! assert_eq!(ClassicRing::from_state(&state).unwrap(), ring);
//! ```
//!
//! # What can fail
//!
//! [`TokenRing::new`] and [`TokenRing::round_robin`] reject bad positions or owners with a
//! [`RingError`]; [`TokenRing::apply`] rejects a move naming a token out of range or a wrong
//! source, and leaves the ring unchanged. Lookups never fail (any `f64`, NaN included, gives a
//! token) and neither do shares, counts, token lists or the invariant checks, which return
//! violations as values. Two accessors panic, as slice indexing does: [`TokenRing::owner`] with a
//! token out of range and [`TokenRing::m_keys_to`] with a wrong number of owners. The classic
//! ring's changes return [`classic::ClassicRingError`]; its lookups return `None` on an empty
//! ring.

pub mod classic;
mod key;
mod membership;
mod migration;
pub mod named;
pub mod shared;
mod state;
mod token_ring;

pub use key::{hash_position, key_hash, key_position};
pub use membership::{JoinRule, LeaveRule};
pub use migration::Migration;
pub use named::{MembershipChange, NamedRing, NamedRingError, NamedRingState, Node, NodeSpec};
pub use state::{TOKEN_RING_STATE_VERSION, TokenRingState};
pub use token_ring::{
    InvariantCheck, InvariantViolation, NodeId, RankSets, RingError, TokenMove, TokenRing,
};
