//! The window of a small-mean table pair: the draw of a token's reads and writes without a
//! branch that depends on the values drawn.
//!
//! A token's reads and writes of a step are two draws by inversion, each `min { i : x < T_i }`
//! for the thresholds `T_i` of its table and a 64-bit uniform `x` whose top 32 bits are one
//! half of the token's random word (see the module documentation of the workload). At the
//! paper's rates a token's mean is about one request, so almost every draw is one of the first
//! few values. A window keeps the top 16 bits of the first [`WINDOW_VALUES`] thresholds of the
//! read table and of the write table (32 bytes); the value drawn is then the number of those
//! thresholds whose top 16 bits are below the top 16 bits of `x`: the thresholds increase,
//! and when the top bits differ they decide the comparison of the whole numbers. The count is
//! a few vector instructions, with no branch per threshold and none that the guide's impure
//! slots would make the processor mispredict.
//!
//! The window cannot answer, and the draw goes to the guide ([`super::sample_pair_without_tie`]),
//! when the count reaches [`WINDOW_VALUES`] (the value is larger), when the top bits of a
//! threshold equal those of `x` (about once in 4 000 tokens: the lower bits decide), or when
//! the table does not start at 0 (its lanes are all 0, so the count is full or ties). So a
//! window draws exactly the value the guide draws, and whether a rate's tables get windows
//! changes the time of a step, never its values.

use super::PoissonTables;

/// Values a window answers: `0` to `WINDOW_VALUES - 1`.
pub(super) const WINDOW_VALUES: usize = 8;

/// The windows of the read table and the write table of one probability: the top 16 bits of
/// their first thresholds, a threshold that the table does not have (or never compares) as
/// `u16::MAX`, which no top bits exceed.
#[derive(Clone, Copy, Debug)]
pub(super) struct WindowPair {
    lanes: lanes::Lanes,
}

impl WindowPair {
    /// The windows of the table pairs of `tables` (reads at `2 i`, writes at `2 i + 1`, every
    /// table a guide table), or an empty list when too many of the draws would go past them
    /// ([`super::served_often_enough`]); `tokens_per_pair[i]` tokens draw from pair `i`.
    pub(super) fn of(tables: &PoissonTables, tokens_per_pair: &[u32]) -> Vec<WindowPair> {
        let mut past = Vec::with_capacity(tokens_per_pair.len());
        let mut windows = Vec::with_capacity(tokens_per_pair.len());
        for pair in 0..tokens_per_pair.len() {
            let (reads, reads_past) = window_of(tables, 2 * pair);
            let (writes, writes_past) = window_of(tables, 2 * pair + 1);
            past.push(1.0 - (1.0 - reads_past) * (1.0 - writes_past));
            windows.push(WindowPair {
                lanes: lanes::Lanes::new(&reads, &writes),
            });
        }
        if super::served_often_enough(tokens_per_pair, |pair| past[pair]) {
            windows
        } else {
            Vec::new()
        }
    }

    /// The reads and writes drawn with `word` (reads from its high half, writes from its low
    /// half), packed as [`super::pack`] packs them, or `None` when either window cannot
    /// answer.
    #[inline(always)]
    pub(super) fn sample_packed(&self, word: u64) -> Option<u64> {
        self.lanes.packed(word)
    }
}

/// The lanes of table `table`'s window and the probability that a draw goes past it.
fn window_of(tables: &PoissonTables, table: usize) -> ([u16; WINDOW_VALUES], f64) {
    let header = tables.headers[table];
    if header.smallest_value != 0 {
        // Any top 16 bits are above 0 or tie with it: the draw always goes to the guide.
        return ([0; WINDOW_VALUES], 1.0);
    }
    let thresholds =
        &tables.thresholds[header.threshold_offset as usize..][..header.value_count as usize];
    // The last threshold is 2^64 and never compared.
    let compared = &thresholds[..thresholds.len() - 1];
    let mut lanes = [u16::MAX; WINDOW_VALUES];
    for (lane, &threshold) in lanes.iter_mut().zip(compared) {
        *lane = (threshold >> 48) as u16;
    }
    let past = compared
        .get(WINDOW_VALUES - 1)
        .map_or(0.0, |&t| 1.0 - t as f64 / super::FIXED_POINT_SCALE);
    (lanes, past)
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use sse2 as lanes;

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
use portable as lanes;

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    //! The comparison with SSE2 (which every x86-64 processor has, through `safe_arch`): a
    //! table's eight lanes in one instruction. The lanes below come out as a bit mask, and two
    //! small tables turn it into the packed word: on Intel's cores only one execution port
    //! runs shuffles, and summing the lanes in the vector registers took four more of them.

    use safe_arch::{
        bitor_m128i, cmp_eq_mask_i16_m128i, cmp_gt_mask_i16_m128i, m128i, move_mask_i8_m128i,
        pack_i16_to_i8_m128i, set_i64_m128i_s, shuffle_ai_f32_all_m128i, unpack_low_i16_m128i,
    };

    use super::WINDOW_VALUES;

    /// SSE2 compares signed numbers: lanes and top bits are kept with their top bit flipped,
    /// which orders them as the unsigned numbers they are.
    const BIAS: u16 = 0x8000;

    /// [`BIAS`] on the two 16-bit lanes of a random word that hold the top bits of its halves:
    /// lane 3 (bits 48 to 63, the reads') and lane 1 (bits 16 to 31, the writes').
    const WORD_BIAS: u64 = (BIAS as u64) << 48 | (BIAS as u64) << 16;

    /// The reads' lanes, then the writes' lanes, biased.
    #[derive(Clone, Copy, Debug)]
    #[repr(C, align(32))]
    pub(super) struct Lanes([m128i; 2]);

    impl Lanes {
        pub(super) fn new(reads: &[u16; WINDOW_VALUES], writes: &[u16; WINDOW_VALUES]) -> Lanes {
            let biased =
                |lanes: &[u16; WINDOW_VALUES]| m128i::from(lanes.map(|lane| (lane ^ BIAS) as i16));
            Lanes([biased(reads), biased(writes)])
        }

        /// The values of the top 16 bits of each half of `word` (the reads' from its high half,
        /// the writes' from its low half), each the number of its table's lanes below them (at
        /// most `WINDOW_VALUES - 1`), packed as [`super::super::pack`] packs reads and writes;
        /// or `None` when a lane equals them or all its lanes are below them.
        #[inline(always)]
        pub(super) fn packed(&self, word: u64) -> Option<u64> {
            // The word's 16-bit lanes in the low half of a register, each doubled; the reads'
            // top (lane 3) and the writes' (lane 1) are then copied to all eight lanes.
            let biased = set_i64_m128i_s((word ^ WORD_BIAS) as i64);
            let doubled = unpack_low_i16_m128i(biased, biased);
            let r = shuffle_ai_f32_all_m128i::<0xFF>(doubled);
            let w = shuffle_ai_f32_all_m128i::<0x55>(doubled);
            let [reads, writes] = self.0;
            // A comparison gives -1 or 0 per lane; a saturating pack keeps a byte per lane:
            // bits 0 to 7 of the mask are the reads' lanes below, bits 8 to 15 the writes'.
            let below = move_mask_i8_m128i(pack_i16_to_i8_m128i(
                cmp_gt_mask_i16_m128i(r, reads),
                cmp_gt_mask_i16_m128i(w, writes),
            )) as usize;
            let ties = move_mask_i8_m128i(bitor_m128i(
                cmp_eq_mask_i16_m128i(r, reads),
                cmp_eq_mask_i16_m128i(w, writes),
            ));
            // A value is past the window when its last lane is below too.
            if ties != 0 || below & 0x8080 != 0 {
                return None;
            }
            // The lanes below are the first ones (the lanes increase), so each half's mask
            // has a low bit set per lane below, and a table reads the count off it.
            Some(READS_BELOW[below & 0xFF] + WRITES_BELOW[below >> 8])
        }
    }

    /// For a mask of the first `k` lanes (`2^k - 1`), `k` reads packed: `pack(k, 0)`.
    static READS_BELOW: [u64; 256] = packed_counts(0);

    /// For a mask of the first `k` lanes (`2^k - 1`), `k` writes packed: `pack(k, k)`.
    static WRITES_BELOW: [u64; 256] = packed_counts(1);

    /// The packed words of `k` requests of which `k * writes` are writes, at the index of the
    /// mask of the first `k` lanes; the other entries are never read (0).
    const fn packed_counts(writes: u64) -> [u64; 256] {
        let mut table = [0; 256];
        let mut k = 0;
        while k < WINDOW_VALUES {
            table[(1 << k) - 1] = ((k as u64) << 32) | (k as u64 * writes);
            k += 1;
        }
        table
    }
}

#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
mod portable {
    //! The same search without vector instructions, for other processors (and, in the tests,
    //! the reference of the SSE2 one): three comparisons, each choosing the next lane to
    //! compare with, compiled to conditional moves rather than branches.

    use super::WINDOW_VALUES;

    /// The reads' lanes, then the writes' lanes.
    #[derive(Clone, Copy, Debug)]
    #[repr(C, align(32))]
    pub(super) struct Lanes {
        reads: [u16; WINDOW_VALUES],
        writes: [u16; WINDOW_VALUES],
    }

    impl Lanes {
        pub(super) fn new(reads: &[u16; WINDOW_VALUES], writes: &[u16; WINDOW_VALUES]) -> Lanes {
            Lanes {
                reads: *reads,
                writes: *writes,
            }
        }

        /// The values of the top 16 bits of each half of `word` (the reads' from its high half,
        /// the writes' from its low half), each the number of its table's lanes below them (at
        /// most `WINDOW_VALUES - 1`), packed as [`super::super::pack`] packs reads and writes;
        /// or `None` when a lane equals them or all its lanes are below them.
        #[inline(always)]
        pub(super) fn packed(&self, word: u64) -> Option<u64> {
            let (reads, reads_open) = search(&self.reads, (word >> 48) as u16);
            let (writes, writes_open) = search(&self.writes, (word >> 16) as u16);
            let (reads, writes) = (u64::from(reads), u64::from(writes));
            (reads_open & writes_open).then_some(super::super::pack(reads + writes, writes))
        }
    }

    /// The number `k` of `lanes` below `top` (they increase) when it is below 8 and no lane
    /// equals `top`, with `true`; otherwise `false`.
    #[inline(always)]
    fn search(lanes: &[u16; WINDOW_VALUES], top: u16) -> (u32, bool) {
        // After the three halvings, `index` is `min(k, 7)`: the first lane not below `top`,
        // or the last lane.
        let mut index = 4 * usize::from(top > lanes[3]);
        index += 2 * usize::from(top > lanes[index + 1]);
        index += usize::from(top > lanes[index]);
        // The value is `index` unless the lane there is below `top` too (k = 8) or equals it.
        (index as u32, top < lanes[index])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::tests::answered_as_the_guide;
    use proptest::prelude::*;

    /// Increasing lanes with repeats and `u16::MAX` padding, as tables make them.
    fn lanes() -> impl Strategy<Value = [u16; WINDOW_VALUES]> {
        proptest::collection::vec(any::<u16>(), WINDOW_VALUES).prop_map(|mut v| {
            v.sort_unstable();
            let mut lanes = [0; WINDOW_VALUES];
            lanes.copy_from_slice(&v);
            lanes
        })
    }

    /// The value a window must give: the number of lanes below the half, when below 8 and no
    /// lane equals it.
    fn expected(lanes: &[u16; WINDOW_VALUES], half: u16) -> Option<u32> {
        let below = lanes.iter().filter(|&&l| l < half).count() as u32;
        (below < WINDOW_VALUES as u32 && !lanes.contains(&half)).then_some(below)
    }

    proptest! {
        /// Both searches give the count of lanes below, or nothing on a tie or past the
        /// window; halves are drawn near the lanes so that ties and edges come up.
        #[test]
        fn the_searches_count_the_lanes_below(
            reads in lanes(),
            writes in lanes(),
            picks in (0_usize..WINDOW_VALUES, -1_i64..=1, 0_usize..WINDOW_VALUES, -1_i64..=1),
            raw in any::<(u16, u16)>(),
            rest in any::<u64>(),
            near in any::<bool>(),
        ) {
            let (halves_r, halves_w) = if near {
                let at = |lanes: &[u16; WINDOW_VALUES], i: usize, d: i64| {
                    (i64::from(lanes[i]) + d).clamp(0, i64::from(u16::MAX)) as u16
                };
                (at(&reads, picks.0, picks.1), at(&writes, picks.2, picks.3))
            } else {
                raw
            };
            let want = expected(&reads, halves_r).zip(expected(&writes, halves_w));
            // The top bits in a word whose other bits are random.
            let word = u64::from(halves_r) << 48
                | u64::from(halves_w) << 16
                | rest & 0x0000_FFFF_0000_FFFF;
            let want = want.map(|(r, w)| super::super::pack(u64::from(r + w), u64::from(w)));
            prop_assert_eq!(portable::Lanes::new(&reads, &writes).packed(word), want);
            prop_assert_eq!(lanes::Lanes::new(&reads, &writes).packed(word), want);
        }
    }

    /// A window draws what the guide draws, for means in and past the windows.
    #[test]
    fn windows_draw_as_the_guide() {
        for mean in [0.0, 0.05, 0.43, 1.0, 3.7, 6.0, 12.0, 40.0] {
            let mut tables = PoissonTables::default();
            tables.push(mean);
            tables.push(mean * 0.3);
            let pair = WindowPair {
                lanes: lanes::Lanes::new(&window_of(&tables, 0).0, &window_of(&tables, 1).0),
            };
            let answered = answered_as_the_guide(&tables, |word| pair.sample_packed(word));
            // Small means almost always fall in the window, a mean of 40 never does.
            if mean <= 1.0 {
                assert!(answered > 19_900, "mean {mean}: {answered}");
            }
            if mean >= 40.0 {
                assert_eq!(answered, 0);
            }
        }
    }

    /// Rates whose draws would mostly go past the windows get none.
    #[test]
    fn large_means_get_no_windows() {
        let mut tables = PoissonTables::default();
        tables.push(1.0);
        tables.push(0.3);
        assert_eq!(WindowPair::of(&tables, &[10]).len(), 1);
        tables.push(60.0);
        tables.push(20.0);
        assert!(WindowPair::of(&tables, &[10, 10]).is_empty());
        // One token of many past its window is a share the windows still serve.
        assert_eq!(WindowPair::of(&tables, &[1000, 1]).len(), 2);
    }
}
