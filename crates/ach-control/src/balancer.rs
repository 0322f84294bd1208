//! The interface every balancing algorithm implements.

use ach_ring::{Migration, RingError, TokenMove, TokenRing};

/// What a balancing algorithm observes at one control step.
#[derive(Clone, Copy, Debug)]
pub struct Observation<'a> {
    /// Step index `t`, from 0.
    pub step: u64,
    /// Load `l_i` of every node `0..n`; `n = loads.len()` is the number of nodes.
    pub loads: &'a [f64],
    /// The cluster's total load (`alpha * mean(l) + (1 - alpha) * max(l)`).
    pub total_load: f64,
    /// `live[i]` is true when the algorithm may use node `i` (as a source or a receiver of
    /// tokens). Same length as `loads`. A node that is not live is ignored entirely.
    pub live: &'a [bool],
    /// Optional per-token loads: `token_loads[k]` is the part of its owner's load that token
    /// `k` carries, in the units of `loads` (what the owner's load would lose if the token
    /// left), one entry per token of the ring. `None` when the telemetry has no per-token
    /// figures (the paper's model, `INFO`-only clusters); algorithms that do not use it ignore
    /// it, and an algorithm that can use it falls back to its rules without it. (For an
    /// algorithm that asks for [`TokenLoadNeed::ExpectedWork`], each token's expected work.)
    pub token_loads: Option<&'a [f64]>,
}

impl Observation<'_> {
    /// Number of nodes.
    pub fn n_nodes(&self) -> usize {
        self.loads.len()
    }

    /// The live nodes in increasing id order.
    pub fn live_nodes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.loads.len()).filter(|&i| self.live.get(i).copied().unwrap_or(true))
    }
}

/// The owner changes an algorithm decided at one step.
///
/// A plan is data: nothing has changed yet. The caller commits it with [`commit`] (or
/// [`TokenRing::apply`]) once the keys of the moved ranges have migrated; in the simulation that
/// is at once. Plans must be committed in the order they were made, before the next call to
/// [`Balancer::plan`], since every plan is computed against the ring it was given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The moves, at most one per token, sorted by token index.
    pub moves: Vec<TokenMove>,
    /// `M_keys` of the plan: the sum of the arcs of the moved tokens.
    pub m_keys: f64,
    /// For budgeted algorithms, the bound the plan must respect: `M_keys <= bound + 1e-9`
    /// (the budget invariant of ACH, `m + |O| * max_s L[s]`). `None` for unbudgeted ones.
    pub budget_bound: Option<f64>,
    /// Set when the algorithm planned moves and held them back (the plan then moves nothing):
    /// why, for the operator.
    pub withheld: Option<Withheld>,
}

/// Moves an algorithm planned and did not carry out, because their predicted gain was below
/// its threshold (ACH's [`crate::AchConfig::min_gain`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Withheld {
    /// How many moves the plan held back.
    pub moves: usize,
    /// Their predicted gain: the fraction of the load above the target they would remove.
    pub gain: f64,
    /// The threshold it fell below.
    pub min_gain: f64,
}

/// Sorts `moves` by token, keeping the given order of moves of one token: the order of a
/// stable sort by token, which is what [`Plan::from_moves`] promises. A plan of at least
/// [`RADIX_SORT_FROM`] moves on a ring of `tokens` tokens is sorted by a least-significant-digit
/// radix sort of the token (linear in the moves, as many passes as the largest token has
/// bytes); other plans by an unstable sort of `(token, position)` keys, which are all
/// distinct, so the result is the stable order too. Both are several times faster than a
/// stable sort of the moves themselves, which the planners' plans of hundreds of moves per
/// step made a tenth of a simulated run.
fn sort_by_token(moves: &mut Vec<TokenMove>, tokens: usize) {
    if moves.is_sorted_by_key(|mv| mv.token) {
        return;
    }
    if moves.len() >= RADIX_SORT_FROM && moves.iter().all(|mv| mv.token < tokens) {
        radix_sort_by_token(moves, tokens);
        return;
    }
    let fits = |n: usize| u32::try_from(n).is_ok();
    if !(fits(moves.len()) && moves.iter().all(|mv| fits(mv.token))) {
        moves.sort_by_key(|mv| mv.token);
        return;
    }
    let mut keys: Vec<u64> = moves
        .iter()
        .enumerate()
        .map(|(position, mv)| ((mv.token as u64) << 32) | position as u64)
        .collect();
    keys.sort_unstable();
    *moves = keys
        .iter()
        .map(|key| moves[(key & 0xFFFF_FFFF) as usize])
        .collect();
}

/// The fewest moves [`sort_by_token`] sorts by radix: below it, the buckets of each pass (up
/// to 256) cost more than sorting the keys.
const RADIX_SORT_FROM: usize = 64;

/// Sorts `moves`, whose tokens are all below `tokens`, stably by token: one counting pass per
/// digit of `tokens - 1`, lowest digit first, each stable, so that the last pass leaves moves
/// of equal tokens in their given order. The digits are as few as bytes would need and as
/// narrow as that allows (five bits each for a thousand tokens), so that a pass over a few
/// hundred moves does not spend its time on empty buckets.
fn radix_sort_by_token(moves: &mut Vec<TokenMove>, tokens: usize) {
    let token_bits = usize::BITS - tokens.saturating_sub(1).leading_zeros();
    if token_bits == 0 {
        return; // One token: every move is of token 0.
    }
    let passes = token_bits.div_ceil(8);
    let digit_bits = token_bits.div_ceil(passes);
    let buckets = 1_usize << digit_bits;
    let mut from = std::mem::take(moves);
    let mut to = from.clone();
    // `next[d]`: where the next move of digit `d` goes.
    let mut next = [0_usize; 256];
    for pass in 0..passes {
        let shift = digit_bits * pass;
        let digit = |mv: &TokenMove| (mv.token >> shift) & (buckets - 1);
        let next = &mut next[..buckets];
        next.fill(0);
        for mv in &from {
            next[digit(mv)] += 1;
        }
        let mut start = 0;
        for slot in next.iter_mut() {
            let count = *slot;
            *slot = start;
            start += count;
        }
        for mv in &from {
            let slot = &mut next[digit(mv)];
            to[*slot] = *mv;
            *slot += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
    *moves = from;
}

impl Plan {
    /// A plan that moves nothing.
    pub fn none() -> Plan {
        Plan::default()
    }

    /// Builds a plan from moves (one per token), sorting them by token and summing their arcs.
    /// A move naming a token the ring does not have adds nothing here; [`commit`] rejects it.
    pub fn from_moves(ring: &TokenRing, mut moves: Vec<TokenMove>) -> Plan {
        sort_by_token(&mut moves, ring.len());
        let m_keys = moves
            .iter()
            .filter(|mv| mv.from != mv.to)
            .filter_map(|mv| ring.arcs().get(mv.token))
            .sum();
        Plan {
            moves,
            m_keys,
            budget_bound: None,
            withheld: None,
        }
    }

    /// The data to copy before the plan is committed: one [`Migration`] per move that changes
    /// an owner, with the exact ranges of key hashes (see [`TokenRing::migrations`]). A key's
    /// owner changes on commit if and only if its hash lies in one of them.
    pub fn migrations(&self, ring: &TokenRing) -> Vec<Migration> {
        ring.migrations(&self.moves)
    }

    /// The part of this plan made of `moves` (those of them that are in the plan), to confirm
    /// what was really switched when only some migrations succeeded. Keeps the budget bound.
    pub fn subset(&self, ring: &TokenRing, moves: &[TokenMove]) -> Plan {
        let kept = moves
            .iter()
            .filter(|mv| self.moves.contains(mv))
            .copied()
            .collect();
        Plan {
            budget_bound: self.budget_bound,
            ..Plan::from_moves(ring, kept)
        }
    }

    /// True when the plan respects its budget bound (always true without one).
    pub fn within_budget(&self) -> bool {
        self.budget_bound
            .is_none_or(|bound| self.m_keys <= bound + BUDGET_SLACK)
    }
}

/// Slack of the budget invariant, for floating-point rounding.
pub const BUDGET_SLACK: f64 = 1e-9;

/// Which per-token figures an algorithm wants in [`Observation::token_loads`]. A caller that
/// has none passes `None` whatever the answer; computing them costs the caller work, so it may
/// skip it for algorithms that answer [`TokenLoadNeed::None`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TokenLoadNeed {
    /// No per-token figures (the paper's algorithms).
    #[default]
    None,
    /// Per-token loads as the telemetry measures them: each token's part of its owner's
    /// observed load, with the same smoothing, lag, noise and missing samples as the node loads
    /// (what per-slot statistics of a live cluster give).
    Observed,
    /// Full knowledge, which only a simulator has: each token's *expected work of the next
    /// step* (requests plus the extra cost of writes, in requests per step). Not in the units of
    /// `loads`; for oracles that bound what any algorithm could reach.
    ExpectedWork,
}

/// A load-balancing algorithm over a [`TokenRing`].
pub trait Balancer {
    /// Short name, as used in the paper's tables (for example `ACH`, `Static-W`).
    fn name(&self) -> &'static str;

    /// Observes one step and plans the owner changes. Must not panic for any observation whose
    /// vectors have one entry per node and any ring whose owners are nodes `0..n`.
    fn plan(&mut self, ring: &TokenRing, observation: &Observation<'_>) -> Plan;

    /// Tells the algorithm that the moves of `plan` were switched (the data copied and the
    /// routing committed), and returns their `M_keys`. A budgeted algorithm charges its budget
    /// here, not when planning: a plan that is dropped or aborted costs nothing. `plan` may be
    /// the latest plan or a part of it ([`Plan::subset`]); each move is confirmed once.
    ///
    /// The default, for algorithms without a budget, accepts any plan. An algorithm that wraps
    /// another (a filter in front of ACH, say) must pass `confirm` on to it, or the inner
    /// algorithm's budget is never charged.
    fn confirm(&mut self, plan: &Plan) -> Result<f64, ConfirmError> {
        Ok(plan.m_keys)
    }

    /// Which per-token figures this algorithm wants in its observations (none by default).
    fn token_load_need(&self) -> TokenLoadNeed {
        TokenLoadNeed::None
    }
}

/// Why a confirmation was rejected: the budget would not match what was switched.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfirmError {
    /// A move that is not an unconfirmed move of the latest plan (from an older plan, made up,
    /// or confirmed already).
    #[error(
        "move of token {} from {} to {} is not an unconfirmed move of the latest plan",
        mv.token, mv.from, mv.to
    )]
    NotPending {
        /// The move.
        mv: TokenMove,
    },
}

/// Commits a plan to the ring and returns its `M_keys` as measured by the ring.
pub fn commit(ring: &mut TokenRing, plan: &Plan) -> Result<f64, RingError> {
    ring.apply(&plan.moves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ach_ring::NodeId;
    use proptest::prelude::*;

    proptest! {
        /// Both ways of sorting give exactly a stable sort by token, moves of one token (which a
        /// plan should not have, but may) in their given order.
        #[test]
        fn moves_are_sorted_as_by_a_stable_sort(
            tokens in prop_oneof![1_usize..200, 200_usize..70_000],
            raw in proptest::collection::vec((any::<usize>(), 0_u32..5, 0_u32..5), 0..300),
        ) {
            // About one move in five is out of range, which only the key sort sorts.
            let moves: Vec<TokenMove> = raw
                .iter()
                .map(|&(token, from, to)| TokenMove {
                    token: token % (tokens + tokens / 4 + 1),
                    from: NodeId(from),
                    to: NodeId(to),
                })
                .collect();
            let mut expected = moves.clone();
            expected.sort_by_key(|mv| mv.token);
            let in_range: Vec<TokenMove> =
                moves.iter().copied().filter(|mv| mv.token < tokens).collect();
            let mut expected_in_range = in_range.clone();
            expected_in_range.sort_by_key(|mv| mv.token);
            let mut sorted = moves.clone();
            sort_by_token(&mut sorted, tokens);
            prop_assert_eq!(sorted, expected);
            let mut sorted = in_range.clone();
            sort_by_token(&mut sorted, tokens);
            prop_assert_eq!(sorted, expected_in_range);
        }
    }
}
