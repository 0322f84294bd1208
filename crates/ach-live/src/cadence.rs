//! The rebalance loop's cadence, read from its step log (`runs/ARM-rK-rebalance.log`, one
//! JSON line per event): how many control steps it made, how many of them moved slots, and how
//! long its migrations took.
//!
//! The simulator plans once per step and moves a slot at once. On a live cluster a step's
//! migrations take time and the next step starts after them, so an arm that moves much makes
//! fewer control steps than the run has; the cadence says by how much.

use std::path::{Path, PathBuf};

use crate::error::CadenceError;

/// What a rebalance loop's log says about its cadence.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct LoopCadence {
    /// Control steps the loop made (its `step` events).
    pub control_steps: u64,
    /// Steps that started at least one migration.
    pub steps_with_moves: u64,
    /// Migrations started (one per source, target and step).
    pub migrations: u64,
    /// Keys the migrations reported.
    pub keys_migrated: u64,
    /// Seconds the migrations took, added up.
    pub migrating_s: f64,
}

/// The step events of a rebalance loop's log (JSON lines; every other line, and every other
/// event, left out), parsed once for whatever reads them.
pub fn step_events(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["event"] == "step")
        .collect()
}

impl LoopCadence {
    /// The cadence of the log `log` (lines that are not a step event are skipped).
    pub fn from_log(log: &str) -> LoopCadence {
        LoopCadence::from_steps(&step_events(log))
    }

    /// The cadence of a log's step events ([`step_events`]).
    pub fn from_steps(steps: &[serde_json::Value]) -> LoopCadence {
        let mut cadence = LoopCadence::default();
        for event in steps {
            cadence.add_event(event);
        }
        cadence
    }

    /// Counts one event of the log (anything but a step event changes nothing).
    fn add_event(&mut self, event: &serde_json::Value) {
        if event["event"] != "step" {
            return;
        }
        self.control_steps += 1;
        let migrations = event["outcome"]["migrations"].as_array();
        let migrations = migrations.map(Vec::as_slice).unwrap_or_default();
        if !migrations.is_empty() {
            self.steps_with_moves += 1;
        }
        for migration in migrations {
            self.migrations += 1;
            self.keys_migrated += migration["keys"].as_u64().unwrap_or(0);
            self.migrating_s += migration["millis"].as_f64().unwrap_or(0.0) / 1000.0;
        }
    }

    /// The mean time of one migration in milliseconds, `None` without migrations.
    pub fn mean_migration_ms(&self) -> Option<f64> {
        (self.migrations > 0).then(|| self.migrating_s * 1000.0 / self.migrations as f64)
    }

    /// One line for the arm's notes.
    pub fn note(&self) -> String {
        let mean = self
            .mean_migration_ms()
            .map_or(String::new(), |ms| format!(", {ms:.0} ms each on average"));
        format!(
            "{} control steps, {} of them with moves; {} migrations of {} keys took {:.1} s{mean}",
            self.control_steps,
            self.steps_with_moves,
            self.migrations,
            self.keys_migrated,
            self.migrating_s
        )
    }
}

/// The cadence of every rebalance loop of a run's output folder: its
/// `runs/*-rebalance.log` files in name order, each with the name of its run (`ACH-r0`).
/// redis-cli's logs (its own output, no step events) are left out.
pub fn read_run_folder(folder: &Path) -> Result<Vec<(String, LoopCadence)>, CadenceError> {
    let runs = folder.join("runs");
    let read_dir = |path: &PathBuf| {
        std::fs::read_dir(path).map_err(|source| CadenceError::Read {
            path: path.clone(),
            source,
        })
    };
    let mut logs: Vec<(String, PathBuf)> = Vec::new();
    for entry in read_dir(&runs)? {
        let path = entry
            .map_err(|source| CadenceError::Read {
                path: runs.clone(),
                source,
            })?
            .path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if let Some(run) = name.strip_suffix("-rebalance.log") {
            logs.push((run.to_string(), path));
        }
    }
    if logs.is_empty() {
        return Err(CadenceError::NoLogs { folder: runs });
    }
    logs.sort();
    let mut cadences = Vec::new();
    for (run, path) in logs {
        let text =
            std::fs::read_to_string(&path).map_err(|source| CadenceError::Read { path, source })?;
        let cadence = LoopCadence::from_log(&text);
        if cadence.control_steps > 0 {
            cadences.push((run, cadence));
        }
    }
    Ok(cadences)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: u64, migrations: &[(u64, f64)]) -> String {
        let migrations: Vec<serde_json::Value> = migrations
            .iter()
            .map(|&(keys, millis)| serde_json::json!({"keys": keys, "millis": millis}))
            .collect();
        serde_json::json!({
            "event": "step",
            "step": step,
            "outcome": {"migrations": migrations},
        })
        .to_string()
    }

    #[test]
    fn counts_the_steps_and_adds_up_the_migrations() {
        let log = [
            serde_json::json!({"event": "fix", "step": null}).to_string(),
            step(0, &[]),
            step(1, &[(169, 193.0), (31, 207.0)]),
            "not json".to_string(),
            step(2, &[(100, 300.0)]),
            serde_json::json!({"event": "step", "step": 3, "plan": {}}).to_string(),
        ]
        .join("\n");
        let cadence = LoopCadence::from_log(&log);
        assert_eq!(cadence.control_steps, 4);
        assert_eq!(cadence.steps_with_moves, 2);
        assert_eq!(cadence.migrations, 3);
        assert_eq!(cadence.keys_migrated, 300);
        assert!((cadence.migrating_s - 0.7).abs() < 1e-12);
        assert_eq!(cadence.mean_migration_ms().map(f64::round), Some(233.0));
        assert_eq!(
            cadence.note(),
            "4 control steps, 2 of them with moves; 3 migrations of 300 keys took 0.7 s, \
             233 ms each on average"
        );
    }

    #[test]
    fn a_log_without_steps_has_no_cadence() {
        let cadence = LoopCadence::from_log("Moving slot 1 from A to B\n");
        assert_eq!(cadence, LoopCadence::default());
        assert_eq!(cadence.mean_migration_ms(), None);
    }

    #[test]
    fn reads_the_loop_logs_of_a_run_folder_in_name_order() {
        let folder = std::env::temp_dir().join(format!("ach-cadence-{}", std::process::id()));
        let runs = folder.join("runs");
        std::fs::create_dir_all(&runs).unwrap();
        std::fs::write(runs.join("b-r0-rebalance.log"), step(0, &[(5, 10.0)])).unwrap();
        std::fs::write(runs.join("a-r1-rebalance.log"), step(0, &[])).unwrap();
        std::fs::write(runs.join("redis-cli-r0-rebalance.log"), "Moving slot 1\n").unwrap();
        std::fs::write(runs.join("a-r1.json"), "{}").unwrap();
        let cadences = read_run_folder(&folder).unwrap();
        let names: Vec<&str> = cadences.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["a-r1", "b-r0"]);
        assert_eq!(cadences[1].1.keys_migrated, 5);
        for name in [
            "a-r1-rebalance.log",
            "b-r0-rebalance.log",
            "redis-cli-r0-rebalance.log",
        ] {
            std::fs::remove_file(runs.join(name)).unwrap();
        }
        let error = read_run_folder(&folder).unwrap_err().to_string();
        assert!(error.contains("no *-rebalance.log"), "{error}");
        std::fs::remove_dir_all(&folder).unwrap();
        let error = read_run_folder(&folder).unwrap_err().to_string();
        assert!(error.contains("cannot read"), "{error}");
    }
}
