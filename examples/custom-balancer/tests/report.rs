//! The example on a small matrix: its results hold the extra algorithm in the summary, in every
//! table that lists algorithms and in every figure that draws them.

use std::path::Path;
use std::process::Command;

#[test]
fn the_extra_algorithm_is_in_every_table_and_figure() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("custom-balancer-c1");
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_custom-balancer"))
        .args([
            "--series",
            "C1,C4c",
            "--runs",
            "3",
            "--threads",
            "2",
            "--against-a0",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "custom-balancer failed: {status}");
    let read = |path: &Path| std::fs::read_to_string(path).unwrap();
    let summary = read(&out.join("summary.json"));
    assert!(
        summary.contains("\"baseline\": \"Greedy-One\""),
        "ACH is paired with it"
    );
    assert!(
        summary.contains("\"algorithm\": \"Greedy-One\""),
        "it is paired against A0"
    );
    let a0_table = read(&out.join("tables").join("statistics_a0.md"));
    assert!(a0_table.contains("Greedy-One"), "{a0_table}");
    let report = read(&out.join("REPORT.md"));
    assert!(report.contains("G1 Greedy-One"), "REPORT.md lists it");
    let mut checked = 0;
    for folder in ["tables", "figures"] {
        for entry in std::fs::read_dir(out.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // Tables 2-4 and the text values set the paper's published numbers against ours:
            // they list the paper's algorithms only.
            let paper_checks = ["table2_", "table3_", "table4_", "text_values"];
            // A PDF's text is compressed; the SVG it was made from is checked.
            if paper_checks.iter().any(|prefix| name.starts_with(prefix)) || name.ends_with(".pdf")
            {
                continue;
            }
            let text = read(&path);
            // A table or figure that shows the built-in algorithms must show the new one too.
            if text.contains("Static-Wt") || text.contains("A1") && text.contains("A2") {
                assert!(
                    text.contains("Greedy-One") || text.contains("G1"),
                    "{} shows the built-ins but not Greedy-One",
                    path.display()
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 10,
        "only {checked} tables and figures list algorithms"
    );
}
