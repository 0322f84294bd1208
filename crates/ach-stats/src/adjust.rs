//! Multiple-comparison adjustments of p-values, with R's `p.adjust` semantics.

use crate::StatsError;

fn check_probabilities(p: &[f64]) -> Result<(), StatsError> {
    match p.iter().position(|value| !(0.0..=1.0).contains(value)) {
        Some(index) => Err(StatsError::NotAProbability {
            index,
            value: p[index],
        }),
        None => Ok(()),
    }
}

/// Bonferroni adjustment: `min(1, m p_i)` for `m` p-values (R `p.adjust(p, "bonferroni")`).
///
/// # Errors
///
/// [`StatsError::NotAProbability`] when a value is NaN or outside [0, 1].
pub fn bonferroni(p: &[f64]) -> Result<Vec<f64>, StatsError> {
    check_probabilities(p)?;
    let m = p.len() as f64;
    Ok(p.iter().map(|value| (m * value).min(1.0)).collect())
}

/// Holm's step-down adjustment (R `p.adjust(p, "holm")`), in the order of the input.
///
/// With the p-values sorted increasingly, `p_(1) <= ... <= p_(m)`, the adjusted value of the
/// `i`-th smallest is `min(1, max_{k <= i} (m - k + 1) p_(k))`.
///
/// # Errors
///
/// [`StatsError::NotAProbability`] when a value is NaN or outside [0, 1].
///
/// # Example
///
/// ```
/// let adjusted = ach_stats::holm(&[0.01, 0.04, 0.03, 0.005])?;
/// assert_eq!(adjusted, vec![0.03, 0.06, 0.06, 0.02]);
/// # Ok::<(), ach_stats::StatsError>(())
/// ```
pub fn holm(p: &[f64]) -> Result<Vec<f64>, StatsError> {
    check_probabilities(p)?;
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    // A stable sort, as R's `order`.
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut adjusted = vec![0.0; m];
    let mut running_max = 0.0_f64;
    for (position, &index) in order.iter().enumerate() {
        let scaled = (m - position) as f64 * p[index];
        running_max = running_max.max(scaled);
        adjusted[index] = running_max.min(1.0);
    }
    Ok(adjusted)
}
