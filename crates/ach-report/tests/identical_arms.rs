//! Two arms with identical results (every paired difference zero) do not break the summary or
//! the report: the Wilcoxon test is scipy's degenerate case (p = 1 for three runs).

use std::path::Path;

use ach_report::experiments::{Args, execute, plan_with};
use ach_sim::algorithms::{AlgorithmInfo, Registry};

#[test]
fn a_twin_of_ach_gets_a_summary_and_a_report() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("identical_arms");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let series = root.join("short.toml");
    std::fs::write(&series, "name = \"C1\"\nsteps = 200\nwarmup = 20\n").unwrap();
    let mut registry = Registry::built_in();
    let ach = registry.get("ACH").unwrap().clone();
    registry
        .register(AlgorithmInfo::new("ACH-Twin", "Twin"), move |config| {
            ach.balancer(config)
        })
        .unwrap();
    let args = Args {
        series: vec!["C1".into()],
        runs: Some(3),
        threads: Some(1),
        configs: vec![series],
        add_algorithms: vec!["ACH-Twin".into()],
        ..Args::new(root.join("out"))
    };
    let checked = plan_with(&args, registry).unwrap();
    let summary = execute(&checked, &args).expect("identical arms must not break the matrix");
    let twin = summary.series[0]
        .comparisons
        .iter()
        .find(|c| c.baseline == "ACH-Twin")
        .unwrap();
    assert_eq!(twin.wilcoxon_statistic, Some(0.0));
    assert_eq!(twin.p_value, Some(1.0));
    assert_eq!(twin.reduction_percent, 0.0);
    let report = std::fs::read_to_string(root.join("out").join("REPORT.md")).unwrap();
    assert!(report.contains("ACH-Twin"));
}
