//! Live slot migration by Redis Cluster's standard protocol, and `fix` for slots an interrupted
//! migration left open.
//!
//! Moving slot `s` from node `S` to node `T` (the order `redis-cli --cluster` uses):
//!
//! 1. `CLUSTER SETSLOT s IMPORTING S` on `T`: `T` accepts `ASKING` requests for `s`.
//! 2. `CLUSTER SETSLOT s MIGRATING T` on `S`: `S` still serves the keys it has; for a key it
//!    does not have, it answers `ASK T`, so new keys are created on `T` and `S` gains no keys.
//! 3. `CLUSTER GETKEYSINSLOT s batch` and `MIGRATE host port "" 0 timeout KEYS ...` on `S`,
//!    until `S` has no key left in `s`. A `BUSYKEY` reply means `T` already holds a copy left by
//!    an interrupted `MIGRATE`; `S`'s copy is the live one (it serves that key while
//!    migrating), so the batch is sent again with `REPLACE`. On a secured cluster `MIGRATE`
//!    logs in to `T` with `AUTH2 user password`, the rebalancer's own credentials
//!    ([`Cluster::credentials`]); over TLS (`tls-cluster yes`) the source opens that connection
//!    with TLS by itself.
//! 4. `CLUSTER SETSLOT s NODE T` on `T` (it bumps its epoch and claims `s`), then on `S`, then on
//!    every other master (gossip would spread it too, more slowly).
//!
//! Clients follow `ASK` and `MOVED`, so reads and writes go on during the move. The
//! controller confirms a planned move only after step 4.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, OpenSlot, Snapshot};
use crate::error::Error;

/// Points of the protocol at which the rebalancer can be made to wait forever, so that a test
/// can kill it there (hidden option `--pause-at` of the command).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum ProtocolPoint {
    /// After `SETSLOT IMPORTING` on the target.
    Importing,
    /// After `SETSLOT MIGRATING` on the source.
    Migrating,
    /// After the first batch of keys was migrated.
    FirstBatch,
    /// After `SETSLOT NODE` on the target.
    TargetNode,
    /// After `SETSLOT NODE` on the source.
    SourceNode,
    /// After `CLUSTER MIGRATESLOTS` was sent (the valkey backend's atomic migration): the job
    /// runs on the server while the rebalancer waits.
    AtomicStarted,
}

/// How slots are migrated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigrationOptions {
    /// Keys per `GETKEYSINSLOT` + `MIGRATE` batch.
    pub batch: usize,
    /// The `timeout` argument of `MIGRATE`, in milliseconds.
    pub migrate_timeout_ms: u64,
    /// When set, wait forever at this point of the first migration (for tests).
    pub pause_at: Option<ProtocolPoint>,
    /// How long an atomic migration job may run before it is cancelled, in milliseconds.
    pub job_timeout_ms: u64,
    /// Valkey 9: a group of slots holding fewer keys than this moves key by key (`SETSLOT` +
    /// `MIGRATE`, as on Redis) instead of in one atomic job. Each atomic job forks its source
    /// to send the slots' data, a fixed cost that a master under a small CPU quota pays in
    /// throttled periods however few keys the job carries. 0 (the default): every group moves
    /// in an atomic job.
    pub atomic_from_keys: u64,
}

impl Default for MigrationOptions {
    /// Batches of 100 keys, `MIGRATE` timeout 5000 ms, no pause, atomic jobs cancelled after
    /// 10 minutes, every group of a Valkey 9 cluster in an atomic job.
    fn default() -> MigrationOptions {
        MigrationOptions {
            batch: 100,
            migrate_timeout_ms: 5000,
            pause_at: None,
            job_timeout_ms: 600_000,
            atomic_from_keys: 0,
        }
    }
}

impl MigrationOptions {
    /// True when a group of slots holding `keys` keys moves key by key on a backend that could
    /// move it in an atomic job ([`MigrationOptions::atomic_from_keys`]).
    pub fn key_by_key(&self, keys: u64) -> bool {
        keys < self.atomic_from_keys
    }
}

/// How a migration moved its slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigrationMethod {
    /// One `CLUSTER MIGRATESLOTS` job (Valkey >= 9).
    Atomic,
    /// The standard protocol, key by key (`SETSLOT` + `MIGRATE`).
    Keys,
}

impl MigrationMethod {
    /// `atomic` or `keys`, as the log and the metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            MigrationMethod::Atomic => "atomic",
            MigrationMethod::Keys => "keys",
        }
    }
}

/// What one migration (one slot key by key, or one atomic job of several slots) did.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SlotMigration {
    /// `atomic` or `keys`.
    pub method: MigrationMethod,
    /// The slots, ascending.
    pub slots: Vec<u16>,
    /// Source address.
    pub from: String,
    /// Target address.
    pub to: String,
    /// Keys copied (for an atomic job: the keys the target holds in its slots afterwards).
    pub keys: u64,
    /// Keys sent again with `REPLACE` after `BUSYKEY`.
    pub busy_keys: u64,
    /// Wall time of the whole migration, in milliseconds.
    pub millis: f64,
    /// `success` (the slots changed owner), `failed` or `cancelled`.
    pub outcome: &'static str,
    /// The server's message for a job that did not succeed (empty otherwise).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl SlotMigration {
    /// True when the slots changed owner.
    pub fn succeeded(&self) -> bool {
        self.outcome == "success"
    }
}

/// Moves `slot` from master `from` to master `to` (indices into `snapshot.masters`).
pub fn migrate_slot(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    slot: u16,
    from: usize,
    to: usize,
    options: &MigrationOptions,
) -> Result<SlotMigration, Error> {
    let started = Instant::now();
    let source = &snapshot.masters[from];
    let target = &snapshot.masters[to];
    setslot(cluster, &target.address, slot, "IMPORTING", &source.id)?;
    pause_if(options, ProtocolPoint::Importing, slot);
    setslot(cluster, &source.address, slot, "MIGRATING", &target.id)?;
    pause_if(options, ProtocolPoint::Migrating, slot);
    let (keys, busy_keys) = move_keys(cluster, &source.address, &target.address, slot, options)?;
    finish_slot(cluster, snapshot, slot, to, Some(options))?;
    Ok(SlotMigration {
        method: MigrationMethod::Keys,
        slots: vec![slot],
        from: source.address.clone(),
        to: target.address.clone(),
        keys,
        busy_keys,
        millis: started.elapsed().as_secs_f64() * 1000.0,
        outcome: "success",
        message: String::new(),
    })
}

/// Step 4: `SETSLOT NODE` on the target, the source (every node that is not the target, in
/// fact: the source is the one that matters first) and the other masters. Errors of other
/// masters than the target and the source are ignored: gossip spreads the new owner anyway. The
/// source's refusal is ignored too when it has become a replica of the target: it lost its last
/// slot to the target's claim, by gossip, before its own `SETSLOT NODE` came.
fn finish_slot(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    slot: u16,
    to: usize,
    options: Option<&MigrationOptions>,
) -> Result<(), Error> {
    let target = &snapshot.masters[to];
    setslot(cluster, &target.address, slot, "NODE", &target.id)?;
    if let Some(options) = options {
        pause_if(options, ProtocolPoint::TargetNode, slot);
    }
    let owner = snapshot.owners[usize::from(slot)];
    if let Some(source) = owner.filter(|&o| o != to) {
        let address = &snapshot.masters[source].address;
        if let Err(error) = setslot(cluster, address, slot, "NODE", &target.id) {
            // The target's claim can reach the source by gossip before this command does. A
            // source that so loses its last slot is a replica of the target by then (Redis and
            // Valkey, cluster-allow-replica-migration) and refuses SETSLOT, but the slot has
            // moved: the migration is done.
            if !is_replica_of(cluster, address, &target.id) {
                return Err(error);
            }
        }
    }
    if let Some(options) = options {
        pause_if(options, ProtocolPoint::SourceNode, slot);
    }
    for (index, master) in snapshot.masters.iter().enumerate() {
        if index != to && Some(index) != owner {
            let _ = setslot(cluster, &master.address, slot, "NODE", &target.id);
        }
    }
    Ok(())
}

/// True when the node at `address` is now a replica of the master `master_id`.
fn is_replica_of(cluster: &mut Cluster, address: &str, master_id: &str) -> bool {
    cluster
        .nodes_of(address)
        .ok()
        .and_then(|view| view.into_iter().find(|line| line.has_flag("myself")))
        .is_some_and(|myself| myself.master_id.as_deref() == Some(master_id))
}

fn setslot(
    cluster: &mut Cluster,
    address: &str,
    slot: u16,
    state: &str,
    node_id: &str,
) -> Result<(), Error> {
    let mut command = redis::cmd("CLUSTER");
    command.arg("SETSLOT").arg(slot).arg(state);
    if state != "STABLE" {
        command.arg(node_id);
    }
    cluster.query::<()>(address, &command)
}

/// Step 3: moves every key of `slot` from `source` to `target`; returns (keys, busy keys).
fn move_keys(
    cluster: &mut Cluster,
    source: &str,
    target: &str,
    slot: u16,
    options: &MigrationOptions,
) -> Result<(u64, u64), Error> {
    let (host, port) = target.rsplit_once(':').unwrap_or((target, "6379"));
    let credentials = cluster.credentials().clone();
    let mut moved = 0u64;
    let mut busy = 0u64;
    let mut first_batch = true;
    loop {
        let keys: Vec<Vec<u8>> = cluster.query(
            source,
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(options.batch.max(1)),
        )?;
        if keys.is_empty() {
            return Ok((moved, busy));
        }
        let migrate = |replace: bool| {
            let mut command = redis::cmd("MIGRATE");
            command
                .arg(host)
                .arg(port)
                .arg("")
                .arg(0)
                .arg(options.migrate_timeout_ms);
            if replace {
                command.arg("REPLACE");
            }
            if let Some(password) = &credentials.password {
                command
                    .arg("AUTH2")
                    .arg(&credentials.user)
                    .arg(password.expose());
            }
            command.arg("KEYS").arg(&keys);
            command
        };
        match cluster.query::<String>(source, &migrate(false)) {
            Ok(_) => {}
            Err(error) if error.to_string().contains("BUSYKEY") => {
                busy += keys.len() as u64;
                cluster.query::<String>(source, &migrate(true))?;
            }
            Err(error) => return Err(error),
        }
        moved += keys.len() as u64;
        if first_batch {
            pause_if(options, ProtocolPoint::FirstBatch, slot);
            first_batch = false;
        }
    }
}

/// Checks, before anything moves, that the ACL user may run every command of the key-by-key
/// protocol on every master (each is a source or a target): each is sent in a form the server
/// checks against the ACL and then refuses or answers without changing anything (`CLUSTER
/// SETSLOT 0` with no valid action, `MIGRATE` of no key, which answers `NOKEY` without
/// connecting anywhere, `RESTORE-ASKING` of an invalid payload, `SELECT 0` on the rebalancer's
/// own connection, `GETKEYSINSLOT 0 0`). A `NOPERM` is an [`Error::Permission`] naming the
/// command; every other answer passes (a node that cannot be reached is the snapshot's
/// business).
pub fn check_permissions(cluster: &mut Cluster, snapshot: &Snapshot) -> Result<(), Error> {
    let probes: [(&str, &[&str]); 5] = [
        ("CLUSTER", &["GETKEYSINSLOT", "0", "0"]),
        ("CLUSTER", &["SETSLOT", "0", "ach-redis-permission-check"]),
        ("MIGRATE", &["127.0.0.1", "1", "", "0", "1", "KEYS"]),
        ("SELECT", &["0"]),
        (
            "RESTORE-ASKING",
            &["{ach-redis}:permission-check", "0", "not-a-payload"],
        ),
    ];
    for master in &snapshot.masters {
        for (name, args) in probes {
            let mut command = redis::cmd(name);
            command.arg(args);
            if let Err(error @ (Error::Permission { .. } | Error::Auth { .. })) =
                cluster.query::<redis::Value>(&master.address, &command)
            {
                return Err(error);
            }
        }
    }
    Ok(())
}

/// Waits forever when `options` asks to pause at `point` (the test hook `--pause-at`).
pub(crate) fn pause_if(options: &MigrationOptions, point: ProtocolPoint, slot: u16) {
    if options.pause_at == Some(point) {
        eprintln!("ach-redis: paused at {point:?} of slot {slot} (test hook)");
        let _ = std::io::stderr().flush();
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// What `fix` did to one open slot.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FixAction {
    /// The slot.
    pub slot: u16,
    /// `completed` (keys moved to the target, which now owns the slot) or `rolled back`
    /// (`SETSLOT STABLE`: the slot stays with its owner); for an atomic job the rebalancer
    /// left running, how it ended: `atomic job succeeded`, `atomic job failed` or
    /// `atomic job cancelled`.
    pub action: &'static str,
    /// The node that owns the slot afterwards.
    pub owner: String,
    /// Keys moved while completing.
    pub keys: u64,
}

/// Closes every slot left open by an interrupted migration.
///
/// A slot whose source and target are both known masters is completed: the target is set
/// importing and the source migrating where they are not yet, the remaining keys move, and
/// `SETSLOT NODE` goes to every master, exactly as a migration ends. A slot only importing on
/// its target while the target holds no key of it (the migration stopped before `MIGRATING`,
/// so no client was sent there) is rolled back with `SETSLOT STABLE`, as is a slot whose other
/// side is not a known master. Uses only cluster commands (no `DEBUG`), so it works on Redis 7.0.
///
/// Fails when a node cannot be reached or is failing, or when the ACL user lacks a command of
/// the protocol ([`check_permissions`]): nothing is touched then.
pub fn fix(cluster: &mut Cluster, options: &MigrationOptions) -> Result<Vec<FixAction>, Error> {
    let snapshot = cluster.snapshot()?;
    if !snapshot.fixable() {
        return Err(Error::Degraded(snapshot.problems.clone()));
    }
    check_permissions(cluster, &snapshot)?;
    let slots = open_slot_numbers(&snapshot);
    let options = MigrationOptions {
        pause_at: None,
        ..*options
    };
    let mut actions = Vec::new();
    for slot in slots {
        actions.push(fix_slot(cluster, &snapshot, slot, &options)?);
    }
    Ok(actions)
}

/// The action of a slot rolled back with `SETSLOT STABLE`: it stays with its owner.
fn rolled_back(snapshot: &Snapshot, slot: u16) -> FixAction {
    FixAction {
        slot,
        action: "rolled back",
        owner: snapshot.owners[usize::from(slot)]
            .map(|o| snapshot.masters[o].address.clone())
            .unwrap_or_default(),
        keys: 0,
    }
}

/// The slots open anywhere in `snapshot`, ascending, each once.
fn open_slot_numbers(snapshot: &Snapshot) -> Vec<u16> {
    let mut slots: Vec<u16> = snapshot.open.iter().map(|o| o.slot).collect();
    slots.sort_unstable();
    slots.dedup();
    slots
}

/// An open slot's entries (one per node that has it open) and its two sides.
struct OpenSides<'a> {
    entries: Vec<&'a OpenSlot>,
    /// The entry of the source, when it has the slot migrating.
    migrating: Option<&'a OpenSlot>,
    /// The entry of the target, when it has the slot importing.
    importing: Option<&'a OpenSlot>,
    /// The source's master index, when it is a known master.
    source: Option<usize>,
    /// The target's master index, when it is a known master.
    target: Option<usize>,
}

/// The entries and sides of `slot`, one of the slots open in `snapshot`.
fn open_sides(snapshot: &Snapshot, slot: u16) -> OpenSides<'_> {
    let entries: Vec<&OpenSlot> = snapshot.open.iter().filter(|o| o.slot == slot).collect();
    let migrating = entries.iter().copied().find(|o| o.state == "migrating");
    let importing = entries.iter().copied().find(|o| o.state == "importing");
    let (source, target) = match (migrating, importing) {
        (Some(m), _) => (Some(m.node), snapshot.index_of(&m.peer)),
        (None, Some(i)) => (snapshot.index_of(&i.peer), Some(i.node)),
        (None, None) => unreachable!("the slot comes from the open entries"),
    };
    OpenSides {
        entries,
        migrating,
        importing,
        source,
        target,
    }
}

fn fix_slot(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    slot: u16,
    options: &MigrationOptions,
) -> Result<FixAction, Error> {
    let OpenSides {
        entries,
        migrating,
        importing,
        source,
        target,
    } = open_sides(snapshot, slot);
    let owner_now = snapshot.owners[usize::from(slot)];
    let rollback = |cluster: &mut Cluster| -> Result<FixAction, Error> {
        for entry in &entries {
            setslot(
                cluster,
                &snapshot.masters[entry.node].address,
                slot,
                "STABLE",
                "",
            )?;
        }
        Ok(rolled_back(snapshot, slot))
    };
    let (Some(source), Some(target)) = (source, target) else {
        return rollback(cluster);
    };
    let target_address = snapshot.masters[target].address.clone();
    let source_address = snapshot.masters[source].address.clone();
    if migrating.is_none() {
        let keys_on_target: u64 = cluster.query(
            &target_address,
            redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(slot),
        )?;
        if keys_on_target == 0 && owner_now != Some(target) {
            return rollback(cluster);
        }
    }
    let owns = |cluster: &mut Cluster, address: &str, index: usize| -> Result<bool, Error> {
        let view = cluster.nodes_of(address)?;
        let owner = crate::topology::slot_owners(&view)[usize::from(slot)].clone();
        Ok(owner.as_deref() == Some(snapshot.masters[index].id.as_str()))
    };
    if importing.is_none() && !owns(cluster, &target_address, target)? {
        let source_id = snapshot.masters[source].id.clone();
        setslot(cluster, &target_address, slot, "IMPORTING", &source_id)?;
    }
    if migrating.is_none() && owns(cluster, &source_address, source)? {
        let target_id = snapshot.masters[target].id.clone();
        setslot(cluster, &source_address, slot, "MIGRATING", &target_id)?;
    }
    let (keys, _busy) = move_keys(cluster, &source_address, &target_address, slot, options)?;
    // The source must hear the new owner even if the seed's view still names the target.
    let mut view = snapshot.clone();
    view.owners[usize::from(slot)] = Some(source);
    finish_slot(cluster, &view, slot, target, None)?;
    Ok(FixAction {
        slot,
        action: "completed",
        owner: target_address,
        keys,
    })
}

/// A slot `fix --force-with-unreachable` left open, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LeftOpen {
    /// The slot.
    pub slot: u16,
    /// Why it was left open, in a sentence.
    pub reason: String,
}

/// What `fix --force-with-unreachable` did on a cluster that may be degraded.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ForcedFix {
    /// The slots closed.
    pub actions: Vec<FixAction>,
    /// The slots left open, each with its reason.
    pub left_open: Vec<LeftOpen>,
    /// The masters that did not answer (their own open slots cannot be seen).
    pub unreachable: Vec<String>,
}

/// [`fix`] on a cluster with unreachable or failing masters (`fix --force-with-unreachable`,
/// as `redis-cli --cluster fix --cluster-fix-with-unreachable-masters`), closing only what can
/// be closed without losing a key:
///
/// - a slot whose source and target both answer is fixed as [`fix`] does; when that fails (on
///   a cluster that is down the target refuses `MIGRATE` with `CLUSTERDOWN`), the slot is left
///   open with the error: `MIGRATE` moves a batch whole or not at all, so its keys are all on
///   one side or the other;
/// - a slot importing on a target that answers from a source that does not, where the target
///   holds no key of it, is rolled back (`SETSLOT STABLE` on the target): no client was sent
///   there, and the source keeps every key;
/// - every other slot with an unreachable side is left open: the keys the unreachable side may
///   hold can be neither moved nor counted.
///
/// Fails only when the seed cannot be read or the ACL user lacks a command of the protocol.
pub fn fix_with_unreachable(
    cluster: &mut Cluster,
    options: &MigrationOptions,
) -> Result<ForcedFix, Error> {
    let snapshot = cluster.snapshot()?;
    let reachable = reachable_masters(cluster, &snapshot);
    check_permissions(cluster, &snapshot)?;
    let slots = open_slot_numbers(&snapshot);
    let options = MigrationOptions {
        pause_at: None,
        ..*options
    };
    let mut fixed = ForcedFix {
        unreachable: snapshot
            .masters
            .iter()
            .zip(&reachable)
            .filter(|(_, up)| !**up)
            .map(|(m, _)| m.address.clone())
            .collect(),
        ..ForcedFix::default()
    };
    for slot in slots {
        match fix_slot_if_safe(cluster, &snapshot, &reachable, slot, &options) {
            Ok(Ok(action)) => fixed.actions.push(action),
            Ok(Err(reason)) => fixed.left_open.push(LeftOpen { slot, reason }),
            Err(error) => fixed.left_open.push(LeftOpen {
                slot,
                reason: format!(
                    "closing it failed: {error}; no key is lost (each batch moves whole or not \
                     at all), run fix again once the cluster is up"
                ),
            }),
        }
    }
    Ok(fixed)
}

/// True for every master of `snapshot` that answers `PING`.
pub fn reachable_masters(cluster: &mut Cluster, snapshot: &Snapshot) -> Vec<bool> {
    snapshot
        .masters
        .iter()
        .map(|m| {
            cluster
                .query::<String>(&m.address, &redis::cmd("PING"))
                .is_ok()
        })
        .collect()
}

/// One slot of [`fix_with_unreachable`]: the action, or (as `Ok(Err(reason))`) why the slot
/// is left open; an error when a command of the fix failed.
fn fix_slot_if_safe(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    reachable: &[bool],
    slot: u16,
    options: &MigrationOptions,
) -> Result<Result<FixAction, String>, Error> {
    let OpenSides {
        migrating,
        source,
        target,
        ..
    } = open_sides(snapshot, slot);
    let down = |side: Option<usize>| side.filter(|&i| !reachable[i]);
    let Some(unreachable) = down(source).or(down(target)) else {
        return fix_slot(cluster, snapshot, slot, options).map(Ok);
    };
    let owner_now = snapshot.owners[usize::from(slot)];
    if let (None, Some(target)) = (migrating, target.filter(|&t| reachable[t])) {
        let address = &snapshot.masters[target].address;
        let keys: u64 = cluster.query(
            address,
            redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(slot),
        )?;
        if keys == 0 && owner_now != Some(target) {
            setslot(cluster, address, slot, "STABLE", "")?;
            return Ok(Ok(rolled_back(snapshot, slot)));
        }
    }
    let side = if Some(unreachable) == source {
        "source"
    } else {
        "target"
    };
    Ok(Err(format!(
        "its {side} {} is unreachable: the keys of the slot it may hold can be neither moved nor \
         counted, so closing the slot could lose them; run fix once it is back",
        snapshot.masters[unreachable].address
    )))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::local::{LocalCluster, ServerKind};

    /// The race a drain's last slot runs: the target claims the slot (`SETSLOT NODE` on the
    /// target bumps its epoch), and its claim reaches the source by gossip before the
    /// rebalancer's `SETSLOT NODE` does. Having lost its last slot, the source is a replica of
    /// the target by then and refuses `SETSLOT`, yet the slot has moved: the migration ends as
    /// done. Here the source is made to hear the claim first by waiting for the gossip.
    fn a_source_that_lost_its_last_slot_by_gossip_ends_the_migration(kind: ServerKind) {
        let local =
            LocalCluster::start_with_slots_of(kind, &[vec![(0, 16382)], vec![(16383, 16383)]])
                .unwrap_or_else(|e| panic!("{e}"));
        let mut cluster = Cluster::connect(&local.seed(), Duration::from_secs(5)).unwrap();
        let snapshot = cluster.snapshot().unwrap();
        let slot = 16383;
        let source = snapshot.owners[usize::from(slot)].unwrap();
        let target = 1 - source;
        let (source_master, target_master) = (&snapshot.masters[source], &snapshot.masters[target]);
        setslot(
            &mut cluster,
            &target_master.address,
            slot,
            "IMPORTING",
            &source_master.id,
        )
        .unwrap();
        setslot(
            &mut cluster,
            &source_master.address,
            slot,
            "MIGRATING",
            &target_master.id,
        )
        .unwrap();
        setslot(
            &mut cluster,
            &target_master.address,
            slot,
            "NODE",
            &target_master.id,
        )
        .unwrap();
        let started = Instant::now();
        while !is_replica_of(&mut cluster, &source_master.address, &target_master.id) {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} becomes a replica of the target by gossip",
                source_master.address
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        finish_slot(&mut cluster, &snapshot, slot, target, None)
            .unwrap_or_else(|e| panic!("the migration ends as done: {e}"));
        let now = cluster.snapshot().unwrap();
        assert!(
            now.owners
                .iter()
                .all(|o| o.map(|i| now.masters[i].id.as_str()) == Some(target_master.id.as_str())),
            "every slot is the target's"
        );
    }

    #[test]
    fn a_redis_source_that_lost_its_last_slot_by_gossip_ends_the_migration() {
        a_source_that_lost_its_last_slot_by_gossip_ends_the_migration(ServerKind::Redis);
    }

    #[test]
    fn a_valkey_source_that_lost_its_last_slot_by_gossip_ends_the_migration() {
        a_source_that_lost_its_last_slot_by_gossip_ends_the_migration(ServerKind::Valkey);
    }

    #[test]
    fn only_groups_below_atomic_from_keys_move_key_by_key() {
        let every_group_atomic = MigrationOptions::default();
        assert!(!every_group_atomic.key_by_key(0));
        let options = MigrationOptions {
            atomic_from_keys: 500,
            ..MigrationOptions::default()
        };
        assert!(options.key_by_key(0) && options.key_by_key(499));
        assert!(!options.key_by_key(500) && !options.key_by_key(u64::MAX));
    }
}
