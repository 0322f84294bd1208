//! The backend seam: what differs between the servers a cluster can run, behind one trait.
//!
//! Both servers speak the same cluster protocol for shape, health and per-node telemetry
//! (`CLUSTER NODES`, `CLUSTER INFO`, `INFO`, `LATENCY HISTOGRAM`), so [`Cluster`] reads those
//! for every backend. What differs is behind [`Backend`]:
//!
//! - [`redis`]: Redis >= 7.0 and Valkey < 9. Keys per slot from `CLUSTER COUNTKEYSINSLOT`, no
//!   per-slot load, key-by-key migration (`SETSLOT` + `MIGRATE`, [`crate::migrate`]).
//! - [`valkey`]: Valkey >= 9. Keys and cpu time per slot from `CLUSTER SLOT-STATS` (cpu when
//!   `cluster-slot-stats-enabled` is on), atomic migration (`CLUSTER MIGRATESLOTS`, polled with
//!   `CLUSTER GETSLOTMIGRATIONS`, cancelled with `CLUSTER CANCELSLOTMIGRATIONS`), a failed job
//!   retried once and then migrated key by key.
//!
//! The backend is chosen when connecting ([`crate::cluster::ConnectOptions`]): detected from
//! every master's `INFO server` (`server_name`, `valkey_version`, `redis_version`) or forced
//! with `--backend`. A cluster whose masters would get different backends is refused.
//!
//! Every backend runs the same test suite (`tests/`, each live test once per backend).

pub mod redis;
pub mod valkey;

use std::sync::atomic::AtomicBool;

use crate::cluster::{Cluster, Snapshot};
use crate::error::Error;
use crate::migrate::{FixAction, ForcedFix, MigrationOptions, SlotMigration};
use crate::slot::SLOT_COUNT;
use crate::telemetry::parse_info;

/// The implementations of the seam.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// Redis >= 7.0 and Valkey < 9: the standard protocol.
    Redis,
    /// Valkey >= 9: slot statistics and atomic slot migration.
    Valkey,
}

impl BackendKind {
    /// `redis` or `valkey`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Redis => "redis",
            BackendKind::Valkey => "valkey",
        }
    }

    /// The implementation.
    pub fn backend(self) -> &'static dyn Backend {
        match self {
            BackendKind::Redis => &redis::RedisBackend,
            BackendKind::Valkey => &valkey::ValkeyBackend,
        }
    }
}

/// `--backend`: detect it, or force one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// From `INFO server`: `valkey` for Valkey >= 9, `redis` otherwise.
    #[default]
    Auto,
    /// The standard protocol (any Redis >= 7.0 or Valkey).
    Redis,
    /// Slot statistics and atomic migration (Valkey >= 9 only).
    Valkey,
}

/// What a node says it runs (`INFO server`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ServerVersion {
    /// `redis` or `valkey` (`server_name`; Redis 7.0 has none and is `redis`).
    pub name: String,
    /// `valkey_version` for Valkey, `redis_version` otherwise, as `(major, minor, patch)`.
    pub version: (u32, u32, u32),
}

impl ServerVersion {
    /// Reads `server_name` and the version from an `INFO server` reply.
    pub fn from_info(reply: &str) -> ServerVersion {
        let fields = parse_info(reply);
        let name = fields
            .get("server_name")
            .map_or("redis", |name| name.trim())
            .to_string();
        let version = fields
            .get(if name == "valkey" {
                "valkey_version"
            } else {
                "redis_version"
            })
            .map(|v| parse_version(v.trim()))
            .unwrap_or_default();
        ServerVersion { name, version }
    }

    /// True for Valkey 9.0 or later, the first with atomic slot migration.
    pub fn has_atomic_migration(&self) -> bool {
        self.name == "valkey" && self.version.0 >= 9
    }

    /// The backend `--backend auto` picks for this server.
    pub fn natural_backend(&self) -> BackendKind {
        if self.has_atomic_migration() {
            BackendKind::Valkey
        } else {
            BackendKind::Redis
        }
    }
}

impl std::fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor, patch) = self.version;
        write!(f, "{} {major}.{minor}.{patch}", self.name)
    }
}

fn parse_version(text: &str) -> (u32, u32, u32) {
    let mut parts = text.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// Picks the backend for masters running `servers` (`(address, version)`): refuses a mixed
/// cluster and `--backend valkey` on a server without atomic migration.
pub fn choose(
    choice: BackendChoice,
    servers: &[(String, ServerVersion)],
) -> Result<BackendKind, Error> {
    let list = || {
        servers
            .iter()
            .map(|(address, version)| format!("{address} runs {version}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let natural: Vec<BackendKind> = servers.iter().map(|(_, v)| v.natural_backend()).collect();
    let mixed = servers
        .windows(2)
        .any(|pair| pair[0].1.name != pair[1].1.name)
        || natural.windows(2).any(|pair| pair[0] != pair[1]);
    if mixed {
        return Err(Error::Input(format!(
            "mixed cluster ({}): ach-redis drives clusters whose masters all run the same \
             server kind (all Redis >= 7.0 or Valkey < 9, or all Valkey >= 9); upgrade the \
             odd masters first",
            list()
        )));
    }
    match choice {
        BackendChoice::Auto => Ok(natural.first().copied().unwrap_or(BackendKind::Redis)),
        BackendChoice::Redis => Ok(BackendKind::Redis),
        BackendChoice::Valkey => match servers.iter().find(|(_, v)| !v.has_atomic_migration()) {
            Some((address, version)) => Err(Error::Input(format!(
                "--backend valkey: {address} runs {version}; the valkey backend needs \
                 Valkey >= 9.0 (CLUSTER SLOT-STATS and CLUSTER MIGRATESLOTS); use \
                 --backend redis (or auto) for it"
            ))),
            None => Ok(BackendKind::Valkey),
        },
    }
}

/// Per-slot figures of one observation, each asked of the slot's owner.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlotFigures {
    /// Keys in every slot.
    pub keys: Vec<u64>,
    /// Cumulative cpu time every slot used on its owner, in microseconds (`cpu-usec` of
    /// `CLUSTER SLOT-STATS`), `None` when the backend or the cluster has no per-slot load.
    pub cpu_usec: Option<Vec<u64>>,
    /// Cumulative bytes every slot's commands read and wrote on its owner
    /// (`network-bytes-in` plus `network-bytes-out`), present with `cpu_usec`.
    pub network_bytes: Option<Vec<u64>>,
    /// Masters whose slot statistics are off (`cluster-slot-stats-enabled no`).
    pub stats_off: Vec<String>,
}

/// What migrating one group of slots (one source, one target) did.
#[derive(Clone, Debug, Default)]
pub struct GroupOutcome {
    /// Every migration tried, in order (an atomic job that failed and its retry included).
    pub migrations: Vec<SlotMigration>,
    /// The slots that changed owner to the target.
    pub switched: Vec<u16>,
    /// Errors (the group stops at the first one).
    pub errors: Vec<String>,
    /// True when a stop request (Ctrl-C) ended the group early.
    pub interrupted: bool,
}

/// One group of planned slot moves: every slot from one source to one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveGroup {
    /// Index of the source in [`Snapshot::masters`].
    pub from: usize,
    /// Index of the target.
    pub to: usize,
    /// The slots, ascending.
    pub slots: Vec<u16>,
    /// The keys the slots held when the step observed them (what a backend may choose its
    /// method by; [`MigrationOptions::atomic_from_keys`]).
    pub keys: u64,
}

/// How the per-slot statistics are read from the masters (Valkey's `CLUSTER SLOT-STATS`): in
/// requests of at most `chunk_slots` of a master's slots, one request to every master that has
/// one left per round, `pause` between rounds. A reply's cost to the server follows the slots
/// it returns (about 0.3 us a slot on a recent x86 core), so a master that runs under a small
/// CPU quota answers a whole map in a burst that can use up its quota: requests in chunks with
/// a pause of the quota's period spread it out. The default is one request per master.
///
/// `every` says how often a control loop reads them: at every `every`-th observation, the
/// ones between reusing the last reading (see [`crate::control::Controller::observe`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotStatsReading {
    /// The most slots of a master one request asks for (>= 1; [`SLOT_COUNT`] or more: the
    /// whole slot space in one request, as before chunks).
    pub chunk_slots: usize,
    /// The wait between two rounds of requests.
    pub pause: std::time::Duration,
    /// Observations per reading of the per-slot figures (>= 1; 1: every observation reads
    /// them). Applies to the keys per slot on every backend (Redis: `COUNTKEYSINSLOT`).
    pub every: u32,
    /// Readings per slot rate (>= 1; 1: each slot's rate is its counter's growth since the
    /// last reading): the per-slot rates (Valkey: `cpu-usec`, bytes) are the counters' growth
    /// over the last `window` readings ([`crate::telemetry::SlotRateWindow`]).
    pub window: u32,
    /// Which rate over the window weights a master's slots (the mean by default).
    pub statistic: crate::telemetry::SlotRateStatistic,
}

impl Default for SlotStatsReading {
    fn default() -> SlotStatsReading {
        SlotStatsReading {
            chunk_slots: SLOT_COUNT,
            pause: std::time::Duration::ZERO,
            every: 1,
            window: 1,
            statistic: crate::telemetry::SlotRateStatistic::Mean,
        }
    }
}

impl SlotStatsReading {
    /// The slot ranges `(first, last)` of the requests for a master owning `slots`
    /// (ascending): the whole slot space when a request may hold every slot, else runs of at
    /// most `chunk_slots` of its slots, each asked as the range from its first to its last.
    pub fn ranges(&self, slots: &[u16]) -> Vec<(u16, u16)> {
        if slots.is_empty() {
            return Vec::new();
        }
        if self.chunk_slots >= SLOT_COUNT {
            return vec![(0, (SLOT_COUNT - 1) as u16)];
        }
        slots
            .chunks(self.chunk_slots.max(1))
            .map(|chunk| (chunk[0], chunk[chunk.len() - 1]))
            .collect()
    }
}

/// What the control loop needs from a server beyond the common cluster protocol.
///
/// Implementations are stateless (the state of an observation lives in the controller), so a
/// backend is a `&'static dyn Backend` that a [`Cluster`] carries.
pub trait Backend: Sync {
    /// Which implementation this is.
    fn kind(&self) -> BackendKind;

    /// Keys in every slot and, where the server has them, cumulative cpu time per slot, read
    /// as `reading` says where the server has per-slot statistics.
    fn slot_figures(
        &self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        reading: &SlotStatsReading,
    ) -> Result<SlotFigures, Error>;

    /// Turns on the server's per-slot load counters on every master (`--enable-slot-stats`);
    /// an error for a server without them.
    fn enable_slot_stats(&self, cluster: &mut Cluster, snapshot: &Snapshot) -> Result<(), Error>;

    /// Moves the slots of `group`, reporting each migration to `progress` as it ends. Checks
    /// `stop` between migrations and, for a migration the server runs on its own, while it
    /// runs (cancelling it). Only the slots in [`GroupOutcome::switched`] changed owner.
    fn migrate(
        &self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        group: &MoveGroup,
        options: &MigrationOptions,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&SlotMigration),
    ) -> GroupOutcome;

    /// Closes everything an interrupted run left open: running migration jobs (waited for)
    /// and slots left migrating or importing (completed or rolled back).
    fn fix(
        &self,
        cluster: &mut Cluster,
        options: &MigrationOptions,
    ) -> Result<Vec<FixAction>, Error>;

    /// [`Backend::fix`] on a cluster whose masters may be unreachable or failing: closes only
    /// what can be closed without losing a key, and names every slot left open with its reason
    /// ([`crate::migrate::fix_with_unreachable`]).
    fn fix_with_unreachable(
        &self,
        cluster: &mut Cluster,
        options: &MigrationOptions,
    ) -> Result<ForcedFix, Error> {
        crate::migrate::fix_with_unreachable(cluster, options)
    }

    /// Cancels every migration job the servers run on their own and waits for them to end;
    /// returns how many were cancelled (always 0 for the standard protocol).
    fn cancel(&self, cluster: &mut Cluster, snapshot: &Snapshot) -> Result<usize, Error>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_asks_for_runs_of_a_masters_own_slots() {
        let slots: Vec<u16> = (0..5).chain(100..103).chain([9000]).collect();
        let whole = SlotStatsReading::default();
        assert_eq!(whole.ranges(&slots), [(0, 16383)]);
        assert_eq!(whole.ranges(&[]), []);
        let chunks = SlotStatsReading {
            chunk_slots: 4,
            ..SlotStatsReading::default()
        };
        // Four slots a request: 0-3, then 4 and 100-102, then 9000.
        assert_eq!(chunks.ranges(&slots), [(0, 3), (4, 102), (9000, 9000)]);
        let one = SlotStatsReading {
            chunk_slots: 1,
            ..SlotStatsReading::default()
        };
        assert_eq!(one.ranges(&slots).len(), slots.len());
    }

    fn server(name: &str, version: (u32, u32, u32)) -> ServerVersion {
        ServerVersion {
            name: name.into(),
            version,
        }
    }

    #[test]
    fn reads_the_server_from_info() {
        let valkey =
            "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n";
        assert_eq!(
            ServerVersion::from_info(valkey),
            server("valkey", (9, 1, 2))
        );
        let redis = "# Server\r\nredis_version:7.0.15\r\nredis_mode:cluster\r\n";
        assert_eq!(ServerVersion::from_info(redis), server("redis", (7, 0, 15)));
        assert_eq!(
            ServerVersion::from_info(valkey).natural_backend(),
            BackendKind::Valkey
        );
        assert_eq!(
            server("valkey", (8, 1, 0)).natural_backend(),
            BackendKind::Redis
        );
    }

    #[test]
    fn refuses_mixed_clusters_and_valkey_on_older_servers() {
        let a = ("127.0.0.1:1".to_string(), server("valkey", (9, 1, 2)));
        let b = ("127.0.0.1:2".to_string(), server("redis", (7, 0, 15)));
        let c = ("127.0.0.1:3".to_string(), server("valkey", (8, 0, 0)));
        let both = [a.clone(), a.clone()];
        assert_eq!(
            choose(BackendChoice::Auto, &both).unwrap(),
            BackendKind::Valkey
        );
        assert_eq!(
            choose(BackendChoice::Redis, &both).unwrap(),
            BackendKind::Redis
        );
        let mixed = choose(BackendChoice::Auto, &[a.clone(), b.clone()]).unwrap_err();
        assert!(mixed.to_string().contains("mixed cluster"), "{mixed}");
        assert!(choose(BackendChoice::Redis, &[a.clone(), c.clone()]).is_err());
        let old = choose(BackendChoice::Valkey, std::slice::from_ref(&c)).unwrap_err();
        assert!(old.to_string().contains("needs Valkey >= 9.0"), "{old}");
        assert_eq!(old.exit_code(), 2);
        assert!(choose(BackendChoice::Valkey, &[b]).is_err());
    }
}
