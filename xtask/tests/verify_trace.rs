//! `cargo xtask verify-trace` on every recorded trace of the repository: all must match.

use std::path::PathBuf;
use std::process::Command;

fn trace_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/ach-sim/tests/data/traces")
}

fn traces() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(trace_dir())
        .expect("trace folder exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_recorded_trace_replays_exactly() {
    let files = traces();
    assert_eq!(
        files.len(),
        18,
        "15 controller traces and 3 telemetry traces"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("verify-trace")
        .args(&files)
        .output()
        .expect("xtask runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "verify-trace failed:\n{stdout}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("match")).count(),
        18,
        "{stdout}"
    );
}

#[test]
fn a_corrupted_trace_is_reported_at_its_first_divergence() {
    use std::io::{Read, Write};
    let path = trace_dir().join("controller_C3_s42_ACH.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Make step 150's recorded budget disagree by 1e-9.
    let m = trace["steps"][150]["m"].as_f64().unwrap();
    trace["steps"][150]["m"] = serde_json::json!(m + 1e-9);
    let dir = std::env::temp_dir().join(format!("ach-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corrupted = dir.join("corrupted.json");
    std::fs::File::create(&corrupted)
        .unwrap()
        .write_all(trace.to_string().as_bytes())
        .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("verify-trace")
        .arg(&corrupted)
        .output()
        .expect("xtask runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("DIVERGED"), "{stdout}");
    assert!(stdout.contains("step 150: m differs"), "{stdout}");
    let missing = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("verify-trace")
        .arg(dir.join("no-such-file.json.gz"))
        .output()
        .expect("xtask runs");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read"));
    std::fs::remove_dir_all(&dir).ok();
}
