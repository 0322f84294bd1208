//! A grid sweep over two fields, from a series file to the report: it validates, runs every
//! point with every algorithm, and the report gets a table for the sweep and a figure per
//! swept field.

use std::path::Path;

use ach_report::experiments::{Args, execute, plan};

#[test]
fn a_grid_sweep_over_two_fields_runs_and_is_reported() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sweep_report");
    if root.exists() {
        std::fs::remove_dir_all(&root).unwrap();
    }
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("grid.toml");
    std::fs::write(
        &file,
        "name = \"G\"\nruns = 3\nsteps = 200\nalgorithms = [\"Static-W\", \"ACH\"]\n\
         [sweep]\nmode = \"grid\"\n\"noise.sigma\" = [0.0, 0.05, 0.1]\n\"ach.eps_on\" = [0.08, 0.12]\n\
         [sweep.linked]\n\"ach.eps_off\" = { of = \"ach.eps_on\", ratio = 0.4 }\n",
    )
    .unwrap();
    let out = root.join("out");
    let args = Args {
        series: vec!["G".into()],
        threads: Some(1),
        configs: vec![file],
        ..Args::new(&out)
    };
    let summary = execute(&plan(&args).unwrap(), &args).unwrap();
    assert_eq!(summary.sensitivity.len(), 6);
    let last = &summary.sensitivity[5];
    assert_eq!(last.point.label(), "noise.sigma=0.1,ach.eps_on=0.12");
    let names: Vec<&str> = last.algorithms().iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["Static-W", "ACH"]);
    assert!(last.algorithms().iter().all(|a| a.runs == 3));
    // Static-W does not depend on eps_on: its statistics agree along that field.
    assert_eq!(
        summary.sensitivity[0].algorithms()[0].d_mean,
        summary.sensitivity[1].algorithms()[0].d_mean
    );

    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    assert!(report.contains("## Sweeps"));
    let table = std::fs::read_to_string(out.join("tables/sweep_G.md")).unwrap();
    assert_eq!(
        table
            .lines()
            .filter(|l| l.starts_with("| noise.sigma="))
            .count(),
        12
    );
    for field in ["noise.sigma", "ach.eps_on"] {
        let svg = std::fs::read_to_string(out.join(format!("figures/sweep_G_{field}.svg")))
            .unwrap_or_else(|e| panic!("figure for {field}: {e}"));
        roxmltree::Document::parse(&svg).expect("an SVG document");
        assert!(report.contains(&format!("figures/sweep_G_{field}.svg")));
    }
}
