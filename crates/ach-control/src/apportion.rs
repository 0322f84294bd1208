//! Splitting `n` whole tokens among receivers in proportion to weights.
//!
//! Both rules hand out the remainder by fractional part, with ties going to the lower index,
//! as the spec requires of every ordering (section 5).

/// Floor and largest remainder (ACH phase 3): `n_j = floor(n * w_j)`, then one more token to
/// each of the receivers with the largest fractional parts until the counts sum to `n`.
///
/// `weights` must be non-negative and sum to 1 (up to rounding).
pub fn floor_largest_remainder(n: usize, weights: &[f64]) -> Vec<usize> {
    let raw: Vec<f64> = weights.iter().map(|w| n as f64 * w).collect();
    let mut counts: Vec<usize> = raw.iter().map(|x| x.floor() as usize).collect();
    let given: usize = counts.iter().sum();
    let remaining = n.saturating_sub(given);
    let fractions: Vec<f64> = raw.iter().map(|x| x - x.floor()).collect();
    for j in first_by(&fractions, Order::LargestFirst, remaining) {
        counts[j] += 1;
    }
    counts
}

/// Round half to even, then fix the total (A1, A2): `n_j = round(raw_j)`; if the counts sum
/// to less than `total`, add one to the receivers with the largest rounding residuals
/// `raw_j - n_j`; if to more, remove one from those with the smallest.
///
/// The residual, not `raw_j - floor(raw_j)`, is what the published simulation ranks by: the
/// recorded A2 traces tell the two apart (a count rounded up has a negative residual but a large
/// fractional part).
pub fn round_half_even_fixed_total(total: usize, raw: &[f64]) -> Vec<i64> {
    let mut residuals = Vec::with_capacity(raw.len());
    let mut counts = Vec::with_capacity(raw.len());
    for &x in raw {
        let rounded = x.round_ties_even();
        residuals.push(x - rounded);
        counts.push(rounded as i64);
    }
    let sum: i64 = counts.iter().sum();
    let diff = total as i64 - sum;
    if diff > 0 {
        for j in first_by(&residuals, Order::LargestFirst, diff as usize) {
            counts[j] += 1;
        }
    } else if diff < 0 {
        for j in first_by(&residuals, Order::SmallestFirst, (-diff) as usize) {
            counts[j] -= 1;
        }
    }
    counts
}

#[derive(Clone, Copy, PartialEq)]
enum Order {
    LargestFirst,
    SmallestFirst,
}

/// The first `k` indices ordered by key, ties in increasing index order (what a stable sort of
/// all indices, then taking `k`, gives). Only the `k` first are sorted: a selection finds them
/// in linear time, which matters when thousands of receivers get a handful of tokens.
fn first_by(keys: &[f64], order: Order, k: usize) -> Vec<usize> {
    let k = k.min(keys.len());
    if k == 0 {
        return Vec::new();
    }
    // Each key as an integer in the order of `f64::total_cmp` (the bits of a negative number's
    // magnitude flipped, as `total_cmp` does), reversed for the largest first, paired with its
    // index: a strict total order of plain integers, so the selection and the sort compare
    // without looking anything up, and the first k do not depend on how they are found.
    let mut ranked: Vec<(i64, usize)> = keys
        .iter()
        .enumerate()
        .map(|(index, key)| {
            let bits = key.to_bits() as i64;
            let total = bits ^ ((((bits >> 63) as u64) >> 1) as i64);
            match order {
                Order::LargestFirst => (!total, index),
                Order::SmallestFirst => (total, index),
            }
        })
        .collect();
    if k < ranked.len() {
        ranked.select_nth_unstable(k - 1);
        ranked.truncate(k);
    }
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, index)| index).collect()
}

/// [`round_half_even_fixed_total`] of many totals over one set of weights, `raw_j = total *
/// w_j`, as A2 splits each source's tokens over the receivers. A split looks only at the
/// receivers that can get a token, so splitting `n` tokens costs about `O(n log n)` rather than
/// a pass over every receiver (with hundreds of sources and receivers, those passes were a
/// fifth of a 1000-node run).
///
/// Why that is exact: `total * w` increases with `w`, so in the order of the weights (largest
/// first) the receivers that round to one or more (`raw > 0.5`) come first, at most `2 n` of
/// them. Every other receiver rounds to 0 with residual `raw` itself, so when the total is
/// fixed, the ones that can be given (or take back) a token are the first (or last) `k` of them
/// in that order, with any receiver of an equal `raw`; those and the first ones are ranked
/// exactly as [`round_half_even_fixed_total`] ranks them.
///
/// ```
/// use ach_control::apportion::RoundHalfEvenSplit;
/// let split = RoundHalfEvenSplit::new(&[0.5, 0.1, 0.4]);
/// // 3 tokens: shares 1.5, 0.3 and 1.2 round (half to even) to 2, 0 and 1.
/// assert_eq!(split.positive_counts(3), vec![(0, 2), (2, 1)]);
/// // 1 token: shares 0.5, 0.1 and 0.4 all round to 0; the largest residual gets it.
/// assert_eq!(split.positive_counts(1), vec![(0, 1)]);
/// ```
#[derive(Clone, Debug)]
pub struct RoundHalfEvenSplit {
    weights: Vec<f64>,
    /// The receivers by weight, largest first, ties by index.
    by_weight: Vec<usize>,
    /// False when a weight is negative or not finite: every split is then computed in full.
    sorted: bool,
}

impl RoundHalfEvenSplit {
    /// Splits over `weights`.
    pub fn new(weights: &[f64]) -> RoundHalfEvenSplit {
        let sorted = weights.iter().all(|w| w.is_finite() && *w >= 0.0);
        let by_weight = if sorted {
            first_by(weights, Order::LargestFirst, weights.len())
        } else {
            (0..weights.len()).collect()
        };
        RoundHalfEvenSplit {
            weights: weights.to_vec(),
            by_weight,
            sorted,
        }
    }

    /// The receivers that get tokens when `total` tokens are split, with how many, in increasing
    /// receiver order: exactly the positive counts of [`round_half_even_fixed_total`] of
    /// `total` and `raw_j = total as f64 * weights[j]`.
    pub fn positive_counts(&self, total: usize) -> Vec<(usize, u64)> {
        let scale = total as f64;
        let raw = |j: usize| scale * self.weights[j];
        let mut counts: Vec<(usize, i64)> = if self.sorted {
            self.sparse_counts(total, raw)
        } else {
            let raw: Vec<f64> = (0..self.weights.len()).map(raw).collect();
            round_half_even_fixed_total(total, &raw)
                .into_iter()
                .enumerate()
                .collect()
        };
        counts.retain(|&(_, count)| count > 0);
        counts.sort_unstable_by_key(|&(j, _)| j);
        counts.into_iter().map(|(j, c)| (j, c as u64)).collect()
    }

    /// The counts of the receivers that round to one or more, and of those the fixing of the
    /// total changes (in no particular order); every other count is 0.
    fn sparse_counts(&self, total: usize, raw: impl Fn(usize) -> f64) -> Vec<(usize, i64)> {
        let rounded_up = self.by_weight.iter().take_while(|&&j| raw(j) > 0.5).count();
        let (first, rest) = self.by_weight.split_at(rounded_up);
        let mut counts: Vec<(usize, i64)> = first
            .iter()
            .map(|&j| (j, raw(j).round_ties_even() as i64))
            .collect();
        let diff = total as i64 - counts.iter().map(|&(_, c)| c).sum::<i64>();
        if diff == 0 {
            return counts;
        }
        let (order, step) = if diff > 0 {
            (Order::LargestFirst, 1)
        } else {
            (Order::SmallestFirst, -1)
        };
        let k = diff.unsigned_abs() as usize;
        // The receivers that round to 0 and may be chosen: the first k (largest raw) or the
        // last k (smallest), widened to every receiver of the same raw as the last one taken.
        let m = k.min(rest.len());
        let candidates = match order {
            Order::LargestFirst => {
                let mut end = m;
                while end > 0 && end < rest.len() && raw(rest[end]) == raw(rest[end - 1]) {
                    end += 1;
                }
                &rest[..end]
            }
            Order::SmallestFirst => {
                let mut start = rest.len() - m;
                while start > 0 && start < rest.len() && raw(rest[start - 1]) == raw(rest[start]) {
                    start -= 1;
                }
                &rest[start..]
            }
        };
        if counts.len() + candidates.len() <= k {
            // Everyone who may be chosen is chosen (with hundreds of receivers and a few
            // tokens, every receiver rounds to 0 and the candidates are the first k).
            for (_, count) in &mut counts {
                *count += step;
            }
            counts.extend(candidates.iter().map(|&j| (j, step)));
            return counts;
        }
        // Everyone who may be chosen, in receiver order (so that `first_by` breaks ties by
        // receiver): its residual and where its count is kept, if it has one yet.
        let mut pool: Vec<(usize, f64, Option<usize>)> = counts
            .iter()
            .enumerate()
            .map(|(at, &(j, count))| (j, raw(j) - count as f64, Some(at)))
            .chain(candidates.iter().map(|&j| (j, raw(j), None)))
            .collect();
        pool.sort_unstable_by_key(|&(j, _, _)| j);
        let residuals: Vec<f64> = pool.iter().map(|&(_, residual, _)| residual).collect();
        for chosen in first_by(&residuals, order, k) {
            match pool[chosen] {
                (_, _, Some(at)) => counts[at].1 += step,
                (j, _, None) => counts.push((j, step)),
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_first_k_are_those_of_a_stable_sort(
            keys in proptest::collection::vec(-3i32..3, 0..40),
            k in 0usize..45,
            largest in proptest::bool::ANY,
        ) {
            let keys: Vec<f64> = keys.into_iter().map(|x| f64::from(x) * 0.25).collect();
            let order = if largest { Order::LargestFirst } else { Order::SmallestFirst };
            let mut expected: Vec<usize> = (0..keys.len()).collect();
            expected.sort_by(|&a, &b| {
                let ord = keys[a].total_cmp(&keys[b]);
                if largest { ord.reverse() } else { ord }
            });
            expected.truncate(k);
            proptest::prop_assert_eq!(first_by(&keys, order, k), expected);
        }
    }

    proptest::proptest! {
        #[test]
        fn many_first_k_are_those_of_a_stable_sort_too(
            keys in proptest::collection::vec(-3i32..3, 30..120),
            k in 20usize..125,
        ) {
            // Long key lists, with k below and above their length.
            let keys: Vec<f64> = keys.into_iter().map(|x| f64::from(x) * 0.25).collect();
            let mut expected: Vec<usize> = (0..keys.len()).collect();
            expected.sort_by(|&a, &b| keys[b].total_cmp(&keys[a]));
            expected.truncate(k);
            proptest::prop_assert_eq!(first_by(&keys, Order::LargestFirst, k), expected);
        }
    }

    proptest::proptest! {
        /// A split of any total over weights with ties, zeros and tiny values gives the
        /// positive counts of rounding every receiver.
        #[test]
        fn a_split_counts_as_rounding_every_receiver(
            picks in proptest::collection::vec(0usize..8, 0..60),
            total in 0usize..80,
            normalise in proptest::bool::ANY,
        ) {
            // 0.1 and the next double up: a total times either is often the same double, a tie
            // of two different weights.
            let values = [0.0, 1.0, 2.0, 0.1, 0.5, 1e-9, f64::from_bits(0.1_f64.to_bits() + 1), 1.0 / 3.0];
            let mut weights: Vec<f64> = picks.iter().map(|&p| values[p]).collect();
            let sum: f64 = weights.iter().sum();
            if normalise && sum > 0.0 {
                weights.iter_mut().for_each(|w| *w /= sum);
            }
            let raw: Vec<f64> = weights.iter().map(|w| total as f64 * w).collect();
            let expected: Vec<(usize, u64)> = round_half_even_fixed_total(total, &raw)
                .into_iter()
                .enumerate()
                .filter(|&(_, c)| c > 0)
                .map(|(j, c)| (j, c as u64))
                .collect();
            proptest::prop_assert_eq!(RoundHalfEvenSplit::new(&weights).positive_counts(total), expected);
        }
    }

    /// Many receivers and few tokens: every share rounds to 0, and the tokens go one each to
    /// the receivers of the largest weights (ties: lower receiver first), as rounding every
    /// receiver gives.
    #[test]
    fn a_split_of_few_tokens_over_many_receivers_gives_one_each_to_the_largest() {
        let mut weights = vec![1.0; 300];
        weights[250] = 3.0;
        weights[7] = 2.0;
        let sum: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= sum);
        let split = RoundHalfEvenSplit::new(&weights);
        assert_eq!(
            split.positive_counts(4),
            vec![(0, 1), (1, 1), (7, 1), (250, 1)]
        );
        let raw: Vec<f64> = weights.iter().map(|w| 4.0 * w).collect();
        let rounded = round_half_even_fixed_total(4, &raw);
        assert_eq!(rounded.iter().sum::<i64>(), 4);
        assert_eq!(
            (rounded[0], rounded[1], rounded[2], rounded[7], rounded[250]),
            (1, 1, 0, 1, 1)
        );
    }

    /// Two different weights whose shares of 3 tokens are the same double: the lower receiver
    /// gets the token left to hand out, as a stable ranking of all does, though the other one
    /// comes first by weight.
    #[test]
    fn a_split_breaks_ties_of_equal_shares_of_different_weights_by_receiver() {
        let above = f64::from_bits(0.1_f64.to_bits() + 1);
        assert_eq!(3.0 * 0.1, 3.0 * above);
        // Shares 0.3, 0.3 and 1.5 (rounded to 2): one token short, for receiver 0.
        let split = RoundHalfEvenSplit::new(&[0.1, above, 0.5]);
        assert_eq!(split.positive_counts(3), vec![(0, 1), (2, 2)]);
    }

    #[test]
    fn a_split_over_unsound_weights_rounds_every_receiver() {
        let weights = [0.5, f64::NAN, -0.25, 0.75];
        let raw: Vec<f64> = weights.iter().map(|w| 3.0 * w).collect();
        let dense = round_half_even_fixed_total(3, &raw);
        let expected: Vec<(usize, u64)> = dense
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(j, &c)| (j, c as u64))
            .collect();
        assert_eq!(
            RoundHalfEvenSplit::new(&weights).positive_counts(3),
            expected
        );
    }

    #[test]
    fn floor_then_largest_remainder_with_ties_to_lower_index() {
        assert_eq!(
            floor_largest_remainder(5, &[0.5, 0.25, 0.25]),
            vec![3, 1, 1]
        );
        // 4 * 1/3 = 1.333 each: one extra, to index 0.
        let third = 1.0 / 3.0;
        assert_eq!(
            floor_largest_remainder(4, &[third, third, third]),
            vec![2, 1, 1]
        );
        assert_eq!(floor_largest_remainder(0, &[0.5, 0.5]), vec![0, 0]);
    }

    #[test]
    fn a1_initial_cluster_example_from_the_spec() {
        // 168 x 3, 92 x 4, 42 x 3 = 998; the two extra tokens go to nodes 3 and 4.
        let caps = [1.0, 1.0, 1.0, 0.55, 0.55, 0.55, 0.55, 0.25, 0.25, 0.25];
        let sum: f64 = caps.iter().sum();
        let raw: Vec<f64> = caps.iter().map(|c| 1000.0 * c / sum).collect();
        assert_eq!(
            round_half_even_fixed_total(1000, &raw),
            vec![168, 168, 168, 93, 93, 92, 92, 42, 42, 42]
        );
    }

    #[test]
    fn rounds_half_to_even_and_fixes_the_total_by_residual() {
        assert_eq!(round_half_even_fixed_total(4, &[2.5, 1.5]), vec![2, 2]);
        // Rounded [1, 2, 1] is one too many; residuals [0.2, -0.4, -0.3]: index 1 gives one.
        assert_eq!(
            round_half_even_fixed_total(3, &[1.2, 1.6, 0.7]),
            vec![1, 1, 1]
        );
        // Rounded [1, 1, 0, 0] is one short; residuals [0.07, -0.1, 0.26, 0.33]: index 3 gets it
        // (ranking by `raw - floor(raw)` would pick index 1, as the A2 traces rule out).
        assert_eq!(
            round_half_even_fixed_total(3, &[1.07, 0.9, 0.26, 0.33]),
            vec![1, 1, 0, 1]
        );
    }
}
