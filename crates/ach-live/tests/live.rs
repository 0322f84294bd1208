//! A short live experiment end to end: a 3-node local cluster, a few seconds per arm, every
//! arm, two repeats; no client error, no lost or stale key, every file written, `d_bar_true`
//! recomputed from the per-step files, no server or cgroup left.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use ach_live::experiment::LiveResults;
use ach_live::pace::ArmCalibration;
use ach_live::{Arm, CpuReading, LiveConfig};

/// One experiment at a time: each starts servers under CPU quotas, and the cgroup check
/// counts every cgroup of the process.
static SERIAL: Mutex<()> = Mutex::new(());

/// A short experiment: 3 masters, 2000 keys, 3 s per arm in 500 ms steps, 2 clients.
fn short_config(
    out: &std::path::Path,
    arms: Vec<Arm>,
    repeats: u32,
    cpu_reading: CpuReading,
) -> LiveConfig {
    LiveConfig {
        nodes: 3,
        keys: 2000,
        duration_s: 3,
        arms,
        seed: 7,
        repeats,
        out: out.to_path_buf(),
        clients: 2,
        senders_per_client: 2,
        rate: 400.0,
        cpu_per_strong_node: 0.3,
        interval_ms: 500,
        calibration_s: 1.0,
        idle_cpu_s: 1.0,
        cpu_reading,
        beta: 0.3,
        // The backend (detected) and the per-slot statistics' settings are the defaults.
        ..LiveConfig::default()
    }
}

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
fn a_short_two_repeat_experiment_loses_no_key_and_its_ground_truth_recomputes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().expect("temporary directory");
    let config = short_config(out.path(), Arm::defaults(), 2, CpuReading::Requests);
    let stop = AtomicBool::new(false);
    let mut progress = Vec::new();
    let results = ach_live::experiment::run(&config, &stop, &mut progress)
        .unwrap_or_else(|e| panic!("the live experiment failed: {e}"));
    let progress = String::from_utf8_lossy(&progress);
    assert!(progress.contains("ACH t="), "{progress}");
    assert_every_run_is_whole(&results);
    assert_moves_and_their_windows(&results);
    match &results.cpu_limits_note {
        None => assert_ne!(results.cpu_limits, "none"),
        Some(reason) => assert_eq!(results.cpu_limits, "none", "{reason}"),
    }
    assert!(leftover_cgroups().is_empty(), "{:?}", leftover_cgroups());

    assert_initial_slots_are_the_equal_ranges(&config, &results);
    let calibration = ach_live::pace::of_results(&results);
    assert_redis_cli_listings(&results, &calibration);
    let sim = ach_live::simulator::run(&config, &results.service_rates, &calibration)
        .expect("the simulator runs the scenario");
    assert_eq!(sim.len(), 10);
    let arms = ach_live::output::write_all(&results, &sim).expect("files written");
    assert_eq!(arms.len(), 5);
    assert_cadences(out.path(), &results);
    let summary = assert_summary(out.path());
    assert_resimulation(out.path(), &summary);
    assert_report_and_figures(out.path());
}

/// Every run of the experiment answered its requests without a client error, lost or stale
/// key, and has its steps, phases and finite D-bars; every arm of a repeat was offered the same
/// requests.
fn assert_every_run_is_whole(results: &LiveResults) {
    // Every master's cpu part counted its requests over its class's service rate, and no
    // idle use was read for it.
    for run in &results.runs {
        for node in &run.nodes {
            let rate = results
                .service_rates
                .iter()
                .find(|r| r.class == node.class)
                .map(|r| r.requests_per_s);
            assert_eq!(node.request_capacity, rate, "{}", node.address);
            assert_eq!(node.idle_cpu_cores, None, "{}", node.address);
        }
    }
    assert_eq!(results.runs.len(), 10);
    assert_eq!(results.service_rates.len(), 3);
    for rate in &results.service_rates {
        assert!(rate.requests_per_s > 0.0 && rate.errors == 0, "{rate:?}");
    }
    for run in &results.runs {
        assert_eq!(
            run.outcome.client_errors, 0,
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
        let outcome = &run.outcome;
        assert!(outcome.requests_answered > 0, "{}", run.algorithm);
        assert!(
            outcome.requests_offered >= outcome.requests_answered,
            "{}",
            run.algorithm
        );
        assert_eq!(run.steps.len(), 6, "{}", run.algorithm);
        assert!(run.d_bar_true.is_finite(), "{}: no D_true", run.algorithm);
        assert!(run.d_bar_telemetry.is_finite(), "{}: no D", run.algorithm);
        assert!(outcome.p999_ms >= outcome.p99_ms && outcome.p99_ms >= outcome.p50_ms);
        assert_eq!(run.phases.len(), 3, "{}", run.algorithm);
    }
    // The same seeded schedule per repeat index: every arm of a repeat was offered the same
    // requests.
    for repeat in 0..2 {
        let offered: Vec<u64> = results
            .runs
            .iter()
            .filter(|r| r.repeat == repeat)
            .map(|r| r.outcome.requests_offered)
            .collect();
        assert!(offered.windows(2).all(|w| w[0] == w[1]), "{offered:?}");
    }
}

/// Static-W moved nothing and redis-cli moved slots; every run that moved keys has its
/// rebalancing window.
fn assert_moves_and_their_windows(results: &LiveResults) {
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
    // Every run that moved keys has its clients' p99 over the steps it moved in, beside
    // A0's over the same steps of its repeat; the latencies were dropped after that.
    for run in &results.runs {
        assert!(
            run.latencies.is_empty(),
            "{}: latencies kept",
            run.algorithm
        );
        match &run.rebalancing {
            Some(window) => {
                assert!(run.keys_moved > 0 && window.steps.0 < window.steps.1);
                // A window of steps in which no request was answered (a loop's first step
                // moves before the clients, which start after the loop, have sent anything)
                // has no p99; any other has one.
                let answered = window.outcome.requests_answered;
                assert_eq!(
                    window.outcome.p99_ms.is_finite(),
                    answered > 0,
                    "{}: {answered} answered in {:?}",
                    run.algorithm,
                    window.steps
                );
                assert!(
                    window.static_p99_ms.is_some(),
                    "{}: no A0 p99",
                    run.algorithm
                );
            }
            None => assert_eq!(run.keys_moved, 0, "{}: no window", run.algorithm),
        }
    }
}

/// Every master's initial slots are one of the equal ranges, each range once per run.
fn assert_initial_slots_are_the_equal_ranges(config: &LiveConfig, results: &LiveResults) {
    let ranges = ach_redis::local::even_slot_ranges(config.nodes);
    for run in &results.runs {
        let mut slots: Vec<(u16, u16)> = run.nodes.iter().filter_map(|n| n.initial_slots).collect();
        slots.sort_unstable();
        assert_eq!(slots, ranges, "{} r{}", run.algorithm, run.repeat);
    }
}

/// redis-cli's order is read back for every repeat in which it printed transfers, and its
/// notes count them.
fn assert_redis_cli_listings(results: &LiveResults, calibration: &ArmCalibration) {
    for run in results.runs.iter().filter(|r| r.algorithm == "redis-cli") {
        let transfers = ach_live::listing::transfers(&run.rebalance_log);
        let note = format!("{} slot batches moved", transfers.len());
        assert!(
            run.rebalancer_notes.iter().any(|n| n.ends_with(&note)),
            "{note}: {:?}",
            run.rebalancer_notes
        );
        let listing = calibration
            .redis_cli_listings
            .iter()
            .find(|l| l.repeat == run.repeat);
        match listing {
            Some(listing) => {
                assert!(!transfers.is_empty());
                let mut nodes = listing.nodes.clone();
                nodes.sort_unstable();
                assert_eq!(nodes, [0, 1, 2], "repeat {}", run.repeat);
            }
            None => assert!(transfers.is_empty(), "repeat {}: {transfers:?}", run.repeat),
        }
    }
}

/// Every rebalance loop's cadence is read back from its log, and is the one in its notes.
fn assert_cadences(out: &std::path::Path, results: &LiveResults) {
    let cadences = ach_live::cadence::read_run_folder(out).expect("the loops' logs");
    let names: Vec<&str> = cadences.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ACH-r0",
            "ACH-r1",
            "Bounded-Loads-r0",
            "Bounded-Loads-r1",
            "Dynamic-R-r0",
            "Dynamic-R-r1"
        ]
    );
    for (name, cadence) in &cadences {
        let (algorithm, repeat) = name.rsplit_once("-r").expect("ARM-rK");
        let run = results
            .runs
            .iter()
            .find(|r| r.algorithm == algorithm && r.repeat.to_string() == repeat)
            .expect("a run per log");
        assert!(cadence.control_steps >= 1, "{name}: {cadence:?}");
        assert!(
            run.rebalancer_notes.contains(&cadence.note()),
            "{name}: {:?}",
            run.rebalancer_notes
        );
    }
}

/// `summary.json` lists every arm with its fields, its `d_bar_true` recomputed from the
/// per-step files, ACH's comparisons and the simulator's calibration; returns it.
fn assert_summary(out: &std::path::Path) -> serde_json::Value {
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    let listed = summary["arms"].as_array().expect("arms");
    assert_eq!(listed.len(), 5);
    for arm in listed {
        for field in [
            "algorithm",
            "backend",
            "repeats",
            "d_bar_true",
            "d_bar_true_ci95",
            "d_bar_true_per_repeat",
            "d_bar_telemetry",
            "keys_moved",
            "client_errors",
            "lost_keys",
            "stale_keys",
            "requests_offered",
            "requests_answered",
            "p50_ms",
            "p99_ms",
            "p999_ms",
            "sim_d_bar_true",
        ] {
            assert!(!arm[field].is_null(), "{field} missing in {arm}");
        }
        recompute_d_bar_true(out, arm);
    }
    let comparisons = summary["comparisons"].as_array().expect("comparisons");
    // ACH against four arms on three metrics.
    assert_eq!(comparisons.len(), 12, "{comparisons:?}");
    for row in comparisons {
        for field in ["algorithm", "baseline", "metric", "n", "cliffs_delta"] {
            assert!(!row[field].is_null(), "{field} missing in {row}");
        }
        assert_eq!(row["n"], 2);
    }
    assert_eq!(summary["service_rates"].as_array().map(Vec::len), Some(3));
    // The simulator ran paced by the clock measured in the loop arms and redis-cli's rate, and
    // read each class as the loops read it; `live-resim` measures the same from the folder.
    let calibration = &summary["simulator"]["calibration"];
    assert!(calibration["pacing"].is_array(), "{calibration}");
    let series = &summary["simulator"]["series"];
    for field in ["pacing", "readings"] {
        let given = series.get(field).cloned().unwrap_or(serde_json::json!([]));
        assert_eq!(given, calibration[field], "{field}");
    }
    summary
}

/// `live-resim` reads the folder back: the calibration the run used, the observer's readings
/// beside the truth for every class, each arm's calibrated D-bar equal to the simulated one of
/// `summary.json`, and, once runs/ is gone, the calibration a resimulation saved.
fn assert_resimulation(out: &std::path::Path, summary: &serde_json::Value) {
    let calibration = &summary["simulator"]["calibration"];
    let listed = summary["arms"].as_array().expect("arms");
    let options = ach_live::resimulate::Options::default();
    let resimulation =
        ach_live::resimulate::resimulate(out, &options).expect("live-resim reads it");
    assert_eq!(
        serde_json::to_value(&resimulation.calibration).expect("JSON"),
        *calibration,
        "the folder gives the calibration the run used"
    );
    assert_eq!(resimulation.arms.len(), 5);
    // The observer's readings of every arm are set beside the truth, per class, with the
    // clients' step p99s read back from the per-step files.
    for arm in &resimulation.arms {
        let classes = resimulation
            .reading_parts
            .iter()
            .filter(|p| p.algorithm == arm.algorithm && p.samples > 0 && p.cpu.is_finite())
            .filter(|p| {
                matches!((p.step_p99_ms_median, p.step_p99_ms_p90),
                    (Some(median), Some(p90)) if median > 0.0 && median <= p90)
            })
            .count();
        assert_eq!(
            classes, 3,
            "{}: {:?}",
            arm.algorithm, resimulation.reading_parts
        );
    }
    // By default live-resim simulates what the run simulated: each arm's calibrated D-bar is
    // the summary's simulated one.
    for (arm, summarised) in resimulation.arms.iter().zip(listed) {
        assert!(arm.live.is_finite() && arm.instant.is_finite() && arm.calibrated.is_finite());
        let simulated = summarised["sim_d_bar_true"]
            .as_f64()
            .expect("sim_d_bar_true");
        assert!(
            (arm.calibrated - simulated).abs() < 1e-12,
            "{}: {} against {simulated}",
            arm.algorithm,
            arm.calibrated
        );
    }
    // A folder without its runs/ takes the calibration a resimulation saved.
    let saved = out.join("resimulation.json");
    resimulation.write_json(&saved).expect("written");
    std::fs::rename(out.join("runs"), out.join("runs-away")).expect("moved");
    let refused = ach_live::resimulate::resimulate(out, &options)
        .expect_err("no runs/, no calibration")
        .to_string();
    assert!(
        refused.contains("runs: missing") && refused.contains("--calibration"),
        "{refused}"
    );
    let from_saved = ach_live::resimulate::resimulate(
        out,
        &ach_live::resimulate::Options {
            calibration: Some(saved),
            ..options
        },
    )
    .expect("live-resim with a saved calibration");
    // The same figures and simulated traces; the live traces are read from the runs only.
    let without_live = |arms: &[ach_live::resimulate::ArmAgreement]| {
        let mut arms = arms.to_vec();
        for arm in &mut arms {
            arm.traces.live.clear();
        }
        arms
    };
    assert!(from_saved.arms.iter().all(|a| a.traces.live.is_empty()));
    assert!(resimulation.arms.iter().all(|a| a.traces.live.len() == 6));
    assert_eq!(from_saved.arms, without_live(&resimulation.arms));
    std::fs::rename(out.join("runs-away"), out.join("runs")).expect("moved back");
}

/// REPORT.md has its tables whole and its notes, and the figures are written.
fn assert_report_and_figures(out: &std::path::Path) {
    let report = std::fs::read_to_string(out.join("REPORT.md")).expect("REPORT.md");
    assert!(report.contains("| redis-cli"), "{report}");
    assert!(report.contains("Service rates"), "{report}");
    assert!(report.contains("load average"), "{report}");
    assert_tables_are_whole(&report);
    for figure in [
        "live_d_true_and_keys_moved",
        "live_vs_simulated_d_true",
        "live_d_telemetry",
    ] {
        let svg = std::fs::read_to_string(out.join(format!("figures/{figure}.svg")))
            .expect("figure written");
        assert!(svg.starts_with("<svg"), "{figure}");
    }
}

/// Every Markdown table of `report` has as many cells in each row as in its header.
fn assert_tables_are_whole(report: &str) {
    let mut header: Option<usize> = None;
    for line in report.lines() {
        if !line.starts_with('|') {
            header = None;
            continue;
        }
        let cells = line.trim_end_matches('|').matches('|').count();
        match header {
            None => header = Some(cells),
            Some(columns) => assert_eq!(cells, columns, "a row unlike its header: {line}"),
        }
    }
}

/// Recomputes an arm's `d_bar_true` from its per-step files: every step's `D_true` from its
/// true loads (max minus mean), the mean over the steps not marked `warmup`, per repeat and
/// over the repeats, and compares with `summary.json`.
fn recompute_d_bar_true(out: &std::path::Path, arm: &serde_json::Value) {
    let name = arm["algorithm"].as_str().expect("a name");
    let per_repeat = arm["d_bar_true_per_repeat"].as_array().expect("per repeat");
    assert_eq!(per_repeat.len(), 2, "{name}");
    let mut means = Vec::new();
    for (repeat, expected) in per_repeat.iter().enumerate() {
        let path = out.join(format!("runs/{name}-r{repeat}.json"));
        let run: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("a run file"))
                .expect("JSON");
        let mut kept = Vec::new();
        for step in run["steps"].as_array().expect("steps") {
            let loads: Vec<f64> = step["true_loads"]
                .as_array()
                .expect("true loads")
                .iter()
                .map(|l| l.as_f64().expect("a number"))
                .collect();
            assert_eq!(loads.len(), 3, "{}", path.display());
            let max = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let d = max - loads.iter().sum::<f64>() / loads.len() as f64;
            let recorded = step["d_true"].as_f64().expect("d_true");
            assert!(
                (d - recorded).abs() < 1e-12,
                "{}: {d} {recorded}",
                path.display()
            );
            if !step["warmup"].as_bool().expect("warmup") {
                kept.push(d);
                // Past the warm-up every master's composite has its parts, the cpu read.
                let parts = step["telemetry_readings"].as_array().expect("readings");
                assert_eq!(parts.len(), 3, "{}", path.display());
                for part in parts {
                    let cpu = part[0].as_f64();
                    assert!(cpu.is_some_and(|c| c >= 0.0), "{}: {part}", path.display());
                }
            }
        }
        assert!(!kept.is_empty(), "{}", path.display());
        let mean = kept.iter().sum::<f64>() / kept.len() as f64;
        let expected = expected.as_f64().expect("a number");
        assert!(
            (mean - expected).abs() < 1e-12,
            "{name} r{repeat}: {mean} {expected}"
        );
        means.push(mean);
    }
    let mean = means.iter().sum::<f64>() / means.len() as f64;
    let listed = arm["d_bar_true"].as_f64().expect("d_bar_true");
    assert!((mean - listed).abs() < 1e-12, "{name}: {mean} {listed}");
}

/// `--cpu-reading cores`: every master's idle cpu is read before the workload, is less than
/// its quota, and the loop steers by cpu readings without a capacity. The loop reads the
/// per-slot statistics in chunks of 2 048 slots (`--slot-stats-chunk`): on Valkey, more
/// requests than one a step.
#[test]
fn with_cpu_readings_every_masters_idle_use_is_read_first() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().expect("temporary directory");
    let arms = vec![Arm::parse("static-w").unwrap(), Arm::parse("ach").unwrap()];
    let config = LiveConfig {
        slot_stats_chunk: 2048,
        slot_stats_every: 1,
        slot_stats_window: 1,
        slot_split: ach_redis::control::SlotSplit::Cpu,
        ..short_config(out.path(), arms, 1, CpuReading::Cores)
    };
    let stop = AtomicBool::new(false);
    let results = ach_live::experiment::run(&config, &stop, &mut std::io::sink())
        .unwrap_or_else(|e| panic!("the live experiment failed: {e}"));
    assert_eq!(results.runs.len(), 2);
    for run in &results.runs {
        assert_eq!(run.outcome.client_errors, 0, "{}", run.algorithm);
        assert_eq!((run.lost_keys, run.stale_keys), (0, 0), "{}", run.algorithm);
        for node in &run.nodes {
            let idle = node
                .idle_cpu_cores
                .unwrap_or_else(|| panic!("{}: {} has no idle cpu", run.algorithm, node.address));
            let quota = node
                .quota_us
                .map_or(1.0, |us| us as f64 / ach_live::cgroup::PERIOD_US as f64);
            assert!(idle > 0.0 && idle < quota, "{}: idle {idle}", node.address);
            assert_eq!(node.request_capacity, None, "{}", node.address);
        }
    }
    if results.backend == "valkey" {
        // One reading before the first step and one a step; each master (about 5 461 slots
        // at the start) answers every reading in more than one request.
        let ach = results
            .runs
            .iter()
            .find(|run| run.algorithm == "ACH")
            .expect("an ACH run");
        let readings = ach_live::cadence::step_events(&ach.rebalance_log).len() as u64 + 1;
        for node in &ach.nodes {
            let work = node.server_work.as_ref().expect("server work");
            let calls = work
                .commands
                .iter()
                .find(|c| c.command == "cluster|slot-stats")
                .map_or(0, |c| c.calls);
            assert!(calls > readings, "{}: {calls} requests", node.address);
        }
    }
    assert!(leftover_cgroups().is_empty(), "{:?}", leftover_cgroups());
}
