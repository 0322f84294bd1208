//! Throwaway local Prometheus servers and `redis_exporter`s for tests and measurements.
//!
//! As with [`local`](crate::local), every server is a child process on a free loopback port
//! with its own temporary directory, stopped by its PID when its handle is dropped, also when a
//! test fails. The binaries are Debian's `prometheus`, `promtool` and
//! `prometheus-redis-exporter` (installed by `cargo xtask test`), or the paths in
//! `ACH_PROMETHEUS`, `ACH_PROMTOOL` and `ACH_REDIS_EXPORTER`.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::local::{LocalError, find_binary};
use crate::prometheus_api::{PrometheusClient, PrometheusError};

/// The `prometheus` binary: `$ACH_PROMETHEUS`, or `prometheus` on the `PATH` or in `/usr/bin`.
pub fn prometheus_binary() -> Result<PathBuf, LocalError> {
    debian_binary("ACH_PROMETHEUS", "prometheus", "prometheus")
}

/// The `promtool` binary: `$ACH_PROMTOOL`, or `promtool` on the `PATH` or in `/usr/bin`.
pub fn promtool_binary() -> Result<PathBuf, LocalError> {
    debian_binary("ACH_PROMTOOL", "promtool", "prometheus")
}

/// Debian's `prometheus-redis-exporter`: `$ACH_REDIS_EXPORTER`, or the binary on the `PATH` or
/// in `/usr/bin`.
pub fn redis_exporter_binary() -> Result<PathBuf, LocalError> {
    debian_binary(
        "ACH_REDIS_EXPORTER",
        "prometheus-redis-exporter",
        "prometheus-redis-exporter",
    )
}

fn debian_binary(variable: &'static str, name: &str, package: &str) -> Result<PathBuf, LocalError> {
    find_binary(variable, name, None).map_err(|variable| {
        LocalError(format!(
            "{name} not found in PATH or /usr/bin: run `cargo xtask test` once (it installs \
             what the tests start), or `apt-get install -y {package}`, or set {variable}"
        ))
    })
}

/// A free loopback port (bound and released; the child binds it right after).
fn free_port() -> Result<u16, LocalError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| LocalError(format!("no free loopback port: {e}")))
}

/// A child process stopped by its PID on drop.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a local Prometheus scrapes.
#[derive(Clone, Debug)]
pub struct ScrapeJob {
    /// The job label.
    pub job: String,
    /// `host:port` targets.
    pub targets: Vec<String>,
    /// The `instance` label of each target, in the order of `targets` (empty: Prometheus's
    /// default, the target's address).
    pub instances: Vec<String>,
}

/// One local Prometheus, scraping every second.
pub struct LocalPrometheus {
    port: u16,
    child: ChildGuard,
    _directory: tempfile::TempDir,
}

impl LocalPrometheus {
    /// Starts Prometheus scraping `jobs` every second and evaluating the rule files `rules`,
    /// and waits until it is ready.
    pub fn start(jobs: &[ScrapeJob], rules: &[&Path]) -> Result<LocalPrometheus, LocalError> {
        let binary = prometheus_binary()?;
        let directory =
            tempfile::tempdir().map_err(|e| LocalError(format!("no temporary directory: {e}")))?;
        let config = directory.path().join("prometheus.yml");
        std::fs::write(&config, config_text(jobs, rules))
            .map_err(|e| LocalError(format!("cannot write {}: {e}", config.display())))?;
        let port = free_port()?;
        let log = std::fs::File::create(directory.path().join("prometheus.log"))
            .map_err(|e| LocalError(format!("cannot create the log: {e}")))?;
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                directory.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| LocalError(format!("cannot start {}: {e}", binary.display())))?;
        let mut prometheus = LocalPrometheus {
            port,
            child: ChildGuard(child),
            _directory: directory,
        };
        prometheus.wait_ready(Duration::from_secs(30))?;
        Ok(prometheus)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LocalError> {
        let client = self.client();
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.0.try_wait() {
                return Err(LocalError(format!(
                    "prometheus exited at start ({status}): {}",
                    self.log_tail()
                )));
            }
            if client.get("/-/ready").is_ok() {
                return Ok(());
            }
            if started.elapsed() > timeout {
                return Err(LocalError(format!(
                    "prometheus on port {} not ready after {timeout:?}: {}",
                    self.port,
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self._directory.path().join("prometheus.log"))
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A client of its HTTP API.
    pub fn client(&self) -> PrometheusClient {
        PrometheusClient::new(&self.url()).expect("a loopback URL is valid")
    }

    /// The PID of the child.
    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Waits until `query` returns at least one series, polling every 250 ms.
    pub fn wait_for_series(
        &self,
        query: &str,
        timeout: Duration,
    ) -> Result<Vec<crate::prometheus_api::Sample>, PrometheusError> {
        let client = self.client();
        let started = Instant::now();
        loop {
            match client.query(query) {
                Ok(samples) if !samples.is_empty() => return Ok(samples),
                Ok(_) | Err(_) if started.elapsed() < timeout => {
                    std::thread::sleep(Duration::from_millis(250));
                }
                Ok(_) => return Err(PrometheusError::NoSeries(format!("{query:?}"))),
                Err(error) => return Err(error),
            }
        }
    }
}

/// The configuration file: a one-second scrape interval, the jobs, the rule files.
fn config_text(jobs: &[ScrapeJob], rules: &[&Path]) -> String {
    let mut text = String::from("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n");
    if !rules.is_empty() {
        text.push_str("rule_files:\n");
        for rule in rules {
            let _ = writeln!(text, "  - {:?}", rule.display().to_string());
        }
    }
    text.push_str("scrape_configs:\n");
    for job in jobs {
        let _ = writeln!(text, "  - job_name: {:?}\n    static_configs:", job.job);
        if job.instances.is_empty() {
            let targets: Vec<String> = job.targets.iter().map(|t| format!("{t:?}")).collect();
            let _ = writeln!(text, "      - targets: [{}]", targets.join(", "));
        }
        for (target, instance) in job.targets.iter().zip(&job.instances) {
            let _ = writeln!(
                text,
                "      - targets: [{target:?}]\n        labels: {{ instance: {instance:?} }}"
            );
        }
    }
    text
}

/// One local `redis_exporter` for one Redis or Valkey node.
pub struct LocalExporter {
    port: u16,
    _child: ChildGuard,
}

impl LocalExporter {
    /// Starts an exporter of the node at `redis_address` (`host:port`) and waits until it
    /// answers.
    pub fn start(redis_address: &str) -> Result<LocalExporter, LocalError> {
        let binary = redis_exporter_binary()?;
        let port = free_port()?;
        let child = Command::new(&binary)
            .arg("-redis.addr")
            .arg(format!("redis://{redis_address}"))
            // `redis_total_system_memory_bytes`, the memory reading's capacity by default.
            .arg("-include-system-metrics")
            .arg("-web.listen-address")
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LocalError(format!("cannot start {}: {e}", binary.display())))?;
        let mut exporter = LocalExporter {
            port,
            _child: ChildGuard(child),
        };
        let started = Instant::now();
        let client = PrometheusClient::new(&format!("http://{}", exporter.address()))
            .expect("a loopback URL is valid");
        while client.get("/metrics").is_err() {
            if let Ok(Some(status)) = exporter._child.0.try_wait() {
                return Err(LocalError(format!(
                    "redis_exporter exited at start ({status})"
                )));
            }
            if started.elapsed() > Duration::from_secs(20) {
                return Err(LocalError(format!(
                    "redis_exporter on port {port} not answering after 20 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        exporter.port = port;
        Ok(exporter)
    }

    /// `127.0.0.1:PORT` of its `/metrics`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The PID of the child.
    pub fn pid(&self) -> u32 {
        self._child.0.id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_lists_jobs_and_rules() {
        let jobs = [ScrapeJob {
            job: "ach".into(),
            targets: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            instances: Vec::new(),
        }];
        let text = config_text(&jobs, &[Path::new("/tmp/r.yml")]);
        assert_eq!(
            text,
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - \
             \"/tmp/r.yml\"\nscrape_configs:\n  - job_name: \"ach\"\n    static_configs:\n      \
             - targets: [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n"
        );
        let labelled = [ScrapeJob {
            job: "redis".into(),
            targets: vec!["127.0.0.1:9121".into()],
            instances: vec!["127.0.0.1:7000".into()],
        }];
        assert!(config_text(&labelled, &[]).ends_with(
            "  - job_name: \"redis\"\n    static_configs:\n      - targets: [\"127.0.0.1:9121\"]\n        \
             labels: { instance: \"127.0.0.1:7000\" }\n"
        ));
    }
}
