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
//! The crate depends on no other `ach-*` crate. It does no I/O, reads no clock and draws no
//! random numbers: every function is a pure function of its inputs.
//!
//! # Example
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
//! ```

pub mod classic;
mod token_ring;

pub use token_ring::{InvariantCheck, InvariantViolation, NodeId, RingError, TokenMove, TokenRing};
