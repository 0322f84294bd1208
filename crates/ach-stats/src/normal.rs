//! The standard normal distribution and the Student t quantile, both from `statrs`.

use statrs::distribution::{Continuous, ContinuousCDF, StudentsT};

use crate::StatsError;

/// `Phi(z)`, the standard normal CDF, as `erfc(-z / sqrt 2) / 2` (scipy's `ndtr`).
///
/// `erfc` is `libm`'s port of the musl/FreeBSD implementation, accurate to about one unit in
/// the last place; `statrs`'s `erfc` is off by up to a few `1e-11` near `|x| = 0.7`, which is
/// visible in p-values compared with scipy to `1e-12`.
pub(crate) fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

/// `1 - Phi(z)`, computed as `Phi(-z)` so that upper tails keep their relative accuracy.
pub(crate) fn normal_sf(z: f64) -> f64 {
    normal_cdf(-z)
}

/// The two-sided critical value `-Phi^-1((1 - level) / 2)` of the standard normal.
pub(crate) fn normal_critical_value(level: f64) -> f64 {
    use statrs::distribution::Normal;
    let standard = Normal::standard();
    -standard.inverse_cdf((1.0 - level) / 2.0)
}

/// The two-sided critical value `t_{(1 + level) / 2, df}` of Student's t distribution.
///
/// The quantile comes from `statrs` (`StudentsT::inverse_cdf`, an inverse regularised
/// incomplete beta function), whose result can be off by a few `1e-13`; one Newton step on
/// `statrs`'s own CDF and density brings it to within about `1e-14` of scipy's `t.ppf`.
pub(crate) fn student_t_critical_value(
    level: f64,
    degrees_of_freedom: f64,
) -> Result<f64, StatsError> {
    let distribution = StudentsT::new(0.0, 1.0, degrees_of_freedom).map_err(|error| {
        StatsError::InvalidOption(format!(
            "Student t with {degrees_of_freedom} degrees of freedom: {error}"
        ))
    })?;
    let probability = 1.0 - (1.0 - level) / 2.0;
    let first = distribution.inverse_cdf(probability);
    let density = distribution.pdf(first);
    if density > 0.0 && density.is_finite() {
        let refined = first - (distribution.cdf(first) - probability) / density;
        if refined.is_finite() {
            return Ok(refined);
        }
    }
    Ok(first)
}
