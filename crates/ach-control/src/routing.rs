//! The interface of a request-routing rule: which node serves each of a step's requests.
//!
//! Every algorithm routes through one. The default, [`OwnerRouting`], is the model of the paper
//! (spec section 5, time order within a step): every request goes to the owner of its key's
//! token. A rule beyond it, such as consistent hashing with bounded loads
//! (`ach_baselines::BoundedLoadsRouting`), may send some requests to other nodes; those are the
//! step's *forwarded* requests, a cost of their own beside the moved key space `M_keys`.

use ach_ring::TokenRing;

/// One step's requests, as a router sees them.
#[derive(Clone, Copy, Debug)]
pub struct StepLoad<'a> {
    /// The ring, whose owners are the requests' home nodes.
    pub ring: &'a TokenRing,
    /// Requests of the step per token (index = token index); a missing entry counts as 0.
    pub requests: &'a [u64],
    /// Writes of the step per token, each at most that token's requests (the writes are part
    /// of the requests); a missing entry counts as 0.
    pub writes: &'a [u64],
    /// Capacity of every node `0..n` (any unit; only ratios matter). A node past the end, or
    /// with a capacity that is not a finite number > 0, has capacity 0.
    pub capacities: &'a [f64],
    /// `live[i]` is true when node `i` may serve requests. A node past the end is not live.
    pub live: &'a [bool],
}

impl StepLoad<'_> {
    /// Number of nodes the routing fills: the nodes given capacities, and any node that owns
    /// a token past them.
    #[inline]
    pub fn n_nodes(&self) -> usize {
        let highest_owner = self.ring.owners().iter().map(|o| o.index() + 1).max();
        self.capacities.len().max(highest_owner.unwrap_or(0))
    }

    /// Requests of token `token` (0 when not given).
    #[inline]
    pub fn requests_of(&self, token: usize) -> u64 {
        self.requests.get(token).copied().unwrap_or(0)
    }

    /// Writes of token `token` (0 when not given; never more than its requests).
    #[inline]
    pub fn writes_of(&self, token: usize) -> u64 {
        self.writes
            .get(token)
            .copied()
            .unwrap_or(0)
            .min(self.requests_of(token))
    }

    /// Capacity of node `node`: 0 when not given or not a finite number > 0.
    #[inline]
    pub fn capacity_of(&self, node: usize) -> f64 {
        match self.capacities.get(node) {
            Some(&c) if c.is_finite() && c > 0.0 => c,
            _ => 0.0,
        }
    }

    /// Whether node `node` is live (false when not given).
    #[inline]
    pub fn is_live(&self, node: usize) -> bool {
        self.live.get(node).copied().unwrap_or(false)
    }
}

/// What each node serves in one step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Requests served by node `i`.
    pub requests: Vec<u64>,
    /// Writes among them.
    pub writes: Vec<u64>,
}

impl Served {
    /// Zero requests and writes for `n` nodes, keeping the allocations.
    pub fn reset(&mut self, n: usize) {
        self.requests.clear();
        self.requests.resize(n, 0);
        self.writes.clear();
        self.writes.resize(n, 0);
    }
}

/// A rule that decides which node serves each request of a step.
///
/// A router must serve every request exactly once: after [`Router::route`], `served.requests`
/// has one entry per node (see [`StepLoad::n_nodes`]) and sums to the step's requests, and
/// `served.writes` likewise sums to its writes. It must not panic for any input.
pub trait Router {
    /// Short name of the rule.
    fn name(&self) -> &'static str;

    /// Routes the step's requests: fills `served` (resetting it first) and returns how many
    /// requests were served by a node other than their token's owner (forwarded).
    fn route(&mut self, step: &StepLoad<'_>, served: &mut Served) -> u64;
}

/// The model's routing: every request is served by its token's owner; nothing is forwarded.
///
/// # Example
///
/// ```
/// use ach_control::{OwnerRouting, Router, Served, StepLoad};
/// use ach_ring::TokenRing;
///
/// let ring = TokenRing::round_robin(vec![0.1, 0.4, 0.7], 2).unwrap();
/// let step = StepLoad {
///     ring: &ring,
///     requests: &[5, 3, 2],
///     writes: &[1, 0, 2],
///     capacities: &[1.0, 1.0],
///     live: &[true, true],
/// };
/// let mut served = Served::default();
/// assert_eq!(OwnerRouting.route(&step, &mut served), 0);
/// // Tokens 0 and 2 are node 0's, token 1 node 1's.
/// assert_eq!(served.requests, vec![7, 3]);
/// assert_eq!(served.writes, vec![3, 0]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct OwnerRouting;

impl Router for OwnerRouting {
    fn name(&self) -> &'static str {
        "owner"
    }

    fn route(&mut self, step: &StepLoad<'_>, served: &mut Served) -> u64 {
        served.reset(step.n_nodes());
        for (token, owner) in step.ring.owners().iter().enumerate() {
            served.requests[owner.index()] += step.requests_of(token);
            served.writes[owner.index()] += step.writes_of(token);
        }
        0
    }
}
