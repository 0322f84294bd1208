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
    for j in order_by_fraction(&raw, Order::LargestFirst)
        .into_iter()
        .take(remaining)
    {
        counts[j] += 1;
    }
    counts
}

/// Round half to even, then fix the total (A1, A2): `n_j = round(raw_j)`; if the counts sum
/// to less than `total`, add one to the largest fractional parts of `raw`; if to more, remove
/// one from the smallest. Fractional part means `raw_j - floor(raw_j)`.
pub fn round_half_even_fixed_total(total: usize, raw: &[f64]) -> Vec<i64> {
    let mut counts: Vec<i64> = raw.iter().map(|x| x.round_ties_even() as i64).collect();
    let sum: i64 = counts.iter().sum();
    let diff = total as i64 - sum;
    if diff > 0 {
        for j in order_by_fraction(raw, Order::LargestFirst)
            .into_iter()
            .take(diff as usize)
        {
            counts[j] += 1;
        }
    } else if diff < 0 {
        for j in order_by_fraction(raw, Order::SmallestFirst)
            .into_iter()
            .take((-diff) as usize)
        {
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

/// Indices ordered by fractional part; a stable sort keeps ties in increasing index order.
fn order_by_fraction(raw: &[f64], order: Order) -> Vec<usize> {
    let frac: Vec<f64> = raw.iter().map(|x| x - x.floor()).collect();
    let mut idx: Vec<usize> = (0..raw.len()).collect();
    idx.sort_by(|&a, &b| {
        let ord = frac[a].total_cmp(&frac[b]);
        match order {
            Order::LargestFirst => ord.reverse(),
            Order::SmallestFirst => ord,
        }
    });
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn rounds_half_to_even_and_removes_from_smallest_fraction() {
        assert_eq!(round_half_even_fixed_total(4, &[2.5, 1.5]), vec![2, 2]);
        assert_eq!(
            round_half_even_fixed_total(3, &[1.2, 1.6, 0.7]),
            vec![0, 2, 1]
        );
    }
}
