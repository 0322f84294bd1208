//! A real local cluster, a data set with hot slots, concurrent workload clients that check
//! every read, and `redis-cli --cluster check`: shared by the integration tests and the
//! `measure` example.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ach_redis::local::{LocalCluster, LocalServer, ServerKind, ServerMode, redis_cli_binary};
use ach_redis::slot::key_slot;
use redis::Commands;

/// The tests of one binary run one at a time: each starts servers and clients, and the machine
/// is small.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts a `redis-server` cluster, failing the test with the harness's message when it
/// cannot.
pub fn start_cluster(nodes: usize) -> LocalCluster {
    start_cluster_of(ServerKind::Redis, nodes)
}

/// Starts a cluster of `kind`, failing the test with the harness's message when it cannot
/// (a missing `valkey-server` names the command that installs it).
pub fn start_cluster_of(kind: ServerKind, nodes: usize) -> LocalCluster {
    LocalCluster::start_of(kind, nodes).unwrap_or_else(|e| panic!("{e}"))
}

/// The data set: `uniform` keys spread over all slots and `hot_slots` hash tags of node 0's
/// slot range holding `per_hot_slot` keys each. Values are `value_bytes` long.
pub struct DataSet {
    /// Every key, in a fixed order.
    pub keys: Vec<String>,
    /// The slots of the hot tags.
    pub hot_slots: Vec<u16>,
    /// Indices (into `keys`) of the keys the workload's hot requests go to.
    pub hot_keys: Vec<usize>,
    /// Value length.
    pub value_bytes: usize,
}

impl DataSet {
    pub fn new(
        uniform: usize,
        hot_slots: usize,
        per_hot_slot: usize,
        hot_range: (u16, u16),
    ) -> DataSet {
        let mut keys: Vec<String> = (0..uniform).map(|i| format!("k:{i}")).collect();
        let mut slots = Vec::new();
        let mut tag = 0u64;
        while slots.len() < hot_slots {
            let name = format!("hot{tag}");
            tag += 1;
            let slot = key_slot(name.as_bytes());
            if slot >= hot_range.0 && slot <= hot_range.1 && !slots.contains(&slot) {
                slots.push(slot);
                keys.extend((0..per_hot_slot).map(|i| format!("{{{name}}}:{i}")));
            }
        }
        DataSet {
            keys,
            hot_slots: slots,
            hot_keys: Vec::new(),
            value_bytes: 400,
        }
    }

    /// `uniform` keys over all slots and one slot of `range` holding `hot_keys` keys (one
    /// hash tag), which [`Workload::start_hot`] sends a share of the requests to.
    pub fn with_hot_slot(uniform: usize, hot_keys: usize, range: (u16, u16)) -> DataSet {
        let mut data = DataSet::new(uniform, 1, hot_keys, range);
        data.hot_keys = (uniform..uniform + hot_keys).collect();
        data
    }

    /// The value written by `writer` as its `version`-th write.
    pub fn value(&self, writer: usize, version: u64) -> String {
        let head = format!("{writer}:{version}:");
        let mut value = head.clone();
        value.extend(std::iter::repeat_n(
            'x',
            self.value_bytes.saturating_sub(head.len()),
        ));
        value
    }

    /// Writes every key once (version 0 of writer `i % writers`) with a cluster client.
    pub fn load(&self, cluster: &LocalCluster, writers: usize) {
        let client = cluster.cluster_client().unwrap().build().unwrap();
        let mut connection = client.get_connection().unwrap();
        for (i, key) in self.keys.iter().enumerate() {
            let _: () = connection.set(key, self.value(i % writers, 0)).unwrap();
        }
    }
}

/// What the workload clients saw.
#[derive(Debug, Default)]
pub struct WorkloadReport {
    /// Commands that succeeded.
    pub ops: u64,
    /// Commands that failed, with a few of the messages.
    pub errors: u64,
    pub error_samples: Vec<String>,
    /// Reads that returned another value than the last one written.
    pub stale_reads: u64,
    /// Last value written per key (version per writer).
    pub last_written: BTreeMap<String, String>,
    /// Wall time the clients ran.
    pub elapsed: Duration,
}

impl WorkloadReport {
    /// Keeps the message of a failed command, the first few only.
    fn sample(&mut self, message: impl FnOnce() -> String) {
        if self.error_samples.len() < 5 {
            self.error_samples.push(message());
        }
    }
}

/// Concurrent clients: client `w` owns the keys `i` with `i % writers == w`; it loops over
/// them writing a new version and reading back another of its keys, checking the read
/// returns the last value it wrote there. Plain commands through the cluster client (which
/// follows ASK and MOVED); no pipelines.
pub struct Workload {
    stop: Arc<AtomicBool>,
    pub ops: Arc<AtomicU64>,
    handles: Vec<JoinHandle<WorkloadReport>>,
    started: Instant,
}

impl Workload {
    pub fn start(
        cluster: &LocalCluster,
        data: &Arc<DataSet>,
        writers: usize,
        limit: Duration,
    ) -> Workload {
        Workload::start_hot(cluster, data, writers, limit, 0)
    }

    /// [`Workload::start`] with `hot_percent` % of every client's writes and reads going to
    /// its share of `data.hot_keys`.
    pub fn start_hot(
        cluster: &LocalCluster,
        data: &Arc<DataSet>,
        writers: usize,
        limit: Duration,
        hot_percent: usize,
    ) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let client = cluster
            .cluster_client()
            .unwrap()
            .retries(16)
            .build()
            .unwrap();
        let handles = (0..writers)
            .map(|writer| {
                let role = ClientRole {
                    writer,
                    writers,
                    hot_percent,
                    limit,
                };
                let (client, data) = (client.clone(), Arc::clone(data));
                let (stop, ops) = (Arc::clone(&stop), Arc::clone(&ops));
                std::thread::spawn(move || run_client(&client, &data, role, &stop, &ops))
            })
            .collect();
        Workload {
            stop,
            ops,
            handles,
            started: Instant::now(),
        }
    }

    /// Stops the clients and merges their reports.
    pub fn finish(self) -> WorkloadReport {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = WorkloadReport::default();
        for handle in self.handles {
            let report = handle.join().expect("a workload client panicked");
            total.ops += report.ops;
            total.errors += report.errors;
            total.stale_reads += report.stale_reads;
            total.error_samples.extend(report.error_samples);
            total.last_written.extend(report.last_written);
        }
        total.elapsed = self.started.elapsed();
        total
    }
}

/// Which client of a [`Workload`] one thread is: client `writer` of `writers`, with its share
/// of hot commands and its time limit.
#[derive(Clone, Copy)]
struct ClientRole {
    writer: usize,
    writers: usize,
    hot_percent: usize,
    limit: Duration,
}

/// One client's loop: a write of the next key's next version and a checked read of another of
/// its keys, until the workload stops or the limit is reached.
fn run_client(
    client: &redis::cluster::ClusterClient,
    data: &DataSet,
    role: ClientRole,
    stop: &AtomicBool,
    ops: &AtomicU64,
) -> WorkloadReport {
    let mut report = WorkloadReport::default();
    let mut connection = client.get_connection().unwrap();
    let mut keys = ClientKeys::new(data, role);
    let count = keys.mine.len();
    let hot_count = keys.hot.len();
    let started = Instant::now();
    // A stride coprime with the key count walks every key.
    let stride = (7919 % count.max(1)).max(1);
    let (mut step, mut next) = (0usize, 0usize);
    while !stop.load(Ordering::Relaxed) && started.elapsed() < role.limit {
        step += 1;
        let hot = hot_count > 0 && step % 100 < role.hot_percent;
        next = if hot {
            keys.hot[step % hot_count]
        } else {
            (next + stride) % count
        };
        keys.write(&mut connection, next, &mut report);
        let read = if hot {
            keys.hot[(step / 2 + 1) % hot_count]
        } else {
            (next + count / 2 + step) % count
        };
        keys.check_read(&mut connection, read, &mut report);
        ops.fetch_add(2, Ordering::Relaxed);
    }
    report.elapsed = started.elapsed();
    for (key, &version) in keys.mine.iter().zip(&keys.versions) {
        report
            .last_written
            .insert((*key).clone(), data.value(role.writer, version));
    }
    report
}

/// One client's keys (those `i` with `i % writers == writer`) and the version it last wrote to
/// each.
struct ClientKeys<'a> {
    data: &'a DataSet,
    writer: usize,
    mine: Vec<&'a String>,
    /// Positions (in `mine`) of this client's hot keys.
    hot: Vec<usize>,
    versions: Vec<u64>,
}

impl<'a> ClientKeys<'a> {
    fn new(data: &'a DataSet, role: ClientRole) -> ClientKeys<'a> {
        let owned: Vec<(usize, &String)> = data
            .keys
            .iter()
            .enumerate()
            .filter(|(i, _)| i % role.writers == role.writer)
            .collect();
        let hot = owned
            .iter()
            .enumerate()
            .filter(|(_, (i, _))| data.hot_keys.contains(i))
            .map(|(position, _)| position)
            .collect();
        ClientKeys {
            data,
            writer: role.writer,
            versions: vec![0; owned.len()],
            mine: owned.into_iter().map(|(_, key)| key).collect(),
            hot,
        }
    }

    /// Writes the next version of key `next`; after an error, reads the key back to learn
    /// whether the write happened.
    fn write(
        &mut self,
        connection: &mut redis::cluster::ClusterConnection,
        next: usize,
        report: &mut WorkloadReport,
    ) {
        let key = self.mine[next];
        let version = self.versions[next] + 1;
        let value = self.data.value(self.writer, version);
        match connection.set::<_, _, ()>(key, &value) {
            Ok(()) => {
                self.versions[next] = version;
                report.ops += 1;
            }
            Err(error) => {
                report.errors += 1;
                report.sample(|| format!("SET {key}: {error}"));
                if let Ok(Some(now)) = connection.get::<_, Option<String>>(key)
                    && now == value
                {
                    self.versions[next] = version;
                }
            }
        }
    }

    /// Reads key `read` and counts a stale read unless it holds the last version written.
    fn check_read(
        &self,
        connection: &mut redis::cluster::ClusterConnection,
        read: usize,
        report: &mut WorkloadReport,
    ) {
        let key = self.mine[read];
        let expected = self.data.value(self.writer, self.versions[read]);
        match connection.get::<_, Option<String>>(key) {
            Ok(Some(value)) if value == expected => report.ops += 1,
            Ok(other) => {
                report.stale_reads += 1;
                report.sample(|| {
                    format!(
                        "GET {key}: {:?}, expected version {}",
                        other.map(|v| v.chars().take(20).collect::<String>()),
                        self.versions[read]
                    )
                });
            }
            Err(error) => {
                report.errors += 1;
                report.sample(|| format!("GET {key}: {error}"));
            }
        }
    }
}

/// Fails the test unless the clients saw no error and no stale read and every key holds the
/// last value written to it.
pub fn assert_nothing_lost(cluster: &LocalCluster, report: &WorkloadReport) {
    assert_eq!(
        report.errors, 0,
        "client errors: {:?}",
        report.error_samples
    );
    assert_eq!(
        report.stale_reads, 0,
        "stale reads: {:?}",
        report.error_samples
    );
    let wrong = wrong_values(cluster, &report.last_written);
    assert!(
        wrong.is_empty(),
        "{} keys lost or stale, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// Reads every key with a fresh cluster client and returns the keys whose value is not the
/// last one written (missing keys included).
pub fn wrong_values(cluster: &LocalCluster, expected: &BTreeMap<String, String>) -> Vec<String> {
    let client = cluster.cluster_client().unwrap().build().unwrap();
    let mut connection = client.get_connection().unwrap();
    let mut wrong = Vec::new();
    for (key, value) in expected {
        let actual: Option<String> = connection.get(key).unwrap();
        if actual.as_deref() != Some(value.as_str()) {
            wrong.push(key.clone());
        }
    }
    wrong
}

/// Runs `redis-cli --cluster check` and fails the test unless it is clean: all nodes agree,
/// all 16384 slots covered, no open slot, no error or warning.
pub fn assert_check_clean(cluster: &LocalCluster) {
    let started = Instant::now();
    loop {
        let mut command = Command::new(redis_cli_binary().unwrap_or_else(|e| panic!("{e}")));
        command.args(["--cluster", "check", &cluster.seed()]);
        cluster
            .security()
            .harness()
            .apply_to_redis_cli(&mut command);
        let output = command.output().expect("redis-cli runs");
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let clean = text.contains("[OK] All nodes agree about slots configuration.")
            && text.contains("[OK] All 16384 slots covered.")
            && !text.contains("[ERR]")
            && !text.contains("[WARNING]");
        if clean {
            return;
        }
        // Gossip may still be spreading the last epoch bump: give it a few seconds.
        if started.elapsed() > Duration::from_secs(10) {
            panic!("redis-cli --cluster check is not clean:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Calls of data commands (`get`, `set`) per master since start, from `INFO commandstats`,
/// by address.
pub fn data_calls(cluster: &LocalCluster) -> BTreeMap<String, u64> {
    command_calls(cluster, &["get", "set"])
}

/// Calls of `commands` (as `INFO commandstats` names them: `get`, `cluster|slot-stats`) per
/// master since start, summed, by address.
pub fn command_calls(cluster: &LocalCluster, commands: &[&str]) -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    for server in cluster.servers() {
        let mut connection = server.connection().unwrap();
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut connection)
            .unwrap();
        let total: u64 = info
            .lines()
            .filter(|l| {
                commands.iter().any(|c| {
                    l.strip_prefix("cmdstat_")
                        .and_then(|l| l.strip_prefix(c))
                        .is_some_and(|l| l.starts_with(':'))
                })
            })
            .filter_map(|l| l.split("calls=").nth(1))
            .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
            .sum();
        calls.insert(server.address(), total);
    }
    calls
}

/// Share of the data commands served by `address` between two `data_calls` readings.
pub fn share_between(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    address: &str,
) -> f64 {
    let delta = |a: &str| after[a] - before[a];
    let total: u64 = after.keys().map(|a| delta(a)).sum();
    delta(address) as f64 / total.max(1) as f64
}

/// `used_memory` of a server in MiB.
pub fn used_memory_mb(server: &ach_redis::local::LocalServer) -> f64 {
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

/// A temporary file for a `--log` (removed when dropped), and its path as an argument.
pub fn temp_log() -> (tempfile::NamedTempFile, String) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let path = log.path().to_str().unwrap().to_string();
    (log, path)
}

/// The steps of a `--log` file, parsed (its `fix` and `summary` lines left out).
pub fn read_log(path: &std::path::Path) -> Vec<serde_json::Value> {
    read_events(path)
        .into_iter()
        .filter(|line| line["event"] == "step")
        .collect()
}

/// Every migration of every step of a rebalance log, in order.
pub fn migrations_of(steps: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    steps
        .iter()
        .flat_map(|step| {
            step["outcome"]["migrations"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .collect()
}

/// Every line of a `--log` file, parsed: `step`, `fix` and `summary` events.
pub fn read_events(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

pub fn node_id(server: &LocalServer) -> String {
    let mut connection = server.connection().unwrap();
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut connection)
        .unwrap()
}

/// One replica per primary of `cluster`: started, introduced, made a replica of its primary,
/// and waited for until its link to the primary is up.
pub fn add_replicas(cluster: &LocalCluster, kind: ServerKind) -> Vec<LocalServer> {
    let replicas: Vec<LocalServer> = cluster
        .servers()
        .iter()
        .map(|_| LocalServer::start_of(kind, ServerMode::Cluster).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    for replica in &replicas {
        meet(cluster, replica);
    }
    for (replica, primary) in replicas.iter().zip(cluster.servers()) {
        follow(replica, primary);
    }
    replicas
}

/// Introduces `server` to `cluster` (`CLUSTER MEET` on its first server).
pub fn meet(cluster: &LocalCluster, server: &LocalServer) {
    let mut seed = cluster.servers()[0].connection().unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(server.port())
        .query(&mut seed)
        .unwrap();
}

/// Makes `replica` (introduced to the cluster) a replica of `primary` and waits until its
/// link to the primary is up.
pub fn follow(replica: &LocalServer, primary: &LocalServer) {
    let primary_id = node_id(primary);
    let mut connection = replica.connection().unwrap();
    let started = Instant::now();
    // The replica must know its primary before it can follow it.
    loop {
        let replicated = redis::cmd("CLUSTER")
            .arg("REPLICATE")
            .arg(&primary_id)
            .query::<()>(&mut connection);
        if replicated.is_ok() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{replicated:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut connection)
            .unwrap();
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{info}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
