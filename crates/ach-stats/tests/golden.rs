//! Golden test: every reference value in `tests/data/wilcoxon_cliff.json` (scipy 1.17.1 and
//! R-compatible ports) is recomputed and compared. All mismatches are collected and reported
//! together, with the number of entries checked, and the test fails if any entry mismatches or
//! if the number of entries checked is not the expected total.

use ach_stats::{
    Alternative, CliffCiAlgorithm, CliffCiOptions, CliffQuantile, CliffVariance, Convention,
    ResolvedMethod, Summary, WilcoxonMethod, WilcoxonOptions, ZeroMethod, bonferroni, cliffs_delta,
    cliffs_delta_ci, holm, wilcoxon,
};
use serde_json::Value;

const DATA: &str = include_str!("data/wilcoxon_cliff.json");

/// Expected entry counts; the test fails if fewer (or more) are checked.
const SCIPY_ENTRIES: usize = 24 * 54;
const R_ENTRIES: usize = 24 * 6;
const CLIFF_DELTA_ENTRIES: usize = 24;
const CLIFF_CI_CASE_VARIANTS: usize = 5 * 8;
const CLIFF_ANCHOR_VARIANTS: usize = 4 * 8;
const CLIFF_ANCHOR_PUBLISHED: usize = 2;
const SUMMARY_ENTRIES: usize = 24;
const HOLM_ENTRIES: usize = 5;

struct Checker {
    mismatches: Vec<String>,
    entries_checked: usize,
}

impl Checker {
    fn close(&mut self, context: &str, field: &str, got: f64, want: f64, tolerance: f64) {
        let within = (got - want).abs() <= tolerance;
        if !within {
            self.mismatches.push(format!(
                "{context}: {field} = {got:e}, want {want:e} (diff {:e}, tolerance {tolerance:e})",
                got - want
            ));
        }
    }

    fn relative(&mut self, context: &str, field: &str, got: f64, want: f64, tolerance: f64) {
        let scale = want.abs().max(1.0);
        self.close(context, field, got, want, tolerance * scale);
    }

    fn equal<T: PartialEq + std::fmt::Debug>(
        &mut self,
        context: &str,
        field: &str,
        got: T,
        want: T,
    ) {
        if got != want {
            self.mismatches
                .push(format!("{context}: {field} = {got:?}, want {want:?}"));
        }
    }
}

fn floats(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v.as_f64().expect("a finite number"))
        .collect()
}

fn number(value: &Value, key: &str) -> f64 {
    value[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {value}"))
}

fn zero_method(name: &str) -> ZeroMethod {
    match name {
        "wilcox" => ZeroMethod::Wilcox,
        "pratt" => ZeroMethod::Pratt,
        "zsplit" => ZeroMethod::Zsplit,
        other => panic!("unknown zero_method {other}"),
    }
}

fn method(name: &str) -> WilcoxonMethod {
    match name {
        "exact" => WilcoxonMethod::Exact,
        "asymptotic" | "approx" => WilcoxonMethod::Asymptotic,
        "auto" => WilcoxonMethod::Auto,
        other => panic!("unknown method {other}"),
    }
}

fn alternative(name: &str) -> Alternative {
    match name {
        "two-sided" => Alternative::TwoSided,
        "less" => Alternative::Less,
        "greater" => Alternative::Greater,
        other => panic!("unknown alternative {other}"),
    }
}

fn resolved(name: &str) -> ResolvedMethod {
    match name {
        "exact" => ResolvedMethod::Exact,
        "asymptotic" | "normal" => ResolvedMethod::Asymptotic,
        "permutation" => ResolvedMethod::Permutation,
        other => panic!("unknown resolved method {other}"),
    }
}

/// Parses `"numerator/denominator"` into its correctly rounded `f64` value. Every denominator
/// in the data is a power of two, so the division is exact after the numerator is rounded once.
fn rational(text: &str) -> f64 {
    let (numerator, denominator) = text.split_once('/').expect("a fraction");
    let numerator: u128 = numerator.parse().expect("an integer numerator");
    let denominator: u128 = denominator.parse().expect("an integer denominator");
    assert!(
        denominator.is_power_of_two(),
        "denominator of {text} is not a power of two"
    );
    numerator as f64 / denominator as f64
}

fn check_scipy_entries(checker: &mut Checker, case: &Value, x: &[f64], y: &[f64]) {
    let id = case["id"].as_str().unwrap();
    for entry in case["wilcoxon_scipy"]["entries"].as_array().unwrap() {
        assert!(
            entry["error"].is_null(),
            "{id}: the data holds an error entry"
        );
        let options = WilcoxonOptions {
            convention: Convention::Scipy,
            zero_method: zero_method(entry["zero_method"].as_str().unwrap()),
            method: method(entry["method"].as_str().unwrap()),
            correction: entry["correction"].as_bool().unwrap(),
            alternative: alternative(entry["alternative"].as_str().unwrap()),
        };
        let context = format!(
            "{id} scipy {}/{}/correction={}/{}",
            entry["zero_method"], entry["method"], entry["correction"], entry["alternative"]
        );
        checker.entries_checked += 1;
        let result = match wilcoxon(x, y, &options) {
            Ok(result) => result,
            Err(error) => {
                checker.mismatches.push(format!("{context}: error {error}"));
                continue;
            }
        };
        checker.equal(
            &context,
            "statistic",
            result.statistic,
            number(entry, "statistic"),
        );
        checker.close(
            &context,
            "pvalue",
            result.pvalue,
            number(entry, "pvalue"),
            1e-12,
        );
        checker.equal(
            &context,
            "resolved_method",
            result.resolved_method,
            resolved(entry["resolved_method"].as_str().unwrap()),
        );
        if let Some(text) = entry.get("pvalue_exact_rational").and_then(Value::as_str) {
            let want = rational(text);
            let relative = ((result.pvalue - want) / want).abs();
            let within = relative <= 1e-15;
            if !within {
                checker.mismatches.push(format!(
                    "{context}: pvalue {:e} differs from {text} by {relative:e} relative",
                    result.pvalue
                ));
            }
            checker.equal(
                &context,
                "pvalue (correctly rounded rational)",
                result.pvalue,
                number(entry, "pvalue_exact_correctly_rounded"),
            );
        }
        if let Some(z) = entry.get("zstatistic").and_then(Value::as_f64) {
            match result.zstatistic {
                Some(got) => checker.close(&context, "zstatistic", got, z, 1e-12),
                None => checker
                    .mismatches
                    .push(format!("{context}: no zstatistic, want {z}")),
            }
        }
    }
}

fn check_r_entries(checker: &mut Checker, case: &Value, x: &[f64], y: &[f64]) {
    let id = case["id"].as_str().unwrap();
    for entry in case["r_wilcox_test_emulated"]["entries"]
        .as_array()
        .unwrap()
    {
        let options = WilcoxonOptions {
            correction: entry["correct"].as_bool().unwrap(),
            ..WilcoxonOptions::r_default()
        }
        .with_alternative(alternative(entry["alternative"].as_str().unwrap()));
        let context = format!(
            "{id} R correct={}/{}",
            entry["correct"], entry["alternative"]
        );
        checker.entries_checked += 1;
        let result = match wilcoxon(x, y, &options) {
            Ok(result) => result,
            Err(error) => {
                checker.mismatches.push(format!("{context}: error {error}"));
                continue;
            }
        };
        checker.equal(
            &context,
            "statistic_V",
            result.statistic,
            number(entry, "statistic_V"),
        );
        checker.close(
            &context,
            "pvalue",
            result.pvalue,
            number(entry, "pvalue"),
            1e-12,
        );
        checker.equal(
            &context,
            "method",
            result.resolved_method,
            resolved(entry["method"].as_str().unwrap()),
        );
        match (entry["z"].as_f64(), result.zstatistic) {
            (Some(want), Some(got)) => checker.close(&context, "z", got, want, 1e-12),
            (None, None) => {}
            (want, got) => checker
                .mismatches
                .push(format!("{context}: z = {got:?}, want {want:?}")),
        }
        let messages: Vec<&str> = result.warnings.iter().map(|w| w.message()).collect();
        match entry["warning"].as_str() {
            Some(want) => {
                if !messages.contains(&want) {
                    checker
                        .mismatches
                        .push(format!("{context}: warnings {messages:?} lack {want:?}"));
                }
            }
            None => checker.equal(&context, "warnings", messages.len(), 0),
        }
    }
}

fn ci_options(variant: &Value) -> CliffCiOptions {
    CliffCiOptions {
        confidence_level: number(variant, "conf_level"),
        variance: if variant["use_unbiased"].as_bool().unwrap() {
            CliffVariance::Unbiased
        } else {
            CliffVariance::Consistent
        },
        quantile: if variant["use_normal"].as_bool().unwrap() {
            CliffQuantile::Normal
        } else {
            CliffQuantile::StudentT
        },
        algorithm: match variant["path"].as_str().unwrap() {
            "naive" => CliffCiAlgorithm::Definition,
            "row-partition" => CliffCiAlgorithm::EffsizeRowPartition,
            other => panic!("unknown path {other}"),
        },
    }
}

fn check_ci_variants(checker: &mut Checker, id: &str, ci: &Value, x: &[f64], y: &[f64]) {
    for variant in ci["variants"].as_array().unwrap() {
        assert!(variant["nonfinite"].as_array().unwrap().is_empty());
        let context = format!(
            "{id} cliff CI {}/unbiased={}/normal={}",
            variant["path"], variant["use_unbiased"], variant["use_normal"]
        );
        checker.entries_checked += 1;
        let result = match cliffs_delta_ci(x, y, &ci_options(variant)) {
            Ok(result) => result,
            Err(error) => {
                checker.mismatches.push(format!("{context}: error {error}"));
                continue;
            }
        };
        checker.close(
            &context,
            "estimate",
            result.estimate.delta,
            number(variant, "estimate"),
            1e-12,
        );
        checker.close(
            &context,
            "var",
            result.variance,
            number(variant, "var"),
            1e-12,
        );
        checker.close(
            &context,
            "crit",
            result.critical_value,
            number(variant, "crit"),
            1e-12,
        );
        checker.close(
            &context,
            "lower",
            result.lower,
            number(variant, "lower"),
            1e-12,
        );
        checker.close(
            &context,
            "upper",
            result.upper,
            number(variant, "upper"),
            1e-12,
        );
        checker.equal(
            &context,
            "magnitude",
            result.estimate.magnitude.name(),
            variant["magnitude"].as_str().unwrap(),
        );
    }
}

fn check_case(checker: &mut Checker, case: &Value) {
    let id = case["id"].as_str().unwrap();
    let x = floats(&case["x"]);
    let y = floats(&case["y"]);
    // The data's differences were computed in IEEE double; ours must be bit-identical.
    let d = floats(&case["d"]);
    for (i, (a, b)) in x.iter().zip(&y).enumerate() {
        assert_eq!(a - b, d[i], "{id}: d[{i}]");
    }
    check_scipy_entries(checker, case, &x, &y);
    check_r_entries(checker, case, &x, &y);

    let cliff = &case["cliffs_delta"];
    let context = format!("{id} cliffs_delta");
    checker.entries_checked += 1;
    let result = cliffs_delta(&x, &y).expect("cliffs_delta");
    checker.equal(&context, "delta", result.delta, number(cliff, "delta"));
    checker.equal(
        &context,
        "n_gt",
        result.n_greater,
        cliff["n_gt"].as_u64().unwrap(),
    );
    checker.equal(
        &context,
        "n_lt",
        result.n_less,
        cliff["n_lt"].as_u64().unwrap(),
    );
    checker.equal(
        &context,
        "n_eq",
        result.n_equal,
        cliff["n_eq"].as_u64().unwrap(),
    );
    checker.equal(
        &context,
        "magnitude",
        result.magnitude.name(),
        cliff["magnitude_romano2006"].as_str().unwrap(),
    );

    if let Some(ci) = case.get("cliffs_delta_ci") {
        check_ci_variants(checker, id, ci, &x, &y);
    }

    let summary = &case["summary_x"];
    let context = format!("{id} summary_x");
    checker.entries_checked += 1;
    let result = Summary::of(&x).expect("summary");
    checker.equal(
        &context,
        "n",
        result.n as u64,
        summary["n"].as_u64().unwrap(),
    );
    checker.relative(
        &context,
        "mean",
        result.mean,
        number(summary, "mean"),
        1e-12,
    );
    checker.relative(&context, "sd", result.sd, number(summary, "sd"), 1e-12);
    checker.relative(&context, "se", result.se, number(summary, "se"), 1e-12);
    checker.close(
        &context,
        "t_crit_0975",
        result.t_crit_0975,
        number(summary, "t_crit_0975"),
        1e-12,
    );
    checker.relative(
        &context,
        "ci95_half_width",
        result.ci95_half_width,
        number(summary, "ci95_half_width"),
        1e-12,
    );
    checker.relative(
        &context,
        "ci95_lower",
        result.ci95_lower,
        number(summary, "ci95_lower"),
        1e-12,
    );
    checker.relative(
        &context,
        "ci95_upper",
        result.ci95_upper,
        number(summary, "ci95_upper"),
        1e-12,
    );
}

fn check_anchors(checker: &mut Checker, anchors: &Value) {
    for anchor in anchors.as_array().unwrap() {
        let id = anchor["id"].as_str().unwrap();
        let treatment = floats(&anchor["treatment"]);
        let control = floats(&anchor["control"]);
        check_ci_variants(checker, id, &anchor["ci"], &treatment, &control);
        if let Some(published) = anchor.get("published").filter(|p| !p.is_null()) {
            let context = format!("{id} published effsize output");
            checker.entries_checked += 1;
            let result = cliffs_delta_ci(&treatment, &control, &CliffCiOptions::default())
                .expect("cliffs_delta_ci");
            checker.equal(
                &context,
                "magnitude",
                result.estimate.magnitude.name(),
                published["magnitude"].as_str().unwrap(),
            );
            if let Some(estimate) = published.get("estimate").and_then(Value::as_f64) {
                checker.close(&context, "estimate", result.estimate.delta, estimate, 1e-15);
                // R printed 7 significant digits.
                checker.close(
                    &context,
                    "lower",
                    result.lower,
                    number(published, "lower"),
                    5e-8,
                );
                checker.close(
                    &context,
                    "upper",
                    result.upper,
                    number(published, "upper"),
                    5e-8,
                );
            }
            if let Some(estimate) = published.get("estimate_approx").and_then(Value::as_f64) {
                checker.close(&context, "estimate", result.estimate.delta, estimate, 1e-5);
            }
        }
    }
}

fn check_holm(checker: &mut Checker, holm_data: &Value) {
    for (index, case) in holm_data["cases"].as_array().unwrap().iter().enumerate() {
        let context = format!("holm case {index}");
        checker.entries_checked += 1;
        let p = floats(&case["p"]);
        let want_holm = floats(&case["holm"]);
        let want_bonferroni = floats(&case["bonferroni"]);
        checker.equal(&context, "holm", holm(&p).unwrap(), want_holm);
        checker.equal(
            &context,
            "bonferroni",
            bonferroni(&p).unwrap(),
            want_bonferroni,
        );
    }
}

#[test]
fn every_golden_entry_matches() {
    let data: Value = serde_json::from_str(DATA).expect("the golden data parses");
    let mut checker = Checker {
        mismatches: Vec::new(),
        entries_checked: 0,
    };
    let cases = data["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 24);
    for case in cases {
        check_case(&mut checker, case);
    }
    check_anchors(&mut checker, &data["cliff_anchors"]);
    check_holm(&mut checker, &data["holm"]);

    let expected = SCIPY_ENTRIES
        + R_ENTRIES
        + CLIFF_DELTA_ENTRIES
        + CLIFF_CI_CASE_VARIANTS
        + CLIFF_ANCHOR_VARIANTS
        + CLIFF_ANCHOR_PUBLISHED
        + SUMMARY_ENTRIES
        + HOLM_ENTRIES;
    eprintln!(
        "golden: {} entries checked, {} mismatches",
        checker.entries_checked,
        checker.mismatches.len()
    );
    for mismatch in &checker.mismatches {
        eprintln!("  {mismatch}");
    }
    assert_eq!(
        checker.entries_checked, expected,
        "number of golden entries checked"
    );
    assert!(
        checker.mismatches.is_empty(),
        "{} of {} golden entries mismatch",
        checker.mismatches.len(),
        checker.entries_checked
    );
}
