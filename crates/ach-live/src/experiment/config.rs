//! The experiment's configuration: every option, its default and its rule.

use std::path::PathBuf;

use ach_sim::config::NodeClass;

use super::{Arm, LiveBackend, MAX_CLIENT_THREADS};
use crate::error::ConfigError;
use crate::workload::WorkloadConfig;

/// Everything the experiment is a function of (besides the machine).
#[derive(Clone, Debug, serde::Serialize)]
pub struct LiveConfig {
    /// Masters in the cluster.
    pub nodes: usize,
    /// Keys loaded.
    pub keys: usize,
    /// Seconds of workload per arm.
    pub duration_s: u64,
    /// The arms, in order.
    pub arms: Vec<Arm>,
    /// Seed of repeat 0 (repeat `r` uses `seed + r`).
    pub seed: u64,
    /// Repeats of every arm.
    pub repeats: u32,
    /// Output folder.
    pub out: PathBuf,
    /// Clients: request streams, each over its own keys.
    pub clients: usize,
    /// Threads that send each client's requests, each for a fixed part of its keys, so that a
    /// request waiting on a slow master holds up only its thread's part of the schedule.
    pub senders_per_client: usize,
    /// Requests per second of all clients before the load step.
    pub rate: f64,
    /// CPUs of a strong node's quota (a medium node gets 0.55 of it, a weak one 0.25).
    pub cpu_per_strong_node: f64,
    /// Length of a measurement and control step, in milliseconds.
    pub interval_ms: u64,
    /// The server and backend.
    pub backend: LiveBackend,
    /// Seconds each class's service rate is measured for, before the arms.
    pub calibration_s: f64,
    /// Seconds every arm's masters are read without clients, once the keys are loaded, for
    /// their idle cpu use, which the controllers and the observer take off their cpu readings
    /// (`ach-redis --idle-cpu`): the cluster bus, the timers and the readings cost a node the
    /// same whatever slots it owns. 0 keeps the whole readings. Not read under
    /// [`CpuReading::Requests`], which has no idle part.
    pub idle_cpu_s: f64,
    /// What the cpu part of the controllers' and the observer's readings counts.
    pub cpu_reading: CpuReading,
    /// The most slots of a master one of the loop's per-slot statistics requests asks for
    /// (Valkey; `SLOT_COUNT`: all in one request). Smaller requests are spread over the CPU
    /// quota's periods, one round per period ([`LiveConfig::slot_stats_reading`]).
    pub slot_stats_chunk: usize,
    /// The loop reads the per-slot statistics at every this-many control steps and reuses them
    /// between (`ach-redis --slot-stats-every`; 1: every step).
    pub slot_stats_every: u32,
    /// Each slot's rate in the loop is its per-slot counter's growth over the last this-many
    /// readings (`ach-redis --slot-stats-window`; 1: since the last reading).
    pub slot_stats_window: u32,
    /// Which rate over those readings weights a master's slots in the loop
    /// (`ach-redis --slot-rate`: the mean, or the median of the per-reading rates).
    pub slot_rate: ach_redis::telemetry::SlotRateStatistic,
    /// Which per-slot counter splits a master's load among its slots in the loop
    /// (`ach-redis --slot-split`).
    pub slot_split: ach_redis::control::SlotSplit,
    /// ACH's `min_gain` in the loop and in the simulator (`ach-redis --min-gain`): a step moves
    /// only when its plan is predicted to remove at least this fraction of the load above the
    /// mean (0: every plan, as `AchConfig::live()`).
    pub min_gain: f64,
    /// Valkey 9: the loop moves a group of slots holding fewer keys than this key by key
    /// instead of in an atomic job (`ach-redis --atomic-from-keys`; 0: every group atomic).
    pub atomic_from_keys: u64,
    /// The EWMA weight of the new reading in the rebalancers' load trackers (`ach-redis
    /// --beta`), and in what the simulator's algorithms read
    /// (`TelemetryParams::controller_beta`); the observer's readings and the ground truth keep
    /// the paper's 0.3 either way.
    pub beta: f64,
}

/// What the cpu part of a master's reading counts, for the controllers and the observer alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuReading {
    /// Its data commands per second over its class's measured service rate (`ach-redis
    /// --request-capacity`): what its clients ask of it, without the cluster bus, the timers,
    /// the readings and the migrations, which its cpu use also counts.
    Requests,
    /// Its cpu use over its quota, less its idle use when `idle_cpu_s` is not 0 (`ach-redis
    /// --idle-cpu`).
    Cores,
}

impl CpuReading {
    /// Parses `requests` or `cores`.
    pub fn parse(text: &str) -> Result<CpuReading, ConfigError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "requests" => Ok(CpuReading::Requests),
            "cores" => Ok(CpuReading::Cores),
            _ => Err(ConfigError::Invalid {
                option: "--cpu-reading",
                value: text.to_string(),
                rule: "must be requests or cores".into(),
            }),
        }
    }
}

impl Default for LiveConfig {
    fn default() -> LiveConfig {
        LiveConfig {
            nodes: 6,
            keys: 100_000,
            duration_s: 60,
            arms: Arm::defaults(),
            seed: 42,
            repeats: 1,
            out: PathBuf::from("results/live"),
            clients: 4,
            senders_per_client: 8,
            rate: 6000.0,
            cpu_per_strong_node: 0.2,
            interval_ms: 1000,
            backend: LiveBackend::Auto,
            calibration_s: 3.0,
            idle_cpu_s: 2.0,
            cpu_reading: CpuReading::Requests,
            slot_stats_chunk: ach_redis::slot::SLOT_COUNT,
            slot_stats_every: 1,
            slot_stats_window: 1,
            slot_rate: ach_redis::telemetry::SlotRateStatistic::Mean,
            slot_split: ach_redis::control::SlotSplit::Cpu,
            min_gain: 0.0,
            atomic_from_keys: 0,
            beta: ach_telemetry::TelemetryConfig::paper().beta,
        }
    }
}

impl LiveConfig {
    /// Checks every field; the message names the option, its value and the rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_size()?;
        self.validate_clients()?;
        self.validate_loop()?;
        self.validate_pace()
    }

    /// The cluster, the keys, the length of an arm, the arms and the repeats.
    fn validate_size(&self) -> Result<(), ConfigError> {
        ensure(
            (2..=64).contains(&self.nodes),
            "--nodes",
            self.nodes,
            "must be 2 to 64",
        )?;
        ensure(
            self.keys >= 100,
            "--keys",
            self.keys,
            "must be at least 100",
        )?;
        ensure(
            self.duration_s >= 3,
            "--duration-s",
            self.duration_s,
            "must be at least 3",
        )?;
        if self.arms.is_empty() {
            return Err(ConfigError::NoAlgorithms);
        }
        ensure(
            self.repeats >= 1,
            "--repeats",
            self.repeats,
            "must be at least 1",
        )
    }

    /// The clients and their sending threads.
    fn validate_clients(&self) -> Result<(), ConfigError> {
        ensure(
            (1..=64).contains(&self.clients),
            "--clients",
            self.clients,
            "must be 1 to 64",
        )?;
        ensure(
            (1..=64).contains(&self.senders_per_client),
            "--senders-per-client",
            self.senders_per_client,
            "must be 1 to 64",
        )?;
        ensure(
            self.client_threads() <= MAX_CLIENT_THREADS,
            "--senders-per-client",
            self.senders_per_client,
            format!(
                "times --clients {} must be at most {MAX_CLIENT_THREADS} threads",
                self.clients
            ),
        )
    }

    /// How the rebalance loop reads the per-slot statistics, smooths its readings and
    /// decides to move.
    fn validate_loop(&self) -> Result<(), ConfigError> {
        ensure(
            (1..=ach_redis::slot::SLOT_COUNT).contains(&self.slot_stats_chunk),
            "--slot-stats-chunk",
            self.slot_stats_chunk,
            format!("must be 1 to {} slots", ach_redis::slot::SLOT_COUNT),
        )?;
        ensure(
            (1..=60).contains(&self.slot_stats_every),
            "--slot-stats-every",
            self.slot_stats_every,
            "must be 1 to 60 control steps",
        )?;
        ensure(
            (1..=60).contains(&self.slot_stats_window),
            "--slot-stats-window",
            self.slot_stats_window,
            "must be 1 to 60 readings",
        )?;
        ensure(
            self.beta > 0.0 && self.beta <= 1.0,
            "--beta",
            self.beta,
            "must be in (0, 1] (1: no smoothing)",
        )?;
        ensure(
            (0.0..1.0).contains(&self.min_gain),
            "--min-gain",
            self.min_gain,
            "must be a fraction in [0, 1)",
        )
    }

    /// The request rate, the nodes' quotas, the step's length, the calibration and idle
    /// readings, and the steps they make.
    fn validate_pace(&self) -> Result<(), ConfigError> {
        ensure(
            self.rate.is_finite() && self.rate > 0.0,
            "--rate",
            self.rate,
            "must be a positive number of requests per second",
        )?;
        ensure(
            self.cpu_per_strong_node.is_finite() && self.cpu_per_strong_node > 0.0,
            "--cpu-per-strong-node",
            self.cpu_per_strong_node,
            "must be positive",
        )?;
        ensure(
            (100..=60_000).contains(&self.interval_ms),
            "--interval-ms",
            self.interval_ms,
            "must be 100 to 60000",
        )?;
        ensure(
            self.calibration_s.is_finite() && (0.5..=60.0).contains(&self.calibration_s),
            "--calibration-s",
            self.calibration_s,
            "must be 0.5 to 60 seconds",
        )?;
        ensure(
            self.idle_cpu_s == 0.0
                || (self.idle_cpu_s.is_finite() && (0.5..=60.0).contains(&self.idle_cpu_s)),
            "--idle-cpu-s",
            self.idle_cpu_s,
            "must be 0 (whole readings) or 0.5 to 60 seconds",
        )?;
        let steps = self.steps();
        ensure(
            steps >= 3,
            "--duration-s",
            self.duration_s,
            format!(
                "gives {steps} steps of --interval-ms {}; need at least 3",
                self.interval_ms
            ),
        )
    }

    /// Measurement steps per arm.
    pub fn steps(&self) -> u32 {
        (self.duration_s * 1000 / self.interval_ms) as u32
    }

    /// The capacity class of node `i` (start order): the paper's 3 : 4 : 3 mix of strong,
    /// medium and weak, strong first.
    pub fn classes(&self) -> Vec<NodeClass> {
        let strong = ((self.nodes as f64) * 0.3).round().max(1.0) as usize;
        let weak = ((self.nodes as f64) * 0.3).round().max(1.0) as usize;
        (0..self.nodes)
            .map(|i| {
                if i < strong {
                    NodeClass::Strong
                } else if i < self.nodes.saturating_sub(weak) {
                    NodeClass::Medium
                } else {
                    NodeClass::Weak
                }
            })
            .collect()
    }

    /// ACH's configuration in the loop and in the simulator: `AchConfig::live()` with
    /// [`LiveConfig::min_gain`].
    pub fn ach_config(&self) -> ach_control::AchConfig {
        ach_control::AchConfig {
            min_gain: self.min_gain,
            ..ach_redis::control::live_ach_config()
        }
    }

    /// The smoothing and composite of the rebalancers' load trackers: the paper's, with
    /// [`LiveConfig::beta`].
    pub fn controllers_telemetry(&self) -> ach_telemetry::TelemetryConfig {
        ach_telemetry::TelemetryConfig {
            beta: self.beta,
            ..ach_telemetry::TelemetryConfig::paper()
        }
    }

    /// How the rebalance loop reads the per-slot statistics: one request per master, or
    /// requests of `slot_stats_chunk` slots with a round per CPU quota period
    /// ([`crate::cgroup::PERIOD_US`]), so that a master's reply does not use its quota up in
    /// one burst; at every [`LiveConfig::slot_stats_every`]-th control step.
    pub fn slot_stats_reading(&self) -> ach_redis::backend::SlotStatsReading {
        let chunked = self.slot_stats_chunk < ach_redis::slot::SLOT_COUNT;
        ach_redis::backend::SlotStatsReading {
            chunk_slots: self.slot_stats_chunk,
            pause: if chunked {
                std::time::Duration::from_micros(crate::cgroup::PERIOD_US)
            } else {
                std::time::Duration::ZERO
            },
            every: self.slot_stats_every,
            window: self.slot_stats_window,
            statistic: self.slot_rate,
        }
    }

    /// The threads that send the clients' requests (and drive the calibration).
    pub fn client_threads(&self) -> usize {
        self.clients * self.senders_per_client
    }

    /// The workload of repeat `repeat`.
    pub fn workload(&self, repeat: u32) -> WorkloadConfig {
        WorkloadConfig {
            keys: self.keys,
            clients: self.clients,
            rate: self.rate,
            duration_s: self.duration_s as f64,
            seed: self.seed + u64::from(repeat),
            zipf_s: 1.0,
            write_fraction: 0.3,
            hot_phase: (0.25, 0.5),
            hot_share: 0.3,
            hot_keys: 16,
            step_at: 0.5,
            step_factor: 3200.0 / 1437.5,
        }
    }

    /// The node the hot keys start on: the first medium node (a weak one if none), in the
    /// order of [`LiveConfig::classes`].
    pub fn hot_node(&self) -> usize {
        self.classes()
            .iter()
            .position(|c| *c == NodeClass::Medium)
            .unwrap_or(self.nodes - 1)
    }

    /// The warm-up steps left out of D-bar: the first tenth of the run (at least 2: the first
    /// observation has no cpu reading yet).
    pub fn warmup(&self) -> u32 {
        (self.steps() / 10).max(2)
    }
}

/// `Ok` when `holds`, else the error naming `option`, its `value` and the `rule` it breaks.
fn ensure(
    holds: bool,
    option: &'static str,
    value: impl ToString,
    rule: impl Into<String>,
) -> Result<(), ConfigError> {
    if holds {
        Ok(())
    } else {
        Err(ConfigError::Invalid {
            option,
            value: value.to_string(),
            rule: rule.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_nodes_are_two_of_each_class_and_bad_options_are_named() {
        let config = LiveConfig::default();
        use NodeClass::{Medium, Strong, Weak};
        assert_eq!(
            config.classes(),
            vec![Strong, Strong, Medium, Medium, Weak, Weak]
        );
        assert!(config.validate().is_ok());
        let error_of = |config: LiveConfig| config.validate().unwrap_err().to_string();
        let with = |change: fn(&mut LiveConfig)| {
            let mut config = LiveConfig::default();
            change(&mut config);
            config
        };
        for (bad, message) in [
            (with(|c| c.nodes = 1), "--nodes 1: must be 2 to 64"),
            (
                with(|c| c.idle_cpu_s = 0.1),
                "--idle-cpu-s 0.1: must be 0 (whole readings) or 0.5 to 60 seconds",
            ),
            (
                with(|c| (c.clients, c.senders_per_client) = (64, 5)),
                "--senders-per-client 5: times --clients 64 must be at most 256 threads",
            ),
            (
                with(|c| c.slot_stats_every = 0),
                "--slot-stats-every 0: must be 1 to 60 control steps",
            ),
            (
                with(|c| c.slot_stats_window = 0),
                "--slot-stats-window 0: must be 1 to 60 readings",
            ),
            (
                with(|c| c.beta = 0.0),
                "--beta 0: must be in (0, 1] (1: no smoothing)",
            ),
            (
                with(|c| c.min_gain = 1.0),
                "--min-gain 1: must be a fraction in [0, 1)",
            ),
        ] {
            assert_eq!(error_of(bad), message);
        }
        assert!(with(|c| c.idle_cpu_s = 0.0).validate().is_ok());
        let every_fifth = LiveConfig {
            slot_stats_every: 5,
            slot_stats_window: 3,
            slot_rate: ach_redis::telemetry::SlotRateStatistic::Median,
            ..LiveConfig::default()
        };
        let reading = every_fifth.slot_stats_reading();
        assert_eq!((reading.every, reading.window), (5, 3));
        assert_eq!(
            reading.statistic,
            ach_redis::telemetry::SlotRateStatistic::Median
        );
        let some_gain = LiveConfig {
            min_gain: 0.05,
            ..LiveConfig::default()
        };
        assert_eq!(some_gain.ach_config().min_gain, 0.05);
        assert_eq!(
            LiveConfig::default().ach_config(),
            ach_redis::control::live_ach_config()
        );
    }
}
