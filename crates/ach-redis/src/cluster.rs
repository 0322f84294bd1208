//! Plain per-node connections to a cluster and a snapshot of its shape and health.
//!
//! Every command goes to one named node over a plain (non-cluster) connection. The `redis`
//! crate's cluster client follows ASK and MOVED for single commands, but its cluster
//! *pipelines* fail or stop refreshing the slot map while a slot is migrating (observed with
//! 1.8), so the rebalancer never uses them: it knows which node it talks to at every step of
//! the protocol.
//!
//! Every connection authenticates and speaks TLS as the [`Security`] of [`ConnectOptions`]
//! says (`--user`, `REDISCLI_AUTH` or `--password-file`, `--tls` ...); a refused login or a
//! missing ACL permission is a typed error naming the node and the user, never the password.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::{Cmd, Connection, FromRedisValue};

use crate::backend::{Backend, BackendChoice, BackendKind, ServerVersion, choose};
use crate::error::Error;
use crate::security::{Connector, Credentials, Security};
use crate::slot::SLOT_COUNT;
use crate::topology::{NodeLine, format_slot_ranges, parse_cluster_nodes, slot_owners};

/// Connections to the nodes of one cluster, opened on demand and kept, and the backend that
/// drives them. Every connection the crate opens is opened here.
pub struct Cluster {
    seed: String,
    timeout: Duration,
    connector: Connector,
    connections: BTreeMap<String, Connection>,
    backend: &'static dyn Backend,
    servers: Vec<(String, ServerVersion)>,
}

/// How to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    /// The longest wait for a connection or a reply.
    pub timeout: Duration,
    /// The backend: detected from `INFO server`, or forced.
    pub backend: BackendChoice,
    /// The credentials and TLS of every connection.
    pub security: Security,
}

impl ConnectOptions {
    /// An open cluster over plain TCP, the backend detected, replies awaited `timeout`.
    pub fn new(timeout: Duration) -> ConnectOptions {
        ConnectOptions {
            timeout,
            backend: BackendChoice::Auto,
            security: Security::default(),
        }
    }
}

/// A master of the cluster as the snapshot saw it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Master {
    /// The node id.
    pub id: String,
    /// `host:port`.
    pub address: String,
    /// Number of slots it owns.
    pub slots: usize,
    /// Its replicas, by address: shown by `status`, never planned as targets (only masters
    /// own slots).
    pub replicas: Vec<Replica>,
}

/// A replica of a master.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Replica {
    /// The node id.
    pub id: String,
    /// `host:port`.
    pub address: String,
    /// Its flags in `CLUSTER NODES` besides `slave` and `myself` (`fail?`, `fail`, ...).
    pub flags: Vec<String>,
    /// True when the seed's cluster bus link to it is up.
    pub link_connected: bool,
}

/// A slot left open (migrating or importing) on one node.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct OpenSlot {
    /// The slot.
    pub slot: u16,
    /// Index (in [`Snapshot::masters`]) of the node that has the slot open.
    pub node: usize,
    /// `migrating` or `importing`.
    pub state: &'static str,
    /// The node id on the other side: the target when migrating, the source when importing.
    pub peer: String,
}

/// The cluster's shape and health at one moment.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Snapshot {
    /// The masters, sorted by address; a master's index is its ACH node id.
    pub masters: Vec<Master>,
    /// The owner of every slot (index into `masters`) in the seed's view; `None`: unassigned.
    pub owners: Vec<Option<usize>>,
    /// Slots left open by a migration, on any master.
    pub open: Vec<OpenSlot>,
    /// Why the cluster cannot be worked on now; empty when healthy.
    pub problems: Vec<String>,
}

impl Snapshot {
    /// True when nothing stops a migration.
    pub fn healthy(&self) -> bool {
        self.problems.is_empty()
    }

    /// True when every problem is a node that disagrees on slot owners (what an interrupted
    /// migration leaves, and `fix` closes): `fix` and `rebalance` start on such a cluster.
    pub fn fixable(&self) -> bool {
        self.problems.iter().all(|p| p.contains("disagrees"))
    }

    /// The index of the master with this node id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.masters.iter().position(|m| m.id == id)
    }

    /// The snapshot without the masters `dropped` marks, which must own no slot and have no
    /// slot open (a drained master once drained): the other masters keep their order, and
    /// every owner and open slot is renumbered. `None` when a dropped master owns or has
    /// open a slot.
    pub fn without(&self, dropped: &[bool]) -> Option<Snapshot> {
        let mut index = Vec::with_capacity(self.masters.len());
        let mut kept = 0;
        for &drop in dropped {
            index.push((!drop).then_some(kept));
            kept += usize::from(!drop);
        }
        let renumber = |i: usize| index.get(i).copied().flatten();
        let owners: Option<Vec<Option<usize>>> = self
            .owners
            .iter()
            .map(|owner| match owner {
                Some(o) => renumber(*o).map(Some),
                None => Some(None),
            })
            .collect();
        let open: Option<Vec<OpenSlot>> = self
            .open
            .iter()
            .map(|o| {
                renumber(o.node).map(|node| OpenSlot {
                    node,
                    peer: o.peer.clone(),
                    ..*o
                })
            })
            .collect();
        Some(Snapshot {
            masters: self
                .masters
                .iter()
                .zip(dropped)
                .filter(|(_, drop)| !**drop)
                .map(|(m, _)| m.clone())
                .collect(),
            owners: owners?,
            open: open?,
            problems: self.problems.clone(),
        })
    }

    /// The slots owned by every master.
    pub fn slots_of(&self) -> Vec<Vec<u16>> {
        let mut slots = vec![Vec::new(); self.masters.len()];
        for (slot, owner) in self.owners.iter().enumerate() {
            if let Some(owner) = owner {
                slots[*owner].push(slot as u16);
            }
        }
        slots
    }
}

/// What one master says of itself in a [`Cluster::snapshot`].
#[derive(Default)]
struct MasterState {
    open: Vec<OpenSlot>,
    problems: Vec<String>,
}

impl Cluster {
    /// Connects to `seed` (`host:port`), checks that it is a cluster node and detects the
    /// backend. Every command waits at most `timeout` for its reply.
    pub fn connect(seed: &str, timeout: Duration) -> Result<Cluster, Error> {
        Cluster::connect_with(seed, ConnectOptions::new(timeout))
    }

    /// Connects to `seed`, checks that it is a cluster node, reads `INFO server` of every
    /// master it can reach and picks the backend ([`choose`]): a mixed cluster, or
    /// `--backend valkey` on a server without atomic migration, is an input error. The TLS
    /// files are read first; a login the seed refuses is an [`Error::Auth`].
    pub fn connect_with(seed: &str, options: ConnectOptions) -> Result<Cluster, Error> {
        validate_address(seed)?;
        let mut cluster = Cluster {
            seed: seed.to_string(),
            timeout: options.timeout,
            connector: options.security.connector()?,
            connections: BTreeMap::new(),
            backend: BackendKind::Redis.backend(),
            servers: Vec::new(),
        };
        let info: String = cluster.query(seed, redis::cmd("INFO").arg("cluster"))?;
        if !info.contains("cluster_enabled:1") {
            return Err(Error::NotCluster {
                address: seed.to_string(),
            });
        }
        let mut masters: Vec<String> = cluster
            .nodes_of(seed)?
            .into_iter()
            .filter(|line| line.is_master() && line.trouble().is_none())
            .map(|line| line.address)
            .collect();
        masters.sort_by_key(|address| address_key(address));
        for address in masters {
            // A master that cannot be reached now shows up as a problem of the snapshot; one
            // that refuses the credentials stops everything here, before anything moves.
            match cluster.query::<String>(&address, redis::cmd("INFO").arg("server")) {
                Ok(info) => cluster
                    .servers
                    .push((address, ServerVersion::from_info(&info))),
                Err(error @ (Error::Auth { .. } | Error::Permission { .. })) => return Err(error),
                Err(_) => {}
            }
        }
        cluster.backend = choose(options.backend, &cluster.servers)?.backend();
        Ok(cluster)
    }

    /// The backend that drives the cluster.
    pub fn backend(&self) -> &'static dyn Backend {
        self.backend
    }

    /// What every master reachable at connection time runs, by address.
    pub fn servers(&self) -> &[(String, ServerVersion)] {
        &self.servers
    }

    /// The user and password every connection logs in with (`MIGRATE` passes them on).
    pub fn credentials(&self) -> &Credentials {
        self.connector.credentials()
    }

    /// The address the cluster was reached through.
    pub fn seed(&self) -> &str {
        &self.seed
    }

    /// Runs one command on the node at `address`. A connection that failed is dropped and
    /// opened again by the next command.
    ///
    /// A reply interrupted by a signal (Ctrl-C arriving while a socket with a timeout waits:
    /// such reads are never restarted) is asked again once on a new connection; every command
    /// the rebalancer sends can be repeated safely (`SETSLOT` sets a state, `MIGRATE` of keys
    /// already moved answers `NOKEY`) but `CLUSTER MIGRATESLOTS`, whose repeat the server
    /// refuses while the first one's job runs: the valkey backend then follows that job.
    pub fn query<T: FromRedisValue>(&mut self, address: &str, command: &Cmd) -> Result<T, Error> {
        let connection = self.connection(address)?;
        let mut result = command.query::<T>(connection);
        if result.as_ref().is_err_and(interrupted) {
            self.connections.remove(address);
            let connection = self.connection(address)?;
            result = command.query::<T>(connection);
        }
        result.map_err(|source| {
            if source.is_io_error() || source.is_connection_dropped() || source.is_timeout() {
                self.connections.remove(address);
            }
            self.command_error(address, command_name(command), source)
        })
    }

    /// The error of `command` on `address`: a refused login or a missing ACL permission is
    /// told apart from other failures.
    fn command_error(&self, address: &str, command: String, source: redis::RedisError) -> Error {
        let user = &self.connector.credentials().user;
        match source.code() {
            Some("NOAUTH") => Error::Auth {
                address: address.to_string(),
                detail: format!(
                    "the node requires authentication and ach-redis has no password (set \
                     {} or --password-file, and --user for an ACL user other than default)",
                    crate::security::PASSWORD_VARIABLE
                ),
            },
            Some("NOPERM") => Error::Permission {
                address: address.to_string(),
                user: user.clone(),
                command,
                detail: source.detail().unwrap_or_default().to_string(),
            },
            _ => Error::Command {
                address: address.to_string(),
                command,
                source,
            },
        }
    }

    /// Runs a pipeline on the node at `address` (one node: plain pipelining is safe).
    pub fn pipeline<T: FromRedisValue>(
        &mut self,
        address: &str,
        pipeline: &redis::Pipeline,
        what: &str,
    ) -> Result<T, Error> {
        let connection = self.connection(address)?;
        pipeline.query::<T>(connection).map_err(|source| {
            self.connections.remove(address);
            self.command_error(address, what.to_string(), source)
        })
    }

    fn connection(&mut self, address: &str) -> Result<&mut Connection, Error> {
        if !self.connections.contains_key(address) {
            let unreachable = |detail: String| Error::Unreachable {
                address: address.to_string(),
                detail,
            };
            let client = self
                .connector
                .client(address)
                .map_err(|e| unreachable(e.to_string()))?;
            let connection = client
                .get_connection_with_timeout(self.timeout)
                .map_err(|e| self.connect_error(address, e))?;
            connection
                .set_read_timeout(Some(self.timeout))
                .and_then(|()| connection.set_write_timeout(Some(self.timeout)))
                .map_err(|e| unreachable(e.to_string()))?;
            self.connections.insert(address.to_string(), connection);
        }
        Ok(self
            .connections
            .get_mut(address)
            .expect("inserted just above"))
    }

    /// Why a connection to `address` could not be opened, with what to check.
    fn connect_error(&self, address: &str, error: redis::RedisError) -> Error {
        let credentials = self.connector.credentials();
        if error.kind() == redis::ErrorKind::AuthenticationFailed
            || error.code() == Some("WRONGPASS")
        {
            return Error::Auth {
                address: address.to_string(),
                detail: format!(
                    "authentication as {} failed: wrong password, or the user is unknown or \
                     disabled",
                    credentials.describe()
                ),
            };
        }
        let hint = if self.connector.uses_tls() {
            " (TLS: check that --cacert holds the CA that signed the server's certificate, \
             and that --cert and --key are a client certificate the server accepts)"
        } else if error.is_connection_dropped() || error.is_unrecoverable_error() {
            " (if the cluster speaks only TLS, add --tls and --cacert)"
        } else {
            ""
        };
        Error::Unreachable {
            address: address.to_string(),
            detail: format!("{error}{hint}"),
        }
    }

    /// `CLUSTER NODES` of one node, parsed.
    pub fn nodes_of(&mut self, address: &str) -> Result<Vec<NodeLine>, Error> {
        let reply: String = self.query(address, redis::cmd("CLUSTER").arg("NODES"))?;
        parse_cluster_nodes(&reply).map_err(|e| Error::Reply {
            address: address.to_string(),
            command: "CLUSTER NODES".into(),
            detail: e.to_string(),
        })
    }

    /// Reads the cluster's shape from the seed and the open slots and state of every master.
    /// Fails only when the seed cannot be read; every other trouble is a problem listed in the
    /// snapshot.
    pub fn snapshot(&mut self) -> Result<Snapshot, Error> {
        let seed = self.seed.clone();
        let lines = self.nodes_of(&seed)?;
        let mut problems = Vec::new();
        let mut masters: Vec<Master> = lines
            .iter()
            .filter(|l| l.is_master())
            .map(|l| Master {
                id: l.id.clone(),
                address: l.address.clone(),
                slots: l
                    .slot_ranges
                    .iter()
                    .map(|&(a, b)| usize::from(b - a) + 1)
                    .sum(),
                replicas: replicas_of(&lines, &l.id),
            })
            .collect();
        masters.sort_by_key(|m| address_key(&m.address));
        for line in &lines {
            if let Some(trouble) = line.trouble() {
                problems.push(format!(
                    "node {} ({}) is {trouble}",
                    line.address,
                    short(&line.id)
                ));
            }
        }
        let index: BTreeMap<&str, usize> = masters
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.as_str(), i))
            .collect();
        let owner_ids = slot_owners(&lines);
        let owners: Vec<Option<usize>> = owner_ids
            .iter()
            .map(|id| id.as_deref().and_then(|id| index.get(id).copied()))
            .collect();
        let unassigned: Vec<u16> = (0..SLOT_COUNT as u16)
            .filter(|&s| owners[usize::from(s)].is_none())
            .collect();
        if !unassigned.is_empty() {
            problems.push(format!(
                "{} slots have no owner ({})",
                unassigned.len(),
                abbreviate(&format_slot_ranges(&unassigned))
            ));
        }
        let mut open = Vec::new();
        for (node, master) in masters.iter().enumerate() {
            let found = self.master_state(node, &master.address, (&seed, &owner_ids));
            open.extend(found.open);
            problems.extend(found.problems);
        }
        Ok(Snapshot {
            masters,
            owners,
            open,
            problems,
        })
    }

    /// What master `node` at `address` says of itself: its open slots, and as problems its
    /// disagreement with the seed's owners `(seed, owner_ids)` and a failing cluster state.
    fn master_state(
        &mut self,
        node: usize,
        address: &str,
        (seed, owner_ids): (&str, &[Option<String>]),
    ) -> MasterState {
        let mut found = MasterState::default();
        let (open, problems) = (&mut found.open, &mut found.problems);
        let view = match self.nodes_of(address) {
            Ok(view) => view,
            Err(error) => {
                problems.push(format!("node {address} cannot be read: {error}"));
                return found;
            }
        };
        if let Some(myself) = view.iter().find(|l| l.has_flag("myself")) {
            for (slot, peer) in &myself.migrating {
                open.push(OpenSlot {
                    slot: *slot,
                    node,
                    state: "migrating",
                    peer: peer.clone(),
                });
            }
            for (slot, peer) in &myself.importing {
                open.push(OpenSlot {
                    slot: *slot,
                    node,
                    state: "importing",
                    peer: peer.clone(),
                });
            }
        }
        let disagree = slot_owners(&view)
            .iter()
            .zip(owner_ids)
            .filter(|(a, b)| a != b)
            .count();
        if disagree > 0 {
            problems.push(format!(
                "node {address} disagrees with {seed} on the owner of {disagree} slots"
            ));
        }
        match self.query::<String>(address, redis::cmd("CLUSTER").arg("INFO")) {
            Ok(info) if !info.contains("cluster_state:ok") => {
                problems.push(format!("node {address} reports cluster_state:fail"));
            }
            Ok(_) => {}
            Err(error) => problems.push(format!("node {address} cannot be read: {error}")),
        }
        found
    }

    /// The number of keys in every slot, asked of the slot's owner (`COUNTKEYSINSLOT`,
    /// pipelined per node).
    pub fn key_counts(&mut self, snapshot: &Snapshot) -> Result<Vec<u64>, Error> {
        let mut counts = vec![0u64; SLOT_COUNT];
        for (node, slots) in snapshot.slots_of().iter().enumerate() {
            if slots.is_empty() {
                continue;
            }
            let mut pipeline = redis::pipe();
            for &slot in slots {
                pipeline.cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(slot);
            }
            let address = snapshot.masters[node].address.clone();
            let replies: Vec<u64> =
                self.pipeline(&address, &pipeline, "CLUSTER COUNTKEYSINSLOT")?;
            for (&slot, count) in slots.iter().zip(replies) {
                counts[usize::from(slot)] = count;
            }
        }
        Ok(counts)
    }
}

/// True for an I/O error that a signal caused (`EINTR`, "Interrupted system call").
fn interrupted(error: &redis::RedisError) -> bool {
    error.is_io_error() && error.to_string().contains("Interrupted")
}

/// The replicas of master `id` in `lines`, by address.
fn replicas_of(lines: &[NodeLine], id: &str) -> Vec<Replica> {
    let mut replicas: Vec<Replica> = lines
        .iter()
        .filter(|l| l.master_id.as_deref() == Some(id) && !l.is_master())
        .map(|l| Replica {
            id: l.id.clone(),
            address: l.address.clone(),
            flags: l
                .flags
                .iter()
                .filter(|f| *f != "slave" && *f != "myself")
                .cloned()
                .collect(),
            link_connected: l.link_connected,
        })
        .collect();
    replicas.sort_by_key(|r| address_key(&r.address));
    replicas
}

/// Checks that `address` reads as `host:port`.
pub fn validate_address(address: &str) -> Result<(), Error> {
    let valid = address
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if valid {
        Ok(())
    } else {
        Err(Error::Input(format!(
            "--cluster {address:?}: expected HOST:PORT, for example 127.0.0.1:7000"
        )))
    }
}

/// Sort key of an address: host, then port as a number.
pub(crate) fn address_key(address: &str) -> (String, u32) {
    match address.rsplit_once(':') {
        Some((host, port)) => (host.to_string(), port.parse().unwrap_or(u32::MAX)),
        None => (address.to_string(), u32::MAX),
    }
}

/// The first 8 characters of a node id, as `redis-cli` prints them.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

fn abbreviate(text: &str) -> String {
    if text.len() <= 60 {
        text.to_string()
    } else {
        format!("{}...", &text[..60])
    }
}

/// The command name and subcommand of `command`, for error messages (keys left out).
fn command_name(command: &Cmd) -> String {
    command
        .args_iter()
        .take(2)
        .filter_map(|arg| match arg {
            redis::Arg::Simple(bytes) => Some(String::from_utf8_lossy(bytes).to_uppercase()),
            _ => None,
        })
        .filter(|word| word.chars().all(|c| c.is_ascii_alphabetic() || c == '-'))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master(id: &str, slots: usize) -> Master {
        Master {
            id: id.into(),
            address: format!("127.0.0.1:{}", 7000 + id.len()),
            slots,
            replicas: Vec::new(),
        }
    }

    #[test]
    fn a_snapshot_without_a_master_renumbers_owners_and_open_slots() {
        let snapshot = Snapshot {
            masters: vec![master("a", 2), master("bb", 0), master("ccc", 1)],
            owners: vec![Some(0), Some(2), None, Some(0)],
            open: vec![OpenSlot {
                slot: 1,
                node: 2,
                state: "migrating",
                peer: "a".into(),
            }],
            problems: Vec::new(),
        };
        let view = snapshot.without(&[false, true, false]).unwrap();
        let ids: Vec<&str> = view.masters.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "ccc"]);
        assert_eq!(view.owners, vec![Some(0), Some(1), None, Some(0)]);
        assert_eq!(view.open[0].node, 1);
        // A master that owns a slot cannot be left out.
        assert!(snapshot.without(&[true, false, false]).is_none());
        // Nor one with a slot open.
        assert!(snapshot.without(&[false, false, true]).is_none());
    }
}
