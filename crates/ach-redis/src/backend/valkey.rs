//! Valkey >= 9: per-slot figures from `CLUSTER SLOT-STATS` and atomic slot migration.
//!
//! - **Slot statistics.** `CLUSTER SLOT-STATS SLOTSRANGE 0 16383` on every master answers, for
//!   each slot the master owns, `key-count` and, when `cluster-slot-stats-enabled` is on,
//!   `cpu-usec`, `network-bytes-in` and `network-bytes-out` (or, read in chunks, the same in
//!   several requests of the master's own slots, see [`SlotStatsReading`]). The counters are
//!   cumulative; they restart at 0 on `CONFIG RESETSTAT` and for a slot whenever its owner
//!   changes (the controller turns such a slot into a missing sample, see
//!   [`crate::telemetry`]).
//! - **Atomic migration.** `CLUSTER MIGRATESLOTS SLOTSRANGE a b [a b ...] NODE target` on the
//!   source starts one job for the group; the server copies a snapshot of the slots, streams
//!   the changes, pauses writes briefly and hands the slots over (clients see `MOVED` after the
//!   switch, never `ASK`). `CLUSTER GETSLOTMIGRATIONS` on the source is polled until the job
//!   ends in `success`, `failed` or `cancelled`; `CLUSTER CANCELSLOTMIGRATIONS` cancels the
//!   source's jobs. The server does not retry a failed job (writes at a high rate can fail
//!   one, valkey-io/valkey#4545): it is retried once, then the slots still owned by the source
//!   are migrated key by key. A slot a failed job left owned by the target (a failover at the
//!   wrong moment can hand slots back and forth, valkey-io/valkey#2724) is not migrated again:
//!   the source's own view decides which slots it still owns.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::Value;

use super::redis::migrate_key_by_key;
use super::{Backend, BackendKind, GroupOutcome, MoveGroup, SlotFigures, SlotStatsReading};
use crate::cluster::{Cluster, Snapshot};
use crate::error::Error;
use crate::migrate::{
    FixAction, ForcedFix, MigrationMethod, MigrationOptions, ProtocolPoint, SlotMigration, fix,
    fix_with_unreachable, pause_if, reachable_masters,
};
use crate::resp::{ReplyShape, integer, pairs, text};
use crate::slot::SLOT_COUNT;
use crate::topology::slot_owners;

/// Valkey >= 9.
#[derive(Clone, Copy, Debug, Default)]
pub struct ValkeyBackend;

/// How often a running job is polled.
const POLL: Duration = Duration::from_millis(10);

impl Backend for ValkeyBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Valkey
    }

    fn slot_figures(
        &self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        reading: &SlotStatsReading,
    ) -> Result<SlotFigures, Error> {
        let mut keys = vec![0u64; SLOT_COUNT];
        let mut cpu = vec![0u64; SLOT_COUNT];
        let mut network = vec![0u64; SLOT_COUNT];
        let requests: Vec<Vec<(u16, u16)>> = snapshot
            .slots_of()
            .iter()
            .map(|slots| reading.ranges(slots))
            .collect();
        let rounds = requests.iter().map(Vec::len).max().unwrap_or(0);
        // Whether every reply of a master had the per-slot counters (statistics on).
        let mut has_counters = vec![true; requests.len()];
        for round in 0..rounds {
            if round > 0 {
                std::thread::sleep(reading.pause);
            }
            for (node, ranges) in requests.iter().enumerate() {
                let Some(&(first, last)) = ranges.get(round) else {
                    continue;
                };
                let address = &snapshot.masters[node].address;
                let reply: Value = cluster.query(
                    address,
                    redis::cmd("CLUSTER")
                        .arg("SLOT-STATS")
                        .arg("SLOTSRANGE")
                        .arg(first)
                        .arg(last),
                )?;
                let stats = parse_slot_stats(&reply).map_err(|shape| Error::Reply {
                    address: address.clone(),
                    command: "CLUSTER SLOT-STATS".into(),
                    detail: shape.to_string(),
                })?;
                for stat in stats {
                    let slot = usize::from(stat.slot);
                    keys[slot] = stat.keys;
                    match (stat.cpu_usec, stat.network_bytes) {
                        (Some(usec), Some(bytes)) => {
                            cpu[slot] = usec;
                            network[slot] = bytes;
                        }
                        _ => has_counters[node] = false,
                    }
                }
            }
        }
        let stats_off: Vec<String> = (0..requests.len())
            .filter(|&node| !requests[node].is_empty() && !has_counters[node])
            .map(|node| snapshot.masters[node].address.clone())
            .collect();
        let on = stats_off.is_empty();
        Ok(SlotFigures {
            keys,
            cpu_usec: on.then_some(cpu),
            network_bytes: on.then_some(network),
            stats_off,
        })
    }

    fn enable_slot_stats(&self, cluster: &mut Cluster, snapshot: &Snapshot) -> Result<(), Error> {
        for master in &snapshot.masters {
            cluster.query::<()>(
                &master.address,
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("cluster-slot-stats-enabled")
                    .arg("yes"),
            )?;
        }
        Ok(())
    }

    fn migrate(
        &self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        group: &MoveGroup,
        options: &MigrationOptions,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(&SlotMigration),
    ) -> GroupOutcome {
        if options.key_by_key(group.keys) {
            return migrate_key_by_key(
                cluster,
                snapshot,
                group,
                &group.slots,
                options,
                stop,
                progress,
            );
        }
        let mut outcome = GroupOutcome::default();
        match atomic_jobs(
            cluster,
            snapshot,
            group,
            options,
            stop,
            progress,
            &mut outcome,
        ) {
            JobsEnded::Settled => outcome,
            JobsEnded::BothFailed => key_by_key_after_failed_jobs(
                cluster, snapshot, group, options, stop, progress, outcome,
            ),
        }
    }

    fn fix(
        &self,
        cluster: &mut Cluster,
        options: &MigrationOptions,
    ) -> Result<Vec<FixAction>, Error> {
        let snapshot = cluster.snapshot()?;
        if !snapshot.fixable() {
            return Err(Error::Degraded(snapshot.problems.clone()));
        }
        let everyone = vec![true; snapshot.masters.len()];
        let mut actions = finish_jobs(cluster, &snapshot, &everyone, options)?;
        // Slots a key-by-key fallback left open.
        actions.extend(fix(cluster, options)?);
        Ok(actions)
    }

    fn fix_with_unreachable(
        &self,
        cluster: &mut Cluster,
        options: &MigrationOptions,
    ) -> Result<ForcedFix, Error> {
        let snapshot = cluster.snapshot()?;
        let reachable = reachable_masters(cluster, &snapshot);
        let jobs = finish_jobs(cluster, &snapshot, &reachable, options)?;
        let mut fixed = fix_with_unreachable(cluster, options)?;
        fixed.actions.splice(0..0, jobs);
        Ok(fixed)
    }

    fn cancel(&self, cluster: &mut Cluster, snapshot: &Snapshot) -> Result<usize, Error> {
        let mut cancelled = 0;
        for master in &snapshot.masters {
            let running = running_jobs(cluster, &master.address)?;
            if running.is_empty() {
                continue;
            }
            cluster.query::<()>(
                &master.address,
                redis::cmd("CLUSTER").arg("CANCELSLOTMIGRATIONS"),
            )?;
            for job in running {
                wait_for_job(
                    cluster,
                    &master.address,
                    &job.name,
                    Duration::from_secs(60),
                    None,
                )?;
                cancelled += 1;
            }
        }
        Ok(cancelled)
    }
}

/// Waits for every migration job running on the `reachable` masters of `snapshot` to end;
/// one action per slot of each job, saying how it ended.
fn finish_jobs(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    reachable: &[bool],
    options: &MigrationOptions,
) -> Result<Vec<FixAction>, Error> {
    let mut actions = Vec::new();
    let timeout = Duration::from_millis(options.job_timeout_ms);
    for (node, master) in snapshot.masters.iter().enumerate() {
        if !reachable[node] {
            continue;
        }
        for job in running_jobs(cluster, &master.address)? {
            let ended = wait_for_job(cluster, &master.address, &job.name, timeout, None)?;
            let owner = match ended.state.as_str() {
                "success" => snapshot
                    .index_of(&ended.target_node)
                    .map(|i| snapshot.masters[i].address.clone())
                    .unwrap_or_else(|| ended.target_node.clone()),
                _ => snapshot.masters[node].address.clone(),
            };
            let action = match ended.state.as_str() {
                "success" => "atomic job succeeded",
                "cancelled" => "atomic job cancelled",
                _ => "atomic job failed",
            };
            for slot in ended.slots() {
                actions.push(FixAction {
                    slot,
                    action,
                    owner: owner.clone(),
                    keys: 0,
                });
            }
        }
    }
    Ok(actions)
}

/// One atomic job for `group`: `MIGRATESLOTS` on the source, then `GETSLOTMIGRATIONS` until
/// the job ends. A stop request cancels the job (and waits for it to end). Fails when the
/// server refuses the command or cannot be polled.
fn atomic_job(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    group: &MoveGroup,
    options: &MigrationOptions,
    stop: &AtomicBool,
) -> Result<SlotMigration, Error> {
    let started = Instant::now();
    let source = &snapshot.masters[group.from];
    let target = &snapshot.masters[group.to];
    let known: BTreeSet<String> = jobs(cluster, &source.address)?
        .into_iter()
        .map(|job| job.name)
        .collect();
    let mut command = redis::cmd("CLUSTER");
    command.arg("MIGRATESLOTS").arg("SLOTSRANGE");
    for (first, last) in ranges(&group.slots) {
        command.arg(first).arg(last);
    }
    command.arg("NODE").arg(&target.id);
    let wanted: BTreeSet<u16> = group.slots.iter().copied().collect();
    let ours = |job: &Job| {
        !known.contains(&job.name)
            && job.operation == "EXPORT"
            && job.target_node == target.id
            && job.slots().into_iter().collect::<BTreeSet<u16>>() == wanted
    };
    if let Err(error) = cluster.query::<()>(&source.address, &command) {
        // A signal (Ctrl-C) that interrupts the wait for the reply makes the connection send
        // the command again; the server then refuses the second one because the first one
        // started the job ("I am already migrating slot"). That job is this one.
        let started_by_the_first = error.to_string().contains("already migrating")
            && jobs(cluster, &source.address)?.iter().any(ours);
        if !started_by_the_first {
            return Err(error);
        }
    }
    if let Some(&slot) = group.slots.first() {
        pause_if(options, ProtocolPoint::AtomicStarted, slot);
    }
    let name = loop {
        if let Some(job) = jobs(cluster, &source.address)?.into_iter().find(ours) {
            break job.name;
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err(Error::Reply {
                address: source.address.clone(),
                command: "CLUSTER GETSLOTMIGRATIONS".into(),
                detail: "the job CLUSTER MIGRATESLOTS started is not listed".into(),
            });
        }
        std::thread::sleep(POLL);
    };
    let timeout = Duration::from_millis(options.job_timeout_ms);
    let job = wait_for_job(cluster, &source.address, &name, timeout, Some(stop))?;
    let keys = if job.state == "success" {
        keys_in(cluster, &target.address, &group.slots)?
    } else {
        0
    };
    Ok(SlotMigration {
        method: MigrationMethod::Atomic,
        slots: group.slots.clone(),
        from: source.address.clone(),
        to: target.address.clone(),
        keys,
        busy_keys: 0,
        millis: started.elapsed().as_secs_f64() * 1000.0,
        outcome: match job.state.as_str() {
            "success" => "success",
            "cancelled" => "cancelled",
            _ => "failed",
        },
        message: job.message,
    })
}

/// Polls the job `name` on `address` until it ends. When `stop` is set, or after `timeout`,
/// cancels the address's jobs once and goes on polling until the job ends.
fn wait_for_job(
    cluster: &mut Cluster,
    address: &str,
    name: &str,
    timeout: Duration,
    stop: Option<&AtomicBool>,
) -> Result<Job, Error> {
    let started = Instant::now();
    let mut cancelled = false;
    loop {
        let job = jobs(cluster, address)?
            .into_iter()
            .find(|job| job.name == name)
            .ok_or_else(|| Error::Reply {
                address: address.to_string(),
                command: "CLUSTER GETSLOTMIGRATIONS".into(),
                detail: format!("job {name} is no longer listed"),
            })?;
        if job.ended() {
            return Ok(job);
        }
        let asked = stop.is_some_and(|s| s.load(Ordering::SeqCst)) || started.elapsed() > timeout;
        if asked && !cancelled {
            cluster.query::<()>(address, redis::cmd("CLUSTER").arg("CANCELSLOTMIGRATIONS"))?;
            cancelled = true;
        }
        if started.elapsed() > timeout + Duration::from_secs(60) {
            return Err(Error::Reply {
                address: address.to_string(),
                command: "CLUSTER GETSLOTMIGRATIONS".into(),
                detail: format!(
                    "job {name} still runs ({}) after being cancelled",
                    job.state
                ),
            });
        }
        std::thread::sleep(POLL);
    }
}

/// Waits until the node at `address` reports `cluster_state:ok`, at most `timeout`.
fn wait_until_serving(
    cluster: &mut Cluster,
    address: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let started = Instant::now();
    loop {
        let state = cluster.query::<String>(address, redis::cmd("CLUSTER").arg("INFO"));
        match state {
            Ok(info) if info.contains("cluster_state:ok") => return Ok(()),
            Ok(_) if started.elapsed() > timeout => {
                return Err(Error::Degraded(vec![format!(
                    "node {address} reports cluster_state:fail for {timeout:?}"
                )]));
            }
            Err(error) if started.elapsed() > timeout => return Err(error),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Keys the node at `address` holds in `slots`.
fn keys_in(cluster: &mut Cluster, address: &str, slots: &[u16]) -> Result<u64, Error> {
    let mut pipeline = redis::pipe();
    for &slot in slots {
        pipeline.cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(slot);
    }
    let counts: Vec<u64> = cluster.pipeline(address, &pipeline, "CLUSTER COUNTKEYSINSLOT")?;
    Ok(counts.iter().sum())
}

/// How long a refusal of a new job because the source still exports its slots is waited out.
const STILL_EXPORTING_WAIT: Duration = Duration::from_secs(5);

/// The jobs of `address` that have not ended and that it exports.
fn running_jobs(cluster: &mut Cluster, address: &str) -> Result<Vec<Job>, Error> {
    Ok(jobs(cluster, address)?
        .into_iter()
        .filter(|job| !job.ended() && job.operation == "EXPORT")
        .collect())
}

/// Every job `CLUSTER GETSLOTMIGRATIONS` lists on `address`.
fn jobs(cluster: &mut Cluster, address: &str) -> Result<Vec<Job>, Error> {
    let reply: Value = cluster.query(address, redis::cmd("CLUSTER").arg("GETSLOTMIGRATIONS"))?;
    parse_jobs(&reply).map_err(|shape| Error::Reply {
        address: address.to_string(),
        command: "CLUSTER GETSLOTMIGRATIONS".into(),
        detail: shape.to_string(),
    })
}

/// One entry of `CLUSTER GETSLOTMIGRATIONS`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Job {
    /// The job's unique name.
    pub name: String,
    /// `EXPORT` on the source, `IMPORT` on the target.
    pub operation: String,
    /// `a-b c-d`: the slot ranges, inclusive.
    pub slot_ranges: String,
    /// The target's node id.
    pub target_node: String,
    /// The source's node id.
    pub source_node: String,
    /// `success`, `failed`, `cancelled` (ended), or a step of the job.
    pub state: String,
    /// The server's message (why a job failed).
    pub message: String,
}

impl Job {
    /// True in a terminal state.
    pub fn ended(&self) -> bool {
        matches!(self.state.as_str(), "success" | "failed" | "cancelled")
    }

    /// The job's slots.
    pub fn slots(&self) -> Vec<u16> {
        self.slot_ranges
            .split_whitespace()
            .filter_map(|range| {
                let (first, last) = range.split_once('-').unwrap_or((range, range));
                Some(first.parse::<u16>().ok()?..=last.parse::<u16>().ok()?)
            })
            .flatten()
            .collect()
    }
}

/// Parses a `GETSLOTMIGRATIONS` reply (RESP2 flat field lists or RESP3 maps).
pub fn parse_jobs(reply: &Value) -> Result<Vec<Job>, ReplyShape> {
    let Value::Array(entries) = reply else {
        return Err(expected("an array", reply));
    };
    entries
        .iter()
        .map(|entry| {
            let mut job = Job::default();
            for (field, value) in pairs(entry)? {
                let text = text(value).unwrap_or_default();
                match field.as_str() {
                    "name" => job.name = text,
                    "operation" => job.operation = text,
                    "slot_ranges" => job.slot_ranges = text,
                    "target_node" => job.target_node = text,
                    "source_node" => job.source_node = text,
                    "state" => job.state = text,
                    "message" => job.message = text,
                    _ => {}
                }
            }
            if job.name.is_empty() || job.state.is_empty() {
                return Err(expected("an entry with a name and a state", entry));
            }
            Ok(job)
        })
        .collect()
}

/// One slot of `CLUSTER SLOT-STATS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotStat {
    /// The slot.
    pub slot: u16,
    /// `key-count`.
    pub keys: u64,
    /// `cpu-usec`, absent while `cluster-slot-stats-enabled` is off.
    pub cpu_usec: Option<u64>,
    /// `network-bytes-in` plus `network-bytes-out`, absent unless the reply has both (they
    /// come with `cpu-usec`).
    pub network_bytes: Option<u64>,
}

/// Parses a `CLUSTER SLOT-STATS` reply: an array of `[slot, {field: value, ...}]`.
pub fn parse_slot_stats(reply: &Value) -> Result<Vec<SlotStat>, ReplyShape> {
    let Value::Array(entries) = reply else {
        return Err(expected("an array", reply));
    };
    entries
        .iter()
        .map(|entry| {
            let Value::Array(parts) = entry else {
                return Err(expected("[slot, stats]", entry));
            };
            let [slot, stats] = parts.as_slice() else {
                return Err(expected("[slot, stats]", entry));
            };
            let slot = integer(slot)
                .and_then(|s| u16::try_from(s).ok())
                .filter(|&s| usize::from(s) < SLOT_COUNT)
                .ok_or_else(|| ReplyShape::SlotOutOfRange {
                    value: format!("{slot:?}"),
                })?;
            let mut stat = SlotStat {
                slot,
                keys: 0,
                cpu_usec: None,
                network_bytes: None,
            };
            let (mut bytes_in, mut bytes_out) = (None, None);
            for (field, value) in pairs(stats)? {
                let number = integer(value).and_then(|v| u64::try_from(v).ok());
                match field.as_str() {
                    "key-count" => stat.keys = number.unwrap_or(0),
                    "cpu-usec" => stat.cpu_usec = number,
                    "network-bytes-in" => bytes_in = number,
                    "network-bytes-out" => bytes_out = number,
                    _ => {}
                }
            }
            stat.network_bytes = bytes_in.zip(bytes_out).map(|(i, o)| i + o);
            Ok(stat)
        })
        .collect()
}

/// A reply of another shape than `what`.
fn expected(what: &'static str, got: &Value) -> ReplyShape {
    ReplyShape::Expected {
        expected: what,
        got: format!("{got:?}"),
    }
}

/// Ascending slots as inclusive ranges of consecutive slots.
pub fn ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut sorted = slots.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<(u16, u16)> = Vec::new();
    for slot in sorted {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == slot => *last = slot,
            _ => out.push((slot, slot)),
        }
    }
    out
}

/// How the atomic jobs of a group ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobsEnded {
    /// A job migrated the group, or the run was stopped: nothing more to do.
    Settled,
    /// Two jobs failed: the slots the source still owns move key by key.
    BothFailed,
}

/// Up to two atomic jobs for `group`, each reported to `progress` and kept in `outcome`.
fn atomic_jobs(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    group: &MoveGroup,
    options: &MigrationOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&SlotMigration),
    outcome: &mut GroupOutcome,
) -> JobsEnded {
    // A source that has just reported a job failed may still hold its slots as exporting
    // for a moment, and refuses a new job for them ("I am already migrating slot"): such a
    // refusal is waited out (for a few seconds at most) rather than counted as an attempt.
    let exporting_until = Instant::now() + STILL_EXPORTING_WAIT;
    let mut attempts = 0;
    while attempts < 2 {
        if stop.load(Ordering::SeqCst) {
            outcome.interrupted = true;
            return JobsEnded::Settled;
        }
        let job = atomic_job(cluster, snapshot, group, options, stop);
        if let Err(error) = &job
            && error.to_string().contains("already migrating")
            && Instant::now() < exporting_until
        {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        attempts += 1;
        match job {
            Ok(migration) => {
                progress(&migration);
                let (succeeded, cancelled) =
                    (migration.succeeded(), migration.outcome == "cancelled");
                outcome.migrations.push(migration);
                if succeeded {
                    outcome.switched = group.slots.clone();
                    return JobsEnded::Settled;
                }
                if cancelled {
                    outcome.interrupted = true;
                    return JobsEnded::Settled;
                }
            }
            Err(error) => {
                // A refused MIGRATESLOTS (say, the target is suspected failing) or a job
                // that could not be followed counts as a failed attempt.
                let source = &snapshot.masters[group.from];
                let migration = SlotMigration {
                    method: MigrationMethod::Atomic,
                    slots: group.slots.clone(),
                    from: source.address.clone(),
                    to: snapshot.masters[group.to].address.clone(),
                    keys: 0,
                    busy_keys: 0,
                    millis: 0.0,
                    outcome: "failed",
                    message: error.to_string(),
                };
                progress(&migration);
                outcome.migrations.push(migration);
            }
        }
    }
    JobsEnded::BothFailed
}

/// After two failed jobs, the slots of `group` its source still owns, moved key by key once
/// both sides serve again (a job fails when the target stops answering; back, it reports the
/// cluster down until it hears from the others, and refuses what MIGRATE sends).
fn key_by_key_after_failed_jobs(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    group: &MoveGroup,
    options: &MigrationOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&SlotMigration),
    mut outcome: GroupOutcome,
) -> GroupOutcome {
    let source = &snapshot.masters[group.from];
    let target = &snapshot.masters[group.to];
    for address in [&source.address, &target.address] {
        if let Err(error) = wait_until_serving(cluster, address, Duration::from_secs(30)) {
            outcome.errors.push(format!(
                "after two failed atomic jobs, no key-by-key migration: {error}"
            ));
            return outcome;
        }
    }
    let still_owned = match cluster.nodes_of(&source.address) {
        Ok(view) => {
            let owners = slot_owners(&view);
            group
                .slots
                .iter()
                .copied()
                .filter(|&s| owners[usize::from(s)].as_deref() == Some(source.id.as_str()))
                .collect::<Vec<u16>>()
        }
        Err(error) => {
            outcome.errors.push(error.to_string());
            return outcome;
        }
    };
    if still_owned.len() != group.slots.len() {
        outcome.errors.push(format!(
            "after two failed atomic jobs {} no longer owns {} of the {} slots; they are \
             not migrated again",
            source.address,
            group.slots.len() - still_owned.len(),
            group.slots.len()
        ));
    }
    let options = MigrationOptions {
        pause_at: None,
        ..*options
    };
    let fallback = migrate_key_by_key(
        cluster,
        snapshot,
        group,
        &still_owned,
        &options,
        stop,
        progress,
    );
    outcome.migrations.extend(fallback.migrations);
    outcome.switched.extend(fallback.switched);
    outcome.errors.extend(fallback.errors);
    outcome.interrupted |= fallback.interrupted;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn parses_slot_stats_with_and_without_cpu() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(15495),
                Value::Array(vec![
                    bulk("key-count"),
                    Value::Int(200),
                    bulk("cpu-usec"),
                    Value::Int(367),
                    bulk("network-bytes-in"),
                    Value::Int(6292),
                    bulk("network-bytes-out"),
                    Value::Int(1008),
                ]),
            ]),
            Value::Array(vec![
                Value::Int(7),
                Value::Map(vec![(bulk("key-count"), Value::Int(3))]),
            ]),
        ]);
        let stats = parse_slot_stats(&reply).unwrap();
        assert_eq!(
            stats,
            vec![
                SlotStat {
                    slot: 15495,
                    keys: 200,
                    cpu_usec: Some(367),
                    network_bytes: Some(7300),
                },
                SlotStat {
                    slot: 7,
                    keys: 3,
                    cpu_usec: None,
                    network_bytes: None,
                }
            ]
        );
        let bad = Value::Array(vec![Value::Array(vec![
            Value::Int(16384),
            Value::Array(vec![]),
        ])]);
        assert!(
            parse_slot_stats(&bad)
                .unwrap_err()
                .to_string()
                .contains("16384")
        );
    }

    #[test]
    fn parses_jobs_and_their_slots() {
        // A reply of valkey-server 9.1.2 (fields as it lists them).
        let fields = [
            ("name", "df95fedf8ee8630b0dd4dd32a41bd40523d8705a"),
            ("operation", "EXPORT"),
            ("slot_ranges", "100-102 200-200"),
            ("target_node", "356d"),
            ("source_node", "925e"),
            ("create_time", "1796114251"),
            ("state", "failed"),
            ("message", "Timed out after too long with no interaction"),
        ];
        let entry = Value::Array(
            fields
                .iter()
                .flat_map(|(k, v)| [bulk(k), bulk(v)])
                .collect(),
        );
        let jobs = parse_jobs(&Value::Array(vec![entry])).unwrap();
        assert_eq!(jobs.len(), 1);
        assert!(jobs[0].ended());
        assert_eq!(jobs[0].slots(), vec![100, 101, 102, 200]);
        assert_eq!(
            jobs[0].message,
            "Timed out after too long with no interaction"
        );
        let running = Job {
            state: "reading-establish-response".into(),
            ..jobs[0].clone()
        };
        assert!(!running.ended());
    }

    #[test]
    fn merges_slots_into_ranges() {
        assert_eq!(ranges(&[5, 3, 4, 9, 10, 1]), vec![(1, 1), (3, 5), (9, 10)]);
        assert_eq!(ranges(&[]), vec![]);
    }
}
