//! The end of a `rebalance` run: what it did in all, the state it left, and the exit code that
//! says whether it did what it planned (docs/redis.md has the table).

use std::fmt::Write;

use crate::control::{StepOutcome, StepPlan, slot_range_count};

/// Exit code: every planned move was migrated and the cluster is healthy.
pub const EXIT_OK: u8 = 0;
/// Exit code: at least one migration failed.
pub const EXIT_MIGRATION_FAILED: u8 = 3;
/// Exit code: planned moves were dropped (neither migrated nor failed; not a stop request).
pub const EXIT_MOVES_DROPPED: u8 = 4;
/// Exit code: the cluster is degraded at exit.
pub const EXIT_DEGRADED: u8 = 5;
/// Exit code: a drained master still owns slots at exit (a slot larger than any drain step's
/// budget, or the steps ran out).
pub const EXIT_DRAIN_UNFINISHED: u8 = 6;

/// What a whole run did, and what it left.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RunSummary {
    /// Steps run (a degraded step counts).
    pub steps: u64,
    /// Steps that migrated at least one slot.
    pub steps_with_moves: u64,
    /// Keys copied.
    pub keys_moved: u64,
    /// Slots switched to their new owner.
    pub slots_moved: u64,
    /// Migrations that failed (or were cancelled other than by a stop request).
    pub migrations_failed: u64,
    /// Planned slot moves neither migrated nor failed.
    pub planned_moves_dropped: u64,
    /// Steps that found the cluster degraded and migrated nothing.
    pub degraded_steps: u64,
    /// Every error of every step, `step N: message`.
    pub errors: Vec<String>,
    /// Wall time of the run, in seconds.
    pub seconds: f64,
    /// The imbalance `D` at the first observation.
    pub imbalance_first: Option<f64>,
    /// The imbalance `D` at the last observation.
    pub imbalance_last: Option<f64>,
    /// True when a stop request (Ctrl-C) ended the run.
    pub stopped_by_request: bool,
    /// The step whose measured `D` was within `--until-balanced`, which ended the run.
    pub balanced_at_step: Option<u64>,
    /// Why the cluster is degraded at exit; empty when healthy.
    pub problems_at_exit: Vec<String>,
    /// Slot ranges in the slot map at exit (as `CLUSTER SLOTS` lists them).
    pub slot_ranges_at_exit: Option<usize>,
    /// The cluster's current configuration epoch at exit (`CLUSTER INFO`).
    pub epoch_at_exit: Option<u64>,
    /// The drained masters that still own slots at exit, each with its slots.
    pub drains_unfinished: Vec<String>,
}

impl RunSummary {
    /// Adds one executed step.
    pub fn add_step(&mut self, step: u64, plan: &StepPlan, outcome: &StepOutcome) {
        self.steps += 1;
        let switched: u64 = outcome
            .migrations
            .iter()
            .filter(|m| m.succeeded())
            .map(|m| m.slots.len() as u64)
            .sum();
        let moved: std::collections::BTreeSet<u16> = outcome
            .migrations
            .iter()
            .filter(|m| m.succeeded())
            .flat_map(|m| m.slots.iter().copied())
            .collect();
        // A migration failed when its slots did not move in the end: an atomic job that failed
        // and whose slots its key-by-key fallback then moved is not a failure of the run.
        let failed: Vec<_> = outcome
            .migrations
            .iter()
            .filter(|m| {
                let stopped_by_request = outcome.interrupted && m.outcome == "cancelled";
                let moved_later = m.slots.iter().all(|s| moved.contains(s));
                !(m.succeeded() || stopped_by_request || moved_later)
            })
            .collect();
        let failed_slots: u64 = failed.iter().map(|m| m.slots.len() as u64).sum();
        let planned: u64 = plan.groups.iter().map(|g| g.slots.len() as u64).sum();
        if switched > 0 {
            self.steps_with_moves += 1;
        }
        self.keys_moved += outcome.keys_moved;
        self.slots_moved += switched;
        // A slot whose key-by-key migration failed has no record of its own, only the step's
        // error: such a step counts one failed migration.
        let failed_migrations = match (failed.len(), outcome.errors.is_empty()) {
            (0, false) => 1,
            (n, _) => n as u64,
        };
        self.migrations_failed += failed_migrations;
        if !outcome.interrupted {
            self.planned_moves_dropped += planned.saturating_sub(switched + failed_slots);
        }
        self.errors
            .extend(outcome.errors.iter().map(|e| format!("step {step}: {e}")));
        self.imbalance_first.get_or_insert(plan.imbalance_now);
        self.imbalance_last = Some(plan.imbalance_now);
    }

    /// Adds one step that found the cluster degraded.
    pub fn add_degraded_step(&mut self) {
        self.steps += 1;
        self.degraded_steps += 1;
    }

    /// Records the slot map at exit.
    pub fn set_slot_map(&mut self, owners: &[Option<usize>]) {
        self.slot_ranges_at_exit = Some(slot_map_ranges(owners));
    }

    /// The exit code: [`EXIT_DEGRADED`] when the cluster is degraded at exit, else
    /// [`EXIT_MIGRATION_FAILED`] when a migration failed, else [`EXIT_MOVES_DROPPED`] when
    /// planned moves were dropped, else [`EXIT_DRAIN_UNFINISHED`] when a drained master still
    /// owns slots, else [`EXIT_OK`].
    pub fn exit_code(&self) -> u8 {
        if !self.problems_at_exit.is_empty() {
            EXIT_DEGRADED
        } else if self.migrations_failed > 0 || !self.errors.is_empty() {
            EXIT_MIGRATION_FAILED
        } else if self.planned_moves_dropped > 0 {
            EXIT_MOVES_DROPPED
        } else if !self.drains_unfinished.is_empty() {
            EXIT_DRAIN_UNFINISHED
        } else {
            EXIT_OK
        }
    }

    /// The summary for people, a few lines.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let figure = |d: Option<f64>| d.map_or("n/a".to_string(), |d| format!("{d:.3}"));
        let _ = writeln!(
            out,
            "rebalance summary: {} steps ({} with moves, {} degraded), {} keys and {} slots moved \
             in {:.1} s; D {} at the first step, {} at the last",
            self.steps,
            self.steps_with_moves,
            self.degraded_steps,
            self.keys_moved,
            self.slots_moved,
            self.seconds,
            figure(self.imbalance_first),
            figure(self.imbalance_last)
        );
        let _ = writeln!(
            out,
            "  {} migrations failed, {} planned slot moves dropped{}",
            self.migrations_failed,
            self.planned_moves_dropped,
            match (self.stopped_by_request, self.balanced_at_step) {
                (true, _) => "; stopped by request".to_string(),
                (false, Some(step)) => format!("; balanced at step {step} (--until-balanced)"),
                (false, None) => String::new(),
            }
        );
        for error in &self.errors {
            let _ = writeln!(out, "  error: {error}");
        }
        let map = match (self.slot_ranges_at_exit, self.epoch_at_exit) {
            (Some(ranges), Some(epoch)) => format!("; slot map: {ranges} ranges, epoch {epoch}"),
            (Some(ranges), None) => format!("; slot map: {ranges} ranges"),
            _ => String::new(),
        };
        for drain in &self.drains_unfinished {
            let _ = writeln!(out, "  drain UNFINISHED: {drain}");
        }
        if self.problems_at_exit.is_empty() {
            let _ = writeln!(out, "  cluster healthy at exit{map}");
        } else {
            let _ = writeln!(
                out,
                "  cluster DEGRADED at exit: {}{map}",
                self.problems_at_exit.join("; ")
            );
        }
        let _ = writeln!(out, "  exit code {}", self.exit_code());
        out
    }
}

/// The number of ranges `CLUSTER SLOTS` lists for this slot map: maximal runs of slots with
/// one owner (unassigned slots are not listed).
pub fn slot_map_ranges(owners: &[Option<usize>]) -> usize {
    let mut by_owner: Vec<Vec<u16>> = Vec::new();
    for (slot, owner) in owners.iter().enumerate() {
        if let Some(owner) = owner {
            if by_owner.len() <= *owner {
                by_owner.resize(owner + 1, Vec::new());
            }
            by_owner[*owner].push(slot as u16);
        }
    }
    by_owner.iter().map(|slots| slot_range_count(slots)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_count_runs_of_one_owner() {
        let mut owners = vec![Some(0); 100];
        owners[10] = Some(1);
        owners[11] = Some(1);
        owners[50] = None;
        // 0-9, 10-11, 12-49, 51-99.
        assert_eq!(slot_map_ranges(&owners), 4);
    }

    #[test]
    fn the_exit_code_puts_degraded_first_then_failures_then_drops_then_drains() {
        let mut summary = RunSummary::default();
        assert_eq!(summary.exit_code(), EXIT_OK);
        summary.drains_unfinished = vec!["127.0.0.1:7000 still owns 1 slot (7)".into()];
        assert_eq!(summary.exit_code(), EXIT_DRAIN_UNFINISHED);
        assert!(summary.text().contains("drain UNFINISHED: 127.0.0.1:7000"));
        summary.planned_moves_dropped = 3;
        assert_eq!(summary.exit_code(), EXIT_MOVES_DROPPED);
        summary.migrations_failed = 1;
        assert_eq!(summary.exit_code(), EXIT_MIGRATION_FAILED);
        summary.problems_at_exit = vec!["node down".into()];
        assert_eq!(summary.exit_code(), EXIT_DEGRADED);
        assert!(
            summary
                .text()
                .contains("cluster DEGRADED at exit: node down")
        );
        assert_eq!(RunSummary::default().exit_code(), EXIT_OK);
    }
}
