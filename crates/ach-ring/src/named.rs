//! Named nodes over a [`TokenRing`]: routing a key to a node's name and address, and nodes that
//! join and leave by name.
//!
//! [`NamedRing`] keeps a table of nodes (name, optional address, capacity, live) beside the
//! ring. Joins and leaves *plan* the least key space that must move and return it as a
//! [`MembershipChange`] (moves and their [`Migration`]s); the ring changes only when the caller
//! commits the moves with [`NamedRing::apply`], after the data has been copied. Until then
//! lookups keep answering with the nodes that hold the data.
//!
//! ```
//! use ach_ring::{NamedRing, NodeSpec};
//!
//! let mut ring = NamedRing::new(
//!     256,
//!     vec![NodeSpec::new("cache-a", 2.0), NodeSpec::new("cache-b", 1.0).with_address("127.0.0.1:7001")],
//! )
//! .unwrap();
//! let owner = ring.lookup_key(b"user:17");
//! assert!(owner.name == "cache-a" || owner.address.as_deref() == Some("127.0.0.1:7001"));
//!
//! // A node joins: the change names the hash ranges to copy before the switch.
//! let change = ring.join(NodeSpec::new("cache-c", 1.0)).unwrap();
//! assert_eq!(change.moves.len(), 3); // v_min tokens, the shortest arcs the others can spare
//! // ... copy the keys whose hash lies in change.migrations[k].ranges, then commit:
//! ring.apply(&change.moves).unwrap();
//! assert_eq!(ring.ring().count(change.node), 3);
//! ```

use ahash::AHashMap;
use serde::{Deserialize, Serialize};

use crate::membership::{JoinRule, LeaveRule};
use crate::migration::Migration;
use crate::state::TokenRingState;
use crate::token_ring::{NodeId, RingError, TokenMove, TokenRing};

/// Default minimum number of tokens of a live node (the paper's `v_min`).
pub const DEFAULT_V_MIN: usize = 3;

/// A node to add: its name, an optional address clients connect to, and its capacity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// Address clients connect to (`host:port`), if the ring should answer with it.
    pub address: Option<String>,
    /// Relative capacity (> 0): the initial ring gives each node a share of tokens in
    /// proportion to it.
    pub capacity: f64,
}

impl NodeSpec {
    /// A node with a name and a capacity, and no address.
    pub fn new(name: impl Into<String>, capacity: f64) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            address: None,
            capacity,
        }
    }

    /// The same node with an address.
    pub fn with_address(mut self, address: impl Into<String>) -> NodeSpec {
        self.address = Some(address.into());
        self
    }
}

/// A node of a [`NamedRing`].
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its id in the ring (dense, never reused).
    pub id: NodeId,
    /// Unique name.
    pub name: String,
    /// Address clients connect to, if known.
    pub address: Option<String>,
    /// Relative capacity.
    pub capacity: f64,
    /// False once the node has left (its id stays taken).
    pub live: bool,
}

/// Why a named-ring operation was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NamedRingError {
    /// Two nodes with one name.
    #[error("node name {name:?} is already taken")]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// A name no node has.
    #[error("no node is named {name:?}")]
    UnknownNode {
        /// The name.
        name: String,
    },
    /// The node has already left.
    #[error("node {name:?} has already left")]
    AlreadyLeft {
        /// The name.
        name: String,
    },
    /// The last live node cannot leave: its keys would have nowhere to go.
    #[error("node {name:?} is the last live node and cannot leave")]
    LastLiveNode {
        /// The name.
        name: String,
    },
    /// The ring or a saved state rejected the operation.
    #[error(transparent)]
    Ring(#[from] RingError),
}

/// A planned change of membership: the moves to commit and the data each one migrates.
#[derive(Clone, Debug, PartialEq)]
pub struct MembershipChange {
    /// The node that joined or is leaving.
    pub node: NodeId,
    /// The owner changes, to commit with [`NamedRing::apply`] once the data is copied.
    pub moves: Vec<TokenMove>,
    /// One per move: the key hashes to copy from `from` to `to`.
    pub migrations: Vec<Migration>,
    /// Share of the key space that moves.
    pub moved_fraction: f64,
}

/// A [`TokenRing`] whose nodes have names, addresses and capacities.
#[derive(Clone, Debug)]
pub struct NamedRing {
    ring: TokenRing,
    nodes: Vec<Node>,
    by_name: AHashMap<String, NodeId>,
    v_min: usize,
}

impl PartialEq for NamedRing {
    fn eq(&self, other: &Self) -> bool {
        // The name map is derived from the nodes.
        self.ring == other.ring && self.nodes == other.nodes && self.v_min == other.v_min
    }
}

/// Fixed seeds for the name map: an internal map, but no process-random state anywhere.
fn name_map() -> AHashMap<String, NodeId> {
    AHashMap::with_hasher(ahash::RandomState::with_seeds(
        0x243F_6A88_85A3_08D3,
        0x1319_8A2E_0370_7344,
        0xA409_3822_299F_31D0,
        0x082E_FA98_EC4E_6C89,
    ))
}

impl NamedRing {
    /// A ring of `tokens` evenly spaced tokens over `nodes`, apportioned to their capacities
    /// and interleaved ([`TokenRing::capacity_weighted`]), with `v_min` = [`DEFAULT_V_MIN`].
    pub fn new(tokens: usize, nodes: Vec<NodeSpec>) -> Result<NamedRing, NamedRingError> {
        let capacities: Vec<f64> = nodes.iter().map(|n| n.capacity).collect();
        let ring = TokenRing::capacity_weighted(tokens, &capacities)?;
        NamedRing::with_ring(ring, nodes)
    }

    /// Names the nodes of an existing ring: `nodes[i]` becomes node `i`. Every owner must be
    /// one of them.
    pub fn with_ring(ring: TokenRing, nodes: Vec<NodeSpec>) -> Result<NamedRing, NamedRingError> {
        if nodes.is_empty() {
            return Err(RingError::NoNodes.into());
        }
        let mut named = NamedRing {
            ring,
            nodes: Vec::with_capacity(nodes.len()),
            by_name: name_map(),
            v_min: DEFAULT_V_MIN,
        };
        for spec in nodes {
            named.push_node(spec, true)?;
        }
        if let Some(token) = named
            .ring
            .owners()
            .iter()
            .position(|o| o.index() >= named.nodes.len())
        {
            return Err(RingError::WrongSource {
                token,
                claimed: NodeId(named.nodes.len() as u32),
                actual: named.ring.owner(token),
            }
            .into());
        }
        Ok(named)
    }

    /// The same ring with another minimum of tokens per live node for joins and leaves.
    pub fn with_v_min(mut self, v_min: usize) -> NamedRing {
        self.v_min = v_min;
        self
    }

    fn push_node(&mut self, spec: NodeSpec, live: bool) -> Result<NodeId, NamedRingError> {
        let index = self.nodes.len();
        if !(spec.capacity.is_finite() && spec.capacity > 0.0) {
            let value = spec.capacity;
            let what = "capacity of node";
            return Err(RingError::NotPositive { what, index, value }.into());
        }
        if self.by_name.contains_key(&spec.name) {
            return Err(NamedRingError::DuplicateName { name: spec.name });
        }
        let id = NodeId(index as u32);
        self.by_name.insert(spec.name.clone(), id);
        self.nodes.push(Node {
            id,
            name: spec.name,
            address: spec.address,
            capacity: spec.capacity,
            live,
        });
        Ok(id)
    }

    /// The token ring.
    pub fn ring(&self) -> &TokenRing {
        &self.ring
    }

    /// Every node ever added, by id (left nodes included, with `live` false).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// `live[i]`: whether node `i` is live, as [`ach-control`'s observations] take it.
    pub fn live(&self) -> Vec<bool> {
        self.nodes.iter().map(|n| n.live).collect()
    }

    /// The node with id `id`.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// The id of the node named `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The node that owns `key` (its name, address and id).
    pub fn lookup_key(&self, key: &[u8]) -> &Node {
        self.lookup_hash(crate::key_hash(key))
    }

    /// The node that owns a key with hash `hash`.
    pub fn lookup_hash(&self, hash: u64) -> &Node {
        let owner = self.ring.owner(self.ring.lookup_hash(hash));
        // Owners are always nodes of the table: checked on construction, and moves to unknown
        // nodes are rejected by `apply`.
        &self.nodes[owner.index()]
    }

    /// Plans a node's join: it is added to the table (live) and the change gives it `v_min`
    /// tokens, the shortest arcs the other nodes can spare while keeping `v_min`. Commit the
    /// moves with [`NamedRing::apply`] once the data is copied.
    pub fn join(&mut self, spec: NodeSpec) -> Result<MembershipChange, NamedRingError> {
        let node = self.push_node(spec, true)?;
        let moves = self.ring.join_moves(
            node,
            JoinRule::ShortestArcs {
                n_nodes: self.nodes.len(),
                tokens: self.v_min,
                v_min: self.v_min,
            },
        );
        Ok(self.change(node, moves))
    }

    /// Plans a node's leave: it is marked not live (no controller hands it tokens) and the
    /// change hands each of its tokens to the next live owner clockwise, which moves only its
    /// own key space. Lookups keep answering with it until the moves are applied.
    pub fn leave(&mut self, name: &str) -> Result<MembershipChange, NamedRingError> {
        let node = self
            .node_id(name)
            .ok_or_else(|| NamedRingError::UnknownNode {
                name: name.to_owned(),
            })?;
        if !self.nodes[node.index()].live {
            return Err(NamedRingError::AlreadyLeft {
                name: name.to_owned(),
            });
        }
        if self.nodes.iter().filter(|n| n.live).count() == 1 {
            return Err(NamedRingError::LastLiveNode {
                name: name.to_owned(),
            });
        }
        self.nodes[node.index()].live = false;
        let live = self.live();
        let moves = self
            .ring
            .leave_moves(node, LeaveRule::NextLiveClockwise { live: &live });
        Ok(self.change(node, moves))
    }

    fn change(&self, node: NodeId, moves: Vec<TokenMove>) -> MembershipChange {
        let migrations = self.ring.migrations(&moves);
        let moved_fraction = moves.iter().map(|mv| self.ring.arcs()[mv.token]).sum();
        MembershipChange {
            node,
            moves,
            migrations,
            moved_fraction,
        }
    }

    /// Commits owner changes (a confirmed plan, a join or a leave) and returns their `M_keys`.
    /// Moves to a node the table does not have are rejected, and nothing changes.
    pub fn apply(&mut self, moves: &[TokenMove]) -> Result<f64, NamedRingError> {
        if let Some(mv) = moves.iter().find(|mv| mv.to.index() >= self.nodes.len()) {
            return Err(RingError::WrongSource {
                token: mv.token,
                claimed: mv.to,
                actual: self.ring.owner(mv.token.min(self.ring.len() - 1)),
            }
            .into());
        }
        Ok(self.ring.apply(moves)?)
    }

    /// The saved state: ring, nodes and `v_min`, exact (capacities as `f64` bits).
    pub fn state(&self) -> NamedRingState {
        NamedRingState {
            ring: self.ring.state(),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeRecord {
                    name: n.name.clone(),
                    address: n.address.clone(),
                    capacity_bits: n.capacity.to_bits(),
                    live: n.live,
                })
                .collect(),
            v_min: self.v_min,
        }
    }

    /// Rebuilds a named ring from its saved state.
    pub fn from_state(state: &NamedRingState) -> Result<NamedRing, NamedRingError> {
        let ring = TokenRing::from_state(&state.ring)?;
        let specs = state
            .nodes
            .iter()
            .map(|n| NodeSpec {
                name: n.name.clone(),
                address: n.address.clone(),
                capacity: f64::from_bits(n.capacity_bits),
            })
            .collect();
        let mut named = NamedRing::with_ring(ring, specs)?.with_v_min(state.v_min);
        for (node, record) in named.nodes.iter_mut().zip(&state.nodes) {
            node.live = record.live;
        }
        Ok(named)
    }
}

/// One node of a [`NamedRingState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRecord {
    /// Unique name.
    pub name: String,
    /// Address, if any.
    pub address: Option<String>,
    /// `f64::to_bits` of the capacity.
    pub capacity_bits: u64,
    /// Whether the node is live.
    pub live: bool,
}

/// Saved state of a [`NamedRing`] (the ring's state is versioned).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedRingState {
    /// The token ring.
    pub ring: TokenRingState,
    /// The nodes, by id.
    pub nodes: Vec<NodeRecord>,
    /// Minimum tokens per live node for joins and leaves.
    pub v_min: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> NamedRing {
        NamedRing::new(
            120,
            vec![
                NodeSpec::new("a", 1.0),
                NodeSpec::new("b", 0.55).with_address("127.0.0.1:7001"),
                NodeSpec::new("c", 0.25),
            ],
        )
        .unwrap()
    }

    #[test]
    fn join_and_leave_move_exactly_the_planned_keys() {
        let mut named = ring();
        let before = named.clone();
        let change = named.join(NodeSpec::new("d", 1.0)).unwrap();
        // Nothing changes before the commit.
        assert_eq!(named.ring(), before.ring());
        let moved = named.apply(&change.moves).unwrap();
        assert!((moved - change.moved_fraction).abs() < 1e-15);
        for i in 0..20_000u32 {
            let key = i.to_le_bytes();
            let hash = crate::key_hash(&key);
            let (old, new) = (before.lookup_key(&key).id, named.lookup_key(&key).id);
            let in_ranges = change
                .migrations
                .iter()
                .any(|m| m.ranges.iter().any(|r| r.contains(&hash)));
            assert_eq!(old != new, in_ranges, "key {i}");
        }
        let change = named.leave("b").unwrap();
        named.apply(&change.moves).unwrap();
        assert_eq!(named.ring().count(named.node_id("b").unwrap()), 0);
        assert!(!named.node(change.node).unwrap().live);
    }

    #[test]
    fn bad_names_are_rejected_with_clear_errors() {
        let mut named = ring();
        assert_eq!(
            named.join(NodeSpec::new("a", 1.0)).unwrap_err().to_string(),
            "node name \"a\" is already taken"
        );
        assert_eq!(
            named.leave("zz").unwrap_err().to_string(),
            "no node is named \"zz\""
        );
        assert_eq!(
            named
                .join(NodeSpec::new("e", -1.0))
                .unwrap_err()
                .to_string(),
            "capacity of node 3 = -1 must be a finite number > 0"
        );
        let lone = NamedRing::new(8, vec![NodeSpec::new("x", 1.0)]).unwrap();
        assert!(matches!(
            lone.clone().leave("x"),
            Err(NamedRingError::LastLiveNode { .. })
        ));
    }

    #[test]
    fn state_round_trips_exactly() {
        let mut named = ring();
        let change = named.leave("c").unwrap();
        named.apply(&change.moves).unwrap();
        let json = serde_json::to_string(&named.state()).unwrap();
        let state: NamedRingState = serde_json::from_str(&json).unwrap();
        assert_eq!(NamedRing::from_state(&state).unwrap(), named);
    }
}
