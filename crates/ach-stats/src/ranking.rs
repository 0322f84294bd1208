//! Average ranks with tie groups, as `scipy.stats.rankdata(method="average")` and R's `rank`
//! compute them.

/// Mid-ranks of a sample, stored doubled so that they are exact integers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ranks {
    /// `doubled_ranks[i]` is twice the average rank of value `i` (ranks start at 1).
    pub doubled_ranks: Vec<u64>,
    /// The sizes of the tie groups in increasing order of value (groups of size 1 included).
    pub tie_group_sizes: Vec<u64>,
}

impl Ranks {
    /// Returns true when at least one tie group holds two or more values.
    pub fn has_ties(&self) -> bool {
        self.tie_group_sizes.iter().any(|&size| size > 1)
    }

    /// Returns the sum of `t^3 - t` over the tie groups, the tie term of the variance of the
    /// signed-rank statistic.
    pub fn tie_term(&self) -> f64 {
        self.tie_group_sizes
            .iter()
            .map(|&size| {
                let size = size as f64;
                size * size * size - size
            })
            .sum()
    }
}

/// Computes the average ranks of `values`, which must all be finite.
///
/// Equal values (exact `f64` equality) share the mean of the ranks they occupy.
pub(crate) fn average_ranks(values: &[f64]) -> Ranks {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut doubled_ranks = vec![0_u64; values.len()];
    let mut tie_group_sizes = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Positions start..end hold ranks start+1 ..= end; their doubled mean is start+1+end.
        let doubled_mean = (start + 1 + end) as u64;
        for &index in &order[start..end] {
            doubled_ranks[index] = doubled_mean;
        }
        tie_group_sizes.push((end - start) as u64);
        start = end;
    }
    Ranks {
        doubled_ranks,
        tie_group_sizes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_share_the_mean_rank() {
        let ranks = average_ranks(&[3.0, 2.0, 1.0, 2.0, 2.0, 2.0, 1.0]);
        assert_eq!(ranks.doubled_ranks, vec![14, 9, 3, 9, 9, 9, 3]);
        assert_eq!(ranks.tie_group_sizes, vec![2, 4, 1]);
        assert!(ranks.has_ties());
        assert_eq!(ranks.tie_term(), 6.0 + 60.0);
    }
}
