//! The three-phase token planner of ACH (Algorithm 1, steps 6-8).

use std::cmp::Ordering;

use ach_ring::{NodeId, TokenMove, TokenRing};

use crate::apportion::floor_largest_remainder;

/// Which tokens come first when a node gives tokens away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArcOrder {
    /// Longest arc first (ACH, A3).
    LongestFirst,
    /// Shortest arc first (A2).
    ShortestFirst,
}

/// Takes tokens in arc order (ties: lower token index first) while `take(token)` says so, and
/// returns how many were taken: they are then `tokens[..count]`, in that order.
///
/// Equivalent to a stable sort of `tokens` (given in increasing index order) by arc followed by
/// a scan, but sorts only as much as the scan reaches: a partial selection of a window that
/// doubles until `take` refuses or the tokens run out.
pub fn take_in_arc_order(
    tokens: &mut [usize],
    arcs: &[f64],
    order: ArcOrder,
    mut take: impl FnMut(usize) -> bool,
) -> usize {
    let compare = |a: &usize, b: &usize| -> Ordering {
        let by_arc = match order {
            ArcOrder::LongestFirst => arcs[*b].total_cmp(&arcs[*a]),
            ArcOrder::ShortestFirst => arcs[*a].total_cmp(&arcs[*b]),
        };
        by_arc.then(a.cmp(b))
    };
    let mut taken = 0;
    let mut window = 8;
    loop {
        let end = (taken + window).min(tokens.len());
        let rest = &mut tokens[taken..];
        if end < taken + rest.len() {
            rest.select_nth_unstable_by(end - taken - 1, compare);
        }
        rest[..end - taken].sort_unstable_by(compare);
        while taken < end {
            if !take(tokens[taken]) {
                return taken;
            }
            taken += 1;
        }
        if end == tokens.len() {
            return taken;
        }
        window *= 2;
    }
}

/// Takes a node's tokens in arc order while the arc taken so far is below `share` and the node
/// still keeps more than `v_min` tokens (so it gives at least one token when it can, and
/// overshoots `share` by at most one arc). `tokens` are all the node's tokens in increasing
/// index order; the taken ones are `tokens[..count]` on return. ACH's phase 1 takes longest
/// first, A2 shortest first.
pub fn take_share(
    tokens: &mut [usize],
    arcs: &[f64],
    order: ArcOrder,
    share: f64,
    v_min: usize,
) -> usize {
    let mut taken = 0.0;
    let mut kept = tokens.len();
    take_in_arc_order(tokens, arcs, order, |token| {
        if taken < share && kept > v_min {
            taken += arcs[token];
            kept -= 1;
            true
        } else {
            false
        }
    })
}

/// Phase 1 and 2 (select and pool): every source gives its longest tokens until it has given
/// its share of the budget, keeping at least `v_min`.
///
/// For each source `i` (in the order given, increasing id): `share_i = m * g_i / sum g`. A
/// source that owns `v_min` tokens or fewer is skipped. Its tokens are taken longest arc first
/// (ties: lower token index first) while the arc taken so far is `< share_i` and the tokens it
/// still keeps are `> v_min`; so a source gives at least one token when it can, and overshoots
/// its share by at most one arc. Returns the pool `(token, source)` in the order taken.
pub fn select_tokens(
    ring: &TokenRing,
    sources: &[(usize, f64)],
    budget: f64,
    counts: &[usize],
    v_min: usize,
) -> Vec<(usize, NodeId)> {
    let gain_sum: f64 = sources.iter().map(|&(_, g)| g).sum();
    let arcs = ring.arcs();
    let mut pool = Vec::new();
    for &(source, gain) in sources {
        let share = budget * gain / gain_sum;
        let owned = counts.get(source).copied().unwrap_or(0);
        if owned <= v_min {
            continue;
        }
        let node = NodeId(source as u32);
        let mut tokens = ring.tokens_of(node);
        let count = take_share(&mut tokens, arcs, ArcOrder::LongestFirst, share, v_min);
        pool.extend(tokens[..count].iter().map(|&token| (token, node)));
    }
    pool
}

/// Phase 3 (assign): split the pool among the receivers in proportion to their weights
/// (`floor` and largest remainder), capped at `v_max - count(j)` when `v_max` is set; walk the
/// receivers in increasing id order, each taking the next `n_j` tokens of the pool. Tokens left
/// over go to the receiver with the lowest load (ties: lower id).
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
    let rest: Vec<_> = next.collect();
    let lowest = receivers.iter().map(|&(j, _)| j).min_by(|&a, &b| {
        let load = |i: usize| loads.get(i).copied().unwrap_or(f64::INFINITY);
        load(a).total_cmp(&load(b)).then(a.cmp(&b))
    });
    // Without receivers nothing moves: the leftover tokens stay with their sources.
    if let Some(lowest) = lowest {
        for &(token, from) in rest {
            moves.push(TokenMove {
                token,
                from,
                to: NodeId(lowest as u32),
            });
        }
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn partial_ordering_equals_a_stable_sort() {
        // Arcs with ties; tokens given in increasing index order, as a node's tokens are.
        let arcs: Vec<f64> = (0..40).map(|s| ((s * 7) % 5) as f64 + 1.0).collect();
        let tokens: Vec<usize> = (0..40).collect();
        for order in [ArcOrder::LongestFirst, ArcOrder::ShortestFirst] {
            let mut expected = tokens.clone();
            expected.sort_by(|&a, &b| match order {
                ArcOrder::LongestFirst => arcs[b].total_cmp(&arcs[a]),
                ArcOrder::ShortestFirst => arcs[a].total_cmp(&arcs[b]),
            });
            for limit in [0, 1, 7, 8, 9, 25, 40] {
                let mut work = tokens.clone();
                let mut seen = 0;
                let count = take_in_arc_order(&mut work, &arcs, order, |_| {
                    seen += 1;
                    seen <= limit
                });
                assert_eq!(count, limit);
                assert_eq!(work[..count], expected[..count], "{order:?} {limit}");
            }
        }
    }

    #[test]
    fn pool_is_split_by_need_and_leftovers_go_to_lowest_load() {
        let pool: Vec<_> = (0..5).map(|t| (t, NodeId(0))).collect();
        let loads = [0.9, 0.2, 0.4];
        let moves = assign_tokens(&pool, &[(1, 0.3), (2, 0.1)], &loads, &[5, 3, 3], None);
        let to: Vec<u32> = moves.iter().map(|m| m.to.0).collect();
        // 5 * 0.75 = 3.75 -> 3, 5 * 0.25 = 1.25 -> 1, the extra to the larger fraction (node 1).
        assert_eq!(to, vec![1, 1, 1, 1, 2]);
        let capped = assign_tokens(&pool, &[(1, 0.3), (2, 0.1)], &loads, &[5, 3, 3], Some(4));
        let to: Vec<u32> = capped.iter().map(|m| m.to.0).collect();
        assert_eq!(to, vec![1, 2, 1, 1, 1]);
    }
}
