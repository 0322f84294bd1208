//! End-to-end tests of `cargo xtask stats`: exit status and error messages.

use std::process::Command;

/// A CSV file in its own temporary folder, which is removed when the value is dropped.
struct CsvFile {
    _directory: tempfile::TempDir,
    path: std::path::PathBuf,
}

fn write_csv(name: &str, contents: &str) -> CsvFile {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join(name);
    std::fs::write(&path, contents).unwrap();
    CsvFile {
        _directory: directory,
        path,
    }
}

fn run(arguments: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("stats")
        .args(arguments)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_number_exits_with_status_2_and_names_the_cell() {
    let csv = write_csv("bad.csv", "run,ach,base\n1,0.9,0.8\n2,0.8,0.7\n3,abc,0.6\n");
    let file = csv.path.to_str().unwrap();
    let (status, stdout, stderr) = run(&[file, "--x", "ach", "--y", "base"]);
    assert_eq!(status, 2);
    assert!(stdout.is_empty());
    assert!(
        stderr.contains(&format!(
            "{file}: row 4, column \"ach\": \"abc\" is not a number"
        )),
        "{stderr}"
    );
}

#[test]
fn missing_column_lists_the_available_columns() {
    let csv = write_csv("columns.csv", "run,ach,base\n1,0.9,0.8\n2,0.8,0.7\n");
    let (status, _, stderr) = run(&[csv.path.to_str().unwrap(), "--x", "ach", "--y", "other"]);
    assert_eq!(status, 2);
    assert!(stderr.contains("\"run\", \"ach\", \"base\""), "{stderr}");
}

#[test]
fn json_lists_every_scipy_combination() {
    let csv = write_csv(
        "good.csv",
        "ach,base\n0.91,0.85\n0.88,0.87\n0.93,0.86\n0.90,0.88\n0.95,0.90\n0.89,0.84\n",
    );
    let (status, stdout, stderr) = run(&[
        csv.path.to_str().unwrap(),
        "--x",
        "ach",
        "--y",
        "base",
        "--json",
    ]);
    assert_eq!(status, 0, "{stderr}");
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(value["wilcoxon"].as_array().unwrap().len(), 54);
    for key in ["delta", "magnitude", "ci_low", "ci_high"] {
        assert!(!value["cliffs_delta"][key].is_null(), "{key}");
    }
    for key in ["mean", "sd", "ci95_half_width"] {
        assert!(value["summary_x"][key].is_number(), "{key}");
        assert!(value["summary_y"][key].is_number(), "{key}");
    }
}

#[test]
fn unreadable_file_exits_with_status_2() {
    let (status, _, stderr) = run(&["/nonexistent/data.csv", "--x", "a", "--y", "b"]);
    assert_eq!(status, 2);
    assert!(
        stderr.contains("/nonexistent/data.csv: cannot read the file"),
        "{stderr}"
    );
}
