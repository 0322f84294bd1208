//! CH-BL: consistent hashing with bounded loads as published (Mirrokni, Thorup and
//! Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA 2018), capacity-weighted. It
//! routes requests and never moves a token.

use ach_control::{Balancer, Observation, Plan, Router, Served, StepLoad};
use ach_ring::TokenRing;

/// CH-BL's routing rule: every live node serves at most `c = 1 + eps` times its
/// capacity-weighted share of the step's requests; what its own tokens bring beyond that is
/// forwarded clockwise to the next nodes with room.
///
/// Not to be confused with [`crate::BoundedLoads`], the published simulation's token-moving
/// heuristic (A3) named after the same paper.
///
/// # The rule, per step
///
/// With `R` the step's requests and `S` the sum of the capacities of the *live nodes on the
/// ring* (live nodes that own at least one token; only they can be reached by a clockwise
/// walk):
///
/// 1. **Bounds.** `bound_i = ceil(c * cap_i / S * R)` for a live node on the ring, 0 for any
///    other node (not live, or capacity 0). The ceiling is the paper's `ceil(c m / n)`; since
///    `c > 1` the bounds sum to at least `R`, so every request finds room.
/// 2. **Home first.** Each node serves its own tokens' requests up to its bound:
///    `served_i = min(own_i, bound_i)`. A node whose own requests exceed its bound is *full*.
/// 3. **Overflow per token.** A full node's overflow `own_i - bound_i` is split over its tokens
///    in proportion to their requests (what requests arriving one by one in random order give in
///    expectation): token `s` gets `floor(overflow * r_s / own_i)`, and the requests left over go
///    one each to the tokens with the largest remainders `overflow * r_s mod own_i`, ties to the
///    lower token index.
/// 4. **Forwarding.** Overflows are placed in ring order of their token (token 0 first). Each
///    walks clockwise over the owners of the following tokens (`s + 1, s + 2, ...`, wrapping
///    around) and gives each node with room as many requests as it has room for, until placed.
///    These are the step's forwarded requests.
/// 5. **Writes** travel with their requests: a token's `w` writes are spread evenly over its `r`
///    requests, the first `p` of them carrying `floor(p * w / r)` writes. The home node keeps
///    the first `r - f` requests of a token that forwards `f`; each forwarded chunk takes the next
///    ones, in walk order. Writes are thereby conserved exactly.
///
/// If no live node on the ring has a positive capacity, or (through floating-point rounding
/// only) the bounds cannot hold every request, a request that finds no room is served by its
/// home node and not counted as forwarded. Otherwise no node serves more than its bound, and a
/// request is forwarded only when its home node is full.
///
/// # Example
///
/// Three nodes of equal capacity, four tokens owned 0, 1, 2, 0, and `eps = 0.25`:
///
/// ```
/// use ach_baselines::BoundedLoadsRouting;
/// use ach_control::{Router, Served, StepLoad};
/// use ach_ring::{NodeId, TokenRing};
///
/// let owners = [0, 1, 2, 0].map(NodeId).to_vec();
/// let ring = TokenRing::new(vec![0.1, 0.3, 0.5, 0.7], owners).unwrap();
/// let step = StepLoad {
///     ring: &ring,
///     requests: &[40, 5, 10, 20], // R = 75; node 0 owns tokens 0 and 3: 60 requests
///     writes: &[8, 0, 0, 0],
///     capacities: &[1.0, 1.0, 1.0],
///     live: &[true, true, true],
/// };
/// let mut routing = BoundedLoadsRouting::new(0.25);
/// let mut served = Served::default();
/// let forwarded = routing.route(&step, &mut served);
/// // Every bound is ceil(1.25 * 75 / 3) = ceil(31.25) = 32. Node 0 is full: it serves 32 and
/// // overflows 28, split 40:20 over its tokens: 18.67 and 9.33, so 18 + 1 (largest remainder)
/// // = 19 from token 0 and 9 from token 3. Token 0's 19 walk to node 1 (room 27, takes all);
/// // then token 3's 9 wrap around to token 0 (node 0, full) and reach token 1's node 1 (room
/// // 8, takes 8) and token 2's node 2 (room 22, takes 1).
/// assert_eq!(forwarded, 28);
/// assert_eq!(served.requests, vec![32, 32, 11]);
/// // Token 0's 8 writes over its 40 requests: the first 21 (kept at home) carry
/// // floor(21 * 8 / 40) = 4, the 19 forwarded the other 4.
/// assert_eq!(served.writes, vec![4, 4, 0]);
/// ```
#[derive(Clone, Debug)]
pub struct BoundedLoadsRouting {
    eps: f64,
    bounds: Vec<u64>,
    own: Vec<u64>,
    token_counts: Vec<usize>,
    room: Vec<u64>,
    overflow: Vec<u64>,
    token_overflow: Vec<u64>,
    full_tokens: Vec<usize>,
    remainders: Vec<(u64, usize)>,
    group_start: Vec<usize>,
    group_fill: Vec<usize>,
    left: Vec<u64>,
    room_left: u64,
    next: Vec<usize>,
}

impl BoundedLoadsRouting {
    /// The default `eps`: `c = 1.25`, the lower end of the balance factors HAProxy's
    /// bounded-load hashing recommends (`hash-balance-factor` 125 to 200).
    pub const DEFAULT_EPS: f64 = 0.25;

    /// The rule with `c = 1 + eps`. `eps` should be a finite number > 0 (series files are
    /// checked for it); with `eps <= 0` the bounds may not hold every request, and what finds
    /// no room stays at its home node.
    pub fn new(eps: f64) -> BoundedLoadsRouting {
        BoundedLoadsRouting {
            eps,
            bounds: Vec::new(),
            own: Vec::new(),
            token_counts: Vec::new(),
            room: Vec::new(),
            overflow: Vec::new(),
            token_overflow: Vec::new(),
            full_tokens: Vec::new(),
            remainders: Vec::new(),
            group_start: Vec::new(),
            group_fill: Vec::new(),
            left: Vec::new(),
            room_left: 0,
            next: Vec::new(),
        }
    }

    /// The `eps` of the rule.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// The bounds of the last routed step, one per node.
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }

    /// Step 1: the bounds of every node.
    fn compute_bounds(&mut self, step: &StepLoad<'_>, total: u64) {
        let n = self.own.len();
        // A node is on the ring when it owns a token.
        let counted = |i: usize| self.token_counts[i] > 0 && step.is_live(i);
        let capacity_sum: f64 = (0..n)
            .filter(|&i| counted(i))
            .map(|i| step.capacity_of(i))
            .sum();
        self.bounds.clear();
        self.bounds.extend((0..n).map(|i| {
            if !counted(i) || capacity_sum <= 0.0 {
                return 0;
            }
            let share = (1.0 + self.eps) * total as f64 * step.capacity_of(i) / capacity_sum;
            // A float-to-integer `as` saturates (and sends NaN to 0).
            share.ceil() as u64
        }));
    }

    /// Each node's own requests and number of tokens, for the nodes of [`StepLoad::n_nodes`]
    /// (those given capacities, and any that owns a token past them), in one pass; `served`
    /// starts with every request at its home node.
    fn count_own(&mut self, step: &StepLoad<'_>, served: &mut Served) {
        let n = step.capacities.len();
        served.reset(n);
        self.own.clear();
        self.own.resize(n, 0);
        self.token_counts.clear();
        self.token_counts.resize(n, 0);
        for (token, owner) in step.ring.owners().iter().enumerate() {
            let i = owner.index();
            if i >= self.own.len() {
                self.own.resize(i + 1, 0);
                self.token_counts.resize(i + 1, 0);
                served.writes.resize(i + 1, 0);
            }
            self.own[i] += step.requests_of(token);
            served.writes[i] += step.writes_of(token);
            self.token_counts[i] += 1;
        }
        served.requests.clone_from(&self.own);
    }

    /// Step 3: splits each full node's overflow over its tokens (largest remainder).
    fn split_overflow(&mut self, step: &StepLoad<'_>) {
        let owners = step.ring.owners();
        self.token_overflow.clear();
        self.token_overflow.resize(owners.len(), 0);
        self.group_tokens_of_full_nodes();
        self.left.clone_from(&self.overflow);
        self.full_tokens.clear();
        for (token, owner) in owners.iter().enumerate() {
            let i = owner.index();
            if self.overflow[i] == 0 {
                continue;
            }
            self.full_tokens.push(token);
            let (floor, remainder) =
                floor_and_remainder(self.overflow[i], step.requests_of(token), self.own[i]);
            self.token_overflow[token] = floor;
            self.left[i] -= floor;
            self.remainders[self.group_fill[i]] = (remainder, token);
            self.group_fill[i] += 1;
        }
        // The requests a full node has left go one each to its tokens of largest remainder,
        // ties to the lower token index: the first `left` of its group in that order, found by
        // a selection (no two entries are equal, so the set is the sorted list's first).
        for (i, &left) in self.left.iter().enumerate() {
            let group = &mut self.remainders[self.group_start[i]..self.group_start[i + 1]];
            let extra = usize::try_from(left).map_or(group.len(), |left| left.min(group.len()));
            if extra == 0 {
                continue;
            }
            if extra < group.len() {
                group.select_nth_unstable_by(extra - 1, largest_remainder_first);
            }
            for &(_, token) in &group[..extra] {
                self.token_overflow[token] += 1;
            }
        }
    }

    /// Lays out `remainders` with one group per full node, in node order, each as long as the
    /// node has tokens: node `i`'s is `group_start[i]..group_start[i + 1]`, and `group_fill[i]`
    /// is where its next entry goes.
    fn group_tokens_of_full_nodes(&mut self) {
        let n = self.overflow.len();
        self.group_start.clear();
        self.group_start.push(0);
        for i in 0..n {
            let size = if self.overflow[i] > 0 {
                self.token_counts[i]
            } else {
                0
            };
            self.group_start.push(self.group_start[i] + size);
        }
        self.group_fill.clear();
        self.group_fill.extend_from_slice(&self.group_start[..n]);
        self.remainders.clear();
        self.remainders.resize(self.group_start[n], (0, 0));
    }

    /// Steps 4 and 5 for one token with an overflow: walks clockwise from the next token and
    /// gives its last requests to the nodes with room, taking them from the home node. Returns
    /// how many were forwarded.
    fn forward(&mut self, step: &StepLoad<'_>, token: usize, served: &mut Served) -> u64 {
        let ring = step.ring;
        let requests = step.requests_of(token);
        let writes = step.writes_of(token);
        let start = requests - self.token_overflow[token];
        // The token's requests `start..position` have been forwarded, and `written` is the
        // number of writes among its first `position`.
        let mut position = start;
        let written_at_start = writes_before(start, requests, writes);
        let mut written = written_at_start;
        let mut from = clockwise_after(token, ring.len());
        while position < requests && self.room_left > 0 {
            let at = self.next_with_room(ring, from);
            let node = ring.owner(at).index();
            let placed = (requests - position).min(self.room[node]);
            position += placed;
            let written_after = writes_before(position, requests, writes);
            served.requests[node] += placed;
            served.writes[node] += written_after - written;
            written = written_after;
            self.room[node] -= placed;
            self.room_left -= placed;
            from = at;
        }
        // The home node keeps the token's first `start` requests and any that found no room:
        // everything but the forwarded positions `start..position`.
        let moved = position - start;
        let home = ring.owner(token).index();
        served.requests[home] -= moved;
        served.writes[home] -= written - written_at_start;
        moved
    }

    /// The first token at or after `token` (clockwise, wrapping) whose owner has room, with
    /// path compression over the tokens of full owners. The caller makes sure some token's
    /// owner has room.
    fn next_with_room(&mut self, ring: &TokenRing, token: usize) -> usize {
        // The token after `at`: its skip pointer, or the next token clockwise.
        let advance = |next: &[usize], at: usize| match next[at] {
            skip if skip == at => clockwise_after(at, ring.len()),
            skip => skip,
        };
        let mut at = token;
        while self.room[ring.owner(at).index()] == 0 {
            at = advance(&self.next, at);
        }
        let found = at;
        let mut at = token;
        while at != found {
            let after = advance(&self.next, at);
            self.next[at] = found;
            at = after;
        }
        found
    }
}

impl Default for BoundedLoadsRouting {
    fn default() -> BoundedLoadsRouting {
        BoundedLoadsRouting::new(BoundedLoadsRouting::DEFAULT_EPS)
    }
}

/// Writes carried by the first `position` of a token's `requests` requests, `writes` of which
/// are writes: `floor(position * writes / requests)` (`position` at most `requests`).
fn writes_before(position: u64, requests: u64, writes: u64) -> u64 {
    if requests == 0 || writes == 0 {
        return 0;
    }
    if position == requests {
        return writes;
    }
    floor_and_remainder(position, writes, requests).0
}

/// The token after `token` on a ring of `len` tokens (`token + 1`, wrapping to 0).
fn clockwise_after(token: usize, len: usize) -> usize {
    if token + 1 == len { 0 } else { token + 1 }
}

/// The order in which a full node's tokens get the requests its floors leave: largest
/// remainder first, ties to the lower token index.
fn largest_remainder_first(a: &(u64, usize), b: &(u64, usize)) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then(a.1.cmp(&b.1))
}

/// `floor(a * b / divisor)` and `a * b mod divisor`, exactly: in 64 bits when the product fits
/// (a step's counts always do), in 128 otherwise. `divisor` must not be 0.
#[inline]
fn floor_and_remainder(a: u64, b: u64, divisor: u64) -> (u64, u64) {
    match a.checked_mul(b) {
        Some(product) => (product / divisor, product % divisor),
        None => {
            let product = u128::from(a) * u128::from(b);
            let divisor = u128::from(divisor);
            ((product / divisor) as u64, (product % divisor) as u64)
        }
    }
}

impl Router for BoundedLoadsRouting {
    fn name(&self) -> &'static str {
        "bounded-loads routing"
    }

    fn route(&mut self, step: &StepLoad<'_>, served: &mut Served) -> u64 {
        self.count_own(step, served);
        let n = self.own.len();
        let total: u64 = self.own.iter().sum();
        self.compute_bounds(step, total);

        // Step 2: home first.
        self.overflow.clear();
        self.overflow
            .extend((0..n).map(|i| self.own[i].saturating_sub(self.bounds[i])));
        self.room.clear();
        self.room
            .extend((0..n).map(|i| self.bounds[i].saturating_sub(self.own[i])));
        self.room_left = self.room.iter().fold(0, |sum, &r| sum.saturating_add(r));

        // Step 3: each full node's overflow per token.
        self.split_overflow(step);

        // Step 4: forwarding, token 0 first; step 5: writes with their requests. Only the
        // tokens of full nodes can have an overflow.
        self.next.clear();
        self.next.extend(0..step.ring.len());
        let mut forwarded = 0;
        for index in 0..self.full_tokens.len() {
            let token = self.full_tokens[index];
            if self.token_overflow[token] > 0 {
                forwarded += self.forward(step, token, served);
            }
        }
        forwarded
    }
}

/// The balancer of an algorithm that only routes: it never moves a token (`M_keys = 0`). CH-BL
/// pairs it with [`BoundedLoadsRouting`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RoutingOnly;

impl Balancer for RoutingOnly {
    fn name(&self) -> &'static str {
        "routing only"
    }

    fn plan(&mut self, _ring: &TokenRing, _observation: &Observation<'_>) -> Plan {
        Plan::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ach_control::OwnerRouting;
    use ach_ring::NodeId;
    use proptest::prelude::*;

    fn ring_of(owners: &[u32]) -> TokenRing {
        let v = owners.len();
        let positions = (0..v).map(|s| (s as f64 + 0.5) / v as f64).collect();
        TokenRing::new(positions, owners.iter().map(|&o| NodeId(o)).collect()).unwrap()
    }

    struct Case<'a> {
        owners: &'a [u32],
        requests: &'a [u64],
        writes: &'a [u64],
        capacities: &'a [f64],
        live: &'a [bool],
    }

    impl Case<'_> {
        fn step<'r>(&'r self, ring: &'r TokenRing) -> StepLoad<'r> {
            StepLoad {
                ring,
                requests: self.requests,
                writes: self.writes,
                capacities: self.capacities,
                live: self.live,
            }
        }
    }

    /// Routes a case with `eps`; returns (served, forwarded, bounds).
    fn route(case: &Case<'_>, eps: f64) -> (Served, u64, Vec<u64>) {
        let ring = ring_of(case.owners);
        let step = case.step(&ring);
        let mut routing = BoundedLoadsRouting::new(eps);
        let mut served = Served::default();
        let forwarded = routing.route(&step, &mut served);
        (served, forwarded, routing.bounds().to_vec())
    }

    #[test]
    fn under_the_bounds_every_request_stays_with_its_owner() {
        let case = Case {
            owners: &[0, 1, 2, 0, 1, 2],
            requests: &[5, 6, 7, 5, 6, 7],
            writes: &[1, 2, 3, 0, 0, 0],
            capacities: &[1.0, 1.0, 1.0],
            live: &[true; 3],
        };
        let (served, forwarded, bounds) = route(&case, 0.25);
        // R = 36: every bound is ceil(1.25 * 12) = 15 >= each node's own 10, 12, 14.
        assert_eq!(bounds, vec![15, 15, 15]);
        assert_eq!(forwarded, 0);
        let ring = ring_of(case.owners);
        let mut by_owner = Served::default();
        let step = case.step(&ring);
        OwnerRouting.route(&step, &mut by_owner);
        assert_eq!(served, by_owner);
    }

    #[test]
    fn bounds_follow_the_capacities() {
        let case = Case {
            owners: &[0, 1, 2, 3],
            requests: &[10, 10, 10, 10],
            writes: &[0; 4],
            capacities: &[2.0, 1.0, 1.0, 0.0],
            live: &[true; 4],
        };
        let (served, forwarded, bounds) = route(&case, 0.25);
        // Capacity sum 4, R = 40: ceil(1.25 * 40 * 2 / 4) = 25, ceil(12.5) = 13, and 0 for the
        // node of capacity 0, whose 10 requests all go on clockwise to node 0 (wrapping).
        assert_eq!(bounds, vec![25, 13, 13, 0]);
        assert_eq!(forwarded, 10);
        assert_eq!(served.requests, vec![20, 10, 10, 0]);
    }

    #[test]
    fn overflow_skips_full_and_dead_nodes_clockwise() {
        // Node 0 (token 0) is hot; token 1 belongs to node 1, which is not live; token 2 to
        // node 2, which is full; token 3 to node 3, which has room.
        let case = Case {
            owners: &[0, 1, 2, 3],
            requests: &[30, 4, 12, 0],
            writes: &[0, 4, 0, 0],
            capacities: &[1.0, 1.0, 1.0, 1.0],
            live: &[true, false, true, true],
        };
        let (served, forwarded, bounds) = route(&case, 0.25);
        // Live nodes 0, 2, 3 (node 1 is not counted): R = 46, bounds ceil(1.25 * 46 / 3) = 20.
        assert_eq!(bounds, vec![20, 0, 20, 20]);
        // Node 0 forwards 10: past node 1 (dead) and node 2 (8 of room after its own 12: it
        // takes 8), then node 3 takes 2. Node 1's 4 requests (all writes) walk to node 2, now
        // full, and on to node 3.
        assert_eq!(forwarded, 14);
        assert_eq!(served.requests, vec![20, 0, 20, 6]);
        assert_eq!(served.writes, vec![0, 0, 0, 4]);
    }

    #[test]
    fn overflow_of_the_last_token_wraps_to_the_first() {
        let case = Case {
            owners: &[0, 1, 2],
            requests: &[0, 0, 9],
            writes: &[0, 0, 3],
            capacities: &[1.0, 1.0, 1.0],
            live: &[true; 3],
        };
        let (served, forwarded, bounds) = route(&case, 0.25);
        // Bounds ceil(1.25 * 9 / 3) = 4; node 2 keeps 4 (writes floor(4 * 3 / 9) = 1) and the
        // 5 others wrap to token 0's node 0 (4) and token 1's node 1 (1).
        assert_eq!(bounds, vec![4, 4, 4]);
        assert_eq!(forwarded, 5);
        assert_eq!(served.requests, vec![4, 1, 4]);
        // Positions 4..8 carry floor(8 * 3 / 9) - 1 = 1 write, position 8 the last one.
        assert_eq!(served.writes, vec![1, 1, 1]);
    }

    #[test]
    fn a_full_nodes_overflow_is_split_by_largest_remainder() {
        // Node 0 owns tokens 0, 1, 2 with 10, 10 and 1 requests; bounds are ceil(1.25 * 21 / 2)
        // = 14 for nodes 0 and 1 (node 1 owns token 3 with no requests). The overflow of 7 is
        // split 10:10:1 as 70/21, 70/21, 7/21 = 3.33, 3.33, 0.33: floors 3, 3, 0 and the last
        // request to token 0 (remainders 7, 7, 7: the tie goes to the lower index).
        let case = Case {
            owners: &[0, 0, 0, 1],
            requests: &[10, 10, 1, 0],
            writes: &[0; 4],
            capacities: &[1.0, 1.0],
            live: &[true; 2],
        };
        let mut routing = BoundedLoadsRouting::new(0.25);
        let ring = ring_of(case.owners);
        let step = case.step(&ring);
        let mut served = Served::default();
        assert_eq!(routing.route(&step, &mut served), 7);
        assert_eq!(routing.token_overflow, vec![4, 3, 0, 0]);
        assert_eq!(served.requests, vec![14, 7]);
    }

    #[test]
    fn without_live_capacity_requests_stay_with_their_owners() {
        let case = Case {
            owners: &[0, 1],
            requests: &[3, 4],
            writes: &[1, 1],
            capacities: &[1.0, 1.0],
            live: &[false, false],
        };
        let (served, forwarded, bounds) = route(&case, 0.25);
        assert_eq!(bounds, vec![0, 0]);
        assert_eq!(forwarded, 0);
        assert_eq!(served.requests, vec![3, 4]);
        assert_eq!(served.writes, vec![1, 1]);
    }

    #[test]
    fn floors_and_remainders_are_exact_past_64_bits() {
        let big = u64::MAX / 3;
        for (a, b, divisor) in [(7, 9, 4), (big, 5, 7), (big, big, u64::MAX), (0, big, 3)] {
            let product = u128::from(a) * u128::from(b);
            let divisor_wide = u128::from(divisor);
            let expected = (
                (product / divisor_wide) as u64,
                (product % divisor_wide) as u64,
            );
            assert_eq!(
                floor_and_remainder(a, b, divisor),
                expected,
                "{a} x {b} / {divisor}"
            );
        }
        // The writes of a whole token are its writes, whatever the product.
        assert_eq!(writes_before(u64::MAX, u64::MAX, 5), 5);
        assert_eq!(
            writes_before(u64::MAX - 1, u64::MAX, u64::MAX),
            u64::MAX - 1
        );
    }

    #[test]
    fn routing_only_never_moves_a_token() {
        let ring = ring_of(&[0, 1, 0, 1]);
        let loads = [1.0, 0.0];
        let observation = crate::test_support::observe(&loads, &[true, true]);
        assert_eq!(RoutingOnly.plan(&ring, &observation), Plan::none());
    }

    /// The rule written out plainly (a linear walk, no skip pointers), to check the fast one:
    /// what every node serves (requests and writes) and the requests forwarded.
    fn reference(case: &Case<'_>, eps: f64) -> (Served, u64) {
        let n = case.capacities.len();
        let v = case.owners.len();
        let owner = |s: usize| case.owners[s] as usize;
        let on_ring = |i: usize| case.owners.iter().any(|&o| o as usize == i);
        let counted = |i: usize| on_ring(i) && case.live[i] && case.capacities[i] > 0.0;
        let total: u64 = case.requests.iter().sum();
        let cap_sum: f64 = (0..n)
            .filter(|&i| counted(i))
            .map(|i| case.capacities[i])
            .sum();
        let bound: Vec<u64> = (0..n)
            .map(|i| {
                if counted(i) {
                    ((1.0 + eps) * total as f64 * case.capacities[i] / cap_sum).ceil() as u64
                } else {
                    0
                }
            })
            .collect();
        let mut own = vec![0u64; n];
        for s in 0..v {
            own[owner(s)] += case.requests[s];
        }
        let mut served: Vec<u64> = (0..n).map(|i| own[i].min(bound[i])).collect();
        // Per-token overflow, largest remainder, ties to the lower token.
        let mut token_overflow = vec![0u64; v];
        for i in 0..n {
            let overflow = own[i].saturating_sub(bound[i]);
            if overflow == 0 {
                continue;
            }
            let mine: Vec<usize> = (0..v).filter(|&s| owner(s) == i).collect();
            let mut given = 0;
            let mut rest = Vec::new();
            for &s in &mine {
                let p = overflow * case.requests[s];
                token_overflow[s] = p / own[i];
                given += p / own[i];
                rest.push((p % own[i], s));
            }
            rest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            for &(_, s) in rest.iter().take((overflow - given) as usize) {
                token_overflow[s] += 1;
            }
        }
        // Writes: every token's at home, then each forwarded chunk's (the positions it takes
        // of its token's requests) moved to the node that serves it.
        let mut writes = vec![0u64; n];
        for s in 0..v {
            writes[owner(s)] += case.writes[s].min(case.requests[s]);
        }
        let writes_before = |s: usize, position: u64| {
            let (r, w) = (case.requests[s], case.writes[s].min(case.requests[s]));
            if r == 0 {
                0
            } else {
                (u128::from(position) * u128::from(w) / u128::from(r)) as u64
            }
        };
        let mut forwarded = 0;
        for s in 0..v {
            let mut left = token_overflow[s];
            let mut position = case.requests[s] - left;
            for step in 1..=v {
                let j = owner((s + step) % v);
                let placed = left.min(bound[j].saturating_sub(served[j]));
                let chunk = writes_before(s, position + placed) - writes_before(s, position);
                writes[j] += chunk;
                writes[owner(s)] -= chunk;
                served[j] += placed;
                forwarded += placed;
                left -= placed;
                position += placed;
            }
            served[owner(s)] += left;
        }
        let served = Served {
            requests: served,
            writes,
        };
        (served, forwarded)
    }

    /// Owners per token, (requests, write percentage) per token, (capacity, live) per node, eps.
    type RandomCase = (Vec<u32>, Vec<(u64, u64)>, Vec<(f64, bool)>, f64);

    fn cases() -> impl Strategy<Value = RandomCase> {
        (1usize..6, 1usize..40).prop_flat_map(|(n, v)| {
            (
                proptest::collection::vec(0..n as u32, v),
                proptest::collection::vec((0u64..300, 0u64..=100), v),
                proptest::collection::vec(
                    (
                        prop_oneof![Just(0.0), Just(0.25), Just(0.55), Just(1.0), 0.01f64..3.0],
                        proptest::bool::weighted(0.8),
                    ),
                    n,
                ),
                prop_oneof![Just(0.25), 0.001f64..2.0],
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn every_request_is_served_once_and_no_node_exceeds_its_bound(
            (owners, counts, nodes, eps) in cases()
        ) {
            let requests: Vec<u64> = counts.iter().map(|&(r, _)| r).collect();
            // Writes are a share (in percent) of the requests.
            let writes: Vec<u64> = counts.iter().map(|&(r, w)| r * w / 100).collect();
            let capacities: Vec<f64> = nodes.iter().map(|&(c, _)| c).collect();
            let live: Vec<bool> = nodes.iter().map(|&(_, l)| l).collect();
            let case = Case {
                owners: &owners,
                requests: &requests,
                writes: &writes,
                capacities: &capacities,
                live: &live,
            };
            let (served, forwarded, bounds) = route(&case, eps);
            let n = capacities.len();
            let total: u64 = requests.iter().sum();
            prop_assert_eq!(served.requests.len(), n);
            prop_assert_eq!(served.requests.iter().sum::<u64>(), total);
            prop_assert_eq!(served.writes.iter().sum::<u64>(), writes.iter().sum::<u64>());
            for i in 0..n {
                prop_assert!(served.writes[i] <= served.requests[i]);
            }
            let mut own = vec![0u64; n];
            for (s, &o) in owners.iter().enumerate() {
                own[o as usize] += requests[s];
            }
            let has_room = bounds.iter().sum::<u64>() >= total;
            if has_room {
                for i in 0..n {
                    // No node above its bound; each serves at least its own requests up to it.
                    prop_assert!(served.requests[i] <= bounds[i], "node {}: {:?} {:?}", i, served, bounds);
                    prop_assert!(served.requests[i] >= own[i].min(bounds[i]));
                }
                // A request is forwarded only when its home node is full: exactly the
                // overflow beyond the bounds moves.
                let overflow: u64 = (0..n).map(|i| own[i].saturating_sub(bounds[i])).sum();
                prop_assert_eq!(forwarded, overflow);
            }
            prop_assert_eq!((served, forwarded), reference(&case, eps));
        }
    }
}
