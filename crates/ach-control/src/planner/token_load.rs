//! The per-token planner: which tokens to move when each token's load is known
//! ([`crate::SelectRule::ByTokenLoad`]), within the budget of the paper's planner.

use ach_ring::{NodeId, TokenMove, TokenRing};

use super::{SelectRules, StepRule};

/// The inputs of [`plan_by_token_load`] beside the ring.
#[derive(Clone, Copy)]
pub struct TokenLoadInputs<'a> {
    /// Sources `(node, gain g_i = l_i - l*)`, increasing id.
    pub sources: &'a [(usize, f64)],
    /// Receivers `(node, need r_j = l* - l_j)`, increasing id.
    pub receivers: &'a [(usize, f64)],
    /// Every node's load `l_i`.
    pub loads: &'a [f64],
    /// Which nodes count (the hottest node is the hottest live node).
    pub live: &'a [bool],
    /// Every token's load, in the units of `loads` (`Observation::token_loads`).
    pub token_loads: &'a [f64],
    /// The step budget `m`.
    pub budget: f64,
    /// Tokens each node owns.
    pub counts: &'a [usize],
    /// Optional maximum tokens per node.
    pub v_max: Option<usize>,
}

/// The per-token planner ([`crate::SelectRule::ByTokenLoad`]): which tokens to move when each
/// token's load is known, within exactly the budget of the paper's planner.
///
/// 1. Every source `i` gets the paper's share of the budget, `share_i = m * g_i / sum g`.
/// 2. The sources' movable tokens with a positive finite load are ranked by *load relieved per
///    key space moved*, `token_load / arc`, highest first (ties: lower token index).
/// 3. In that order a token is taken if its source may still give (under [`StepRule::Paper`]:
///    what it gave is below `share_i` and it keeps more than `v_min` tokens, so it overshoots by
///    at most one arc, as in phase 1; under [`StepRule::Strict`] the token must also fit in
///    `share_i`), its source has not yet been relieved of its whole gain `g_i`, and some
///    receiver can take it: a receiver with need left (`r_j` minus the load it was given) and
///    room under `v_max`, whose load plus the token's would stay *below* the hottest of the
///    other live nodes after the move (so a hot token is never handed to a node it would make
///    the hottest: no ping-pong of a hot token). Of those, the one with the most need left
///    (ties: lower id). A token no receiver can take stays; a lighter one may still go.
///
/// Loads are projected as the plan grows: a source loses, a receiver gains, each moved
/// token's load. Tokens stay whole. The key space taken from each source obeys the same rule
/// as [`select_tokens_under`](super::select_tokens_under), so the plan keeps the paper's budget invariant
/// `M_keys <= m + |O| * max_s L[s]` (and `M_keys <= m` under the strict rule).
pub fn plan_by_token_load(
    ring: &TokenRing,
    inputs: &TokenLoadInputs<'_>,
    rules: SelectRules<'_>,
) -> Vec<TokenMove> {
    let TokenLoadInputs {
        sources,
        receivers,
        loads,
        live,
        token_loads,
        budget,
        ..
    } = *inputs;
    let arcs = ring.arcs();
    let n = loads.len();
    let gain_sum: f64 = sources.iter().map(|&(_, g)| g).sum();
    let positive = |x: f64| x > 0.0;
    if sources.is_empty() || receivers.is_empty() || !positive(gain_sum) || !positive(budget) {
        return Vec::new();
    }
    let source_slot = source_slots(sources, n);
    let share: Vec<f64> = sources
        .iter()
        .map(|&(_, g)| budget * g / gain_sum)
        .collect();
    let candidates = ranked_by_load_per_arc(ring, &source_slot, token_loads, rules.movable);
    let is_live = |i: usize| live.get(i).copied().unwrap_or(true);
    let mut progress = TokenLoadProgress::new(inputs);
    let mut moves = Vec::new();
    // The three hottest live nodes, kept as the plan grows: the hottest node other than a
    // receiver and the source is among them, so each check costs O(1) instead of O(nodes).
    let mut hottest = Hottest::of(&progress.projected, is_live);
    // Sources that can give no more token and receivers that can take none stay so, so once
    // every source or every receiver is done no later candidate can move: the plan stops
    // there, and the candidates past that point are never ranked.
    let gives_no_more = |progress: &TokenLoadProgress, k: usize| {
        progress.gives_no_more(k, (sources[k].1, share[k]), rules.v_min)
    };
    let mut sources_done = (0..sources.len())
        .filter(|&k| gives_no_more(&progress, k))
        .count();
    let mut receivers_done = (0..receivers.len())
        .filter(|&r| progress.takes_no_more(r, receivers, n))
        .count();
    for token in candidates {
        if sources_done == sources.len() || receivers_done == receivers.len() {
            break;
        }
        let from = ring.owners()[token];
        let k = source_slot[from.index()];
        let (source, gain) = sources[k];
        let arc = arcs[token];
        if !progress.source_may_give(k, (gain, share[k]), arc, &rules) {
            continue;
        }
        let load = token_loads[token];
        let Some(r) = progress.receiver_for(receivers, &hottest, is_live, (source, load)) else {
            continue;
        };
        let to = receivers[r].0;
        progress.take((k, source), (r, to), arc, load);
        sources_done += usize::from(gives_no_more(&progress, k));
        receivers_done += usize::from(progress.takes_no_more(r, receivers, n));
        hottest = Hottest::of(&progress.projected, is_live);
        moves.push(TokenMove {
            token,
            from,
            to: NodeId(to as u32),
        });
    }
    moves
}

/// Every node's slot in `sources` (its index there), [`NOT_A_SOURCE`] for the other nodes
/// of the `n`; a source outside the `n` nodes gets none.
fn source_slots(sources: &[(usize, f64)], n: usize) -> Vec<usize> {
    let mut source_slot = vec![NOT_A_SOURCE; n];
    for (k, &(i, _)) in sources.iter().enumerate() {
        if i < n {
            source_slot[i] = k;
        }
    }
    source_slot
}

/// The slot of a node that is not a source, in [`plan_by_token_load`]'s index of sources.
const NOT_A_SOURCE: usize = usize::MAX;

/// The movable tokens of the sources (`source_slot[owner]` not [`NOT_A_SOURCE`]) with a
/// positive finite load, ranked by load relieved per key space moved, `token_load / arc`,
/// highest first (ties: lower token index).
fn ranked_by_load_per_arc(
    ring: &TokenRing,
    source_slot: &[usize],
    token_loads: &[f64],
    movable: &dyn Fn(usize) -> bool,
) -> InRankOrder {
    let arcs = ring.arcs();
    let candidates: Vec<(usize, f64)> = ring
        .owners()
        .iter()
        .enumerate()
        .filter(|&(token, owner)| {
            source_slot
                .get(owner.index())
                .is_some_and(|&k| k != NOT_A_SOURCE)
                && movable(token)
        })
        .filter_map(|(token, _)| {
            let load = token_loads.get(token).copied().unwrap_or(0.0);
            let arc = arcs[token];
            (load.is_finite() && load > 0.0 && arc > 0.0).then_some((token, load / arc))
        })
        .collect();
    InRankOrder::new(candidates)
}

/// Candidate tokens `(token, load per arc)` handed out in rank order, highest load per arc
/// first (ties: lower token index), ranked a block at a time: each block is the next best
/// candidates (a selection), then sorted, and each block is twice the last. A plan that
/// stops after a few moves ranks a few blocks, not every candidate. No two candidates tie
/// (each token is listed once), so the order is the one sort of them all would give.
struct InRankOrder {
    candidates: Vec<(usize, f64)>,
    next: usize,
    ranked_until: usize,
    block: usize,
}

impl InRankOrder {
    /// The size of the first block.
    const FIRST_BLOCK: usize = 64;

    fn new(candidates: Vec<(usize, f64)>) -> InRankOrder {
        InRankOrder {
            candidates,
            next: 0,
            ranked_until: 0,
            block: InRankOrder::FIRST_BLOCK,
        }
    }

    /// Ranks the next block of the candidates not ranked yet.
    fn rank_next_block(&mut self) {
        let by_rank = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let rest = &mut self.candidates[self.ranked_until..];
        let block = self.block.min(rest.len());
        if block < rest.len() {
            rest.select_nth_unstable_by(block - 1, by_rank);
        }
        rest[..block].sort_unstable_by(by_rank);
        self.ranked_until += block;
        self.block = self.block.saturating_mul(2);
    }
}

impl Iterator for InRankOrder {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.next == self.candidates.len() {
            return None;
        }
        if self.next == self.ranked_until {
            self.rank_next_block();
        }
        self.next += 1;
        Some(self.candidates[self.next - 1].0)
    }
}

/// What [`plan_by_token_load`] has planned so far: the nodes' projected loads, and for each
/// source (by its index in the sources) the key space taken, the load relieved and the
/// tokens kept, and for each receiver the need left and the room under `v_max`.
struct TokenLoadProgress {
    projected: Vec<f64>,
    taken_arc: Vec<f64>,
    relieved: Vec<f64>,
    kept: Vec<usize>,
    need_left: Vec<f64>,
    room: Vec<usize>,
}

impl TokenLoadProgress {
    /// Nothing planned yet.
    fn new(inputs: &TokenLoadInputs<'_>) -> TokenLoadProgress {
        let count_of = |i: usize| inputs.counts.get(i).copied().unwrap_or(0);
        TokenLoadProgress {
            projected: inputs.loads.to_vec(),
            taken_arc: vec![0.0; inputs.sources.len()],
            relieved: vec![0.0; inputs.sources.len()],
            kept: inputs.sources.iter().map(|&(i, _)| count_of(i)).collect(),
            need_left: inputs.receivers.iter().map(|&(_, r)| r).collect(),
            room: inputs
                .receivers
                .iter()
                .map(|&(j, _)| match inputs.v_max {
                    None => usize::MAX,
                    Some(v_max) => v_max.saturating_sub(count_of(j)),
                })
                .collect(),
        }
    }

    /// Whether source `k`, of gain `gain` and budget share `share`, may still give a token of
    /// key space `arc` under `rules`: it has given less than its share and keeps more than
    /// `v_min` tokens, it is not yet relieved of its whole gain, and under
    /// [`StepRule::Strict`] the token fits in what is left of its share.
    #[inline]
    fn source_may_give(
        &self,
        k: usize,
        (gain, share): (f64, f64),
        arc: f64,
        rules: &SelectRules<'_>,
    ) -> bool {
        if self.gives_no_more(k, (gain, share), rules.v_min) {
            return false;
        }
        !(rules.step_rule == StepRule::Strict && self.taken_arc[k] + arc > share)
    }

    /// The receiver (its index in `receivers`) that takes a token of load `load` from node
    /// `source`: of the receivers with room and need left whose projected load plus the
    /// token's stays below the hottest other live node once the token has left `source`
    /// (`hottest` holds the hottest live nodes now), the one with the most need left (ties:
    /// lower index); `None` when there is none.
    #[inline]
    fn receiver_for(
        &self,
        receivers: &[(usize, f64)],
        hottest: &Hottest,
        is_live: impl Fn(usize) -> bool,
        (source, load): (usize, f64),
    ) -> Option<usize> {
        // Every node has a projected load: `n` is the number of nodes.
        let n = self.projected.len();
        let projected = &self.projected;
        // The hottest live node other than `j` once the token has left its source.
        let source_after = projected[source] - load;
        let hottest_except = |j: usize| {
            let others = hottest.except(j, source);
            if source != j && is_live(source) && source_after.is_finite() {
                others.max(source_after)
            } else {
                others
            }
        };
        (0..receivers.len())
            .filter(|&r| !self.takes_no_more(r, receivers, n))
            .filter(|&r| {
                let j = receivers[r].0;
                j != source && projected[j] + load < hottest_except(j)
            })
            .max_by(|&a, &b| {
                self.need_left[a]
                    .total_cmp(&self.need_left[b])
                    .then(b.cmp(&a))
            })
    }

    /// Whether source `k`, of gain `gain` and budget share `share`, can give no more token:
    /// it has given its share, keeps no more than `v_min` tokens or is relieved of its whole
    /// gain. Each of these stays true as the plan grows.
    fn gives_no_more(&self, k: usize, (gain, share): (f64, f64), v_min: usize) -> bool {
        !(self.taken_arc[k] < share && self.kept[k] > v_min) || self.relieved[k] >= gain
    }

    /// Whether receiver `r` can take no more token: it has no room or no need left, or it is
    /// not one of the `n` nodes. Each of these stays true as the plan grows.
    fn takes_no_more(&self, r: usize, receivers: &[(usize, f64)], n: usize) -> bool {
        !(self.room[r] > 0 && self.need_left[r] > 0.0 && receivers[r].0 < n)
    }

    /// A token of key space `arc` and load `load` moves from source `k` (node `source`) to
    /// receiver `r` (node `to`).
    fn take(&mut self, (k, source): (usize, usize), (r, to): (usize, usize), arc: f64, load: f64) {
        self.taken_arc[k] += arc;
        self.kept[k] -= 1;
        self.relieved[k] += load;
        self.projected[source] -= load;
        self.projected[to] += load;
        self.need_left[r] -= load;
        self.room[r] -= 1;
    }
}

/// The three highest finite loads of live nodes, highest first (ties: lower id), padded with
/// `-inf`.
struct Hottest([(f64, usize); 3]);

impl Hottest {
    fn of(loads: &[f64], is_live: impl Fn(usize) -> bool) -> Hottest {
        let mut top = [(f64::NEG_INFINITY, usize::MAX); 3];
        for (x, &load) in loads.iter().enumerate() {
            if !(is_live(x) && load.is_finite()) {
                continue;
            }
            if let Some(k) = top.iter().position(|&(l, _)| load > l) {
                top[k..].rotate_right(1);
                top[k] = (load, x);
            }
        }
        Hottest(top)
    }

    /// The highest load of a live node other than `a` and `b` (`-inf` when there is none).
    fn except(&self, a: usize, b: usize) -> f64 {
        self.0
            .iter()
            .find(|&&(_, x)| x != a && x != b && x != usize::MAX)
            .map_or(f64::NEG_INFINITY, |&(l, _)| l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_hottest_except_two_nodes_is_the_maximum_over_the_others(
            loads in proptest::collection::vec(proptest::prop_oneof![
                -2.0f64..2.0, proptest::strategy::Just(f64::NAN), proptest::strategy::Just(1.0)
            ], 0..12),
            live_bits in 0u32..4096,
            a in 0usize..13,
            b in 0usize..13,
        ) {
            let is_live = |x: usize| live_bits & (1 << x) != 0;
            let expected = (0..loads.len())
                .filter(|&x| x != a && x != b && is_live(x) && loads[x].is_finite())
                .map(|x| loads[x])
                .fold(f64::NEG_INFINITY, f64::max);
            let got = Hottest::of(&loads, is_live).except(a, b);
            proptest::prop_assert_eq!(got.to_bits(), expected.to_bits());
        }
    }

    /// The plan as first written: every candidate ranked by one stable sort, and every one
    /// of them tried (no early stop).
    fn plan_in_full(
        ring: &TokenRing,
        inputs: &TokenLoadInputs<'_>,
        rules: SelectRules<'_>,
    ) -> Vec<TokenMove> {
        let (sources, receivers) = (inputs.sources, inputs.receivers);
        let n = inputs.loads.len();
        let gain_sum: f64 = sources.iter().map(|&(_, g)| g).sum();
        let positive = |x: f64| x > 0.0;
        if sources.is_empty()
            || receivers.is_empty()
            || !positive(gain_sum)
            || !positive(inputs.budget)
        {
            return Vec::new();
        }
        let source_slot = source_slots(sources, n);
        let mut candidates: Vec<(usize, f64)> = (0..ring.len())
            .filter(|&t| {
                source_slot
                    .get(ring.owner(t).index())
                    .is_some_and(|&k| k != NOT_A_SOURCE)
                    && (rules.movable)(t)
            })
            .filter_map(|t| {
                let (load, arc) = (
                    inputs.token_loads.get(t).copied().unwrap_or(0.0),
                    ring.arcs()[t],
                );
                (load.is_finite() && load > 0.0 && arc > 0.0).then_some((t, load / arc))
            })
            .collect();
        candidates.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let is_live = |i: usize| inputs.live.get(i).copied().unwrap_or(true);
        let mut progress = TokenLoadProgress::new(inputs);
        let mut moves = Vec::new();
        for (token, _) in candidates {
            let from = ring.owner(token);
            let k = source_slot[from.index()];
            let (source, gain) = sources[k];
            let share = inputs.budget * gain / gain_sum;
            let arc = ring.arcs()[token];
            if !progress.source_may_give(k, (gain, share), arc, &rules) {
                continue;
            }
            let load = inputs.token_loads[token];
            let hottest = Hottest::of(&progress.projected, is_live);
            if let Some(r) = progress.receiver_for(receivers, &hottest, is_live, (source, load)) {
                progress.take((k, source), (r, receivers[r].0), arc, load);
                moves.push(TokenMove {
                    token,
                    from,
                    to: NodeId(receivers[r].0 as u32),
                });
            }
        }
        moves
    }

    proptest::proptest! {
        /// Ranking a block at a time and stopping once every source or every receiver is done
        /// plan the same moves as ranking every candidate and trying each.
        #[test]
        fn the_plan_is_the_plan_of_every_candidate_in_rank_order(
            // Per token: its owner, its gap to the previous position, its load in hundredths
            // (ties and tokens without load) and whether it is frozen.
            token_specs in proptest::collection::vec(
                (0u32..6, 1u32..20, 0u32..6, proptest::bool::weighted(0.1)),
                1..300,
            ),
            nodes in proptest::collection::vec((0.0f64..1.2, proptest::bool::weighted(0.9)), 6),
            budget in proptest::prop_oneof![0.001f64..0.05, 0.05f64..1.0],
            v_min in 0usize..4,
            v_max in proptest::option::of(1usize..80),
            strict in proptest::bool::ANY,
        ) {
            let total_gap: u32 = token_specs.iter().map(|spec| spec.1).sum();
            let mut position = 0;
            let positions = token_specs
                .iter()
                .map(|spec| {
                    position += spec.1;
                    f64::from(position - spec.1) / f64::from(total_gap)
                })
                .collect();
            let owners = token_specs.iter().map(|spec| NodeId(spec.0)).collect();
            let ring = TokenRing::new(positions, owners).unwrap();
            let token_loads: Vec<f64> = token_specs.iter().map(|spec| f64::from(spec.2) * 0.01).collect();
            let frozen: Vec<bool> = token_specs.iter().map(|spec| spec.3).collect();
            let loads: Vec<f64> = nodes.iter().map(|node| node.0).collect();
            let live: Vec<bool> = nodes.iter().map(|node| node.1).collect();
            let n = loads.len();
            let sources: Vec<(usize, f64)> = (0..n).filter(|&i| loads[i] > 0.7).map(|i| (i, loads[i] - 0.65)).collect();
            let receivers: Vec<(usize, f64)> = (0..n).filter(|&i| loads[i] < 0.6).map(|i| (i, 0.65 - loads[i])).collect();
            let counts = ring.counts(n);
            let inputs = TokenLoadInputs {
                sources: &sources,
                receivers: &receivers,
                loads: &loads,
                live: &live,
                token_loads: &token_loads,
                budget,
                counts: &counts,
                v_max,
            };
            let movable = |t: usize| !frozen[t];
            let step_rule = if strict { StepRule::Strict } else { StepRule::Paper };
            let rules = SelectRules { v_min, step_rule, movable: &movable };
            proptest::prop_assert_eq!(
                plan_by_token_load(&ring, &inputs, rules),
                plan_in_full(&ring, &inputs, rules)
            );
        }
    }

    fn ring() -> TokenRing {
        // Arcs: token 0 = 0.3, 1 = 0.1, 2 = 0.2, 3 = 0.15, 4 = 0.25; owners 0,0,0,0,1.
        let pos = vec![0.05, 0.15, 0.35, 0.5, 0.75];
        let owners = [0, 0, 0, 0, 1].map(NodeId).to_vec();
        TokenRing::new(pos, owners).unwrap()
    }

    fn plan(token_loads: &[f64], loads: &[f64], budget: f64) -> Vec<(usize, u32)> {
        let r = ring();
        let counts = r.counts(loads.len());
        let inputs = TokenLoadInputs {
            sources: &[(0, loads[0] - 0.5)],
            receivers: &[(2, 0.5 - loads[2])],
            loads,
            live: &[true; 3],
            token_loads,
            budget,
            counts: &counts,
            v_max: None,
        };
        plan_by_token_load(&r, &inputs, SelectRules::paper(1))
            .iter()
            .map(|m| (m.token, m.to.0))
            .collect()
    }

    #[test]
    fn the_most_load_per_key_space_goes_first() {
        // Token 1 (arc 0.1, load 0.2) relieves 2 per unit of key space; token 0 (arc 0.3,
        // load 0.3) only 1. A budget of one short arc takes token 1 alone.
        let moves = plan(&[0.3, 0.2, 0.05, 0.05, 0.1], &[0.9, 0.6, 0.1], 0.05);
        assert_eq!(moves, vec![(1, 2)]);
    }

    #[test]
    fn a_token_that_would_make_its_receiver_the_hottest_stays() {
        // Token 1 carries 0.6: node 2 would end at 0.7 > the others' 0.6 (node 1) and 0.3
        // (node 0). The lighter token 2 goes instead.
        let moves = plan(&[0.05, 0.6, 0.2, 0.05, 0.1], &[0.9, 0.6, 0.1], 0.15);
        assert_eq!(moves, vec![(2, 2)]);
        // Nothing fits: no move at all.
        assert!(plan(&[0.0, 0.6, 0.0, 0.0, 0.1], &[0.9, 0.6, 0.1], 0.15).is_empty());
    }
}
