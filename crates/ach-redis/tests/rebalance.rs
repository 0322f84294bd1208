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
    DataSet, Workload, ach_redis, assert_check_clean, assert_nothing_lost, data_calls, node_id,
    read_log, serial, share_between, slot_map, start_cluster_of, temp_log, used_memory_mb,
    wrong_values,
};

on_every_backend!(
    ach_rebalance_under_load_sheds_the_hot_node_within_budget_and_loses_nothing,
    sigkill_at_every_protocol_point_then_fix_leaves_a_clean_cluster,
    degraded_cluster_migrates_nothing_and_resumes_when_healthy,
    ctrl_c_finishes_the_slot_in_flight_and_stops_cleanly,
    unreachable_node_stops_migrations_until_it_is_back,
    fix_force_with_unreachable_closes_what_loses_no_key_and_names_the_rest,
    a_reshuffle_that_moves_all_of_a_masters_slots_keeps_it_a_master_and_loses_nothing,
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

    let (log, log_path) = temp_log();
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
    // An atomic job the kill left running may still run when fix starts: fix then waits for it
    // and reports each of its slots as succeeded, which leaves no open slot either.
    let waited_for_job = expected == "no open slot"
        && !fixed.trim().is_empty()
        && fixed
            .lines()
            .all(|line| line.contains("atomic job succeeded"));
    assert!(
        fixed.contains(expected) || waited_for_job,
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
    // by itself (fix waits for a job still running, and says each slot's job succeeded) and
    // leaves no open slot.
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

/// `CLUSTER <args>` on `server`, failing the test on an error.
fn cluster_command<T: redis::FromRedisValue>(
    server: &ach_redis::local::LocalServer,
    args: &[&str],
) -> T {
    let mut connection = server.connection().unwrap();
    redis::cmd("CLUSTER")
        .arg(args)
        .query(&mut connection)
        .unwrap_or_else(|e| panic!("CLUSTER {args:?} on {}: {e}", server.address()))
}

/// Waits until every server of `cluster` at `indices` reports `state` (`ok` or `fail`).
fn wait_for_state(cluster: &LocalCluster, indices: &[usize], state: &str) {
    let started = std::time::Instant::now();
    while !indices.iter().all(|&i| {
        let info: String = cluster_command(&cluster.servers()[i], &["INFO"]);
        info.contains(&format!("cluster_state:{state}"))
    }) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "cluster_state:{state}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Three masters A, B, C with keys; slots left open by hand, then C killed (the cluster goes
/// down): s1 migrating A -> B with one key moved and the others not, s2 importing on B only,
/// s3 importing on A from C, s4 migrating A -> C, s5 migrating A -> B with every key moved.
/// `fix` refuses the degraded cluster; `fix --force-with-unreachable` warns first, rolls back
/// s2 and s3 (their targets hold no key), completes s5 (no key left to move), leaves s4 open
/// naming C and s1 open with the target's CLUSTERDOWN refusal of MIGRATE, and exits 5. Once C is back, `fix` closes the rest: every key holds its value and the check
/// is clean.
fn fix_force_with_unreachable_closes_what_loses_no_key_and_names_the_rest(kind: ServerKind) {
    let _serial = serial();
    let mut cluster = start_cluster_of(kind, 3);
    // Four hash tags of 5 keys each in slots 0-5000, and 3000 keys over all slots.
    let data = DataSet::new(3000, 4, 5, (0, 5000));
    data.load(&cluster, 2);
    let count = |server: &ach_redis::local::LocalServer, slot: u16| -> u64 {
        cluster_command(server, &["COUNTKEYSINSLOT", &slot.to_string()])
    };
    // A owns the tags' slots; C is the master killed.
    let servers = cluster.servers();
    let a_index = (0..3)
        .find(|&i| count(&servers[i], data.hot_slots[0]) > 0)
        .expect("a master holds the tags' keys");
    let (b_index, c_index) = ((a_index + 1) % 3, (a_index + 2) % 3);
    let (a, b, c) = (&servers[a_index], &servers[b_index], &servers[c_index]);
    let ids = [node_id(a), node_id(b), node_id(c)];
    let keys_in = |slot: u16| -> Vec<String> {
        cluster_command(a, &["GETKEYSINSLOT", &slot.to_string(), "100"])
    };
    let [s1, s2, s4, s5] = [0, 1, 2, 3].map(|i| data.hot_slots[i]);
    // A slot of C's: importing on A from it.
    let s3 = (0..16384u16)
        .find(|&slot| count(c, slot) > 0)
        .expect("C owns a slot with keys");
    let migrate = |keys: &[String]| {
        let mut connection = a.connection().unwrap();
        let _: redis::Value = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(b.port())
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(keys)
            .query(&mut connection)
            .unwrap();
    };
    let setslot = |server: &ach_redis::local::LocalServer, slot: u16, state: &str, id: &str| {
        let _: () = cluster_command(server, &["SETSLOT", &slot.to_string(), state, id]);
    };
    for slot in [s1, s5] {
        setslot(b, slot, "IMPORTING", &ids[0]);
        setslot(a, slot, "MIGRATING", &ids[1]);
    }
    migrate(&keys_in(s1)[..1]);
    migrate(&keys_in(s5));
    setslot(b, s2, "IMPORTING", &ids[0]);
    setslot(a, s3, "IMPORTING", &ids[2]);
    setslot(a, s4, "MIGRATING", &ids[2]);
    // The harness's servers keep no data across a restart: the keys C holds now are lost with
    // it whatever fix does, and are left out of the final check.
    let lost_with_c: std::collections::BTreeSet<u16> = data
        .keys
        .iter()
        .map(|k| ach_redis::slot::key_slot(k.as_bytes()))
        .filter(|&slot| count(c, slot) > 0)
        .collect();
    let (down, b_address) = (c.address(), b.address());
    cluster.servers_mut()[c_index].kill();
    wait_for_state(&cluster, &[a_index, b_index], "fail");
    let seed = cluster.seed();

    let refused = ach_redis(&["fix", "--cluster", &seed]);
    let refused_text = String::from_utf8_lossy(&refused.stderr).to_string();
    assert_eq!(refused.status.code(), Some(2), "{refused_text}");
    assert!(refused_text.contains("degraded"), "{refused_text}");

    let forced = ach_redis(&["fix", "--cluster", &seed, "--force-with-unreachable"]);
    let warning = String::from_utf8_lossy(&forced.stderr).to_string();
    let report = String::from_utf8_lossy(&forced.stdout).to_string();
    eprintln!("{warning}{report}");
    assert!(
        warning.starts_with("ach-redis: WARNING: fix --force-with-unreachable on a degraded"),
        "{warning}"
    );
    assert_eq!(forced.status.code(), Some(5), "{report}");
    let line = |slot: u16| -> String {
        report
            .lines()
            .find(|l| l.starts_with(&format!("fix: slot {slot} ")))
            .unwrap_or_else(|| panic!("slot {slot} reported:\n{report}"))
            .to_string()
    };
    assert!(line(s2).contains("rolled back"), "{report}");
    assert!(line(s3).contains("rolled back"), "{report}");
    assert!(
        line(s5).contains(&format!("completed (owner {b_address}")),
        "{report}"
    );
    assert!(
        line(s4).contains(&format!("LEFT OPEN: its target {down} is unreachable")),
        "{report}"
    );
    // Redis 7.0 and Valkey 9 alike: SETSLOT works on a cluster that is down, but the target
    // refuses MIGRATE's RESTORE-ASKING with CLUSTERDOWN, so a slot with keys on both sides
    // stays open.
    let s1_line = line(s1);
    assert!(
        s1_line.contains("LEFT OPEN: closing it failed") && s1_line.contains("ClusterDown"),
        "{report}"
    );
    assert!(report.contains(&format!(
        "unreachable masters (their own open slots unseen): {down}"
    )));

    cluster.servers_mut()[c_index]
        .restart()
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for_state(&cluster, &[0, 1, 2], "ok");
    let fix = ach_redis(&["fix", "--cluster", &seed]);
    let fixed = String::from_utf8_lossy(&fix.stdout).to_string();
    eprintln!("after the restart:\n{fixed}");
    assert!(
        fix.status.success(),
        "{}",
        String::from_utf8_lossy(&fix.stderr)
    );
    assert!(
        fixed.contains(&format!("fix: slot {s4} completed")),
        "{fixed}"
    );
    let expected = data
        .keys
        .iter()
        .enumerate()
        .filter(|(_, key)| !lost_with_c.contains(&ach_redis::slot::key_slot(key.as_bytes())))
        .map(|(i, key)| (key.clone(), data.value(i % 2, 0)))
        .collect();
    assert_eq!(wrong_values(&cluster, &expected), Vec::<String>::new());
    assert_check_clean(&cluster);
}

/// The role (`master`, `slave`) `server` reports.
fn role_of(server: &ach_redis::local::LocalServer) -> String {
    let mut connection = server.connection().unwrap();
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut connection).unwrap();
    match &role[0] {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).to_string(),
        other => panic!("ROLE: {other:?}"),
    }
}

fn a_reshuffle_that_moves_all_of_a_masters_slots_keeps_it_a_master_and_loses_nothing(
    kind: ServerKind,
) {
    let _serial = serial();
    // Slots laid out against the masters' order: Static-Wt, which gives the masters blocks of
    // slots in their order, moves all of the last master's slots (the first range) to the
    // first, and gives it the last range back. Migrated in the plan's order the last master
    // would own nothing in between, and Redis would make it a replica.
    let cluster = LocalCluster::start_against_address_order(kind, 3)
        .unwrap_or_else(|e| panic!("a {} cluster could not start: {e}", kind.name()));
    let data = Arc::new(DataSet::new(3_000, 0, 0, (0, 0)));
    data.load(&cluster, 2);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(120));
    let log = tempfile::NamedTempFile::new().unwrap();
    let output = ach_redis(&[
        "rebalance",
        "--cluster",
        &cluster.seed(),
        "--algorithm",
        "static-wt",
        "--steps",
        "1",
        "--interval-ms",
        "200",
        "--log",
        log.path().to_str().unwrap(),
    ]);
    let report = workload.finish();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    let servers = cluster.servers();
    let (first, last) = (servers[0].address(), servers[2].address());
    let lines = read_log(log.path());
    let summary = lines
        .iter()
        .find_map(|line| line["plan"]["summary"].as_array())
        .unwrap_or_else(|| panic!("a plan in the log: {lines:?}"));
    // The plan gives all of the last master's slots to the first in one group.
    assert!(
        summary.iter().any(|group| group["from"] == last.as_str()
            && group["to"] == first.as_str()
            && group["ranges"] == "0-5460"),
        "{summary:?}"
    );
    for server in servers {
        assert_eq!(role_of(server), "master", "{}: {stderr}", server.address());
    }
    // Every planned slot was migrated and switched, and every slot has its master.
    let step = lines
        .iter()
        .find(|line| line["plan"]["summary"].is_array())
        .unwrap();
    let planned: u64 = summary.iter().map(|g| g["slots"].as_u64().unwrap()).sum();
    let outcome = &step["outcome"];
    assert_eq!(outcome["errors"].as_array().unwrap().len(), 0, "{outcome}");
    let switched: usize = outcome["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["outcome"] == "success")
        .map(|m| m["slots"].as_array().unwrap().len())
        .sum();
    assert_eq!(switched as u64, planned, "{stderr}");
    let (owners, _) = slot_map(&cluster);
    assert!(owners.iter().all(|owner| !owner.is_empty()));
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
}
