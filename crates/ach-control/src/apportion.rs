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
