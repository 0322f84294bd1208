//! `cargo xtask bench-scale`: bad input is refused before anything runs, and the measuring
//! child prints one line of figures that the parent reads back.

use std::process::Command;

use ach_report::bench::Measurement;

fn xtask(arguments: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("bench-scale")
        .args(arguments)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

#[test]
fn zero_repeats_or_nodes_are_refused() {
    for arguments in [&["--repeats", "0"][..], &["--nodes", "10,0"][..]] {
        let output = xtask(arguments);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}: {stderr}");
        assert!(output.stdout.is_empty());
        assert!(
            stderr.starts_with("error: --repeats and every --nodes value must be >= 1"),
            "{stderr}"
        );
    }
}

#[test]
fn the_measuring_child_reports_one_line_of_figures() {
    let output = xtask(&["--measure", "10", "--repeats", "1"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let m = Measurement::parse(stdout.trim()).unwrap();
    assert_eq!((m.nodes, m.tokens, m.steps), (10, 1000, 2000));
    assert_eq!(m.seconds.len(), 1);
    assert!(m.seconds[0] > 0.0);
    if cfg!(target_os = "linux") {
        assert!(m.peak_kib.is_some_and(|kib| kib > 0));
    }
    let bad = xtask(&["--measure", "ten"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("must be C1 or a number of nodes"));
}

#[test]
fn the_whole_command_prints_the_table_and_draws_the_curve() {
    let svg = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench_scale.svg");
    let _ = std::fs::remove_file(&svg);
    let output = xtask(&[
        "--nodes",
        "10",
        "--repeats",
        "1",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("| C1 | 10 | 1000 | 2000 |"), "{stdout}");
    assert!(stdout.contains("| scale | 10 | 1000 | 2000 |"), "{stdout}");
    let drawn = std::fs::read_to_string(&svg).expect("the curve is written");
    assert!(drawn.starts_with("<svg") && drawn.trim_end().ends_with("</svg>"));
}
