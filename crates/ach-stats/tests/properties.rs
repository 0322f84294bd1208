//! Property tests of the invariants every implementation of these statistics must satisfy.

use ach_stats::{
    Alternative, Convention, WilcoxonMethod, WilcoxonOptions, ZeroMethod, cliffs_delta, wilcoxon,
};
use proptest::prelude::*;

/// Pairs of small integer-valued samples (so that ties and zero differences are frequent).
fn paired_samples() -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
    (1_usize..40).prop_flat_map(|n| {
        (
            proptest::collection::vec(-6_i32..6, n),
            proptest::collection::vec(-6_i32..6, n),
        )
            .prop_map(|(x, y)| {
                (
                    x.into_iter().map(f64::from).collect(),
                    y.into_iter().map(f64::from).collect(),
                )
            })
    })
}

fn every_scipy_option() -> Vec<WilcoxonOptions> {
    let mut all = Vec::new();
    for zero_method in ZeroMethod::ALL {
        for method in WilcoxonMethod::ALL {
            for correction in [false, true] {
                for alternative in Alternative::ALL {
                    all.push(WilcoxonOptions {
                        convention: Convention::Scipy,
                        zero_method,
                        method,
                        correction,
                        alternative,
                    });
                }
            }
        }
    }
    for method in WilcoxonMethod::ALL {
        for correction in [false, true] {
            for alternative in Alternative::ALL {
                all.push(WilcoxonOptions {
                    method,
                    correction,
                    alternative,
                    ..WilcoxonOptions::r_default()
                });
            }
        }
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn pvalues_are_probabilities((x, y) in paired_samples()) {
        prop_assume!(x.iter().zip(&y).any(|(a, b)| a != b));
        for options in every_scipy_option() {
            let result = wilcoxon(&x, &y, &options).unwrap();
            prop_assert!((0.0..=1.0).contains(&result.pvalue), "{options:?}: {}", result.pvalue);
        }
    }

    /// Swapping `x` and `y` negates every difference, so the one-sided p-values trade places
    /// and the two-sided p-value stays. The exception is scipy's `exact` with `pratt` and zeros:
    /// its null distribution has mean `n(n+1)/4` while `R+ + R-` excludes the zero ranks, so it
    /// is not symmetric (see the crate documentation).
    #[test]
    fn swapping_samples_mirrors_one_sided_pvalues((x, y) in paired_samples()) {
        prop_assume!(x.iter().zip(&y).any(|(a, b)| a != b));
        let has_zero = x.iter().zip(&y).any(|(a, b)| a == b);
        for options in every_scipy_option() {
            let resolved = wilcoxon(&x, &y, &options).unwrap().resolved_method;
            if options.zero_method == ZeroMethod::Pratt
                && has_zero
                && resolved == ach_stats::ResolvedMethod::Exact
            {
                continue;
            }
            let forward = wilcoxon(&x, &y, &options).unwrap();
            let mirrored = options.with_alternative(options.alternative.mirrored());
            let backward = wilcoxon(&y, &x, &mirrored).unwrap();
            prop_assert!(
                (forward.pvalue - backward.pvalue).abs() <= 1e-15,
                "{options:?}: {} vs {}", forward.pvalue, backward.pvalue
            );
        }
    }

    #[test]
    fn swapping_samples_negates_delta(
        x in proptest::collection::vec(-20_i32..20, 1..60),
        y in proptest::collection::vec(-20_i32..20, 1..60),
    ) {
        let x: Vec<f64> = x.into_iter().map(f64::from).collect();
        let y: Vec<f64> = y.into_iter().map(f64::from).collect();
        let forward = cliffs_delta(&x, &y).unwrap();
        let backward = cliffs_delta(&y, &x).unwrap();
        prop_assert_eq!(forward.delta, -backward.delta);
        prop_assert_eq!(forward.magnitude, backward.magnitude);
    }

    #[test]
    fn delta_is_invariant_under_increasing_transforms(
        x in proptest::collection::vec(-50_i32..50, 1..60),
        y in proptest::collection::vec(-50_i32..50, 1..60),
    ) {
        let x: Vec<f64> = x.into_iter().map(f64::from).collect();
        let y: Vec<f64> = y.into_iter().map(f64::from).collect();
        let original = cliffs_delta(&x, &y).unwrap().delta;
        // Each transform is strictly increasing and keeps distinct integers distinct in f64.
        let transforms: [fn(f64) -> f64; 3] = [
            |v| v * v * v + 3.0 * v,
            |v| (v / 7.0).exp(),
            |v| 1000.0 + 0.5 * v,
        ];
        for transform in transforms {
            let tx: Vec<f64> = x.iter().copied().map(transform).collect();
            let ty: Vec<f64> = y.iter().copied().map(transform).collect();
            prop_assert_eq!(cliffs_delta(&tx, &ty).unwrap().delta, original);
        }
    }
}
