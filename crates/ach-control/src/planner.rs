//! The three-phase token planner of ACH (Algorithm 1, steps 6-8).

use ach_ring::{NodeId, TokenMove, TokenRing};

use crate::apportion::floor_largest_remainder;
use crate::config::StepRule;

mod token_load;

pub use token_load::{TokenLoadInputs, plan_by_token_load};

/// Which tokens come first when a node gives tokens away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArcOrder {
    /// Longest arc first (ACH, A3).
    LongestFirst,
    /// Shortest arc first (A2).
    ShortestFirst,
}

/// Takes tokens from several nodes at once, each node's in arc order (ties: lower token index
/// first): walks the ring's tokens once in that order and offers each token of a listed node to
/// `take(k, token)`, where `k` indexes `nodes`. A node whose `take` refuses once gets no more
/// offers. Returns, for each of `nodes`, the tokens taken, in the order taken.
///
/// This is what sorting each node's tokens by arc and scanning them would give, in one pass over
/// the ring's fixed arc order ([`TokenRing::tokens_longest_first`]) and without sorting.
pub fn take_in_arc_order(
    ring: &TokenRing,
    order: ArcOrder,
    nodes: &[usize],
    mut take: impl FnMut(usize, usize) -> bool,
) -> Vec<Vec<usize>> {
    offer_in_arc_order(ring, order, nodes, |k, token| {
        if take(k, token) {
            Offer::Take
        } else {
            Offer::Stop
        }
    })
}

/// What a node does with a token offered to it by [`offer_in_arc_order`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Take the token.
    Take,
    /// Leave this token and look at the next one.
    Skip,
    /// Leave this token and take no more.
    Stop,
}

/// [`take_in_arc_order`] where a node may also skip a token and go on: walks the ring's tokens
/// once in arc order and offers each token of a listed node to `offer(k, token)`; a node that
/// answers [`Offer::Stop`] gets no more offers.
pub fn offer_in_arc_order(
    ring: &TokenRing,
    order: ArcOrder,
    nodes: &[usize],
    offer: impl FnMut(usize, usize) -> Offer,
) -> Vec<Vec<usize>> {
    let in_order = match order {
        ArcOrder::LongestFirst => ring.tokens_longest_first(),
        ArcOrder::ShortestFirst => ring.tokens_shortest_first(),
    };
    if ring.owner_changes() == 0 {
        // A ring whose owners never changed (one built for a single plan, or a run's first
        // step) is read through its tokens: its owners in arc order would cost a pass to
        // build, and a store at every later move to keep.
        let owners = ring.owners();
        let owners_in_order = in_order.iter().map(|&s| owners[s]);
        return offer_to_owners(ring, in_order, owners_in_order, nodes, offer);
    }
    // The ring keeps its owners in both arc orders, so the walk reads them one after the other.
    let owners_in_order = match order {
        ArcOrder::LongestFirst => ring.owners_longest_first(),
        ArcOrder::ShortestFirst => ring.owners_shortest_first(),
    };
    offer_to_owners(
        ring,
        in_order,
        owners_in_order.iter().copied(),
        nodes,
        offer,
    )
}

/// [`offer_in_arc_order`] over the tokens `in_order` of `ring` and their owners
/// `owners_in_order`, in that order.
fn offer_to_owners(
    ring: &TokenRing,
    in_order: &[usize],
    owners_in_order: impl Iterator<Item = NodeId>,
    nodes: &[usize],
    mut offer: impl FnMut(usize, usize) -> Offer,
) -> Vec<Vec<usize>> {
    // `slot_of_node[i]`: the index in `nodes` of node `i` while it still takes offers.
    let mut slot_of_node = last_places(nodes);
    // A node gives at most the tokens it owns: room for them all spares the growing.
    let mut taken: Vec<Vec<usize>> = nodes
        .iter()
        .map(|&i| Vec::with_capacity(ring.count(NodeId(i as u32))))
        .collect();
    let mut active = nodes.len();
    for (rank, owner) in owners_in_order.enumerate() {
        if active == 0 {
            break;
        }
        let Some(&k) = slot_of_node.get(owner.index()) else {
            continue;
        };
        if k == NO_SLOT {
            continue;
        }
        let token = in_order[rank];
        match offer(k, token) {
            Offer::Take => taken[k].push(token),
            Offer::Skip => {}
            Offer::Stop => {
                slot_of_node[owner.index()] = NO_SLOT;
                active -= 1;
            }
        }
    }
    taken
}

/// No place in a list of nodes (see [`last_places`]).
const NO_SLOT: usize = usize::MAX;

/// For every id up to the largest of `nodes`, its last index in `nodes`, or [`NO_SLOT`] for an
/// id not listed: the place at which a walk offers a node its tokens.
fn last_places(nodes: &[usize]) -> Vec<usize> {
    let slots = nodes.iter().max().map_or(0, |&i| i + 1);
    let mut last_place = vec![NO_SLOT; slots];
    for (k, &i) in nodes.iter().enumerate() {
        last_place[i] = k;
    }
    last_place
}

/// What [`offer_in_arc_order`] gives for offers whose answers to one node depend on that
/// node's state alone (as when each node takes its own share), or `None` for a ring that keeps
/// no rank sets: each node is offered its tokens in arc order until it stops, one node after
/// the other, its state made by `start(k)` (`k` indexes `nodes`) and passed to `offer` with
/// each token. A node's tokens are read from the ring's rank sets
/// ([`TokenRing::rank_sets_shortest_first`]), so the walk visits only the listed nodes' tokens,
/// and a node's state stays in registers.
fn offer_node_by_node<S>(
    ring: &TokenRing,
    order: ArcOrder,
    nodes: &[usize],
    start: impl Fn(usize) -> S,
    offer: impl Fn(&mut S, usize) -> Offer,
) -> Option<Vec<Vec<usize>>> {
    let (in_order, rank_sets) = match order {
        ArcOrder::LongestFirst => (ring.tokens_longest_first(), ring.rank_sets_longest_first()),
        ArcOrder::ShortestFirst => (
            ring.tokens_shortest_first(),
            ring.rank_sets_shortest_first(),
        ),
    };
    let rank_sets = rank_sets?;
    // A node listed twice is offered its tokens at its last place only, as the walk over every
    // token offers them.
    let last_place = last_places(nodes);
    let mut taken: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (k, &i) in nodes.iter().enumerate() {
        let (true, Ok(id)) = (last_place[i] == k, u32::try_from(i)) else {
            continue;
        };
        let node = NodeId(id);
        let mut state = start(k);
        // A node takes at most the tokens it owns. Written into a slice of that length, not
        // pushed: a call that may grow a vector would make the compiler keep the state in
        // memory, and each token's arc would wait for the last one's store.
        let mut tokens = vec![0; ring.count(node)];
        let mut taken_count = 0;
        // The bits are read here rather than through `RankSets::ranks_of`, whose nested
        // iterator took 0.8 % more instructions a C1 run.
        'walk: for (word_index, &word) in rank_sets.words_of(node).iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let rank = word_index * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let token = in_order[rank];
                match offer(&mut state, token) {
                    Offer::Take => {
                        tokens[taken_count] = token;
                        taken_count += 1;
                    }
                    Offer::Skip => {}
                    Offer::Stop => break 'walk,
                }
            }
        }
        tokens.truncate(taken_count);
        taken[k] = tokens;
    }
    Some(taken)
}

/// Takes from each `(node, share)` its tokens in arc order while the arc taken so far is below
/// `share` and the node still keeps more than `v_min` tokens (so a node gives at least one token
/// when it can, and overshoots its share by at most one arc). `counts` are the tokens each node
/// owns. ACH's phase 1 takes longest first, A2 shortest first.
pub fn take_shares(
    ring: &TokenRing,
    order: ArcOrder,
    shares: &[(usize, f64)],
    counts: &[usize],
    v_min: usize,
) -> Vec<Vec<usize>> {
    // The paper's rules, with a `movable` the compiler sees is always true.
    take_shares_with(ring, order, shares, counts, v_min, StepRule::Paper, |_| {
        true
    })
}

/// [`take_shares`] under explicit rules: under [`StepRule::Strict`] a node skips a token that
/// would take it past its share (a shorter one may go), so no node exceeds its share; tokens
/// that are not movable are skipped under both rules.
pub fn take_shares_under(
    ring: &TokenRing,
    order: ArcOrder,
    shares: &[(usize, f64)],
    counts: &[usize],
    rules: SelectRules<'_>,
) -> Vec<Vec<usize>> {
    let SelectRules {
        v_min,
        step_rule,
        movable,
    } = rules;
    take_shares_with(ring, order, shares, counts, v_min, step_rule, movable)
}

/// [`take_shares_under`] with the rules' parts, `movable` of a type the compiler can inline.
fn take_shares_with(
    ring: &TokenRing,
    order: ArcOrder,
    shares: &[(usize, f64)],
    counts: &[usize],
    v_min: usize,
    step_rule: StepRule,
    movable: impl Fn(usize) -> bool,
) -> Vec<Vec<usize>> {
    let arcs = ring.arcs();
    let nodes: Vec<usize> = shares.iter().map(|&(i, _)| i).collect();
    let start = |k: usize| ShareTaken {
        share: shares[k].1,
        arc: 0.0,
        kept: counts.get(nodes[k]).copied().unwrap_or(0),
    };
    let offer = |taken: &mut ShareTaken, token: usize| {
        // Written so that a NaN share stops the node, as it always has.
        if !(taken.arc < taken.share && taken.kept > v_min) {
            return Offer::Stop;
        }
        if !movable(token) {
            return Offer::Skip;
        }
        if step_rule == StepRule::Strict && taken.arc + arcs[token] > taken.share {
            return Offer::Skip;
        }
        taken.arc += arcs[token];
        taken.kept -= 1;
        Offer::Take
    };
    if let Some(taken) = offer_node_by_node(ring, order, &nodes, start, offer) {
        return taken;
    }
    let mut states: Vec<ShareTaken> = (0..nodes.len()).map(start).collect();
    offer_in_arc_order(ring, order, &nodes, |k, token| offer(&mut states[k], token))
}

/// How far one node of [`take_shares_with`] is in taking its share.
struct ShareTaken {
    /// The arc it is to give.
    share: f64,
    /// The arc it has given so far.
    arc: f64,
    /// The tokens it still keeps.
    kept: usize,
}

/// Phase 1 and 2 (select and pool): every source gives its longest tokens until it has given
/// its share of the budget, keeping at least `v_min`.
///
/// For each source `i` (in the order given, increasing id): `share_i = m * g_i / sum g`. A
/// source that owns `v_min` tokens or fewer gives nothing. Its tokens are taken longest arc
/// first (ties: lower token index first) while the arc taken so far is `< share_i` and the tokens
/// it still keeps are `> v_min`; so a source gives at least one token when it can, and overshoots
/// its share by at most one arc. Returns the pool `(token, source)`: source by source, each in
/// the order taken.
pub fn select_tokens(
    ring: &TokenRing,
    sources: &[(usize, f64)],
    budget: f64,
    counts: &[usize],
    v_min: usize,
) -> Vec<(usize, NodeId)> {
    select_tokens_under(ring, sources, budget, counts, SelectRules::paper(v_min))
}

/// The rules of [`select_tokens_under`].
#[derive(Clone, Copy)]
pub struct SelectRules<'a> {
    /// Tokens every source keeps.
    pub v_min: usize,
    /// Whether a source may overshoot its share by one arc ([`StepRule::Paper`]) or skips a
    /// token that would take it past its share ([`StepRule::Strict`]).
    pub step_rule: StepRule,
    /// Whether a token may move at all (false during its cool-down); others are skipped.
    pub movable: &'a dyn Fn(usize) -> bool,
}

impl SelectRules<'static> {
    /// The paper's rules: overshoot by one arc allowed, every token movable.
    pub fn paper(v_min: usize) -> SelectRules<'static> {
        SelectRules {
            v_min,
            step_rule: StepRule::Paper,
            movable: &|_| true,
        }
    }
}

/// [`select_tokens`] under explicit rules. Under [`StepRule::Strict`] a source takes a token
/// only if what it has taken stays within its share, so the pool never exceeds `budget`; a
/// token that does not fit is skipped and a shorter one may go. Tokens that are not movable
/// are skipped under both rules.
pub fn select_tokens_under(
    ring: &TokenRing,
    sources: &[(usize, f64)],
    budget: f64,
    counts: &[usize],
    rules: SelectRules<'_>,
) -> Vec<(usize, NodeId)> {
    let gain_sum: f64 = sources.iter().map(|&(_, g)| g).sum();
    let shares: Vec<(usize, f64)> = sources
        .iter()
        .map(|&(i, gain)| (i, budget * gain / gain_sum))
        .collect();
    let taken = take_shares_under(ring, ArcOrder::LongestFirst, &shares, counts, rules);
    sources
        .iter()
        .zip(taken)
        .flat_map(|(&(i, _), tokens)| tokens.into_iter().map(move |t| (t, NodeId(i as u32))))
        .collect()
}

/// Phase 3 (assign): split the pool among the receivers in proportion to their weights
/// (`floor` and largest remainder), capped at `v_max - count(j)` when `v_max` is set; walk the
/// receivers in increasing id order, each taking the next `n_j` tokens of the pool. Tokens left
/// over go to the receiver with the lowest load (ties: lower id); with `v_max` set, to the
/// receivers with the lowest load that still have room, and a token no receiver has room for
/// stays with its source (no move). So no receiver ever ends above `v_max` through a plan.
pub fn assign_tokens(
    pool: &[(usize, NodeId)],
    receivers: &[(usize, f64)],
    loads: &[f64],
    counts: &[usize],
    v_max: Option<usize>,
) -> Vec<TokenMove> {
    let need_sum: f64 = receivers.iter().map(|&(_, r)| r).sum();
    let weights: Vec<f64> = receivers.iter().map(|&(_, r)| r / need_sum).collect();
    let mut quota = floor_largest_remainder(pool.len(), &weights);
    if let Some(v_max) = v_max {
        for (q, &(j, _)) in quota.iter_mut().zip(receivers) {
            *q = (*q).min(v_max.saturating_sub(counts.get(j).copied().unwrap_or(0)));
        }
    }
    let mut moves = Vec::with_capacity(pool.len());
    let mut next = pool.iter();
    for (&(receiver, _), &q) in receivers.iter().zip(&quota) {
        for &(token, from) in next.by_ref().take(q) {
            moves.push(TokenMove {
                token,
                from,
                to: NodeId(receiver as u32),
            });
        }
    }
    let mut by_load: Vec<usize> = receivers.iter().map(|&(j, _)| j).collect();
    let load = |i: usize| loads.get(i).copied().unwrap_or(f64::INFINITY);
    by_load.sort_by(|&a, &b| load(a).total_cmp(&load(b)).then(a.cmp(&b)));
    // Room left under v_max after the quotas (unbounded without v_max).
    let mut room: Vec<usize> = by_load
        .iter()
        .map(|&j| match v_max {
            None => usize::MAX,
            Some(v_max) => {
                let k = receivers.iter().position(|&(r, _)| r == j).unwrap_or(0);
                let count = counts.get(j).copied().unwrap_or(0);
                v_max.saturating_sub(count).saturating_sub(quota[k])
            }
        })
        .collect();
    // Without receivers, or without room, the leftover tokens stay with their sources.
    for &(token, from) in next {
        let Some(slot) = room.iter().position(|&r| r > 0) else {
            break;
        };
        room[slot] -= 1;
        moves.push(TokenMove {
            token,
            from,
            to: NodeId(by_load[slot] as u32),
        });
    }
    moves
}

/// Phase 3 by key space ([`crate::config::AssignRule::ByArc`]): each receiver `j` is owed
/// `r_j / sum r` of the pool's total arc; the pool's tokens, in pool order, go one by one to the
/// receiver with the largest debt left (owed minus given; ties: lower id) that has room under
/// `v_max`. A token no receiver has room for stays with its source. On a ring whose arcs differ
/// widely (a key-weighted ring of Redis slots, say), this shares the moved key space by need;
/// splitting by token count could hand one receiver every heavy token.
pub fn assign_tokens_by_arc(
    ring: &TokenRing,
    pool: &[(usize, NodeId)],
    receivers: &[(usize, f64)],
    counts: &[usize],
    v_max: Option<usize>,
) -> Vec<TokenMove> {
    let arcs = ring.arcs();
    let arc = |token: usize| arcs.get(token).copied().unwrap_or(0.0);
    let need_sum: f64 = receivers.iter().map(|&(_, r)| r).sum();
    let pool_arc: f64 = pool.iter().map(|&(token, _)| arc(token)).sum();
    let mut debt: Vec<f64> = receivers
        .iter()
        .map(|&(_, r)| pool_arc * r / need_sum)
        .collect();
    let mut room: Vec<usize> = receivers
        .iter()
        .map(|&(j, _)| match v_max {
            None => usize::MAX,
            Some(v_max) => v_max.saturating_sub(counts.get(j).copied().unwrap_or(0)),
        })
        .collect();
    let mut moves = Vec::with_capacity(pool.len());
    for &(token, from) in pool {
        let best = (0..receivers.len())
            .filter(|&k| room[k] > 0)
            .max_by(|&a, &b| debt[a].total_cmp(&debt[b]).then(b.cmp(&a)));
        let Some(k) = best else {
            break;
        };
        room[k] -= 1;
        debt[k] -= arc(token);
        moves.push(TokenMove {
            token,
            from,
            to: NodeId(receivers[k].0 as u32),
        });
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`take_shares_under`] is to give, by its definition: each listed node's tokens
    /// sorted by arc (stably, so ties by index), taken while the rules allow; a node listed
    /// twice takes at its last place only.
    fn taken_by_definition(
        ring: &TokenRing,
        order: ArcOrder,
        shares: &[(usize, f64)],
        counts: &[usize],
        rules: SelectRules<'_>,
    ) -> Vec<Vec<usize>> {
        let arcs = ring.arcs();
        let listed_later = |k: usize| shares[k + 1..].iter().any(|&(j, _)| j == shares[k].0);
        (0..shares.len())
            .map(|k| {
                let (node, share) = shares[k];
                if listed_later(k) {
                    return Vec::new();
                }
                let mut tokens = ring.tokens_of(NodeId(node as u32));
                tokens.sort_by(|&a, &b| match order {
                    ArcOrder::LongestFirst => arcs[b].total_cmp(&arcs[a]),
                    ArcOrder::ShortestFirst => arcs[a].total_cmp(&arcs[b]),
                });
                let (mut arc, mut kept) = (0.0, counts.get(node).copied().unwrap_or(0));
                let mut taken = Vec::new();
                for token in tokens {
                    if !(arc < share && kept > rules.v_min) {
                        break;
                    }
                    let past_share = arc + arcs[token] > share;
                    if !(rules.movable)(token)
                        || (rules.step_rule == StepRule::Strict && past_share)
                    {
                        continue;
                    }
                    arc += arcs[token];
                    kept -= 1;
                    taken.push(token);
                }
                taken
            })
            .collect()
    }

    proptest::proptest! {
        /// Taking shares gives what the definition gives, node by node from the ring's rank
        /// sets and walking every token of a ring that keeps none (one whose owners never
        /// changed, with one token of a node id too large for them), for any shares (a NaN one
        /// too), rules and unmovable tokens, with arcs that tie.
        #[test]
        fn taking_shares_follows_the_definition_with_and_without_rank_sets(
            gaps in proptest::collection::vec(1u32..6, 1..300),
            owner_picks in proptest::collection::vec(0u32..6, 300),
            listed in proptest::collection::vec((0usize..8, proptest::prop_oneof![
                0.0f64..0.4, proptest::strategy::Just(f64::NAN)
            ]), 0..8),
            v_min in 0usize..4,
            strict in proptest::bool::ANY,
            movable_bits in proptest::collection::vec(proptest::bool::weighted(0.8), 300),
        ) {
            let total: u32 = gaps.iter().sum();
            let positions: Vec<f64> = gaps
                .iter()
                .scan(0, |at, &gap| { let p = *at; *at += gap; Some(f64::from(p) / f64::from(total)) })
                .collect();
            let owners: Vec<NodeId> = owner_picks[..positions.len()].iter().map(|&i| NodeId(i)).collect();
            let mut with_sets = TokenRing::new(positions.clone(), owners.clone()).unwrap();
            // A ring keeps rank sets from its first change of owners on.
            let first_owner = with_sets.owner(0);
            with_sets.apply(&[TokenMove { token: 0, from: first_owner, to: first_owner }]).unwrap();
            let mut without_sets_owners = owners;
            without_sets_owners[0] = NodeId(70_000);
            let without_sets = TokenRing::new(positions, without_sets_owners).unwrap();
            proptest::prop_assert!(with_sets.rank_sets_longest_first().is_some());
            proptest::prop_assert!(without_sets.rank_sets_shortest_first().is_none());
            let step_rule = if strict { StepRule::Strict } else { StepRule::Paper };
            let movable = |token: usize| movable_bits[token];
            let rules = SelectRules { v_min, step_rule, movable: &movable };
            for ring in [&with_sets, &without_sets] {
                let counts = ring.counts(8);
                for order in [ArcOrder::LongestFirst, ArcOrder::ShortestFirst] {
                    let got = take_shares_under(ring, order, &listed, &counts, rules);
                    let want = taken_by_definition(ring, order, &listed, &counts, rules);
                    proptest::prop_assert_eq!(got, want);
                }
            }
        }
    }

    fn ring() -> TokenRing {
        // Arcs: token 0 = 0.3, 1 = 0.1, 2 = 0.2, 3 = 0.15, 4 = 0.25; owners 0,0,0,0,1.
        let pos = vec![0.05, 0.15, 0.35, 0.5, 0.75];
        let owners = [0, 0, 0, 0, 1].map(NodeId).to_vec();
        TokenRing::new(pos, owners).unwrap()
    }

    #[test]
    fn a_source_gives_its_longest_tokens_and_keeps_v_min() {
        let r = ring();
        let counts = r.counts(2);
        // A tiny budget still takes one token, the longest.
        assert_eq!(
            select_tokens(&r, &[(0, 1.0)], 1e-6, &counts, 1),
            vec![(0, NodeId(0))]
        );
        // A huge budget stops at v_min kept.
        let pool = select_tokens(&r, &[(0, 1.0)], 10.0, &counts, 1);
        assert_eq!(pool.iter().map(|p| p.0).collect::<Vec<_>>(), vec![0, 2, 3]);
        // A source with v_min tokens or fewer is skipped.
        assert!(select_tokens(&r, &[(1, 1.0)], 10.0, &counts, 1).is_empty());
    }

    #[test]
    fn taking_in_arc_order_equals_a_stable_sort_per_node() {
        // Arcs with ties: 40 tokens, owners round-robin over 3 nodes.
        let mut gaps: Vec<f64> = (0..40).map(|s| ((s * 7) % 5) as f64 + 1.0).collect();
        let total: f64 = gaps.iter().sum();
        gaps.iter_mut().for_each(|g| *g /= total);
        let mut positions = Vec::new();
        let mut acc = 0.0;
        for g in &gaps {
            positions.push(acc);
            acc += g;
        }
        let r = TokenRing::round_robin(positions, 3).unwrap();
        let arcs = r.arcs();
        for order in [ArcOrder::LongestFirst, ArcOrder::ShortestFirst] {
            for limit in [0, 1, 5, 13, 14] {
                let mut offered = [0usize; 2];
                let taken = take_in_arc_order(&r, order, &[2, 0], |k, _| {
                    offered[k] += 1;
                    offered[k] <= limit
                });
                for (k, node) in [2u32, 0].into_iter().enumerate() {
                    let mut expected = r.tokens_of(NodeId(node));
                    expected.sort_by(|&a, &b| match order {
                        ArcOrder::LongestFirst => arcs[b].total_cmp(&arcs[a]),
                        ArcOrder::ShortestFirst => arcs[a].total_cmp(&arcs[b]),
                    });
                    expected.truncate(limit);
                    assert_eq!(taken[k], expected, "{order:?} {limit} node {node}");
                }
            }
        }
    }

    #[test]
    fn by_arc_the_moved_key_space_is_shared_by_need() {
        // Arcs 0.3, 0.1, 0.2, 0.15, 0.25; node 0 gives tokens 0, 4, 2, 3 (longest first).
        let r = ring();
        let pool = [
            (0, NodeId(0)),
            (4, NodeId(1)),
            (2, NodeId(0)),
            (3, NodeId(0)),
        ];
        let moves = assign_tokens_by_arc(&r, &pool, &[(2, 0.5), (3, 0.5)], &[4, 1, 0, 0], None);
        let to: Vec<(usize, u32)> = moves.iter().map(|m| (m.token, m.to.0)).collect();
        // Each is owed 0.45: 0.3 to node 2, then 0.25 to node 3, then 0.2 to node 3 (debt
        // 0.2 > 0.15), then 0.15 to node 2: 0.45 each.
        assert_eq!(to, vec![(0, 2), (4, 3), (2, 3), (3, 2)]);
        // By count, node 2 would get the two longest.
        let by_count = assign_tokens(
            &pool,
            &[(2, 0.5), (3, 0.5)],
            &[0.9, 0.9, 0.1, 0.1],
            &[4, 1, 0, 0],
            None,
        );
        assert_eq!(
            by_count.iter().map(|m| m.to.0).collect::<Vec<_>>(),
            vec![2, 2, 3, 3]
        );
        // v_max: node 2 has room for one; the rest go to node 3, or stay when it is full.
        let capped = assign_tokens_by_arc(&r, &pool, &[(2, 0.5), (3, 0.5)], &[4, 1, 2, 1], Some(3));
        let to: Vec<(usize, u32)> = capped.iter().map(|m| (m.token, m.to.0)).collect();
        assert_eq!(to, vec![(0, 2), (4, 3), (2, 3)]);
    }

    #[test]
    fn pool_is_split_by_need_and_leftovers_go_to_lowest_load() {
        let pool: Vec<_> = (0..5).map(|t| (t, NodeId(0))).collect();
        let loads = [0.9, 0.2, 0.4];
        let moves = assign_tokens(&pool, &[(1, 0.3), (2, 0.1)], &loads, &[5, 3, 3], None);
        let to: Vec<u32> = moves.iter().map(|m| m.to.0).collect();
        // 5 * 0.75 = 3.75 -> 3, 5 * 0.25 = 1.25 -> 1, the extra to the larger fraction (node 1).
        assert_eq!(to, vec![1, 1, 1, 1, 2]);
        // Under v_max = 4 each receiver (3 tokens) has room for one: 3 of the 5 stay home.
        let capped = assign_tokens(&pool, &[(1, 0.3), (2, 0.1)], &loads, &[5, 3, 3], Some(4));
        let to: Vec<u32> = capped.iter().map(|m| m.to.0).collect();
        assert_eq!(to, vec![1, 2]);
        // With room for more, leftovers go to the least-loaded receiver with room.
        let roomy = assign_tokens(&pool, &[(1, 0.3), (2, 0.1)], &loads, &[5, 3, 3], Some(5));
        let to: Vec<u32> = roomy.iter().map(|m| m.to.0).collect();
        assert_eq!(to, vec![1, 1, 2, 2]);
    }
}
