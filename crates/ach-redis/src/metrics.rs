//! The rebalancer's own metrics, served in the OpenMetrics text format on `/metrics`
//! (`ach-redis rebalance --metrics-addr HOST:PORT`).
//!
//! [`Metrics`] holds every family (names, units and labels are listed in docs/prometheus.md);
//! the control loop updates it as it goes, and [`MetricsServer`] answers scrapes from a thread
//! of its own, so a scrape never waits for a step and a long migration stays visible while it
//! runs. The families are built with the official `prometheus-client` crate.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// A gauge of floating-point values.
type FloatGauge = Gauge<f64, AtomicU64>;

/// The label of a per-node family: the node's `host:port`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    /// `host:port` of the master.
    pub node: String,
}

/// The labels of a node's reading: the node and the signal (`cpu`, `memory`, `latency`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReadingLabels {
    /// `host:port` of the master.
    pub node: String,
    /// The signal the reading is of.
    pub signal: String,
}

/// The labels of a finished migration.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MigrationLabels {
    /// `atomic` (Valkey's `CLUSTER MIGRATESLOTS`) or `keys` (the key-by-key protocol).
    pub method: String,
    /// `success`, `failed` or `cancelled`.
    pub outcome: String,
}

/// Every metric the rebalancer exports.
pub struct Metrics {
    registry: Registry,
    node_load: Family<NodeLabels, FloatGauge>,
    node_reading: Family<ReadingLabels, FloatGauge>,
    imbalance: FloatGauge,
    keys_moved: Counter,
    budget_window_used_ratio: FloatGauge,
    budget_exhausted_steps: Gauge,
    migrations: Family<MigrationLabels, Counter>,
    migration_duration: Histogram,
    migration_running: Gauge,
    migration_started: FloatGauge,
    step_duration: Histogram,
    cluster_healthy: Gauge,
    steps: Counter,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Every family, registered and at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let node_load = Family::<NodeLabels, FloatGauge>::default();
        registry.register(
            "ach_node_load",
            "Smoothed load of each master, the controller's l_i (0 = idle, 1 = saturated)",
            node_load.clone(),
        );
        let node_reading = Family::<ReadingLabels, FloatGauge>::default();
        registry.register(
            "ach_node_reading",
            "Latest raw reading of each master per signal, before smoothing",
            node_reading.clone(),
        );
        let imbalance = FloatGauge::default();
        registry.register(
            "ach_imbalance",
            "Imbalance D = max l_i - mean l_i of the latest observation",
            imbalance.clone(),
        );
        let keys_moved = Counter::default();
        registry.register(
            "ach_keys_moved",
            "Keys moved to another master by confirmed migrations",
            keys_moved.clone(),
        );
        let budget_window_used_ratio = FloatGauge::default();
        registry.register(
            "ach_budget_window_used_ratio",
            "Share of the window budget M_H spent by the last H steps (1 = exhausted)",
            budget_window_used_ratio.clone(),
        );
        let budget_exhausted_steps = Gauge::default();
        registry.register(
            "ach_budget_exhausted_steps",
            "Consecutive steps, up to the latest, that ended with the window budget exhausted",
            budget_exhausted_steps.clone(),
        );
        let migrations = Family::<MigrationLabels, Counter>::default();
        registry.register(
            "ach_migrations",
            "Finished slot migrations by method and outcome",
            migrations.clone(),
        );
        let migration_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register_with_unit(
            "ach_migration_duration",
            "Time one migration took, from its start to its outcome",
            Unit::Seconds,
            migration_duration.clone(),
        );
        let migration_running = Gauge::default();
        registry.register(
            "ach_migration_running",
            "1 while a migration runs, 0 otherwise",
            migration_running.clone(),
        );
        let migration_started = FloatGauge::default();
        registry.register_with_unit(
            "ach_migration_started_timestamp",
            "Unix time at which the running (or last) migration started",
            Unit::Seconds,
            migration_started.clone(),
        );
        let step_duration = Histogram::new(exponential_buckets(0.001, 2.0, 18));
        registry.register_with_unit(
            "ach_step_duration",
            "Time one control step took: observe, plan, migrate, confirm",
            Unit::Seconds,
            step_duration.clone(),
        );
        let cluster_healthy = Gauge::default();
        registry.register(
            "ach_cluster_healthy",
            "1 when the latest observation found every slot served and no node failing",
            cluster_healthy.clone(),
        );
        let steps = Counter::default();
        registry.register("ach_steps", "Control steps run", steps.clone());
        Metrics {
            registry,
            node_load,
            node_reading,
            imbalance,
            keys_moved,
            budget_window_used_ratio,
            budget_exhausted_steps,
            migrations,
            migration_duration,
            migration_running,
            migration_started,
            step_duration,
            cluster_healthy,
            steps,
        }
    }

    /// The latest observation: each master's load and raw readings, and the imbalance.
    pub fn observe<'a>(&self, nodes: impl IntoIterator<Item = NodeMetrics<'a>>, imbalance: f64) {
        self.node_load.clear();
        self.node_reading.clear();
        for node in nodes {
            let labels = NodeLabels {
                node: node.address.to_string(),
            };
            self.node_load.get_or_create(&labels).set(node.load);
            for &(signal, value) in node.readings {
                let labels = ReadingLabels {
                    node: node.address.to_string(),
                    signal: signal.to_string(),
                };
                self.node_reading.get_or_create(&labels).set(value);
            }
        }
        self.imbalance.set(imbalance);
    }

    /// Whether the latest observation found the cluster healthy.
    pub fn set_healthy(&self, healthy: bool) {
        self.cluster_healthy.set(i64::from(healthy));
    }

    /// A migration starts now.
    pub fn migration_started(&self) {
        self.migration_started.set(unix_seconds());
        self.migration_running.set(1);
    }

    /// A migration ended with `outcome` after `duration`, moving `keys` keys when it succeeded.
    pub fn migration_finished(&self, method: &str, outcome: &str, duration: Duration, keys: u64) {
        self.migration_running.set(0);
        self.migration_duration.observe(duration.as_secs_f64());
        let labels = MigrationLabels {
            method: method.to_string(),
            outcome: outcome.to_string(),
        };
        self.migrations.get_or_create(&labels).inc();
        if outcome == "success" {
            self.keys_moved.inc_by(keys);
        }
    }

    /// No migration runs any more (the step's migrations are over).
    pub fn migration_ended(&self) {
        self.migration_running.set(0);
    }

    /// A step ended after `duration`, with `window_used_ratio` of the window budget spent.
    pub fn step_finished(&self, duration: Duration, window_used_ratio: f64) {
        self.steps.inc();
        self.step_duration.observe(duration.as_secs_f64());
        self.budget_window_used_ratio.set(window_used_ratio);
        if window_used_ratio >= 1.0 - 1e-9 {
            self.budget_exhausted_steps.inc();
        } else {
            self.budget_exhausted_steps.set(0);
        }
    }

    /// The OpenMetrics text of every family, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }

    /// The same samples in Prometheus's text format 0.0.4, for scrapers and tools that do
    /// not accept OpenMetrics (`curl`, `promtool check metrics`): a counter's `HELP` and
    /// `TYPE` name its `_total` sample, and there is no `UNIT` or `EOF` line.
    pub fn encode_prometheus_text(&self) -> String {
        to_prometheus_text(&self.encode())
    }
}

/// Rewrites OpenMetrics text as Prometheus text 0.0.4 (see
/// [`Metrics::encode_prometheus_text`]).
fn to_prometheus_text(open_metrics: &str) -> String {
    let counters: Vec<&str> = open_metrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        text.push_str(renamed.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

/// One master's figures for [`Metrics::observe`].
#[derive(Clone, Copy, Debug)]
pub struct NodeMetrics<'a> {
    /// `host:port`.
    pub address: &'a str,
    /// Smoothed load.
    pub load: f64,
    /// Raw readings by signal name.
    pub readings: &'a [(&'a str, f64)],
}

fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address is not `HOST:PORT` with a numeric host.
    #[error("--metrics-addr {0:?} is not HOST:PORT (for example 127.0.0.1:9464)")]
    BadAddress(String),
    /// The address could not be bound (in use, or not an address of this machine).
    #[error("--metrics-addr {address}: cannot listen there: {source}")]
    Bind {
        /// The address as given.
        address: String,
        /// What the system said.
        source: std::io::Error,
    },
}

/// The `/metrics` endpoint: a thread that answers each scrape with [`Metrics::encode`].
/// Dropping it stops the thread.
pub struct MetricsServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `address` (`HOST:PORT`; port 0 picks a free one) and serves `metrics`.
    pub fn start(address: &str, metrics: Arc<Metrics>) -> Result<MetricsServer, MetricsError> {
        let parsed: SocketAddr = address
            .parse()
            .map_err(|_| MetricsError::BadAddress(address.to_string()))?;
        let bind_error = |source| MetricsError::Bind {
            address: address.to_string(),
            source,
        };
        let listener = TcpListener::bind(parsed).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        let bound = listener.local_addr().map_err(bind_error)?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || serve(&listener, &metrics, &stop))
        };
        Ok(MetricsServer {
            address: bound,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (with the port chosen when 0 was asked).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts scrapes until `stop` is set, polling every 20 ms.
fn serve(listener: &TcpListener, metrics: &Metrics, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                // A client that misbehaves loses its answer, never the endpoint.
                let _ = answer(stream, metrics);
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Reads one HTTP request (its head, at most 8 KiB) and answers it: for `GET /metrics` the
/// OpenMetrics text when the request accepts it (as Prometheus's scrapes do), otherwise the
/// Prometheus text format; 404 for any other path, 405 for any other method.
fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
        let read = stream.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let open_metrics = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("accept:") && line.contains("application/openmetrics-text")
    });
    let (status, content_type, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") if open_metrics => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.encode_prometheus_text(),
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: the metrics are at /metrics\n".to_string(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET /metrics\n".to_string(),
        ),
    };
    let body = if method == "HEAD" { "" } else { body.as_str() };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN_METRICS: &str = "Accept: application/openmetrics-text;version=1.0.0\r\n";

    fn scrape(address: SocketAddr, path: &str, accept: &str) -> String {
        let mut stream = TcpStream::connect(address).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n{accept}\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    #[test]
    fn every_family_is_exported_with_its_unit_and_labels() {
        let metrics = Metrics::new();
        let readings = [("cpu", 0.5), ("latency", 0.25)];
        metrics.observe(
            [NodeMetrics {
                address: "127.0.0.1:7000",
                load: 0.75,
                readings: &readings,
            }],
            0.125,
        );
        metrics.set_healthy(true);
        metrics.migration_started();
        metrics.migration_finished("atomic", "success", Duration::from_millis(30), 120);
        metrics.migration_finished("keys", "failed", Duration::from_millis(5), 7);
        metrics.step_finished(Duration::from_millis(250), 0.5);
        let text = metrics.encode();
        for line in [
            "ach_node_load{node=\"127.0.0.1:7000\"} 0.75",
            "ach_node_reading{node=\"127.0.0.1:7000\",signal=\"latency\"} 0.25",
            "ach_imbalance 0.125",
            "ach_keys_moved_total 120",
            "ach_budget_window_used_ratio 0.5",
            "ach_budget_exhausted_steps 0",
            "ach_migrations_total{method=\"atomic\",outcome=\"success\"} 1",
            "ach_migrations_total{method=\"keys\",outcome=\"failed\"} 1",
            "ach_migration_duration_seconds_count 2",
            "ach_migration_running 0",
            "ach_step_duration_seconds_count 1",
            "ach_cluster_healthy 1",
            "ach_steps_total 1",
            "# UNIT ach_migration_duration_seconds seconds",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in\n{text}"
            );
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn the_prometheus_text_names_counters_by_their_samples() {
        let open = "# HELP a x.\n# TYPE a counter\na_total 1\n# HELP b_seconds g.\n\
                    # TYPE b_seconds gauge\n# UNIT b_seconds seconds\nb_seconds 2\n# EOF\n";
        assert_eq!(
            to_prometheus_text(open),
            "# HELP a_total x.\n# TYPE a_total counter\na_total 1\n# HELP b_seconds g.\n\
             # TYPE b_seconds gauge\nb_seconds 2\n"
        );
    }

    #[test]
    fn exhausted_steps_count_up_and_reset() {
        let metrics = Metrics::new();
        for ratio in [1.0, 1.0, 1.0] {
            metrics.step_finished(Duration::ZERO, ratio);
        }
        assert!(metrics.encode().contains("ach_budget_exhausted_steps 3\n"));
        metrics.step_finished(Duration::ZERO, 0.9);
        assert!(metrics.encode().contains("ach_budget_exhausted_steps 0\n"));
    }

    #[test]
    fn a_departed_node_leaves_the_node_families() {
        let metrics = Metrics::new();
        let node = |address| NodeMetrics {
            address,
            load: 0.5,
            readings: &[],
        };
        metrics.observe([node("127.0.0.1:1"), node("127.0.0.1:2")], 0.0);
        metrics.observe([node("127.0.0.1:2")], 0.0);
        let text = metrics.encode();
        assert!(!text.contains("127.0.0.1:1\""), "{text}");
        assert!(text.contains("127.0.0.1:2\""), "{text}");
    }

    #[test]
    fn the_endpoint_serves_metrics_and_refuses_other_paths() {
        let metrics = Arc::new(Metrics::new());
        metrics.step_finished(Duration::from_millis(1), 0.0);
        let server = MetricsServer::start("127.0.0.1:0", Arc::clone(&metrics)).unwrap();
        let response = scrape(server.address(), "/metrics", OPEN_METRICS);
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(
            response.contains("application/openmetrics-text"),
            "{response}"
        );
        assert!(response.contains("\r\n\r\n# HELP "), "{response}");
        assert!(response.contains("ach_steps_total 1\n"), "{response}");
        assert!(response.ends_with("# EOF\n"), "{response}");
        let plain = scrape(server.address(), "/metrics", "Accept: */*\r\n");
        assert!(plain.contains("text/plain; version=0.0.4"), "{plain}");
        assert!(
            plain.contains("# TYPE ach_steps_total counter\n"),
            "{plain}"
        );
        assert!(!plain.contains("# EOF"), "{plain}");
        assert!(scrape(server.address(), "/", "").starts_with("HTTP/1.1 404"));
    }

    #[test]
    fn a_port_in_use_and_a_bad_address_are_clear_errors() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = taken.local_addr().unwrap().to_string();
        let error = MetricsServer::start(&address, Arc::new(Metrics::new()))
            .err()
            .unwrap();
        let message = error.to_string();
        assert!(message.starts_with(&format!("--metrics-addr {address}: cannot listen")));
        let error = MetricsServer::start("localhost", Arc::new(Metrics::new()))
            .err()
            .unwrap();
        assert!(matches!(error, MetricsError::BadAddress(_)), "{error}");
    }
}
