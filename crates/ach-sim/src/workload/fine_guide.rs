//! The fine guide of a small-mean table pair: a token's reads and writes read off two bytes.
//!
//! A table's guide (see the module documentation of the workload) has about two slots per
//! value, so at the paper's rates one slot in ten holds a threshold, and the window that
//! serves such rates first compares eight thresholds per draw. A fine guide splits `[0, 2^64)`
//! into [`SLOTS`] equal slots per table, a byte each: a slot whose whole range lies between two
//! consecutive thresholds holds its value, any other slot (one that holds a threshold, or
//! whose value is [`MISS`] or more, or every slot of a table that does not start at 0) holds
//! [`MISS`]. A token's two draws are then two byte reads, at the top [`SLOT_BITS`] bits of each
//! half of its random word, and a miss (1.8 % of the tokens at C1's rate) is drawn by the
//! window, then by the guide.
//!
//! A pair takes 1 KiB, so a rate's fine guides stay in the processor's second-level cache up
//! to [`MAX_PAIRS`] pairs (C1 has about 180; a Zipf popularity gives every token a pair of its
//! own). Past that the window alone is faster, and a rate gets no fine guides. Nor does a rate
//! that changes at every step (a periodic load): its steps would each read another rate's
//! fine guides, out of the cache, so a rate gets them at its second step in a row. A fine guide
//! draws exactly the value the guide draws, and whether a rate has fine guides changes the
//! time of a step, never its values.

use super::PoissonTables;

/// A slot is chosen by this many top bits of a word's half.
const SLOT_BITS: u32 = 9;

/// Slots per table.
const SLOTS: usize = 1 << SLOT_BITS;

/// A slot whose value the fine guide does not give; the values it gives are below it.
const MISS: u8 = 0x80;

/// Most table pairs of a rate that get fine guides (their 1 KiB each fit in the second-level
/// cache beside the rest of a run: at 1000 pairs a draw was still faster than with the window
/// alone, at 1000 pairs of 2 KiB it was slower).
pub(super) const MAX_PAIRS: usize = 1024;

/// Most table pairs with fine guides in a workload's cache of rates (16 MiB): a periodic load
/// keeps the tables of every rate of its period.
pub(super) const MAX_CACHED_PAIRS: usize = 16 * MAX_PAIRS;

/// The slots of the read table and of the write table of one probability.
#[derive(Clone, Debug)]
pub(super) struct FineGuidePair {
    /// The read table's slots, then the write table's.
    slots: [u8; 2 * SLOTS],
}

impl FineGuidePair {
    /// The fine guides of the table pairs of `tables` (reads at `2 i`, writes at `2 i + 1`,
    /// every table a guide table): one per pair.
    pub(super) fn of(tables: &PoissonTables) -> Vec<FineGuidePair> {
        (0..tables.len() / 2)
            .map(|pair| {
                let mut slots = [MISS; 2 * SLOTS];
                let (reads, writes) = slots.split_at_mut(SLOTS);
                fill_slots(tables, 2 * pair, reads);
                fill_slots(tables, 2 * pair + 1, writes);
                FineGuidePair { slots }
            })
            .collect()
    }

    /// The probability that a draw from this pair misses: either of its slots is a miss.
    pub(super) fn miss_probability(&self) -> f64 {
        let (reads, writes) = self.slots.split_at(SLOTS);
        let hit =
            |slots: &[u8]| slots.iter().filter(|&&slot| slot != MISS).count() as f64 / SLOTS as f64;
        1.0 - hit(reads) * hit(writes)
    }

    /// The reads and writes drawn with `word` (reads from its high half, writes from its low
    /// half), packed as [`super::pack`] packs them, or `None` when either slot is a miss.
    #[inline(always)]
    pub(super) fn sample_packed(&self, word: u64) -> Option<u64> {
        let reads = self.slots[(word >> (64 - SLOT_BITS)) as usize];
        let writes = self.slots[SLOTS + ((word >> (32 - SLOT_BITS)) as usize & (SLOTS - 1))];
        if (reads | writes) & MISS != 0 {
            return None;
        }
        let (reads, writes) = (u64::from(reads), u64::from(writes));
        Some(((reads + writes) << 32) | writes)
    }
}

/// Fills `slots` (all [`MISS`]) with the values of table `table`: value `v` is drawn for the
/// uniforms `T_(v-1) <= x < T_v` (from 0 for the first value, to `2^64` for the last), and the
/// slots wholly inside that range are the slots `ceil(T_(v-1) / w)` to `floor(T_v / w) - 1`
/// for the slot width `w = 2^(64 - SLOT_BITS)`.
fn fill_slots(tables: &PoissonTables, table: usize, slots: &mut [u8]) {
    let header = tables.headers[table];
    if header.smallest_value != 0 {
        return;
    }
    let thresholds =
        &tables.thresholds[header.threshold_offset as usize..][..header.value_count as usize];
    let last = thresholds.len() - 1;
    let width_bits = 64 - SLOT_BITS;
    let mut range_start = 0_u64;
    for (value, &threshold) in thresholds.iter().enumerate().take(usize::from(MISS)) {
        let first = range_start.div_ceil(1 << width_bits) as usize;
        // The last threshold stands for 2^64 and is never compared.
        let end = if value == last {
            slots.len()
        } else {
            (threshold >> width_bits) as usize
        };
        if first < end {
            slots[first..end].fill(value as u8);
        }
        range_start = threshold;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::tests::answered_as_the_guide;
    use proptest::prelude::*;

    /// The value the guide draws from `thresholds` for the uniform `x`.
    fn inverse(thresholds: &[u64], x: u64) -> usize {
        let last = thresholds.len() - 1;
        thresholds[..last]
            .iter()
            .position(|&threshold| x < threshold)
            .unwrap_or(last)
    }

    /// The share of `slots` that are misses.
    fn miss_share(slots: &[u8]) -> f64 {
        slots.iter().filter(|&&slot| slot == MISS).count() as f64 / slots.len() as f64
    }

    proptest! {
        /// A slot holds a value exactly when the guide draws that value at both ends of the
        /// slot (so at every point of it), the value is below MISS and the table starts at 0.
        #[test]
        fn a_slot_holds_the_value_of_its_whole_range(
            mean in prop_oneof![0.0..3.0, 0.0..200.0, Just(0.0), Just(1e-9)],
            write_mean in 0.0..2.0_f64,
        ) {
            let mut tables = PoissonTables::default();
            tables.push(mean);
            tables.push(write_mean);
            let pair = &FineGuidePair::of(&tables)[0];
            for (table, slots) in [(0, &pair.slots[..SLOTS]), (1, &pair.slots[SLOTS..])] {
                let header = tables.headers[table];
                let thresholds = &tables.thresholds[header.threshold_offset as usize..]
                    [..header.value_count as usize];
                for (slot, &entry) in slots.iter().enumerate() {
                    let start = (slot as u64) << (64 - SLOT_BITS);
                    let end = start | ((1 << (64 - SLOT_BITS)) - 1);
                    let value = inverse(thresholds, start);
                    let whole = value == inverse(thresholds, end)
                        && value < usize::from(MISS)
                        && header.smallest_value == 0;
                    let expected = if whole { value as u8 } else { MISS };
                    prop_assert_eq!(entry, expected, "table {} slot {}", table, slot);
                }
            }
            let (reads, writes) = pair.slots.split_at(SLOTS);
            let expected_miss = 1.0 - (1.0 - miss_share(reads)) * (1.0 - miss_share(writes));
            prop_assert!((pair.miss_probability() - expected_miss).abs() < 1e-15);
        }
    }

    /// A fine guide draws what the guide draws, for means in and past its slots; small means
    /// almost never miss.
    #[test]
    fn fine_guides_draw_as_the_guide() {
        for mean in [0.0, 0.05, 0.43, 1.0, 3.7, 6.0, 12.0, 40.0, 300.0] {
            let mut tables = PoissonTables::default();
            tables.push(mean);
            tables.push(mean * 0.3);
            let pair = &FineGuidePair::of(&tables)[0];
            let answered = answered_as_the_guide(&tables, |word| pair.sample_packed(word));
            if mean <= 0.05 {
                assert!(answered > 19_800, "mean {mean}: {answered}");
            }
            if mean >= 300.0 {
                // The table starts at the mode, not at 0.
                assert_eq!(answered, 0);
            }
        }
    }
}
