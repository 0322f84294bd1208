//! Bad input gives typed errors, never a panic.

use ach_stats::{
    BootstrapOptions, CliffCiOptions, StatsError, Summary, WilcoxonMethod, WilcoxonOptions,
    ZeroMethod, bonferroni, bootstrap_ci, cliffs_delta, cliffs_delta_ci, holm, wilcoxon,
};

#[test]
fn wilcoxon_rejects_bad_input() {
    let options = WilcoxonOptions::scipy_default();
    assert_eq!(
        wilcoxon(&[1.0, 2.0], &[1.0], &options),
        Err(StatsError::LengthMismatch { x_len: 2, y_len: 1 })
    );
    assert!(matches!(
        wilcoxon(&[], &[], &options),
        Err(StatsError::TooFewValues {
            needed: 1,
            got: 0,
            ..
        })
    ));
    assert!(matches!(
        wilcoxon(&[1.0, f64::NAN], &[0.0, 0.0], &options),
        Err(StatsError::NonFinite {
            sample: "x",
            index: 1,
            ..
        })
    ));
    assert!(matches!(
        wilcoxon(&[1.0, 2.0], &[0.0, f64::INFINITY], &options),
        Err(StatsError::NonFinite {
            sample: "y",
            index: 1,
            ..
        })
    ));
    assert!(matches!(
        wilcoxon(&[f64::MAX, 1.0], &[-f64::MAX, 0.0], &options),
        Err(StatsError::NonFinite {
            sample: "x - y",
            index: 0,
            ..
        })
    ));
    // Identical samples are not an error: the result is flagged degenerate (tests/all_zero.rs).
    assert!(
        wilcoxon(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0], &options)
            .unwrap()
            .degenerate
    );
    let r_pratt = WilcoxonOptions {
        zero_method: ZeroMethod::Pratt,
        ..WilcoxonOptions::r_default()
    };
    assert!(matches!(
        wilcoxon(&[1.0, 2.0], &[0.0, 0.0], &r_pratt),
        Err(StatsError::InvalidOption(_))
    ));
    let exact = WilcoxonOptions {
        method: WilcoxonMethod::Exact,
        ..WilcoxonOptions::scipy_default()
    };
    let large: Vec<f64> = (1..=200).map(f64::from).collect();
    let zeros = vec![0.0; 200];
    assert_eq!(
        wilcoxon(&large, &zeros, &exact),
        Err(StatsError::ExactSampleTooLarge { n: 200, max: 127 })
    );
}

#[test]
fn effect_sizes_and_summaries_reject_bad_input() {
    assert!(matches!(
        cliffs_delta(&[], &[1.0]),
        Err(StatsError::TooFewValues { .. })
    ));
    assert!(matches!(
        cliffs_delta(&[1.0], &[f64::NAN]),
        Err(StatsError::NonFinite { .. })
    ));
    assert!(matches!(
        cliffs_delta_ci(&[1.0], &[1.0, 2.0], &CliffCiOptions::default()),
        Err(StatsError::TooFewValues {
            needed: 2,
            got: 1,
            ..
        })
    ));
    let bad_level = CliffCiOptions {
        confidence_level: 1.0,
        ..CliffCiOptions::default()
    };
    assert!(matches!(
        cliffs_delta_ci(&[1.0, 2.0], &[1.0, 2.0], &bad_level),
        Err(StatsError::InvalidOption(_))
    ));
    assert!(matches!(
        Summary::of(&[1.0]),
        Err(StatsError::TooFewValues {
            needed: 2,
            got: 1,
            ..
        })
    ));
    assert!(matches!(
        Summary::of(&[1.0, f64::NEG_INFINITY]),
        Err(StatsError::NonFinite { .. })
    ));
    assert!(matches!(
        holm(&[0.1, f64::NAN]),
        Err(StatsError::NotAProbability { index: 1, .. })
    ));
    assert!(matches!(
        bonferroni(&[1.5]),
        Err(StatsError::NotAProbability { index: 0, .. })
    ));
    assert_eq!(holm(&[]), Ok(vec![]));
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    assert!(matches!(
        bootstrap_ci(&[], mean, &BootstrapOptions::with_seed(1)),
        Err(StatsError::TooFewValues { .. })
    ));
}

#[test]
fn bootstrap_is_reproducible_with_a_seed() {
    let sample = [2.1, 2.5, 2.2, 3.0, 2.8, 2.4, 2.6, 2.9, 1.9, 3.3];
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    let first = bootstrap_ci(&sample, mean, &BootstrapOptions::with_seed(42)).unwrap();
    let second = bootstrap_ci(&sample, mean, &BootstrapOptions::with_seed(42)).unwrap();
    let other = bootstrap_ci(&sample, mean, &BootstrapOptions::with_seed(43)).unwrap();
    assert_eq!(first, second);
    assert_ne!(first, other);
    assert!(first.lower < first.estimate && first.estimate < first.upper);
}

#[test]
fn exact_tails_stay_exact_far_out() {
    // All 100 differences positive: P(R+ >= 5050) = 2^-100 exactly.
    let x: Vec<f64> = (1..=100).map(f64::from).collect();
    let y = vec![0.0; 100];
    let options = WilcoxonOptions {
        method: WilcoxonMethod::Exact,
        alternative: ach_stats::Alternative::Greater,
        ..WilcoxonOptions::scipy_default()
    };
    let result = wilcoxon(&x, &y, &options).unwrap();
    assert_eq!(result.pvalue, 2.0_f64.powi(-100));
}
