//! The opt-in coefficient of variation of the true loads (`report_cv = true`): a small sweep
//! with it on carries it through the records, the summary, the report's table and figure; the
//! same sweep with it off has none of it and the same D-bar everywhere (the measure does not
//! change the simulation).

use std::path::{Path, PathBuf};

use ach_report::experiments::{Args, execute, plan};
use ach_sim::summary::MatrixSummary;

const SERIES: &str = "name = \"V\"\nruns = 3\nsteps = 200\nalgorithms = [\"Static-W\", \"ACH\"]\n\
                      [sweep]\n\"noise.sigma\" = [0.0, 0.1]\n";

fn run(root: &Path, name: &str, text: &str) -> (PathBuf, MatrixSummary) {
    let file = root.join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    let out = root.join(name);
    let args = Args {
        series: vec!["V".into()],
        threads: Some(1),
        configs: vec![file],
        ..Args::new(&out)
    };
    let summary = execute(&plan(&args).unwrap(), &args).unwrap();
    (out, summary)
}

#[test]
fn report_cv_reaches_summary_and_report_and_is_absent_when_off() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cv_report");
    if root.exists() {
        std::fs::remove_dir_all(&root).unwrap();
    }
    std::fs::create_dir_all(&root).unwrap();
    let (on_out, on) = run(&root, "on", &format!("report_cv = true\n{SERIES}"));
    let (off_out, off) = run(&root, "off", SERIES);

    assert_eq!(on.sensitivity.len(), 2);
    for (p_on, p_off) in on.sensitivity.iter().zip(&off.sensitivity) {
        for (a_on, a_off) in p_on.algorithms().iter().zip(p_off.algorithms()) {
            let cv = a_on
                .cv_true_mean
                .unwrap_or_else(|| panic!("{} at {} has no CV", a_on.name, p_on.point.label()));
            assert!(cv.mean > 0.0 && cv.mean < 1.0, "{cv:?}");
            assert!(cv.ci95.is_some());
            assert_eq!(a_off.cv_true_mean, None);
            assert_eq!(a_on.d_mean, a_off.d_mean);
            assert_eq!(a_on.d_true_mean, a_off.d_true_mean);
        }
    }

    // The records on disk carry it (the trailing block) and are reused as they are.
    let record = std::fs::read(on_out.join("runs/V/noise.sigma=0.1/run_000.bin")).unwrap();
    let decoded = ach_report::store::decode(&record).expect("a record");
    assert!(
        decoded
            .algorithms
            .iter()
            .all(|a| a.aggregates.cv_true_mean.is_some())
    );
    let off_record = std::fs::read(off_out.join("runs/V/noise.sigma=0.1/run_000.bin")).unwrap();
    let decoded_off = ach_report::store::decode(&off_record).expect("a record");
    assert!(
        decoded_off
            .algorithms
            .iter()
            .all(|a| a.aggregates.cv_true_mean.is_none())
    );
    assert_eq!(ach_report::store::encode(&decoded_off), off_record);

    let on_json = std::fs::read_to_string(on_out.join("summary.json")).unwrap();
    let off_json = std::fs::read_to_string(off_out.join("summary.json")).unwrap();
    assert!(on_json.contains("\"cv_true_mean\""));
    assert!(!off_json.contains("cv_true_mean"));

    let on_report = std::fs::read_to_string(on_out.join("REPORT.md")).unwrap();
    let off_report = std::fs::read_to_string(off_out.join("REPORT.md")).unwrap();
    assert!(on_report.contains("## D-bar beside the coefficient of variation"));
    assert!(!off_report.contains("coefficient of variation"));
    let table = std::fs::read_to_string(on_out.join("tables/cv_V.md")).unwrap();
    assert!(table.contains("CV true"));
    assert_eq!(
        table
            .lines()
            .filter(|l| l.starts_with("| noise.sigma="))
            .count(),
        4
    );
    assert!(!off_out.join("tables/cv_V.md").exists());
    let svg = std::fs::read_to_string(on_out.join("figures/cv_V_noise.sigma.svg")).unwrap();
    roxmltree::Document::parse(&svg).expect("an SVG document");
    assert!(on_report.contains("figures/cv_V_noise.sigma.svg"));
    assert!(!off_out.join("figures/cv_V_noise.sigma.svg").exists());
}
