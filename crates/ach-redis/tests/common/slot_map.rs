//! What an operator reads off a cluster and a plan: the slot map as `CLUSTER SLOTS` lists it,
//! a plan's moves, a replica of one master.

use ach_redis::local::{LocalCluster, LocalServer, ServerKind, ServerMode};

use super::{ach_redis, follow, read_log, temp_log};

/// Every slot's owner (`host:port`) and the number of ranges, from the first server's
/// `CLUSTER SLOTS`.
pub fn slot_map(cluster: &LocalCluster) -> (Vec<String>, usize) {
    slot_map_of(&cluster.servers()[0])
}

/// Every slot's owner (`host:port`) and the number of ranges, from `server`'s `CLUSTER SLOTS`.
pub fn slot_map_of(server: &LocalServer) -> (Vec<String>, usize) {
    let mut connection = server.connection().unwrap();
    let entries: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut connection)
        .unwrap();
    let mut owners = vec![String::new(); 16384];
    for entry in &entries {
        let redis::Value::Array(fields) = entry else {
            panic!("a CLUSTER SLOTS entry: {entry:?}")
        };
        let number = |v: &redis::Value| match v {
            redis::Value::Int(n) => *n as usize,
            other => panic!("a slot number: {other:?}"),
        };
        let redis::Value::Array(master) = &fields[2] else {
            panic!("a master: {:?}", fields[2])
        };
        let port = number(&master[1]);
        for owner in &mut owners[number(&fields[0])..=number(&fields[1])] {
            *owner = format!("127.0.0.1:{port}");
        }
    }
    (owners, entries.len())
}

/// `(slot, from, to)` of every move of a plan's JSON.
pub fn moves_of(plan: &serde_json::Value) -> Vec<(u64, String, String)> {
    plan["moves"]
        .as_array()
        .expect("a plan has moves")
        .iter()
        .map(|mv| {
            (
                mv["slot"].as_u64().unwrap(),
                mv["from"].as_str().unwrap().to_string(),
                mv["to"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A command's output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// A replica of the `primary`-th server of `cluster`: started, introduced, made its replica,
/// and waited for until its link to the primary is up.
pub fn add_replica_of(cluster: &LocalCluster, kind: ServerKind, primary: usize) -> LocalServer {
    let replica =
        LocalServer::start_of(kind, ServerMode::Cluster).unwrap_or_else(|e| panic!("{e}"));
    super::meet(cluster, &replica);
    follow(&replica, &cluster.servers()[primary]);
    replica
}

/// The step options `plan` and `rebalance` get when their moves are compared. The window budget
/// `M_H` (0.03) is below `M_max * C`, so the step budget is `M_H` itself: what moves is then a
/// function of the slots' keys, which the clients (overwriting their keys) do not change, and
/// not of the noise of a cpu reading.
pub const STEP_OPTIONS: [&str; 10] = [
    "--m-max",
    "0.3",
    "--m-horizon",
    "0.03",
    "--horizon",
    "10",
    "--beta",
    "0.3",
    "--min-slot-keys",
    "2",
];

/// `rebalance --steps 1` with `common` and [`STEP_OPTIONS`]: its log's step lines and its
/// progress (stderr); fails the test when the run fails.
pub fn first_step_of_rebalance(common: &[&str]) -> (Vec<serde_json::Value>, String) {
    let (log, log_path) = temp_log();
    let mut args = vec![
        "rebalance",
        "--steps",
        "1",
        "--interval-ms",
        "500",
        "--log",
        &log_path,
    ];
    args.extend(common);
    args.extend(STEP_OPTIONS);
    let rebalance = ach_redis(&args);
    let progress = text(&rebalance.stderr);
    assert!(rebalance.status.success(), "rebalance failed:\n{progress}");
    (read_log(log.path()), progress)
}
