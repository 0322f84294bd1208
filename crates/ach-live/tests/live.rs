//! A short live experiment end to end: a 3-node local cluster, a few seconds per arm, every
//! arm; no client error, no lost or stale key, every file written, no server or cgroup left.

use std::sync::atomic::AtomicBool;

use ach_live::{Arm, LiveConfig};

fn leftover_cgroups() -> Vec<String> {
    let prefix = format!("ach-live-{}-", std::process::id());
    ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup"]
        .iter()
        .filter_map(|root| std::fs::read_dir(root).ok())
        .flatten()
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(&prefix))
        .collect()
}

#[test]
fn a_short_live_experiment_runs_every_arm_without_losing_a_key() {
    let out = tempfile::tempdir().expect("temporary directory");
    let config = LiveConfig {
        nodes: 3,
        keys: 2000,
        duration_s: 4,
        arms: Arm::defaults(),
        seed: 7,
        repeats: 1,
        out: out.path().to_path_buf(),
        clients: 2,
        rate: 400.0,
        cpu_per_strong_node: 0.3,
        interval_ms: 500,
    };
    let stop = AtomicBool::new(false);
    let mut progress = Vec::new();
    let results = ach_live::experiment::run(&config, &stop, &mut progress)
        .unwrap_or_else(|e| panic!("the live experiment failed: {e}"));
    let progress = String::from_utf8_lossy(&progress);
    assert!(progress.contains("ACH t="), "{progress}");
    assert_eq!(results.runs.len(), 5);
    for run in &results.runs {
        assert_eq!(
            run.client_errors, 0,
            "{}: {:?}",
            run.algorithm, run.error_samples
        );
        assert_eq!(run.lost_keys, 0, "{}", run.algorithm);
        assert_eq!(run.stale_keys, 0, "{}", run.algorithm);
        assert_eq!(
            run.stale_reads, 0,
            "{}: {:?}",
            run.algorithm, run.error_samples
        );
        assert!(run.requests > 0, "{}", run.algorithm);
        assert_eq!(run.steps.len(), 8, "{}", run.algorithm);
        assert!(run.d_bar.is_finite(), "{}: no D measured", run.algorithm);
        assert!(run.p99_ms >= run.p50_ms, "{}", run.algorithm);
    }
    let moved = |name: &str| {
        results
            .runs
            .iter()
            .find(|r| r.algorithm == name)
            .map(|r| r.keys_moved)
            .unwrap()
    };
    assert_eq!(moved("Static-W"), 0);
    // Equal slot ranges against weights 1 : 0.55 : 0.25: redis-cli must move slots.
    assert!(moved("redis-cli") > 0, "redis-cli moved nothing");
    match &results.cpu_limits_note {
        None => assert_ne!(results.cpu_limits, "none"),
        Some(reason) => assert_eq!(results.cpu_limits, "none", "{reason}"),
    }
    assert!(leftover_cgroups().is_empty(), "{:?}", leftover_cgroups());

    let sim = ach_live::simulator::run(&config).expect("the simulator runs the scenario");
    assert_eq!(sim.len(), 5);
    let arms = ach_live::output::write_all(&results, &sim).expect("files written");
    assert_eq!(arms.len(), 5);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    let listed = summary["arms"].as_array().expect("arms");
    assert_eq!(listed.len(), 5);
    for arm in listed {
        for field in [
            "algorithm",
            "d_bar",
            "keys_moved",
            "client_errors",
            "lost_keys",
            "p99_ms",
        ] {
            assert!(!arm[field].is_null(), "{field} missing in {arm}");
        }
    }
    let report = std::fs::read_to_string(out.path().join("REPORT.md")).expect("REPORT.md");
    assert!(report.contains("| redis-cli"), "{report}");
    for figure in ["live_d_and_keys_moved", "simulator_d_and_keys_moved"] {
        let svg = std::fs::read_to_string(out.path().join(format!("figures/{figure}.svg")))
            .expect("figure written");
        assert!(svg.starts_with("<svg"), "{figure}");
    }
}
