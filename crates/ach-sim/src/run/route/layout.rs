//! The layouts of owners that route in full without an addition to memory per token.
//!
//! Two rings of a run keep one layout for its whole length, and both are the commonest: the
//! initial ring, which the run lays out round robin (token `s` to node `s % n`), and the ring
//! of Static-Wt, which gives each node one block of consecutive tokens. Their words can be
//! summed the way a processor sums an array, several words per instruction:
//!
//! - **Periodic**: token `s` has the owner of token `s % period`, so the words are added
//!   period by period into `period` sums, each of which is then added to its owner's sum.
//! - **Runs**: the owners form few runs of consecutive tokens with one owner, and each run's
//!   words are summed as a slice.
//!
//! Any other layout (a ring that moved tokens here and there) is *scattered*: each word is
//! added to its owner's sum, as [`super::sum_scattered`] does. Integer sums do not depend on the
//! order of the additions, so a layout changes the time of a step, never its values.

use ach_ring::NodeId;

/// Longest period summed period by period: beyond it the period's sums no longer stay in
/// the first-level cache.
const MAX_PERIOD: usize = 4096;

/// The fewest tokens per run, on average, for which runs are summed as slices.
const MIN_MEAN_RUN: usize = 16;

/// The fewest words a periodic layout adds per block (a multiple of its period).
const MIN_BLOCK: usize = 64;

/// How an arm's words are summed when it is routed in full.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) enum Layout {
    /// Token `s` has the owner of token `s % period`.
    Periodic {
        /// The period, at least 1 and at most the token count.
        period: usize,
    },
    /// Each `(end, owner)`: the tokens from the previous run's end (0 for the first) to `end`
    /// belong to `owner`.
    Runs(Vec<(usize, NodeId)>),
    /// Neither: each word is added to its owner's sum.
    #[default]
    Scattered,
}

impl Layout {
    /// The layout of `owners`: periodic if a period of at most [`MAX_PERIOD`] and at most half
    /// the tokens repeats through them, else runs if they average [`MIN_MEAN_RUN`] tokens or
    /// more, else scattered. Gives up on either as soon as the owners rule it out, so that a
    /// scattered ring costs a few dozen tokens' look.
    pub(super) fn of(owners: &[NodeId]) -> Layout {
        if let Some(period) = period_of(owners) {
            return Layout::Periodic { period };
        }
        match runs_of(owners) {
            Some(runs) => Layout::Runs(runs),
            None => Layout::Scattered,
        }
    }

    /// Sets `sums` to the `n` per-node sums of `packed` over `owners`, the owners this layout
    /// was found for; `period_sums` is a buffer kept between calls. Returns false, doing
    /// nothing, for [`Layout::Scattered`].
    pub(super) fn sums(
        &self,
        owners: &[NodeId],
        packed: &[u64],
        n: usize,
        sums: &mut Vec<u64>,
        period_sums: &mut Vec<u64>,
    ) -> bool {
        if *self != Layout::Scattered {
            sums.clear();
            sums.resize(n, 0);
        }
        match self {
            Layout::Periodic { period } => {
                // The owners repeat with any multiple of the period too: one of at least
                // [`MIN_BLOCK`] words makes the additions of a block a long vector loop.
                let block = period * MIN_BLOCK.div_ceil(*period);
                period_sums.clear();
                period_sums.resize(block, 0);
                let mut blocks = packed.chunks_exact(block);
                for words in &mut blocks {
                    for (sum, &word) in period_sums.iter_mut().zip(words) {
                        *sum += word;
                    }
                }
                for (sum, &word) in period_sums.iter_mut().zip(blocks.remainder()) {
                    *sum += word;
                }
                for (owner, &sum) in owners.iter().zip(period_sums.iter()) {
                    sums[owner.index()] += sum;
                }
                true
            }
            Layout::Runs(runs) => {
                let mut start = 0;
                for &(end, owner) in runs {
                    sums[owner.index()] += packed[start..end].iter().sum::<u64>();
                    start = end;
                }
                true
            }
            Layout::Scattered => false,
        }
    }
}

/// The period of `owners` (token `s` has the owner of token `s % period` for every `s`), if
/// one of at most [`MAX_PERIOD`] and at most half the tokens does. The only candidate tried is
/// the first later token with the first token's owner: that finds the period of a round-robin
/// layout, whose period holds each owner once; a pattern that repeats an owner within its
/// period is not looked for (it is summed as runs or scattered, with the same sums).
fn period_of(owners: &[NodeId]) -> Option<usize> {
    let first = *owners.first()?;
    let longest = MAX_PERIOD.min(owners.len() / 2);
    let period = 1 + owners[1..=longest]
        .iter()
        .position(|&owner| owner == first)?;
    owners[period..]
        .iter()
        .zip(owners)
        .all(|(later, earlier)| later == earlier)
        .then_some(period)
}

/// The runs of `owners`, if they average at least [`MIN_MEAN_RUN`] tokens. They are counted
/// first, up to the most allowed, so that scattered owners cost no allocation.
fn runs_of(owners: &[NodeId]) -> Option<Vec<(usize, NodeId)>> {
    let most = owners.len() / MIN_MEAN_RUN;
    let mut count = usize::from(!owners.is_empty());
    for pair in owners.windows(2) {
        count += usize::from(pair[0] != pair[1]);
        if count > most {
            return None;
        }
    }
    if count == 0 || count > most {
        return None;
    }
    let mut runs = Vec::with_capacity(count);
    for (end, pair) in (1..).zip(owners.windows(2)) {
        if pair[0] != pair[1] {
            runs.push((end, pair[0]));
        }
    }
    runs.push((owners.len(), owners[owners.len() - 1]));
    Some(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(owners: &[u32]) -> Vec<NodeId> {
        owners.iter().map(|&o| NodeId(o)).collect()
    }

    #[test]
    fn round_robin_is_periodic_and_blocks_are_runs() {
        let round_robin: Vec<u32> = (0..100).map(|s| s % 7).collect();
        assert_eq!(
            Layout::of(&ids(&round_robin)),
            Layout::Periodic { period: 7 }
        );
        let blocks: Vec<u32> = (0..100).map(|s| s / 25).collect();
        let runs = vec![
            (25, NodeId(0)),
            (50, NodeId(1)),
            (75, NodeId(2)),
            (100, NodeId(3)),
        ];
        assert_eq!(Layout::of(&ids(&blocks)), Layout::Runs(runs));
        // One owner throughout: period 1.
        assert_eq!(Layout::of(&ids(&[4; 10])), Layout::Periodic { period: 1 });
        let scattered: Vec<u32> = (0..100_u32).map(|s| s * 7919 % 13 % 5).collect();
        assert_eq!(Layout::of(&ids(&scattered)), Layout::Scattered);
        assert_eq!(Layout::of(&[]), Layout::Scattered);
        // A period that does not fit twice is none.
        assert_eq!(Layout::of(&ids(&[0, 1, 2, 0, 1])), Layout::Scattered);
    }

    /// Owners made of a repeated pattern, of blocks, or drawn at random, with a few changed.
    fn owners() -> impl Strategy<Value = Vec<NodeId>> {
        let pattern = (proptest::collection::vec(0_u32..6, 1..12), 1_usize..300).prop_map(
            |(pattern, tokens)| (0..tokens).map(|s| pattern[s % pattern.len()]).collect(),
        );
        let blocks = proptest::collection::vec((0_u32..6, 1_usize..60), 1..12).prop_map(|blocks| {
            blocks
                .into_iter()
                .flat_map(|(owner, length)| std::iter::repeat_n(owner, length))
                .collect()
        });
        let random = proptest::collection::vec(0_u32..6, 0..300);
        (
            prop_oneof![pattern, blocks, random],
            proptest::collection::vec((any::<usize>(), 0_u32..6), 0..3),
        )
            .prop_map(|(mut owners, changes): (Vec<u32>, _)| {
                for (at, owner) in changes {
                    if !owners.is_empty() {
                        let len = owners.len();
                        owners[at % len] = owner;
                    }
                }
                ids(&owners)
            })
    }

    proptest! {
        /// Every layout sums each token's word to its owner, as one addition per token does.
        #[test]
        fn every_layout_sums_each_word_to_its_owner(
            owners in owners(),
            seed in any::<u64>(),
        ) {
            let packed: Vec<u64> = (0..owners.len() as u64)
                .map(|s| ((s.wrapping_mul(seed | 1) >> 44) << 32) | ((s ^ seed) % 97))
                .collect();
            let mut want = vec![0_u64; 6];
            for (owner, &word) in owners.iter().zip(&packed) {
                want[owner.index()] += word;
            }
            let layout = Layout::of(&owners);
            let mut got = vec![1_u64; 2];
            let mut buffer = Vec::new();
            if layout.sums(&owners, &packed, 6, &mut got, &mut buffer) {
                prop_assert_eq!(got, want);
            } else {
                prop_assert_eq!(layout, Layout::Scattered);
            }
        }
    }
}
