//! Greedy-One, the example's own algorithm, rebalancing a real local Redis Cluster through
//! `ach-redis rebalance` (the `greedy-redis` binary: `ach-redis` run with the example's
//! catalogue): every step's plan is Greedy-One's, its moves are migrated by the live protocol,
//! and no key is lost.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ach_redis::cluster::Cluster;
use ach_redis::local::{LocalCluster, LocalServer};
use ach_redis::slot::key_slot;

/// Slots of server 0 in a 3-node local cluster (`LocalCluster::start` gives equal ranges).
const HOT_SLOTS: std::ops::Range<u16> = 0..5461;

/// One key in every slot of server 0 and 2 KiB values: server 0 holds all the data, so its
/// memory reading is far above the others'.
fn load_hot_keys(server: &LocalServer) -> BTreeMap<String, String> {
    let mut keys = BTreeMap::new();
    let mut covered = vec![false; HOT_SLOTS.len()];
    let mut pipe = redis::pipe();
    let mut i = 0u64;
    while keys.len() < HOT_SLOTS.len() {
        let key = format!("greedy:{i}");
        i += 1;
        let slot = key_slot(key.as_bytes());
        if HOT_SLOTS.contains(&slot) && !covered[usize::from(slot)] {
            covered[usize::from(slot)] = true;
            let value = format!("{key}:{}", "v".repeat(2048));
            pipe.cmd("SET").arg(&key).arg(&value).ignore();
            keys.insert(key, value);
        }
    }
    let mut connection = server.connection().expect("connect to server 0");
    pipe.query::<()>(&mut connection)
        .expect("server 0 takes its keys");
    keys
}

fn used_memory_mb(server: &LocalServer) -> f64 {
    let mut connection = server.connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut connection)
        .unwrap();
    let bytes: f64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO memory has used_memory");
    bytes / (1024.0 * 1024.0)
}

#[test]
fn greedy_one_rebalances_a_live_cluster_through_ach_redis() {
    let cluster = LocalCluster::start(3).unwrap_or_else(|e| panic!("{e}"));
    let hot = cluster.servers()[0].address();
    let keys = load_hot_keys(&cluster.servers()[0]);
    let capacity = format!("{:.1}", used_memory_mb(&cluster.servers()[0]) * 1.05);

    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("greedy-redis.jsonl");
    let _ = std::fs::remove_file(&log);
    let steps = 4;
    let output = Command::new(env!("CARGO_BIN_EXE_greedy-redis"))
        .args(["rebalance", "--cluster", &cluster.seed()])
        .args(["--algorithm", "greedy-one", "--steps", &steps.to_string()])
        .args(["--interval-ms", "300", "--beta", "1"])
        .args(["--memory-capacity-mb", &capacity])
        .arg("--log")
        .arg(&log)
        .output()
        .expect("greedy-redis runs");
    let progress = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "rebalance failed:\n{progress}");

    // The log's step lines (it also has a line per `fix` and the run's summary).
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|line| line["event"] == "step")
        .collect();
    assert_eq!(lines.len(), steps, "one line per step:\n{progress}");
    let mut migrated = 0;
    for line in &lines {
        let plan = &line["plan"];
        assert_eq!(plan["algorithm"], "Greedy-One", "{line}");
        // Greedy-One hands at most one token per step, from the most loaded node.
        let moves = plan["moves"].as_array().unwrap();
        assert!(moves.len() <= 1, "{line}");
        for migration in line["outcome"]["migrations"].as_array().unwrap() {
            assert_eq!(migration["from"], hot.as_str(), "{line}");
            assert_eq!(migration["keys"], 1, "{line}");
            migrated += 1;
        }
    }
    eprintln!("{progress}\nGreedy-One migrated {migrated} slots in {steps} steps");
    assert!(
        migrated >= steps - 1,
        "Greedy-One moved {migrated} slots in {steps} steps:\n{progress}"
    );

    // The slots moved, and every key is where its slot now is, with its value.
    let mut view = Cluster::connect(&cluster.seed(), Duration::from_secs(5)).unwrap();
    let snapshot = view.snapshot().unwrap();
    assert!(snapshot.healthy(), "{:?}", snapshot.problems);
    let hot_index = snapshot
        .masters
        .iter()
        .position(|m| m.address == hot)
        .unwrap();
    assert_eq!(
        snapshot.masters[hot_index].slots,
        HOT_SLOTS.len() - migrated,
        "server 0 gave away the slots migrated"
    );
    let mut connections: BTreeMap<String, redis::Connection> = cluster
        .servers()
        .iter()
        .map(|s| (s.address(), s.connection().unwrap()))
        .collect();
    for (key, value) in &keys {
        let owner = snapshot.owners[usize::from(key_slot(key.as_bytes()))].unwrap();
        let connection = connections
            .get_mut(&snapshot.masters[owner].address)
            .unwrap();
        let stored: Option<String> = redis::cmd("GET").arg(key).query(connection).unwrap();
        assert_eq!(stored.as_deref(), Some(value.as_str()), "{key}");
    }
}
