//! The rebalancer's metrics against the real Prometheus tools: `promtool check metrics` on a
//! scrape, `promtool check rules` on the shipped alert rules, and a real Prometheus that
//! scrapes the endpoint, loads the rules and answers queries about both.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ach_redis::local::LocalCluster;
use ach_redis::local_prometheus::{LocalExporter, LocalPrometheus, ScrapeJob, promtool_binary};
use ach_redis::metrics::{Metrics, MetricsServer, NodeMetrics};
use ach_redis::prometheus_api::PrometheusError;
use ach_redis::prometheus_telemetry::PrometheusTelemetry;

fn rules_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/prometheus/ach-rules.yml")
}

/// Metrics with a value in every family, as after a step with one migration.
fn busy_metrics() -> Metrics {
    let metrics = Metrics::new();
    let readings = [("cpu", 0.4), ("memory", 0.2), ("latency", 0.1)];
    let nodes = ["127.0.0.1:7000", "127.0.0.1:7001"].map(|address| NodeMetrics {
        address,
        load: 0.3,
        readings: &readings,
    });
    metrics.observe(nodes, 0.05);
    metrics.set_healthy(true);
    metrics.migration_started();
    metrics.migration_finished("keys", "success", Duration::from_millis(12), 40);
    metrics.step_finished(Duration::from_millis(80), 0.25);
    metrics
}

fn scrape(address: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect(address).expect("the endpoint accepts");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nAccept: */*\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (_, body) = response.split_once("\r\n\r\n").expect("an HTTP answer");
    body.to_string()
}

fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let binary = promtool_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(&binary)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    } else {
        drop(child.stdin.take());
    }
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[test]
fn a_scrape_of_the_endpoint_passes_promtool_check_metrics() {
    let server = MetricsServer::start("127.0.0.1:0", Arc::new(busy_metrics())).unwrap();
    let body = scrape(server.address());
    assert!(body.contains("ach_keys_moved_total 40"), "{body}");
    let (ok, said) = promtool(&["check", "metrics"], Some(&body));
    assert!(
        ok && said.trim().is_empty(),
        "promtool check metrics: {said}\n{body}"
    );
}

#[test]
fn the_alert_rules_pass_promtool_check_rules() {
    let rules = rules_file();
    let (ok, said) = promtool(&["check", "rules", rules.to_str().unwrap()], None);
    assert!(ok, "promtool check rules: {said}");
    assert!(said.contains("SUCCESS: 2 rules found"), "{said}");
}

#[test]
fn a_real_prometheus_scrapes_the_endpoint_and_loads_the_alert_rules() {
    let metrics = Arc::new(busy_metrics());
    let server = MetricsServer::start("127.0.0.1:0", Arc::clone(&metrics)).unwrap();
    let rules = rules_file();
    let prometheus = LocalPrometheus::start(
        &[ScrapeJob {
            job: "ach-redis".into(),
            targets: vec![server.address().to_string()],
            instances: Vec::new(),
        }],
        &[rules.as_path()],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let timeout = Duration::from_secs(30);
    let steps = prometheus
        .wait_for_series("ach_steps_total", timeout)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0].labels["job"], "ach-redis");
    assert_eq!(steps[0].value, 1.0);
    // The node families keep their labels, and a unit suffix survives the OpenMetrics scrape.
    let loads = prometheus
        .wait_for_series("ach_node_load", timeout)
        .unwrap();
    let mut nodes: Vec<&str> = loads.iter().map(|s| s.labels["node"].as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, ["127.0.0.1:7000", "127.0.0.1:7001"]);
    let durations = prometheus
        .wait_for_series("ach_migration_duration_seconds_count", timeout)
        .unwrap();
    assert_eq!(durations[0].value, 1.0);
    // A later step is seen by the next scrape.
    metrics.step_finished(Duration::from_millis(50), 1.0);
    let exhausted = prometheus
        .wait_for_series("ach_budget_exhausted_steps == 1", timeout)
        .unwrap();
    assert_eq!(exhausted.len(), 1);
    // Both alert rules are loaded and evaluated.
    let rules = prometheus.client().get("/api/v1/rules").unwrap();
    for alert in ["AchBudgetExhausted", "AchMigrationStuck"] {
        assert!(rules.contains(&format!("\"name\":\"{alert}\"")), "{rules}");
    }
    assert!(!rules.contains("\"health\":\"err\""), "{rules}");
}

/// INFO's `used_memory` of the server at `address`.
fn info_used_memory(cluster: &LocalCluster, index: usize) -> f64 {
    let mut connection = cluster.servers()[index].connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut connection)
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn readings_from_prometheus_match_the_nodes_and_missing_series_are_errors() {
    let mut monitored = Monitored::start(3);
    let cluster = &monitored.cluster;
    let nodes: Vec<String> = cluster.servers().iter().map(|s| s.address()).collect();
    // Three scrapes of every exporter, so that every rate has two points.
    monitored.wait_scraped(3);
    let timeout = Duration::from_secs(30);
    let prometheus = &monitored.prometheus;
    let mut telemetry = PrometheusTelemetry::new(&prometheus.url()).unwrap();
    telemetry.window = Duration::from_secs(10);
    let readings = telemetry.read(&nodes).unwrap_or_else(|e| panic!("{e}"));
    for (i, reading) in readings.iter().enumerate() {
        let cpu = reading
            .cpu_cores
            .unwrap_or_else(|| panic!("no cpu for {}", nodes[i]));
        assert!((0.0..1.5).contains(&cpu), "{reading:?}");
        let used = reading.used_memory.expect("used memory");
        let info = info_used_memory(cluster, i);
        assert!(
            (used - info).abs() / info < 0.05,
            "{used} against INFO {info}"
        );
    }
    // A label no series has: an error that names the query, not a cluster of missing samples.
    telemetry.node_label = "no_such_label".into();
    let error = telemetry.read(&nodes).unwrap_err();
    assert!(matches!(error, PrometheusError::NoSeries(_)), "{error}");
    assert!(error.to_string().contains("no_such_label"), "{error}");
    // A node whose exporter is gone becomes a missing sample (every reading `None`) once its
    // series go stale, and the others keep theirs.
    telemetry.node_label = "instance".into();
    telemetry.max_age = Duration::from_secs(3);
    drop(monitored.exporters.remove(0));
    let started = std::time::Instant::now();
    loop {
        let readings = telemetry.read(&nodes).unwrap_or_else(|e| panic!("{e}"));
        if readings[0] == Default::default() {
            assert!(
                readings[1..].iter().all(|r| r.cpu_cores.is_some()),
                "{readings:?}"
            );
            break;
        }
        assert!(
            started.elapsed() < timeout,
            "node 0 still read: {readings:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A free loopback port (bound, then released for the rebalancer to bind).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `rebalance` with Static-Wt and server 0 three times as heavy, which moves slots to it at the
/// first step.
fn heavy_rebalance_args(cluster: &LocalCluster, steps: u32, interval_ms: u32) -> Vec<String> {
    let heavy = format!("{}=3", cluster.servers()[0].address());
    [
        "rebalance",
        "--cluster",
        &cluster.seed(),
        "--algorithm",
        "static-wt",
        "--weight",
        &heavy,
        "--steps",
        &steps.to_string(),
        "--interval-ms",
        &interval_ms.to_string(),
    ]
    .map(str::to_string)
    .to_vec()
}

/// [`heavy_rebalance_args`], serving its metrics at `metrics_addr`.
fn heavy_rebalance(
    cluster: &LocalCluster,
    steps: u32,
    interval_ms: u32,
    metrics_addr: &str,
) -> Vec<String> {
    let mut args = heavy_rebalance_args(cluster, steps, interval_ms);
    args.extend(["--metrics-addr".to_string(), metrics_addr.to_string()]);
    args
}

#[test]
fn a_rebalance_serves_its_metrics_to_a_real_prometheus_while_it_runs() {
    let _serial = common::serial();
    let cluster = common::start_cluster(3);
    let data = common::DataSet::new(3_000, 0, 0, (0, 0));
    data.load(&cluster, 2);
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let prometheus = LocalPrometheus::start(
        &[ScrapeJob {
            job: "ach-redis".into(),
            targets: vec![address.clone()],
            instances: Vec::new(),
        }],
        &[rules_file().as_path()],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let progress = tempfile::NamedTempFile::new().unwrap();
    // Steps enough to outlast any wait below: the test stops the run itself once Prometheus has
    // seen what it checks, so a slow machine cannot end the run before the scrapes.
    let mut rebalance = Command::new(env!("CARGO_BIN_EXE_ach-redis"))
        .args(heavy_rebalance(&cluster, 1_000, 500, &address))
        // A file, not a pipe: one progress line per slot would fill a pipe nobody reads yet.
        .stdout(Stdio::null())
        .stderr(progress.reopen().unwrap())
        .spawn()
        .unwrap();
    let stderr = || std::fs::read_to_string(progress.path()).unwrap();
    // Prometheus sees the steps while the rebalancer runs. Once the process is gone its next
    // scrape fails and Prometheus marks every series stale, so all of them are read before.
    let timeout = Duration::from_secs(60);
    let seen = |query: &str| {
        prometheus
            .wait_for_series(query, timeout)
            .unwrap_or_else(|e| panic!("{e}\n{}", stderr()))
    };
    let steps = seen("ach_steps_total >= 1");
    assert_eq!(steps[0].labels["job"], "ach-redis");
    seen("sum(ach_migrations_total{method=\"keys\",outcome=\"success\"}) >= 1");
    let moved = seen("ach_keys_moved_total > 0");
    assert!(moved[0].value > 0.0, "{moved:?}");
    let healthy = seen("ach_cluster_healthy");
    assert_eq!(healthy[0].value, 1.0);
    assert!(
        rebalance.try_wait().unwrap().is_none(),
        "the rebalance ended before the test stopped it: {}",
        stderr()
    );
    // SIGINT by PID, as Ctrl-C sends it: the run stops after the slot in flight, cleanly.
    let interrupted = Command::new("bash")
        .args(["-c", &format!("kill -INT {}", rebalance.id())])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = rebalance.wait().unwrap();
    assert!(status.success(), "{status}: {}", stderr());
    common::assert_check_clean(&cluster);
}

#[test]
fn a_metrics_port_in_use_stops_the_rebalance_before_anything_moves() {
    let _serial = common::serial();
    let cluster = common::start_cluster(3);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let args = heavy_rebalance(&cluster, 2, 100, &address);
    let output = common::ach_redis(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--metrics-addr {address}: cannot listen there")),
        "{stderr}"
    );
    let mut connection = cluster.servers()[0].connection().unwrap();
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut connection)
        .unwrap();
    let myself = nodes.lines().find(|l| l.contains("myself")).unwrap();
    assert!(myself.ends_with(" 0-5460"), "slots moved: {myself}");
}

/// A cluster with one `redis_exporter` per master and a Prometheus scraping them every second,
/// each exporter's series labelled `instance="<its master's host:port>"`.
struct Monitored {
    cluster: LocalCluster,
    exporters: Vec<LocalExporter>,
    prometheus: LocalPrometheus,
}

impl Monitored {
    fn start(masters: usize) -> Monitored {
        let cluster = common::start_cluster(masters);
        let nodes: Vec<String> = cluster.servers().iter().map(|s| s.address()).collect();
        let exporters: Vec<LocalExporter> = nodes
            .iter()
            .map(|node| LocalExporter::start(node).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let prometheus = LocalPrometheus::start(
            &[ScrapeJob {
                job: "redis".into(),
                targets: exporters.iter().map(LocalExporter::address).collect(),
                instances: nodes,
            }],
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Monitored {
            cluster,
            exporters,
            prometheus,
        }
    }

    /// Waits until every exporter has been scraped `scrapes` times in the last minute.
    fn wait_scraped(&self, scrapes: usize) {
        let masters = self.cluster.servers().len();
        self.prometheus
            .wait_for_series(
                &format!("count(count_over_time(redis_up[1m]) >= {scrapes}) == {masters}"),
                Duration::from_secs(60),
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// `--telemetry prometheus --prometheus-url ... --prometheus-window-s WINDOW`.
    fn telemetry_args(&self, window_s: u64) -> Vec<String> {
        [
            "--telemetry",
            "prometheus",
            "--prometheus-url",
            &self.prometheus.url(),
            "--prometheus-window-s",
            &window_s.to_string(),
        ]
        .map(str::to_string)
        .to_vec()
    }
}

fn run_json(args: &[String]) -> serde_json::Value {
    let output = common::ach_redis(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

fn column(node: &serde_json::Value, path: &[&str]) -> f64 {
    let mut value = node;
    for part in path {
        value = &value[*part];
    }
    value.as_f64().unwrap_or(f64::NAN)
}

/// `status --telemetry prometheus` against INFO-based `status` on the same cluster under a
/// steady client load. Both runs read the same counters of the same processes (the exporter
/// turns INFO into series), so they differ only by their windows: INFO's covers the 10 s
/// `--sample-ms` of its own run, Prometheus's the 10 s `rate()` window that ends right after
/// it (so half of each window is shared), sampled by 1 s scrapes. The tolerances, per column:
/// - slots and keys: equal (one snapshot of the cluster each, no key written or deleted);
/// - memory (used over the machine's memory, both from `used_memory`): 5 % relative, the
///   client buffers and allocator state of a few seconds apart under writing clients (measured
///   0.8 to 2.4 % apart; the reader's own test allows the same 5 %);
/// - cpu (cores): 35 % relative plus 0.01 cores, the change of a client-driven load between
///   two windows half apart on a 2-core machine shared with other work (the clients, the
///   exporters and Prometheus run on it too), and `rate()`'s extrapolation over 1 s scrapes;
/// - ops/s: 35 % relative, for the same reason, against the rate of INFO's own
///   `total_commands_processed` over the 10 s before the Prometheus run (INFO's
///   `instantaneous_ops_per_sec`, a 1.6 s sampled average, was measured 72 % off a 10 s rate);
/// - latency: not the same statistic (INFO's is the p99 bucket bound of the interval's
///   histogram, a power of two; Prometheus's the mean time per data command), so the mean
///   must lie at or under the p99 bound and above a 16th of it (four buckets);
/// - load: the composite of the three readings, within 35 % relative plus 0.01.
///
/// Then each source again with `--request-capacity` at four times each master's rate: its cpu
/// part must be within 35 % of the data commands per second over the capacity, the rate taken
/// from `total_commands_processed` over that status's own window (the 3 s sample for INFO,
/// the 10 s before the query for Prometheus).
#[test]
fn status_from_prometheus_agrees_with_status_from_info() {
    let _serial = common::serial();
    let monitored = Monitored::start(3);
    let cluster = &monitored.cluster;
    let data = std::sync::Arc::new(common::DataSet::new(3_000, 0, 0, (0, 0)));
    data.load(cluster, 2);
    let workload = common::Workload::start(cluster, &data, 2, Duration::from_secs(120));
    // A full window of scrapes under the load.
    std::thread::sleep(Duration::from_secs(5));
    monitored.wait_scraped(12);
    let base = ["status", "--json", "--cluster", &cluster.seed()].map(str::to_string);
    let mut info_args = base.to_vec();
    info_args.extend(["--sample-ms".to_string(), "10000".to_string()]);
    let commands = || -> Vec<f64> {
        cluster
            .servers()
            .iter()
            .map(|server| {
                let info: String = redis::cmd("INFO")
                    .arg("stats")
                    .query(&mut server.connection().unwrap())
                    .unwrap();
                info.lines()
                    .find_map(|line| line.strip_prefix("total_commands_processed:"))
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap()
            })
            .collect()
    };
    // Each master's commands per second since `before`, taken at `started`.
    let rates_since = |before: &[f64], started: std::time::Instant| -> Vec<f64> {
        let seconds = started.elapsed().as_secs_f64();
        commands()
            .iter()
            .zip(before)
            .map(|(after, before)| (after - before) / seconds)
            .collect()
    };
    let (before, started) = (commands(), std::time::Instant::now());
    let info = run_json(&info_args);
    let info_rates = rates_since(&before, started);
    let mut prometheus_args = base.to_vec();
    prometheus_args.extend(monitored.telemetry_args(10));
    prometheus_args.extend(["--sample-ms".to_string(), "1".to_string()]);
    let prometheus = run_json(&prometheus_args);
    // `--request-capacity` at four times each master's rate: from either source its cpu part
    // is its data commands per second over the capacity, about a quarter.
    let capacities: Vec<f64> = info_rates.iter().map(|rate| (4.0 * rate).round()).collect();
    let with_capacities = |args: &[String]| -> serde_json::Value {
        let mut args = args.to_vec();
        for (server, capacity) in cluster.servers().iter().zip(&capacities) {
            args.extend([
                "--request-capacity".to_string(),
                format!("{}={capacity}", server.address()),
            ]);
        }
        run_json(&args)
    };
    // Each status's cpu part is compared with the rate of the same window: the clients' rate
    // drifts by more than the tolerance over a minute of a busy machine (seen once in CI:
    // 0.388 against 0.250 of the earlier window's rate).
    let mut short_info_args = base.to_vec();
    short_info_args.extend(["--sample-ms".to_string(), "3000".to_string()]);
    let (before, started) = (commands(), std::time::Instant::now());
    let info_by_requests = with_capacities(&short_info_args);
    let info_window_rates = rates_since(&before, started);
    // Prometheus's rate covers the 10 s before the query: the commands of the 10 s before it.
    let (before, started) = (commands(), std::time::Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let prometheus_window_rates = rates_since(&before, started);
    let prometheus_by_requests = with_capacities(&prometheus_args);
    let by_requests = [
        (info_by_requests, info_window_rates),
        (prometheus_by_requests, prometheus_window_rates),
    ];
    let report = workload.finish();
    assert_eq!(report.errors, 0, "{:?}", report.error_samples);
    assert_eq!(info["observed"]["signals"]["telemetry"], "info");
    assert_eq!(prometheus["observed"]["signals"]["telemetry"], "prometheus");
    let info_nodes = info["observed"]["nodes"].as_array().unwrap();
    let prometheus_nodes = prometheus["observed"]["nodes"].as_array().unwrap();
    assert_eq!(info_nodes.len(), 3);
    let near = |a: f64, b: f64, relative: f64, absolute: f64| {
        a.is_finite() && b.is_finite() && (a - b).abs() <= relative * a.max(b) + absolute
    };
    // INFO's rates and the capacities are in the servers' start order; the nodes of a status
    // are in address order.
    let server_of = |node: &serde_json::Value| -> usize {
        cluster
            .servers()
            .iter()
            .position(|s| node["address"] == s.address().as_str())
            .unwrap_or_else(|| panic!("no server {}", node["address"]))
    };
    for (i, p) in info_nodes.iter().zip(prometheus_nodes) {
        let info_rate = &info_rates[server_of(i)];
        let figures = format!("INFO {i}\nPrometheus {p}\nINFO's commands/s {info_rate:.0}");
        println!("{}", figures.replace('\n', " | "));
        assert_eq!(i["address"], p["address"]);
        assert_eq!(i["slots"], p["slots"], "{figures}");
        assert_eq!(i["keys"], p["keys"], "{figures}");
        let reading =
            |node: &serde_json::Value, k: usize| node["reading"][k].as_f64().unwrap_or(f64::NAN);
        assert!(
            near(reading(i, 1), reading(p, 1), 0.05, 0.0),
            "memory: {figures}"
        );
        assert!(
            near(reading(i, 0), reading(p, 0), 0.35, 0.01),
            "cpu: {figures}"
        );
        let p_ops = column(p, &["ops_per_sec"]);
        assert!(
            p_ops > 100.0 && near(*info_rate, p_ops, 0.35, 0.0),
            "ops/s: {figures}"
        );
        let p99 = column(i, &["p99_usec"]);
        let mean = column(p, &["mean_latency_usec"]);
        assert!(
            mean > 0.0 && mean <= p99 && mean > p99 / 16.0,
            "latency: {figures}"
        );
        assert!(
            near(column(i, &["load"]), column(p, &["load"]), 0.35, 0.01),
            "load: {figures}"
        );
    }
    for (source, (status, window_rates)) in ["info", "prometheus"].iter().zip(&by_requests) {
        let nodes = status["observed"]["nodes"].as_array().unwrap();
        for node in nodes {
            let (rate, capacity) = (window_rates[server_of(node)], capacities[server_of(node)]);
            let cpu = node["reading"][0].as_f64().unwrap_or(f64::NAN);
            let figures = format!(
                "{source}: cpu part {cpu}, capacity {capacity}, INFO's commands/s over the \
                 window {rate:.0}"
            );
            println!("{figures}");
            assert!(near(cpu, rate / capacity, 0.35, 0.0), "{figures}");
            if *source == "info" {
                // INFO's ops/s are the data commands the cpu part divides.
                assert_eq!(cpu, column(node, &["ops_per_sec"]) / capacity, "{figures}");
            }
        }
    }
}

/// `rebalance --telemetry prometheus` moves slots (Static-Wt with one master three times as
/// heavy) under writing and reading clients, with no client error and nothing lost.
#[test]
fn a_rebalance_steered_by_prometheus_moves_slots_with_no_error() {
    let _serial = common::serial();
    let monitored = Monitored::start(3);
    let cluster = &monitored.cluster;
    let data = std::sync::Arc::new(common::DataSet::new(3_000, 0, 0, (0, 0)));
    data.load(cluster, 2);
    monitored.wait_scraped(3);
    let workload = common::Workload::start(cluster, &data, 2, Duration::from_secs(120));
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut args = heavy_rebalance_args(cluster, 3, 500);
    args.extend([
        "--log".to_string(),
        log.path().to_str().unwrap().to_string(),
    ]);
    args.extend(monitored.telemetry_args(5));
    let output = common::ach_redis(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let report = workload.finish();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines = common::read_log(log.path());
    let moved: u64 = lines
        .iter()
        .map(|line| line["outcome"]["keys_moved"].as_u64().unwrap_or(0))
        .sum();
    assert!(moved > 0, "no key moved: {stderr}");
    for line in &lines {
        let observed = &line["observed"];
        assert_eq!(observed["signals"]["telemetry"], "prometheus", "{line}");
        let errors = line["outcome"]["errors"].as_array().map_or(0, Vec::len);
        assert_eq!(errors, 0, "{line}");
    }
    let nodes: String = {
        let mut connection = cluster.servers()[0].connection().unwrap();
        redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut connection)
            .unwrap()
    };
    assert!(
        !nodes
            .lines()
            .any(|l| l.contains("myself") && l.ends_with(" 0-5460")),
        "{nodes}"
    );
    common::assert_nothing_lost(cluster, &report);
    common::assert_check_clean(cluster);
}

/// The first master's slots, as `CLUSTER NODES` shows them on its own line.
fn own_slots(cluster: &LocalCluster) -> String {
    let mut connection = cluster.servers()[0].connection().unwrap();
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut connection)
        .unwrap();
    let myself = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .unwrap()
        .to_string();
    myself.split(' ').skip(8).collect::<Vec<_>>().join(" ")
}

/// An unreachable Prometheus and a node label no series has: `status`, `plan` and `rebalance`
/// exit 2 with a message naming the server or the query, and nothing moves.
#[test]
fn a_bad_prometheus_stops_every_command_before_anything_moves() {
    let _serial = common::serial();
    let monitored = Monitored::start(3);
    let cluster = &monitored.cluster;
    monitored.wait_scraped(3);
    let before = own_slots(cluster);
    let unreachable = format!("http://127.0.0.1:{}", free_port());
    let heavy = format!("{}=3", cluster.servers()[0].address());
    let rebalance = [
        "rebalance",
        "--algorithm",
        "static-wt",
        "--weight",
        &heavy,
        "--steps",
        "2",
        "--interval-ms",
        "100",
    ];
    let commands: [&[&str]; 3] = [
        &["status"],
        &["plan", "--algorithm", "static-wt", "--weight", &heavy],
        &rebalance,
    ];
    let url = monitored.prometheus.url();
    let cases: [(&[&str], &str); 3] = [
        (&["--prometheus-url", &unreachable], "is unreachable"),
        (
            &[
                "--prometheus-url",
                &url,
                "--prometheus-node-label",
                "no_such_label",
            ],
            "returned no series",
        ),
        (
            &["--prometheus-url", "ftp://127.0.0.1:1"],
            "is not an http:// or https:// URL",
        ),
    ];
    let seed = cluster.seed();
    for command in commands {
        for (options, message) in cases {
            let mut args: Vec<&str> = command.to_vec();
            args.extend(["--cluster", &seed, "--telemetry", "prometheus"]);
            args.extend(options);
            let output = common::ach_redis(&args);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains(message), "{args:?}: {stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
    // --telemetry prometheus without a URL, and a URL without --telemetry prometheus.
    for args in [
        vec!["status", "--cluster", &seed, "--telemetry", "prometheus"],
        vec!["status", "--cluster", &seed, "--prometheus-url", &url],
    ] {
        let output = common::ach_redis(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("--prometheus-url") || stderr.contains("--telemetry"),
            "{stderr}"
        );
    }
    assert_eq!(own_slots(cluster), before, "slots moved");
    common::assert_check_clean(cluster);
}

/// A Prometheus that stops answering during a `rebalance --telemetry prometheus`: the steps
/// after it are logged unhealthy with the server named and move nothing, and the run goes on to
/// its last step and exits 0.
#[test]
fn a_prometheus_lost_mid_run_skips_the_steps_and_the_run_goes_on() {
    let _serial = common::serial();
    let Monitored {
        cluster,
        exporters,
        prometheus,
    } = Monitored::start(3);
    let monitored_url = prometheus.url();
    let data = common::DataSet::new(300, 0, 0, (0, 0));
    data.load(&cluster, 1);
    prometheus
        .wait_for_series(
            "count(count_over_time(redis_up[1m]) >= 3) == 3",
            Duration::from_secs(60),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let log = tempfile::NamedTempFile::new().unwrap();
    let progress = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ach-redis"))
        .args([
            "rebalance",
            "--cluster",
            &cluster.seed(),
            "--algorithm",
            "static-w",
        ])
        .args(["--steps", "4", "--interval-ms", "1000"])
        .args(["--log", log.path().to_str().unwrap()])
        .args([
            "--telemetry",
            "prometheus",
            "--prometheus-url",
            &monitored_url,
        ])
        .args(["--prometheus-window-s", "5"])
        .stdout(Stdio::null())
        .stderr(progress.reopen().unwrap())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while common::read_log(log.path()).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no step logged"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(prometheus);
    let status = child.wait().unwrap();
    drop(exporters);
    let stderr = std::fs::read_to_string(progress.path()).unwrap();
    assert!(status.success(), "{stderr}");
    let lines = common::read_log(log.path());
    assert_eq!(lines.len(), 4, "{stderr}");
    assert_eq!(lines[0]["healthy"], true, "{}", lines[0]);
    let last = &lines[3];
    assert_eq!(last["healthy"], false, "{last}");
    let problems = last["problems"].to_string();
    assert!(
        problems.contains(&format!("cannot reach Prometheus at {monitored_url}")),
        "{problems}"
    );
    assert!(last["outcome"].is_null(), "{last}");
}
