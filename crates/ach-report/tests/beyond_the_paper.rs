//! The algorithms beyond the paper, named in a series file with their parameters: CH-BL and
//! ACH-F run beside the paper's, with the pairs against A0, through the summary and the report.

use std::path::Path;

use ach_report::experiments::{Args, execute, plan};

const SERIES: &str = "name = \"B\"\nruns = 3\nsteps = 150\nzipf_s = 0.8\nagainst_a0 = true\n\
                      algorithms = [\"Static-W\", \"ACH\", \"CH-BL\", \"ACH-F\"]\n\
                      [ach_f]\nwindow = 3\n[ch_bl]\neps = 0.5\n";

#[test]
fn ch_bl_and_ach_f_run_from_a_series_file() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("beyond_the_paper");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("b.toml");
    std::fs::write(&file, SERIES).unwrap();
    let out = root.join("out");
    let args = Args {
        series: vec!["B".into()],
        threads: Some(1),
        configs: vec![file],
        ..Args::new(&out)
    };
    let summary = execute(&plan(&args).unwrap(), &args).unwrap();

    let series = &summary.series[0];
    let names: Vec<&str> = series.algorithms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["Static-W", "ACH", "CH-BL", "ACH-F"]);
    for a in &series.algorithms {
        assert_eq!(a.runs, 3);
        assert_eq!(a.n_viol, 0, "{}", a.name);
        // Only CH-BL forwards, and it moves nothing.
        match a.name.as_str() {
            "CH-BL" => {
                let forwarded = a.forwarded_fraction.expect("CH-BL's forwarded fraction");
                assert!(
                    forwarded.mean > 0.0 && forwarded.mean < 1.0,
                    "{forwarded:?}"
                );
                assert_eq!(a.m_cum.mean, 0.0);
            }
            _ => assert_eq!(a.forwarded_fraction, None, "{}", a.name),
        }
    }
    // ACH against each of the three others; the three others against A0.
    let baselines: Vec<&str> = series
        .comparisons
        .iter()
        .map(|c| c.baseline.as_str())
        .collect();
    assert_eq!(baselines, ["Static-W", "CH-BL", "ACH-F"]);
    let against_a0: Vec<Option<&str>> = series
        .against_a0
        .iter()
        .map(|c| c.algorithm.as_deref())
        .collect();
    assert_eq!(against_a0, [Some("ACH"), Some("CH-BL"), Some("ACH-F")]);

    // The configuration written beside the results keeps the parameters.
    let config = std::fs::read_to_string(out.join("config/B.toml")).unwrap();
    assert!(
        config.contains("[ach_f]") && config.contains("window = 3"),
        "{config}"
    );
    assert!(
        config.contains("[ch_bl]") && config.contains("eps = 0.5"),
        "{config}"
    );

    // The report shows both, the forwarded column and the table against A0.
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    for needle in ["CH-BL", "ACH-F", "Forwarded", "against Static-W (A0)"] {
        assert!(report.contains(needle), "REPORT.md lacks {needle:?}");
    }
}
