//! `ach-redis rebalance` on a real 4-node cluster under continuous reads and writes, and
//! `fix` after the rebalancer is killed (SIGKILL) at every point of the migration protocol.
//! Every test runs once per backend (`redis_backend::*` on redis-server 7.0,
//! `valkey_backend::*` on valkey-server 9 with atomic migration).

#[macro_use]
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use ach_redis::local::{LocalCluster, ServerKind};
use common::{
    DataSet, Workload, ach_redis, assert_check_clean, assert_nothing_lost, data_calls, read_log,
    serial, share_between, start_cluster_of, used_memory_mb,
};

on_every_backend!(
    ach_rebalance_under_load_sheds_the_hot_node_within_budget_and_loses_nothing,
    sigkill_at_every_protocol_point_then_fix_leaves_a_clean_cluster,
    degraded_cluster_migrates_nothing_and_resumes_when_healthy,
    ctrl_c_finishes_the_slot_in_flight_and_stops_cleanly,
    unreachable_node_stops_migrations_until_it_is_back,
);

/// The migration method every migration of `kind`'s backend uses.
fn method_of(kind: ServerKind) -> &'static str {
    match kind {
        // Valkey 8 has no atomic migration: the redis backend drives it.
        ServerKind::Redis | ServerKind::Valkey8 => "keys",
        ServerKind::Valkey => "atomic",
    }
}

/// The hot server's slot range (server 0 of a 4-node cluster).
const HOT_RANGE: (u16, u16) = (0, 4095);

/// A 4-node cluster whose server 0 holds `hot_slots` slots of `per_hot_slot` keys besides
/// `uniform` keys spread over all slots, with the `--memory-capacity-mb` that puts server 0's
/// memory reading at about 0.95.
fn hot_cluster(
    kind: ServerKind,
    uniform: usize,
    hot_slots: usize,
    per_hot_slot: usize,
) -> (LocalCluster, Arc<DataSet>, String) {
    let cluster = start_cluster_of(kind, 4);
    let data = Arc::new(DataSet::new(uniform, hot_slots, per_hot_slot, HOT_RANGE));
    data.load(&cluster, 2);
    let capacity = format!("{:.1}", used_memory_mb(&cluster.servers()[0]) * 1.05);
    (cluster, data, capacity)
}

fn ach_rebalance_under_load_sheds_the_hot_node_within_budget_and_loses_nothing(kind: ServerKind) {
    let _serial = serial();
    // 12000 keys over all slots, 24000 more in 60 hot slots of server 0: it holds 75 % of the
    // keys and, as clients touch every key alike, 75 % of the operations.
    let (cluster, data, capacity) = hot_cluster(kind, 12_000, 60, 400);
    let hot = cluster.servers()[0].address();
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(120));

    let window = Duration::from_secs(2);
    let calls_0 = data_calls(&cluster);
    std::thread::sleep(window);
    let calls_1 = data_calls(&cluster);
    let share_before = share_between(&calls_0, &calls_1, &hot);

    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().to_str().unwrap().to_string();
    let seed = cluster.seed();
    let (m_max, m_horizon, horizon) = (0.05, 0.3, 10usize);
    let output = ach_redis(&[
        "rebalance",
        "--cluster",
        &seed,
        "--steps",
        "20",
        "--interval-ms",
        "300",
        "--beta",
        "0.6",
        "--memory-capacity-mb",
        &capacity,
        "--log",
        &log_path,
        "--m-max",
        &m_max.to_string(),
        "--m-horizon",
        &m_horizon.to_string(),
        "--horizon",
        &horizon.to_string(),
    ]);
    let progress = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "rebalance failed:\n{progress}");

    let calls_2 = data_calls(&cluster);
    std::thread::sleep(window);
    let calls_3 = data_calls(&cluster);
    let share_after = share_between(&calls_2, &calls_3, &hot);
    let report = workload.finish();
    eprintln!(
        "{progress}\nhot node's share of operations: {share_before:.3} before, {share_after:.3} after; \
         workload: {} ops, {} errors, {} stale reads",
        report.ops, report.errors, report.stale_reads
    );

    assert!(report.ops > 1000, "the workload ran: {} ops", report.ops);
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);

    let steps = read_log(log.path());
    assert_eq!(steps.len(), 20, "one line per step:\n{progress}");
    for step in &steps {
        assert_eq!(step["backend"], kind_backend(kind), "{step}");
        assert_eq!(
            step["slot_stats"], false,
            "slot statistics stay off unless asked"
        );
        for migration in step["outcome"]["migrations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            assert_eq!(migration["method"], method_of(kind), "{migration}");
            assert_eq!(migration["outcome"], "success", "{migration}");
        }
    }
    let moved: Vec<f64> = steps
        .iter()
        .map(|s| s["moved_fraction"].as_f64().unwrap())
        .collect();
    let keys_moved: u64 = steps
        .iter()
        .filter_map(|s| s["outcome"]["keys_moved"].as_u64())
        .sum();
    assert!(keys_moved > 0, "nothing moved:\n{progress}");
    for (step, fraction) in moved.iter().enumerate() {
        assert!(
            *fraction <= m_max + 1e-9,
            "step {step} moved {fraction} > M_max"
        );
    }
    for start in 0..moved.len() {
        let window: f64 = moved[start..(start + horizon).min(moved.len())]
            .iter()
            .sum();
        assert!(
            window <= m_horizon + 1e-9,
            "steps {start}.. moved {window} > M_H"
        );
    }
    assert!(
        share_after < share_before - 0.1,
        "hot node's share of operations: {share_before:.3} before, {share_after:.3} after\n{progress}"
    );
}

/// The `backend` field of the step log for `kind`'s servers (detected).
fn kind_backend(kind: ServerKind) -> &'static str {
    match kind {
        ServerKind::Redis | ServerKind::Valkey8 => "redis",
        ServerKind::Valkey => "valkey",
    }
}

/// Runs `rebalance` paused at `point`, kills it with SIGKILL there, then runs `fix` and checks
/// that it did `expected` (`completed`, `rolled back` or `no open slot`).
fn kill_at_point_then_fix(seed: &str, capacity: &str, point: &str, expected: &str) {
    let (mut child, lines) = spawn_rebalance(
        seed,
        capacity,
        &[
            "--steps",
            "5",
            "--interval-ms",
            "100",
            "--batch",
            "20",
            "--m-max",
            "0.1",
            "--horizon",
            "5",
            "--pause-at",
            point,
        ],
    );
    let paused = std::panic::catch_unwind(|| wait_for_line(&lines, "paused at"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(paused.is_ok(), "rebalance never reached {point}");
    let status = ach_redis(&["status", "--cluster", seed, "--sample-ms", "10"]);
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert_eq!(
        !status.contains("open slots: none"),
        expected != "no open slot",
        "after a kill at {point}:\n{status}"
    );
    let fix = ach_redis(&["fix", "--cluster", seed]);
    let fixed = String::from_utf8_lossy(&fix.stdout).to_string();
    assert!(
        fix.status.success(),
        "fix after a kill at {point} failed: {}",
        String::from_utf8_lossy(&fix.stderr)
    );
    assert!(
        fixed.contains(expected),
        "fix after a kill at {point}: {fixed}"
    );
}

fn sigkill_at_every_protocol_point_then_fix_leaves_a_clean_cluster(kind: ServerKind) {
    let _serial = serial();
    let (cluster, data, capacity) = hot_cluster(kind, 4000, 30, 300);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(180));
    let seed = cluster.seed();
    let key_by_key = [
        ("importing", "rolled back"),
        ("migrating", "completed"),
        ("first-batch", "completed"),
        ("target-node", "completed"),
        ("source-node", "no open slot"),
    ];
    // The server runs an atomic job on its own: killed right after MIGRATESLOTS, the job ends
    // by itself (fix waits for a job still running) and leaves no open slot.
    let atomic = [("atomic-started", "no open slot")];
    let points: &[(&str, &str)] = match kind {
        ServerKind::Redis | ServerKind::Valkey8 => &key_by_key,
        ServerKind::Valkey => &atomic,
    };
    for &(point, expected) in points {
        kill_at_point_then_fix(&seed, &capacity, point, expected);
        assert_check_clean(&cluster);
    }
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
}

/// Starts `ach-redis rebalance --cluster SEED --beta 1 --memory-capacity-mb CAPACITY
/// --m-horizon 1` and `extra`, with a piped stderr whose lines arrive on the returned channel.
fn spawn_rebalance(
    seed: &str,
    capacity: &str,
    extra: &[&str],
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ach-redis"))
        .args(["rebalance", "--cluster", seed, "--beta", "1"])
        .args(["--memory-capacity-mb", capacity, "--m-horizon", "1"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    (child, receiver)
}

/// Starts `rebalance` for `steps` steps of 200 ms (a 10-step horizon of `M_max = 0.05`),
/// logging to `log`, and waits for its first step.
fn spawn_watching(
    seed: &str,
    capacity: &str,
    steps: &str,
    log: &std::path::Path,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let log = log.to_str().unwrap();
    let (child, lines) = spawn_rebalance(
        seed,
        capacity,
        &[
            "--steps",
            steps,
            "--interval-ms",
            "200",
            "--m-max",
            "0.05",
            "--horizon",
            "10",
            "--log",
            log,
        ],
    );
    wait_for_line(&lines, "step 0:");
    (child, lines)
}

/// Waits for a stderr line containing `text`; returns every line seen (the match last).
fn wait_for_line(receiver: &mpsc::Receiver<String>, text: &str) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(line) = receiver.recv_timeout(Duration::from_secs(60)) {
        let found = line.contains(text);
        seen.push(line);
        if found {
            return seen;
        }
    }
    panic!("no line with {text:?} within 60 s:\n{}", seen.join("\n"));
}

fn degraded_cluster_migrates_nothing_and_resumes_when_healthy(kind: ServerKind) {
    let _serial = serial();
    let (cluster, _data, capacity) = hot_cluster(kind, 4000, 30, 300);
    // An empty slot of the seed (server 0), which it will stop serving: from the middle of its
    // range, as compact moves take their runs from the ends of a range and the first step may
    // move an empty slot at the start of it.
    let mut seed_connection = cluster.servers()[0].connection().unwrap();
    let empty_slot = (HOT_RANGE.1 / 2..=HOT_RANGE.1)
        .find(|&slot| {
            let keys: u64 = redis::cmd("CLUSTER")
                .arg("COUNTKEYSINSLOT")
                .arg(slot)
                .query(&mut seed_connection)
                .unwrap();
            keys == 0
        })
        .expect("an empty slot");
    let log = tempfile::NamedTempFile::new().unwrap();
    let seed = cluster.seed();
    let (mut child, lines) = spawn_watching(&seed, &capacity, "25", log.path());
    let _: () = redis::cmd("CLUSTER")
        .arg("DELSLOTS")
        .arg(empty_slot)
        .query(&mut seed_connection)
        .unwrap();
    let seen = wait_for_line(&lines, "migrating nothing");
    let degraded = seen.last().unwrap().clone();
    wait_for_line(&lines, "migrating nothing");
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTS")
        .arg(empty_slot)
        .query(&mut seed_connection)
        .unwrap();
    let status = child.wait().unwrap();
    // 0, or 3 when a migration in flight as the slot lost its owner failed (the summary, the
    // log's last line, says so): the exit code tells which.
    let summary = common::read_events(log.path())
        .into_iter()
        .find(|line| line["event"] == "summary")
        .expect("the log ends with the summary");
    let failed = summary["summary"]["migrations_failed"].as_u64().unwrap();
    match status.code() {
        Some(0) => assert_eq!(failed, 0, "{summary}"),
        Some(3) => assert!(failed > 0, "{summary}"),
        other => panic!("exit {other:?}: {summary}"),
    }
    assert!(
        degraded.contains("1 slots have no owner") || degraded.contains("cluster_state:fail"),
        "{degraded}"
    );
    let steps = read_log(log.path());
    let first_degraded = steps
        .iter()
        .position(|s| s["healthy"] == false)
        .expect("a degraded step");
    let moved_while_degraded: u64 = steps
        .iter()
        .filter(|s| s["healthy"] == false)
        .map(|s| {
            assert!(s["outcome"].is_null() && !s["problems"].as_array().unwrap().is_empty());
            s["outcome"]["keys_moved"].as_u64().unwrap_or(0)
        })
        .sum();
    assert_eq!(moved_while_degraded, 0);
    let moved_after: u64 = steps[first_degraded..]
        .iter()
        .filter(|s| s["healthy"] == true)
        .filter_map(|s| s["outcome"]["keys_moved"].as_u64())
        .sum();
    assert!(moved_after > 0, "the rebalancer did not resume");
    assert_check_clean(&cluster);
}

fn ctrl_c_finishes_the_slot_in_flight_and_stops_cleanly(kind: ServerKind) {
    let _serial = serial();
    let (cluster, _data, capacity) = hot_cluster(kind, 4000, 30, 300);
    let seed = cluster.seed();
    let (mut child, lines) = spawn_rebalance(
        &seed,
        &capacity,
        &[
            "--steps",
            "100",
            "--interval-ms",
            "100",
            "--batch",
            "2",
            "--m-max",
            "0.05",
            "--horizon",
            "10",
        ],
    );
    let mut seen = wait_for_line(&lines, &format!("  {} slot ", method_of(kind)));
    // SIGINT by PID, as Ctrl-C in a terminal sends it (bash's builtin `kill`).
    let interrupted = Command::new("bash")
        .args(["-c", &format!("kill -INT {}", child.id())])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    // The reader thread ends at the child's end of stderr: every line is in.
    seen.extend(lines.iter());
    let rest = seen;
    assert!(status.success(), "{status}: {rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("stopped by request")),
        "{rest:?}"
    );
    // The slot in flight finished normally: no error, nothing left for the closing fix.
    assert!(
        !rest
            .iter()
            .any(|l| l.contains("errors:") || l.starts_with("fix:")),
        "{rest:?}"
    );
    let after = ach_redis(&["status", "--cluster", &seed, "--sample-ms", "10"]);
    let after = String::from_utf8_lossy(&after.stdout).to_string();
    assert!(after.contains("open slots: none"), "{after}\n{rest:?}");
    assert_check_clean(&cluster);
}

fn unreachable_node_stops_migrations_until_it_is_back(kind: ServerKind) {
    let _serial = serial();
    let (mut cluster, _data, capacity) = hot_cluster(kind, 4000, 30, 300);
    let seed = cluster.seed();
    let down = cluster.servers()[3].address();
    let log = tempfile::NamedTempFile::new().unwrap();
    let (mut child, lines) = spawn_watching(&seed, &capacity, "30", log.path());
    cluster.servers_mut()[3].kill();
    let seen = wait_for_line(&lines, "migrating nothing");
    let degraded = seen.last().unwrap().clone();
    wait_for_line(&lines, "migrating nothing");
    cluster.servers_mut()[3]
        .restart()
        .unwrap_or_else(|e| panic!("{e}"));
    let status = child.wait().unwrap();
    // The reader thread ends at the child's end of stderr: every line is in.
    let rest: Vec<String> = lines.iter().collect();
    assert!(degraded.contains(&down), "{degraded}");
    let steps = read_log(log.path());
    let first_degraded = steps
        .iter()
        .position(|s| s["healthy"] == false)
        .expect("a degraded step");
    // The node is killed while the first steps migrate: a migration to it may fail then, and
    // the run must say so with exit code 3. Nothing may fail once the node is back, and the
    // cluster is healthy at exit.
    let summary = common::read_events(log.path())
        .into_iter()
        .find(|event| event["event"] == "summary")
        .expect("a summary event");
    assert_eq!(
        summary["summary"]["problems_at_exit"],
        serde_json::json!([])
    );
    let errors = summary["summary"]["errors"].as_array().unwrap();
    for error in errors {
        let step: usize = error.as_str().unwrap()["step ".len()..]
            .split(':')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("an error without its step: {error}"));
        assert!(
            step < first_degraded,
            "a failure after the node was back: {error}"
        );
    }
    let expected_code = if errors.is_empty() { 0 } else { 3 };
    assert_eq!(status.code(), Some(expected_code), "{summary}\n{rest:?}");
    let moved_after: u64 = steps[first_degraded..]
        .iter()
        .filter(|s| s["healthy"] == true)
        .filter_map(|s| s["outcome"]["keys_moved"].as_u64())
        .sum();
    assert!(moved_after > 0, "the rebalancer did not resume: {rest:?}");
    assert_check_clean(&cluster);
}
