//! The standard protocol (Redis >= 7.0, Valkey < 9): keys per slot from
//! `CLUSTER COUNTKEYSINSLOT`, no per-slot load, key-by-key migration.

use std::sync::atomic::{AtomicBool, Ordering};

use super::{Backend, BackendKind, GroupOutcome, MoveGroup, SlotFigures, SlotStatsReading};
use crate::cluster::{Cluster, Snapshot};
use crate::error::Error;
use crate::migrate::{FixAction, MigrationOptions, SlotMigration, fix, migrate_slot};

/// The standard protocol.
#[derive(Clone, Copy, Debug, Default)]
pub struct RedisBackend;

impl Backend for RedisBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Redis
    }

    fn slot_figures(
        &self,
        cluster: &mut Cluster,
        snapshot: &Snapshot,
        _: &SlotStatsReading,
    ) -> Result<SlotFigures, Error> {
        Ok(SlotFigures {
            keys: cluster.key_counts(snapshot)?,
            cpu_usec: None,
            network_bytes: None,
            stats_off: Vec::new(),
        })
    }

    fn enable_slot_stats(&self, _: &mut Cluster, _: &Snapshot) -> Result<(), Error> {
        Err(Error::Input(
            "--enable-slot-stats: the redis backend has no per-slot load counters \
             (CLUSTER SLOT-STATS needs Valkey >= 8; this backend drives Redis >= 7.0 and \
             Valkey < 9)"
                .into(),
        ))
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
        migrate_key_by_key(
            cluster,
            snapshot,
            group,
            &group.slots,
            options,
            stop,
            progress,
        )
    }

    fn fix(
        &self,
        cluster: &mut Cluster,
        options: &MigrationOptions,
    ) -> Result<Vec<FixAction>, Error> {
        fix(cluster, options)
    }

    fn cancel(&self, _: &mut Cluster, _: &Snapshot) -> Result<usize, Error> {
        Ok(0)
    }
}

/// Moves `slots` of `group` one at a time with the standard protocol, stopping before the
/// next slot when `stop` is set and at the first failure.
pub(crate) fn migrate_key_by_key(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    group: &MoveGroup,
    slots: &[u16],
    options: &MigrationOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&SlotMigration),
) -> GroupOutcome {
    let mut outcome = GroupOutcome::default();
    for &slot in slots {
        if stop.load(Ordering::SeqCst) {
            outcome.interrupted = true;
            break;
        }
        match migrate_slot(cluster, snapshot, slot, group.from, group.to, options) {
            Ok(migration) => {
                progress(&migration);
                outcome.migrations.push(migration);
                outcome.switched.push(slot);
            }
            Err(error) => {
                outcome.errors.push(error.to_string());
                break;
            }
        }
    }
    outcome
}
