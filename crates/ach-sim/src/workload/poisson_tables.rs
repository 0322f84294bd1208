//! The Poisson tables of a workload: the fixed-point thresholds of each distribution, its
//! guide, and the draw by guided inversion (see the documentation of the parent module,
//! [`super`], for the method and its exactness).

use rand::RngCore;
use rand_distr::{Distribution, Poisson};
use rand_pcg::Pcg64Mcg;

use super::MAX_TABLE_MEAN;

/// Tables hold fewer values than this, so that a guide slot fits in 15 bits (a table for the
/// mean [`MAX_TABLE_MEAN`] has about 19 000 values).
const MAX_TABLE_VALUES: usize = 1 << 15;

/// Below this mean the table starts at 0 with `p_0 = exp(-mu)`; from it on, at the mode.
const SMALL_MEAN: f64 = 30.0;

/// The walk away from the mode stops once the mass left beyond it is below this (`2^-64`).
const TRUNCATED_TAIL_MASS: f64 = 1.0 / 18_446_744_073_709_551_616.0;

/// `2^64` as a float, the scale of the fixed-point thresholds.
pub(super) const FIXED_POINT_SCALE: f64 = 18_446_744_073_709_551_616.0;

/// The guide table has at least `2^GUIDE_EXTRA_BITS` slots per table value.
const GUIDE_EXTRA_BITS: u32 = 1;

/// The guide table of one distribution never has more than `2^MAX_GUIDE_BITS` slots.
const MAX_GUIDE_BITS: u32 = 20;

/// Marks a guide slot that contains a threshold: the lower bits of the uniform decide.
pub(super) const IMPURE_SLOT: u16 = 1 << 15;

/// Where one distribution lives in the shared buffers of a [`PoissonTables`].
#[derive(Clone, Copy, Debug)]
pub(super) struct TableHeader {
    /// The smallest value the table can return, `k_lo`.
    pub(super) smallest_value: u64,
    /// Index of the first guide slot in `PoissonTables::guide`, or of the fallback sampler in
    /// `PoissonTables::large_mean_samplers` when `guide_bits` is 0.
    pub(super) guide_offset: u32,
    /// `b`: the guide has `2^b` slots (1 to [`MAX_GUIDE_BITS`]); 0 marks a fallback sampler.
    pub(super) guide_bits: u32,
    /// Index of the first threshold in `PoissonTables::thresholds`.
    pub(super) threshold_offset: u32,
    /// Number of values in the table (at least 1).
    pub(super) value_count: u32,
}

/// A set of Poisson distributions, each sampled by guided inversion of a fixed-point table
/// (see the module documentation). All tables share three buffers, so rebuilding the set
/// reuses their memory.
#[derive(Clone, Debug, Default)]
pub(super) struct PoissonTables {
    pub(super) headers: Vec<TableHeader>,
    /// Guide slots: a value offset for a pure slot, `IMPURE_SLOT | first candidate` otherwise.
    pub(super) guide: Vec<u16>,
    /// Fixed-point cumulative probabilities; the last one of each table is `u64::MAX` and is
    /// never compared.
    pub(super) thresholds: Vec<u64>,
    /// Exact rejection samplers for means above [`MAX_TABLE_MEAN`].
    large_mean_samplers: Vec<Poisson<f64>>,
    /// Probabilities below the mode, from the mode down (reused between builds).
    lower_scratch: Vec<f64>,
    /// Probabilities from the mode up (reused between builds).
    upper_scratch: Vec<f64>,
}

impl PoissonTables {
    /// Removes every table, keeping the memory.
    pub(super) fn clear(&mut self) {
        self.headers.clear();
        self.guide.clear();
        self.thresholds.clear();
        self.large_mean_samplers.clear();
    }

    /// Number of tables.
    pub(super) fn len(&self) -> usize {
        self.headers.len()
    }

    /// Appends the table of `Poisson(mean)`. A mean that is NaN or not positive gives the
    /// constant 0; a mean above `Poisson::MAX_LAMBDA` (about `1.8e19`, infinity included) is
    /// clamped to it.
    pub(super) fn push(&mut self, mean: f64) {
        if mean.is_nan() || mean <= 0.0 {
            self.push_probabilities(0, &[1.0]);
            return;
        }
        if mean > MAX_TABLE_MEAN {
            self.push_large_mean_sampler(mean);
            return;
        }

        let mut lower = std::mem::take(&mut self.lower_scratch);
        let mut upper = std::mem::take(&mut self.upper_scratch);
        lower.clear();
        upper.clear();
        let inverse_mean = 1.0 / mean;

        // The walk starts at the mode, or at 0 for small means (p_0 = exp(-mu) needs no
        // ln Gamma and the walk down is empty).
        let (mode, mode_probability) = if mean < SMALL_MEAN {
            (0.0, (-mean).exp())
        } else {
            let mode = mean.floor();
            let log_probability = mode * mean.ln() - mean - libm::lgamma(mode + 1.0);
            (mode, log_probability.exp())
        };

        // Downwards: p_(k-1) = p_k * k / mu. The ratio r = k / mu shrinks as k falls, so the
        // mass below k is at most p_k * r / (1 - r); the test below is that bound against the
        // truncation level, multiplied out by (1 - r).
        let mut value = mode;
        let mut probability = mode_probability;
        while value > 0.0 {
            let ratio = value * inverse_mean;
            if probability * ratio < TRUNCATED_TAIL_MASS * (1.0 - ratio) {
                break;
            }
            probability *= ratio;
            value -= 1.0;
            lower.push(probability);
        }
        let smallest_value = value as u64;

        // Upwards: p_(k+1) = p_k * mu / (k + 1); the same bound with r = mu / (k + 1), which
        // shrinks as k grows (it is below 1 only past the mean: the walk goes on until then).
        upper.push(mode_probability);
        let mut value = mode;
        let mut probability = mode_probability;
        loop {
            let ratio = mean / (value + 1.0);
            if ratio < 1.0 && probability * ratio < TRUNCATED_TAIL_MASS * (1.0 - ratio) {
                break;
            }
            probability *= ratio;
            value += 1.0;
            upper.push(probability);
        }

        if lower.len() + upper.len() < MAX_TABLE_VALUES {
            // The values in increasing order: the lower half reversed, then the upper half.
            lower.reverse();
            lower.extend_from_slice(&upper);
            self.push_probabilities(smallest_value, &lower);
        } else {
            self.push_large_mean_sampler(mean);
        }

        self.lower_scratch = lower;
        self.upper_scratch = upper;
    }

    /// Appends `rand_distr::Poisson(mean)` (mean clamped to `Poisson::MAX_LAMBDA`).
    fn push_large_mean_sampler(&mut self, mean: f64) {
        let clamped = mean.min(Poisson::<f64>::MAX_LAMBDA);
        let sampler = Poisson::new(clamped).expect("the mean is positive and finite");
        self.headers.push(TableHeader {
            smallest_value: 0,
            guide_offset: self.large_mean_samplers.len() as u32,
            guide_bits: 0,
            threshold_offset: 0,
            value_count: 0,
        });
        self.large_mean_samplers.push(sampler);
    }

    /// Appends a table for the values `smallest_value, smallest_value + 1, ...` with relative
    /// probabilities `weights` (non-negative, not all zero).
    fn push_probabilities(&mut self, smallest_value: u64, weights: &[f64]) {
        let value_count = weights.len();
        let total: f64 = weights.iter().sum();
        let threshold_offset = self.thresholds.len();
        // The widths are summed in fixed point from both ends towards the most likely value,
        // which takes the few units lost to rounding; every other value's width then carries
        // only the relative rounding of its own probability (a cumulative sum in floating point
        // would give the tail values an absolute error of about 1e-16).
        let scale = FIXED_POINT_SCALE / total;
        // `as` saturates, so a width rounded up to 2^64 gives `u64::MAX`.
        let width = |index: usize| (weights[index] * scale) as u64;
        let anchor = weights
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(index, _)| index);
        let mut cumulative = 0_u64;
        for index in 0..anchor {
            cumulative = cumulative.saturating_add(width(index));
            self.thresholds.push(cumulative);
        }
        let right_start = self.thresholds.len();
        self.thresholds
            .resize(threshold_offset + value_count, u64::MAX);
        let mut right_sum = 0_u64;
        for index in (anchor..value_count - 1).rev() {
            right_sum = right_sum.saturating_add(width(index + 1));
            // T_index = 2^64 - (w_(index+1) + ... + w_last), kept at or above T_(index-1).
            let threshold = if right_sum == 0 {
                u64::MAX
            } else {
                (u64::MAX - right_sum + 1).max(cumulative)
            };
            self.thresholds[right_start + (index - anchor)] = threshold;
        }
        let thresholds = &self.thresholds[threshold_offset..];

        // b = ceil(log2(value_count)) + GUIDE_EXTRA_BITS, between 1 and MAX_GUIDE_BITS.
        let length_bits = usize::BITS - (value_count - 1).leading_zeros();
        let guide_bits = (length_bits + GUIDE_EXTRA_BITS).clamp(1, MAX_GUIDE_BITS);
        let guide_offset = self.guide.len();
        push_guide(&mut self.guide, thresholds, guide_bits);

        self.headers.push(TableHeader {
            smallest_value,
            guide_offset: guide_offset as u32,
            guide_bits,
            threshold_offset: threshold_offset as u32,
            value_count: value_count as u32,
        });
    }

    /// Draws from table `table`, with `high_bits` as the top 32 bits of the 64-bit uniform
    /// `x`; draws the lower 32 bits from `rng` only if they matter.
    #[inline(always)]
    pub(super) fn sample(&self, table: usize, high_bits: u32, rng: &mut Pcg64Mcg) -> u64 {
        let header = self.headers[table];
        if header.guide_bits == 0 {
            return self.large_mean_samplers[header.guide_offset as usize].sample(rng) as u64;
        }
        let slot = (high_bits >> (32 - header.guide_bits)) as usize;
        let entry = self.guide[header.guide_offset as usize + slot];
        if entry & IMPURE_SLOT == 0 {
            return header.smallest_value + u64::from(entry);
        }
        self.sample_impure(table, entry, high_bits, rng)
    }

    /// The part of [`PoissonTables::sample`] for an impure guide slot `entry` of table
    /// `table` (a guide table, not a fallback sampler).
    #[inline]
    fn sample_impure(&self, table: usize, entry: u16, high_bits: u32, rng: &mut Pcg64Mcg) -> u64 {
        let header = self.headers[table];
        let thresholds =
            &self.thresholds[header.threshold_offset as usize..][..header.value_count as usize];
        let prefix = u64::from(high_bits);
        let index = match Self::search_impure(thresholds, entry, prefix) {
            Ok(index) => index,
            Err(index) => Self::resolve_tie(thresholds, index, prefix, rng),
        };
        header.smallest_value + index as u64
    }

    /// The search of an impure slot `entry` in the thresholds of its table with the top 32
    /// bits `prefix` of x: `Ok(index)` of the value, or `Err(index)` of the threshold whose top
    /// 32 bits equal `prefix` (a tie: the lower bits of x decide, from index on).
    ///
    /// If the top 32 bits of x exceed those of T_i, then x >= T_i; if they are below, x < T_i;
    /// only on a tie (with probability about 2^-32) do the lower bits decide.
    #[inline(always)]
    pub(super) fn search_impure(
        thresholds: &[u64],
        entry: u16,
        prefix: u64,
    ) -> Result<usize, usize> {
        let last = thresholds.len() - 1;
        let mut index = usize::from(entry & !IMPURE_SLOT);
        while index < last && prefix > thresholds[index] >> 32 {
            index += 1;
        }
        if index < last && prefix == thresholds[index] >> 32 {
            return Err(index);
        }
        Ok(index)
    }

    /// [`PoissonTables::sample_impure`] without its tie: the value offset of the slot from
    /// the table's smallest value, or `None` on a tie (which draws from the generator).
    #[inline(always)]
    pub(super) fn impure_offset_without_tie(
        &self,
        table: usize,
        entry: u16,
        high_bits: u32,
    ) -> Option<u64> {
        let header = self.headers[table];
        let thresholds =
            &self.thresholds[header.threshold_offset as usize..][..header.value_count as usize];
        Self::search_impure(thresholds, entry, u64::from(high_bits))
            .ok()
            .map(|index| index as u64)
    }

    /// The rare path of [`PoissonTables::sample`]: completes `x` with 32 fresh lower bits and
    /// goes on searching from `index`.
    #[cold]
    fn resolve_tie(thresholds: &[u64], mut index: usize, prefix: u64, rng: &mut Pcg64Mcg) -> usize {
        let uniform = (prefix << 32) | (rng.next_u64() >> 32);
        let last = thresholds.len() - 1;
        while index < last && uniform >= thresholds[index] {
            index += 1;
        }
        index
    }
}

/// Appends the `2^guide_bits` slots of the guide of `thresholds` to `guide`. Slot `s` covers
/// the uniforms `s w` to `(s + 1) w - 1` for the slot width `w = 2^(64 - guide_bits)`; its
/// candidate is the value of its first point, `min { c : c = last or T_c > s w }`, and it is
/// pure when its last point has that value too. So the slots of candidate `c` are those from
/// `ceil(T_(c-1) / w)` to `ceil(T_c / w) - 1` (to the end for the last value), all pure but the
/// one that holds `T_c` when `T_c` is not a multiple of `w`: filled a range at a time.
pub(super) fn push_guide(guide: &mut Vec<u16>, thresholds: &[u64], guide_bits: u32) {
    let slot_shift = 64 - guide_bits;
    let slots = 1_usize << guide_bits;
    let start = guide.len();
    guide.resize(start + slots, 0);
    let guide = &mut guide[start..];
    let last = thresholds.len() - 1;
    let mut first_slot = 0;
    for (candidate, &threshold) in thresholds.iter().enumerate() {
        if candidate == last {
            guide[first_slot..].fill(candidate as u16);
            break;
        }
        let pure_end = (threshold >> slot_shift) as usize;
        let end = threshold.div_ceil(1 << slot_shift) as usize;
        if first_slot < end {
            guide[first_slot..pure_end].fill(candidate as u16);
            if pure_end < end {
                guide[pure_end] = IMPURE_SLOT | candidate as u16;
            }
            first_slot = end;
        }
    }
}
