//! Numbers in the LaTeX tables: each estimate rounded to the precision its CI supports, p-values
//! in one form, and the `siunitx` `table-format` that reserves room for a column's numbers.
//!
//! **The rounding rule.** A CI half-width is rounded to one significant digit, or to two when
//! that digit would be a 1 or a 2 (a rounded 0.1 or 0.2 loses up to a quarter of its value);
//! the mean is rounded to the same decimal place. So `0.17783 ± 0.00362` prints
//! `0.178 ± 0.004`, `1.6269 ± 0.1293` prints `1.63 ± 0.13` and `29.9601 ± 0.2513` prints
//! `29.96 ± 0.25`. At most [`MAX_DECIMALS`] decimals, at least none. A CI of zero (every run
//! gave the same value; below half the last of those places) or no CI (one run) supports no
//! precision of its own: the mean keeps
//! the table's default decimals and no `±` is printed; an exact zero prints `0`.
//!
//! **p-values.** From [`P_FIXED_FROM`] up with three decimals (`0.685`, `0.063`, `0.001`), below
//! it as a mantissa with one decimal times a power of ten (`1.9e-9`, which `siunitx` sets as
//! $1.9 \times 10^{-9}$).

/// The most decimals an estimate gets, however narrow its CI.
pub const MAX_DECIMALS: usize = 6;

/// p-values from this value up are printed with fixed decimals, smaller ones in scientific form.
pub const P_FIXED_FROM: f64 = 0.001;

/// The decimals a CI half-width of `ci95` supports, by the rule of the module; `None` when it
/// supports none (zero, negative or not finite).
pub fn decimals_for_ci(ci95: f64) -> Option<usize> {
    // Below half the last place of `MAX_DECIMALS` a CI is zero (floating-point residue of
    // runs that agree exactly).
    if !(ci95.is_finite() && ci95 >= 0.5 * 10f64.powi(-(MAX_DECIMALS as i32))) {
        return None;
    }
    // `{:.1e}` rounds to two significant digits: "2.5e-1", "9.6e-3".
    let (mantissa, exponent_two) = mantissa_exponent(&format!("{ci95:.1e}"));
    let last_place = if mantissa < 3.0 {
        exponent_two - 1
    } else {
        // One significant digit; rounding may carry to the next power (9.6e-3 to 1e-2).
        mantissa_exponent(&format!("{ci95:.0e}")).1
    };
    Some((-last_place).clamp(0, MAX_DECIMALS as i32) as usize)
}

fn mantissa_exponent(text: &str) -> (f64, i32) {
    let (mantissa, exponent) = text
        .split_once('e')
        .expect("`e` formatting has an exponent");
    (
        mantissa.parse().expect("a formatted mantissa parses"),
        exponent.parse().expect("a formatted exponent parses"),
    )
}

/// `value` with `decimals` decimals, `-0.000` printed as `0.000`.
pub fn fixed(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    match text.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => text,
    }
}

/// An estimate in `siunitx` input form: the mean and, when the CI supports a precision, the
/// half-width (both at the CI's decimals). `default_decimals` applies without one.
pub fn estimate(mean: f64, ci95: Option<f64>, default_decimals: usize) -> (String, Option<String>) {
    match ci95.and_then(decimals_for_ci) {
        Some(decimals) => (
            fixed(mean, decimals),
            Some(fixed(ci95.unwrap_or_default(), decimals)),
        ),
        None if mean == 0.0 => ("0".to_string(), None),
        None => (fixed(mean, default_decimals), None),
    }
}

/// A p-value in `siunitx` input form, by the rule of the module.
pub fn p_value(p: f64) -> String {
    if p >= P_FIXED_FROM {
        return fixed(p, 3);
    }
    if p == 0.0 {
        return "0".to_string();
    }
    let (mantissa, exponent) = mantissa_exponent(&format!("{p:.1e}"));
    format!("{mantissa:.1}e{exponent}")
}

/// The room a number takes in a `siunitx` `table-format`: its sign, digits before and after
/// the decimal marker, and exponent digits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NumberShape {
    /// A sign (`-`, `+` or `\pm`) is printed.
    pub sign: bool,
    /// Digits before the decimal marker.
    pub integer: usize,
    /// Digits after it.
    pub decimals: usize,
    /// Digits of a (negative) exponent; 0 without one.
    pub exponent: usize,
}

impl NumberShape {
    /// The shape of a number in `siunitx` input form (`-0.25`, `+1.2`, `\pm 0.004`, `1.9e-9`).
    pub fn of(text: &str) -> NumberShape {
        let (sign, rest) = match text.strip_prefix("\\pm ") {
            Some(rest) => (true, rest),
            None => match text.strip_prefix(['-', '+']) {
                Some(rest) => (true, rest),
                None => (false, text),
            },
        };
        let (number, exponent) = match rest.split_once('e') {
            Some((number, exponent)) => (number, exponent.trim_start_matches('-').len()),
            None => (rest, 0),
        };
        let (integer, decimals) = match number.split_once('.') {
            Some((integer, decimals)) => (integer.len(), decimals.len()),
            None => (number.len(), 0),
        };
        NumberShape {
            sign,
            integer,
            decimals,
            exponent,
        }
    }

    /// The smallest shape that holds both.
    pub fn union(self, other: NumberShape) -> NumberShape {
        NumberShape {
            sign: self.sign || other.sign,
            integer: self.integer.max(other.integer),
            decimals: self.decimals.max(other.decimals),
            exponent: self.exponent.max(other.exponent),
        }
    }

    /// The `siunitx` `table-format` value, e.g. `-1.3`, `+2.2`, `1.3e-1`.
    pub fn table_format(self) -> String {
        let mut format = String::new();
        if self.sign {
            format.push('+');
        }
        format.push_str(&self.integer.max(1).to_string());
        if self.decimals > 0 {
            format.push('.');
            format.push_str(&self.decimals.to_string());
        }
        if self.exponent > 0 {
            format.push_str(&format!("e-{}", self.exponent));
        }
        format
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ci_keeps_one_significant_digit_or_two_when_it_starts_with_1_or_2() {
        assert_eq!(decimals_for_ci(0.00362), Some(3));
        assert_eq!(decimals_for_ci(0.1293), Some(2));
        assert_eq!(decimals_for_ci(0.2513), Some(2));
        assert_eq!(decimals_for_ci(0.0249), Some(3));
        assert_eq!(decimals_for_ci(0.0299), Some(2));
        // One digit: 0.0096 carries to 0.01.
        assert_eq!(decimals_for_ci(0.0096), Some(2));
        assert_eq!(decimals_for_ci(12.0), Some(0));
        assert_eq!(decimals_for_ci(3.0e-6), Some(MAX_DECIMALS));
        assert_eq!(decimals_for_ci(3.0e-17), None);
        assert_eq!(decimals_for_ci(0.0), None);
        assert_eq!(decimals_for_ci(f64::NAN), None);
    }

    #[test]
    fn estimates_are_rounded_to_the_place_of_their_ci() {
        let shown = |mean, ci, default| {
            let (mean, ci) = estimate(mean, ci, default);
            (mean, ci.unwrap_or_default())
        };
        assert_eq!(
            shown(0.17783, Some(0.00362), 3),
            ("0.178".into(), "0.004".into())
        );
        assert_eq!(
            shown(1.6269, Some(0.1293), 3),
            ("1.63".into(), "0.13".into())
        );
        assert_eq!(
            shown(29.9601, Some(0.2513), 3),
            ("29.96".into(), "0.25".into())
        );
        assert_eq!(shown(0.3273, Some(0.0), 3), ("0.327".into(), String::new()));
        assert_eq!(shown(0.0, Some(0.0), 3), ("0".into(), String::new()));
        assert_eq!(shown(0.25, None, 3), ("0.250".into(), String::new()));
        assert_eq!(
            shown(-0.00001, Some(0.004), 3),
            ("0.000".into(), "0.004".into())
        );
    }

    #[test]
    fn p_values_have_three_decimals_or_a_power_of_ten() {
        assert_eq!(p_value(0.685), "0.685");
        assert_eq!(p_value(0.2988), "0.299");
        assert_eq!(p_value(0.0626), "0.063");
        assert_eq!(p_value(0.001), "0.001");
        assert_eq!(p_value(1.862645149230957e-9), "1.9e-9");
        assert_eq!(p_value(9.96e-5), "1.0e-4");
        assert_eq!(p_value(0.0), "0");
    }

    #[test]
    fn shapes_reserve_room_for_every_number_of_a_column() {
        let shape = ["0.178", "-29.96", "1.9e-9", "\\pm 0.13"]
            .iter()
            .map(|t| NumberShape::of(t))
            .fold(NumberShape::default(), NumberShape::union);
        assert_eq!(
            shape,
            NumberShape {
                sign: true,
                integer: 2,
                decimals: 3,
                exponent: 1
            }
        );
        assert_eq!(shape.table_format(), "+2.3e-1");
        assert_eq!(NumberShape::of("30").table_format(), "2");
    }
}
