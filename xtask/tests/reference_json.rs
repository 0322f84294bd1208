//! `--reference-json` writes the published simulation's schema: per-run files and the C5 sweep.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ach-refjson-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read_json(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn runs_and_sweep_follow_the_published_schema() {
    let dir = scratch("schema");
    std::fs::write(
        dir.join("c1.toml"),
        "name = \"C1\"\nsteps = 120\nwarmup = 20\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("c5.toml"),
        "name = \"C5\"\nsteps = 120\nwarmup = 20\nalgorithms = [\"ACH\"]\n\
         [sweep]\neps_on = [0.05, 0.1]\neps_off_ratio = 0.4\ntau = [0.7]\n",
    )
    .unwrap();
    let out = dir.join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "experiments",
            "--series",
            "C1,C5",
            "--runs",
            "2",
            "--no-report",
            "--reference-json",
        ])
        .arg("--config")
        .arg(dir.join("c1.toml"))
        .arg("--config")
        .arg(dir.join("c5.toml"))
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());

    let run = read_json(out.join("C1/run_001.json"));
    assert_eq!(run["run_id"], 1);
    assert_eq!(run["seed"], 1042);
    assert_eq!(run["series"], "C1");
    assert!(run["elapsed"].is_number());
    let algorithms = run["algorithms"].as_object().unwrap();
    let names: Vec<&str> = algorithms.keys().map(String::as_str).collect();
    for name in ["Static-W", "Static-Wt", "Dynamic-R", "Bounded-Loads", "ACH"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
        let a = &algorithms[name];
        assert_eq!(a["D_trace"].as_array().unwrap().len(), 120);
        assert_eq!(a["M_trace"].as_array().unwrap().len(), 120);
        for key in ["D_mean", "D_max", "M_cum", "pi_chg", "ell_max"] {
            assert!(a["agg"][key].is_number(), "{name}.agg.{key}");
        }
        assert_eq!(a["agg"]["ell_max"], a["agg"]["D_max"]);
        assert!(a["violations"].is_array());
        assert_eq!(a["n_violations"], 0);
    }

    let sweep = read_json(out.join("C5/sensitivity.json"));
    let eps_on = sweep["eps_on"].as_object().unwrap();
    assert_eq!(eps_on.keys().collect::<Vec<_>>(), ["0.05", "0.1"]);
    let point = &eps_on["0.05"];
    assert_eq!(point["value"], 0.05);
    for key in ["D_mean", "D_ci", "M_cum", "M_ci", "pi_chg", "pi_ci"] {
        assert!(point[key].is_number(), "{key}");
    }
    assert!(sweep["tau"]["0.7"]["D_mean"].is_number());
    std::fs::remove_dir_all(&dir).ok();
}
