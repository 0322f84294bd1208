//! The errors of the live experiment, one enum per part; [`LiveError`] gathers them for a
//! command line.

use std::path::PathBuf;

/// A bad value in the experiment's configuration; the message names the option, its value and
/// the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// An option's value breaks its rule.
    #[error("{option} {value}: {rule}")]
    Invalid {
        /// The option (`--nodes`).
        option: &'static str,
        /// Its value as given.
        value: String,
        /// The rule it breaks.
        rule: String,
    },
    /// `--algorithms` lists nothing.
    #[error("--algorithms: the list is empty")]
    NoAlgorithms,
    /// `--algorithms` names an algorithm that is not in the catalogue.
    #[error(
        "--algorithms: unknown algorithm {text:?}; {expected} (case-insensitive; a0 to a3 for \
         the paper's baselines)"
    )]
    UnknownAlgorithm {
        /// The name as given.
        text: String,
        /// The list of names an arm may have.
        expected: String,
    },
    /// `--algorithms` names an algorithm that routes requests its own way (CH-BL).
    #[error(
        "--algorithms: {name} routes requests its own way and cannot run on a Redis cluster; \
         {expected}"
    )]
    RoutingAlgorithm {
        /// The algorithm's name.
        name: String,
        /// The list of names an arm may have.
        expected: String,
    },
}

/// A CPU quota that could not be set.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No cgroup cpu controller can be used; the reason.
    #[error("{0}")]
    Unavailable(String),
    /// The cgroup's directory could not be made.
    #[error("{}: cannot create: {source}", path.display())]
    Create {
        /// The cgroup's directory.
        path: PathBuf,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// A cgroup file could not be written.
    #[error("{}: cannot write {value:?}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// The error of the operating system.
        source: std::io::Error,
    },
}

/// A failure while running the arms on the local cluster.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A local server or cluster did not start (or `redis-cli` is missing).
    #[error(transparent)]
    Local(#[from] ach_redis::local::LocalError),
    /// A CPU quota could not be set.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// A cluster command, the controller or the rebalance loop failed.
    #[error(transparent)]
    Redis(#[from] ach_redis::Error),
    /// The observer's telemetry rejected a value.
    #[error(transparent)]
    Telemetry(#[from] ach_telemetry::TelemetryError),
    /// A slot has no owner where every slot must have one.
    #[error("a slot has no owner")]
    SlotWithoutOwner,
    /// The cluster is not healthy when every key is checked at the end.
    #[error("cluster unhealthy at the final check: {}", .0.join("; "))]
    UnhealthyAtCheck(Vec<String>),
    /// The observer saw another set of masters than at the start.
    #[error("the set of masters changed")]
    MastersChanged,
    /// A master of the cluster is none of the servers the experiment started.
    #[error("no master {0}")]
    UnknownMaster(String),
    /// The node that holds the hot keys owns no slot, or not one range of them.
    #[error("the hot keys' node {0} owns no slot, or not one range of them")]
    HotNodeOwnsNoSlot(String),
    /// A program could not be started.
    #[error("{program}: {source}")]
    Spawn {
        /// The program.
        program: &'static str,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// A service rate could not be measured.
    #[error("service-rate calibration: {0}")]
    Calibration(String),
    /// The backend asked for cannot run here.
    #[error("--backend {backend}: {reason}")]
    Backend {
        /// The backend asked for.
        backend: &'static str,
        /// Why it cannot run.
        reason: String,
    },
    /// A workload client thread panicked.
    #[error("a client thread panicked")]
    ClientPanicked,
    /// One arm of one repeat failed.
    #[error("{arm} (repeat {repeat}): {source}")]
    Arm {
        /// The arm's name.
        arm: String,
        /// The repeat.
        repeat: u32,
        /// What failed.
        source: Box<ExperimentError>,
    },
}

/// The simulator could not run the live scenario.
#[derive(Debug, thiserror::Error)]
#[error("simulator: {0}")]
pub struct SimulatorError(pub String);

/// The outputs could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A folder could not be made.
    #[error("{}: cannot create: {source}", path.display())]
    Create {
        /// The folder.
        path: PathBuf,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// A figure could not be drawn.
    #[error("figure {name}: {message}")]
    Figure {
        /// The figure.
        name: String,
        /// What the renderer said.
        message: String,
    },
}

/// Any error of the live experiment, for a command line: configuration, run, simulator or
/// outputs.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The arms failed.
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    /// The simulator failed.
    #[error(transparent)]
    Simulator(#[from] SimulatorError),
    /// The outputs could not be written.
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// A run folder's rebalance logs could not be read ([`crate::cadence::read_run_folder`]).
#[derive(Debug, thiserror::Error)]
pub enum CadenceError {
    /// A folder or a file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// The folder holds no rebalance log.
    #[error(
        "{}: no *-rebalance.log file (the runs/ folder of `cargo xtask live --out DIR`)",
        folder.display()
    )]
    NoLogs {
        /// The `runs/` folder.
        folder: PathBuf,
    },
}

/// A saved output folder could not be simulated again ([`crate::resimulate::resimulate`]).
#[derive(Debug, thiserror::Error)]
pub enum ResimulateError {
    /// A file could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// The resimulation could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// A file is not what `cargo xtask live` writes.
    #[error("{}: {detail}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The simulator refused the series or failed.
    #[error(transparent)]
    Simulator(#[from] SimulatorError),
}
