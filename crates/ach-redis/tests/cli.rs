//! The `ach-redis` command against real local servers: status, plan (a dry run), fix on a
//! clean cluster, the slot function against Redis, and bad input (exit 2, clear message).

#[macro_use]
mod common;

use ach_redis::local::{LocalCluster, LocalServer, ServerKind, ServerMode};
use ach_redis::slot::key_slot;
use common::{DataSet, ach_redis, serial, start_cluster_of};

on_every_backend!(
    key_slot_agrees_with_cluster_keyslot,
    status_and_plan_report_the_cluster_and_move_nothing,
    bad_input_gets_a_clear_error_and_exit_2,
    fix_completes_a_slot_whose_target_holds_a_stale_copy,
    status_columns_tell_the_truth,
);

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn key_slot_agrees_with_cluster_keyslot(kind: ServerKind) {
    let _serial = serial();
    let cluster = start_cluster_of(kind, 1);
    let mut connection = cluster.servers()[0].connection().unwrap();
    let keys = [
        "",
        "a",
        "foo",
        "{user1000}.following",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "k:12345",
        "{}x",
    ];
    let generated: Vec<String> = (0..500).map(|i| format!("key-{i}-{}", i * 7919)).collect();
    for key in keys.iter().map(|k| k.to_string()).chain(generated) {
        let redis_slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&key)
            .query(&mut connection)
            .unwrap();
        assert_eq!(key_slot(key.as_bytes()), redis_slot, "key {key:?}");
    }
}

fn status_and_plan_report_the_cluster_and_move_nothing(kind: ServerKind) {
    let _serial = serial();
    let cluster = start_cluster_of(kind, 4);
    let data = DataSet::new(4000, 4, 500, (0, 4095));
    data.load(&cluster, 1);
    let seed = cluster.seed();
    let status = ach_redis(&["status", "--cluster", &seed, "--sample-ms", "200"]);
    assert!(status.status.success(), "{}", stderr(&status));
    let text = stdout(&status);
    assert!(text.contains("cluster: 4 masters, healthy"), "{text}");
    assert!(text.contains("keys: 6000"), "{text}");
    assert!(text.contains("open slots: none"), "{text}");
    for server in cluster.servers() {
        assert!(text.contains(&server.address()), "{text}");
    }
    let before = ach_redis(&["status", "--cluster", &seed, "--json", "--sample-ms", "50"]);
    let json: serde_json::Value = serde_json::from_slice(&before.stdout).unwrap();
    let keys: Vec<u64> = json["observed"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["keys"].as_u64().unwrap())
        .collect();
    assert_eq!(keys.iter().sum::<u64>(), 6000);
    let first = json["snapshot"]["masters"]
        .as_array()
        .unwrap()
        .iter()
        .position(|m| m["address"] == cluster.servers()[0].address().as_str())
        .unwrap();
    assert_eq!(keys[first], 3000, "server 0 holds the hot slots: {keys:?}");
    // `--idle-cpu`: server 0's cpu reading is the use of the rest of its allowance (one
    // core at weight 1), so an idle use of 0.9 cores leaves nothing of the reading's few
    // hundredths; the other masters keep their whole readings.
    let cpu_readings = |json: &serde_json::Value| -> Vec<f64> {
        json["observed"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["reading"][0].as_f64().unwrap())
            .collect()
    };
    let idle = format!("{}=0.9", cluster.servers()[0].address());
    let status = |extra: &[&str]| {
        let mut args = vec!["status", "--cluster", &seed, "--json", "--sample-ms", "200"];
        args.extend_from_slice(extra);
        let output = ach_redis(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        cpu_readings(&serde_json::from_slice(&output.stdout).unwrap())
    };
    let (whole, corrected) = (status(&[]), status(&["--idle-cpu", &idle]));
    assert!(whole[first] > 0.0 && whole[first] < 0.9, "{whole:?}");
    assert_eq!(corrected[first], 0.0, "{corrected:?}");
    assert!(
        (0..4).all(|i| i == first || corrected[i] > 0.0),
        "{corrected:?}"
    );
    // `--request-capacity`: server 0's cpu part counts its data commands, of which an idle
    // cluster has none: the rebalancer's own readings (INFO, CLUSTER ..., LATENCY) do not
    // count, while they do take cpu.
    let capacity = format!("{}=1000", cluster.servers()[0].address());
    let by_requests = status(&["--request-capacity", &capacity]);
    assert_eq!(by_requests[first], 0.0, "{by_requests:?}");
    assert!(
        (0..4).all(|i| i == first || by_requests[i] > 0.0),
        "{by_requests:?}"
    );
    let plan = ach_redis(&[
        "plan",
        "--cluster",
        &seed,
        "--json",
        "--sample-ms",
        "100",
        "--memory-capacity-mb",
        "4",
    ]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert!(plan["plan"]["imbalance_now"].as_f64().unwrap() > 0.0);
    let after = ach_redis(&["status", "--cluster", &seed, "--json", "--sample-ms", "50"]);
    let json_after: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap();
    assert_eq!(
        json["snapshot"]["owners"], json_after["snapshot"]["owners"],
        "plan moved a slot"
    );
    let fix = ach_redis(&["fix", "--cluster", &seed]);
    assert!(fix.status.success(), "{}", stderr(&fix));
    assert!(stdout(&fix).contains("no open slot"));

    // Static-Wt with server 1 weighing 3 (2 relative to the mean): it plans half of the slots
    // (a contiguous block) for server 1, which owns a quarter now, so it receives more slots than
    // it gives. How many it gives depends on where its block falls against the quarter it owns,
    // which depends on the order of the random node ids: at worst it gives its whole quarter
    // and receives the whole block, twice as many (empty slots are skipped alike on both sides).
    let heavy = cluster.servers()[1].address();
    let weight = format!("{heavy}=3");
    let weighted = ach_redis(&[
        "plan",
        "--cluster",
        &seed,
        "--json",
        "--sample-ms",
        "10",
        "--algorithm",
        "static-wt",
        "--weight",
        &weight,
    ]);
    assert!(weighted.status.success(), "{}", stderr(&weighted));
    let weighted: serde_json::Value = serde_json::from_slice(&weighted.stdout).unwrap();
    let moves = weighted["plan"]["moves"].as_array().unwrap();
    let to_heavy = moves.iter().filter(|m| m["to"] == heavy.as_str()).count();
    let from_heavy = moves.iter().filter(|m| m["from"] == heavy.as_str()).count();
    assert!(
        to_heavy > 500 && 3 * from_heavy < 2 * to_heavy,
        "{to_heavy} moves to, {from_heavy} from {heavy}"
    );
    let node = weighted["observed"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["address"] == heavy.as_str())
        .unwrap();
    assert_eq!(
        node["weight"].as_f64().unwrap(),
        2.0,
        "3 over the mean weight 1.5"
    );
}

/// `status`'s columns: ops/s leaves out the rebalancer's own commands (its 16,384
/// `CLUSTER COUNTKEYSINSLOT` per reading, its INFO and CLUSTER calls), so an idle cluster reads
/// about 0 and a node serving a client reads that client's rate; the weight is the one given;
/// memory is n/a (null) without a known capacity.
fn status_columns_tell_the_truth(kind: ServerKind) {
    let _serial = serial();
    let cluster = start_cluster_of(kind, 3);
    DataSet::new(3000, 0, 0, (0, 0)).load(&cluster, 1);
    let seed = cluster.seed();
    let mut connection = cluster.servers()[0].connection().unwrap();
    let heavy = cluster.servers()[1].address();
    let weight = format!("{heavy}=3");
    // A client on server 0 for the whole status (DBSIZE: a data command as commandstats
    // counts it, needing no key of the node's slots).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut calls = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
                calls += 1;
            }
            calls
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    let args = [
        "status",
        "--cluster",
        &seed,
        "--sample-ms",
        "500",
        "--weight",
        &weight,
    ];
    let json_args: Vec<&str> = args.iter().copied().chain(["--json"]).collect();
    let json = ach_redis(&json_args);
    let text = ach_redis(&args);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let calls = client.join().unwrap();
    assert!(json.status.success(), "{}", stderr(&json));
    assert!(text.status.success(), "{}", stderr(&text));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let nodes = json["observed"]["nodes"].as_array().unwrap();
    for node in nodes {
        let address = node["address"].as_str().unwrap();
        let ops = node["ops_per_sec"].as_f64().unwrap();
        println!("{address}: {ops:.1} data ops/s ({calls} DBSIZE calls by the client)");
        if address == cluster.servers()[0].address() {
            assert!(
                ops > 100.0,
                "{address}: {ops} ops/s under a client ({calls} calls)"
            );
        } else {
            assert!(ops < 5.0, "{address}: {ops} ops/s with no client");
        }
        let given = if address == heavy { 3.0 } else { 1.0 };
        assert_eq!(node["weight_given"].as_f64().unwrap(), given, "{address}");
        assert!(node["memory"].is_null(), "{address}: {node}");
    }
    let text = stdout(&text);
    println!("{text}");
    assert!(text.contains("data ops/s"), "{text}");
    let row = text.lines().find(|l| l.starts_with(&heavy)).unwrap();
    let columns: Vec<&str> = row.split_whitespace().collect();
    // node, id, slots, keys, weight, cpu, memory, ...
    assert_eq!((columns[4], columns[6]), ("3", "n/a"), "{text}");
    let known = ach_redis(&[
        "status",
        "--cluster",
        &seed,
        "--sample-ms",
        "50",
        "--json",
        "--memory-capacity-mb",
        "1024",
    ]);
    let known: serde_json::Value = serde_json::from_slice(&known.stdout).unwrap();
    for node in known["observed"]["nodes"].as_array().unwrap() {
        let memory = node["memory"].as_f64().unwrap();
        assert!(memory > 0.0 && memory < 0.1, "{node}");
    }
}

fn assert_exit_2(args: &[&str], message: &str) {
    let output = ach_redis(args);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {text}");
    assert!(
        text.contains(message),
        "{args:?}: expected {message:?} in {text}"
    );
}

fn bad_input_gets_a_clear_error_and_exit_2(kind: ServerKind) {
    let _serial = serial();
    // An address where nothing listens: a port just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!("127.0.0.1:{port}");
    assert_exit_2(
        &["status", "--cluster", &nowhere],
        &format!("cannot reach {nowhere}"),
    );
    assert_exit_2(&["status", "--cluster", "localhost"], "expected HOST:PORT");

    let plain =
        LocalServer::start_of(kind, ServerMode::Standalone).unwrap_or_else(|e| panic!("{e}"));
    assert_exit_2(
        &["plan", "--cluster", &plain.address()],
        "is not in cluster mode",
    );

    // Slots 12000-16383 have no owner: cluster_state:fail.
    let failing = LocalCluster::start_with_slots_of(kind, &[vec![(0, 5999)], vec![(6000, 11999)]])
        .unwrap_or_else(|e| panic!("{e}"));
    let seed = failing.seed();
    let args = [
        "rebalance",
        "--cluster",
        &seed,
        "--steps",
        "1",
        "--interval-ms",
        "10",
    ];
    assert_exit_2(&args, "4384 slots have no owner");
    assert_exit_2(&["plan", "--cluster", &seed], "the cluster is degraded");
    assert_exit_2(&["fix", "--cluster", &seed], "slots have no owner");

    let cluster = start_cluster_of(kind, 3);
    let seed = cluster.seed();
    // `rebalance --cluster SEED` with `--steps 1 --interval-ms 10` unless `extra` sets them.
    let check = |extra: &[&str], message: &str| {
        let mut args = vec!["rebalance", "--cluster", &seed];
        if !extra.contains(&"--steps") {
            args.extend(["--steps", "1"]);
        }
        if !extra.contains(&"--interval-ms") {
            args.extend(["--interval-ms", "10"]);
        }
        args.extend_from_slice(extra);
        assert_exit_2(&args, message);
    };
    check(&["--weight", "127.0.0.1:1=2"], "no master \"127.0.0.1:1\"");
    check(&["--weight", "x=-1"], "finite and >= 0 (0 drains the node)");
    let all: Vec<String> = cluster.servers().iter().map(|s| s.address()).collect();
    check(
        &[
            "--drain",
            &all[0],
            "--drain",
            &all[1],
            "--weight",
            &format!("{}=0", all[2]),
        ],
        "every master is drained",
    );
    check(&["--weight", "nonsense"], "is not NODE=W");
    check(&["--idle-cpu", "nonsense"], "is not NODE=CORES");
    check(&["--idle-cpu", "x=-0.1"], "the cores finite and >= 0");
    check(
        &["--idle-cpu", "127.0.0.1:1=0.01"],
        "--idle-cpu 127.0.0.1:1=0.01: no master",
    );
    // Three masters of weight 1 have an allowance of one core each.
    check(
        &["--idle-cpu", &format!("{}=1", all[0])],
        "must be below the node's cpu allowance, 1 cores",
    );
    check(
        &["--request-capacity", "nonsense"],
        "is not NODE=REQUESTS_PER_S",
    );
    check(
        &["--request-capacity", "x=-1"],
        "the capacity finite and >= 0",
    );
    check(
        &["--request-capacity", "127.0.0.1:1=10"],
        "--request-capacity 127.0.0.1:1=10: no master",
    );
    check(
        &["--request-capacity", &format!("{}=0", all[0])],
        "must be a number of requests per second above 0",
    );
    check(
        &[
            "--idle-cpu",
            &format!("{}=0.01", all[0]),
            "--request-capacity",
            &format!("{}=1000", all[0]),
        ],
        "also has an --idle-cpu",
    );
    check(&["--interval-ms", "0"], "--interval-ms");
    check(&["--interval-ms", "-5"], "--interval-ms");
    check(&["--interval-ms", "soon"], "--interval-ms");
    check(&["--steps", "0"], "--steps");
    check(
        &["--slot-stats-every", "0"],
        "--slot-stats-every 0: must be at least 1",
    );
    check(
        &["--slot-stats-window", "0"],
        "--slot-stats-window 0: must be at least 1",
    );
    check(&["--slot-rate", "mode"], "--slot-rate");
    check(
        &["--slot-stats-chunk", "0"],
        "--slot-stats-chunk 0: must be at least 1 slot",
    );
    check(&["--beta", "0"], "beta");
    check(&["--m-max=-1"], "M_max");
    check(&["--min-gain", "1"], "min_gain = 1 must be in [0, 1)");
    check(&["--min-gain=-0.1"], "min_gain = -0.1 must be in [0, 1)");
    check(&["--atomic-from-keys=-1"], "--atomic-from-keys");
    check(&["--algorithm", "magic"], "unknown algorithm \"magic\"");
    check(&["--algorithm", "CH-BL"], "routes requests its own way");
    check(
        &["--algorithm", "ach-f", "--param", "ach_f.window=0"],
        "ach_f.window = 0 must be >= 1",
    );
    check(&["--param", "nope=1"], "unknown parameter \"nope\"");
    check(&["--param", "nope"], "is not NAME=VALUE");
    assert_exit_2(
        &["status", "--cluster", &seed, "--sample-ms", "0"],
        "--sample-ms",
    );
    match kind {
        // The valkey backend on Redis (and Valkey 8), and the redis backend's lack of per-slot
        // counters.
        ServerKind::Redis | ServerKind::Valkey8 => {
            assert_exit_2(
                &["status", "--cluster", &seed, "--backend", "valkey"],
                "the valkey backend needs Valkey >= 9.0",
            );
            assert_exit_2(
                &["status", "--cluster", &seed, "--enable-slot-stats"],
                "no per-slot load counters",
            );
        }
        // The standard protocol drives Valkey too, without per-slot load.
        ServerKind::Valkey => {
            let status = ach_redis(&["status", "--cluster", &seed, "--backend", "redis"]);
            assert!(status.status.success(), "{}", stderr(&status));
            assert!(
                stdout(&status).contains("backend: redis"),
                "{}",
                stdout(&status)
            );
        }
    }
}

fn fix_completes_a_slot_whose_target_holds_a_stale_copy(kind: ServerKind) {
    let _serial = serial();
    let cluster = start_cluster_of(kind, 2);
    let key = "busy-key";
    let slot = key_slot(key.as_bytes());
    let (source, target) = if slot < 8192 { (0, 1) } else { (1, 0) };
    let (source, target) = (&cluster.servers()[source], &cluster.servers()[target]);
    let id = |server: &LocalServer| -> String {
        let mut connection = server.connection().unwrap();
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut connection)
            .unwrap()
    };
    let (source_id, target_id) = (id(source), id(target));
    let mut on_source = source.connection().unwrap();
    let mut on_target = target.connection().unwrap();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("old")
        .query(&mut on_source)
        .unwrap();
    let setslot = |connection: &mut redis::Connection, state: &str, node: &str| {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(state)
            .arg(node)
            .query(connection)
            .unwrap();
    };
    // An interrupted migration: both sides open, and a copy of the key already on the target
    // (MIGRATE ... COPY), after which the source's live copy changed.
    setslot(&mut on_target, "IMPORTING", &source_id);
    setslot(&mut on_source, "MIGRATING", &target_id);
    let _: String = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(target.port())
        .arg(key)
        .arg(0)
        .arg(5000)
        .arg("COPY")
        .query(&mut on_source)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("new")
        .query(&mut on_source)
        .unwrap();

    let fix = ach_redis(&["fix", "--cluster", &cluster.seed()]);
    assert!(fix.status.success(), "{}", stderr(&fix));
    assert!(
        stdout(&fix).contains(&format!("fix: slot {slot} completed")),
        "{}",
        stdout(&fix)
    );
    let value: String = redis::cmd("GET").arg(key).query(&mut on_target).unwrap();
    assert_eq!(value, "new");
    common::assert_check_clean(&cluster);
}
