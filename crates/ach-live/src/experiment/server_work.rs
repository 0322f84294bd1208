//! What each server counted of its own work over the workload: its CPU time (its own and its
//! forked children's, such as the snapshot child of an atomic slot migration), its forks, and
//! per command the calls and the microseconds the server spent in them (`INFO cpu`, `stats`
//! and `commandstats`, read before the clients start and after they stop; the differences).
//!
//! A command's microseconds are wall time inside the command: on a master whose CPU quota ran
//! out they include the time it waited for the next period, so they rank the commands of one
//! master but overstate a throttled master's CPU.

use std::collections::BTreeMap;

use ach_redis::cluster::{Cluster, Snapshot};
use ach_redis::telemetry::parse_info;

use crate::error::ExperimentError;

/// One command's share of a server's work.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CommandWork {
    /// The command as `INFO commandstats` names it (`get`, `cluster|slots`, ...).
    pub command: String,
    /// Calls.
    pub calls: u64,
    /// Microseconds spent in the calls.
    pub usec: u64,
}

/// One server's work over the workload.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ServerWork {
    /// CPU seconds of the server process (`used_cpu_sys + used_cpu_user`).
    pub cpu_s: f64,
    /// CPU seconds of its forked children that ended (`used_cpu_*_children`).
    pub children_cpu_s: f64,
    /// Forks (`total_forks`).
    pub forks: u64,
    /// Every command called, the most microseconds first.
    pub commands: Vec<CommandWork>,
}

/// One server's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct ServerCounters {
    cpu_s: f64,
    children_cpu_s: f64,
    forks: u64,
    /// (calls, usec) per command.
    commands: BTreeMap<String, (u64, u64)>,
}

impl ServerCounters {
    /// The counters in the fields of `INFO cpu`, `stats` and `commandstats`.
    pub(super) fn parse(info: &str) -> ServerCounters {
        let fields = parse_info(info);
        let number = |name: &str| {
            fields
                .get(name)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let commands = fields
            .iter()
            .filter_map(|(name, value)| {
                let command = name.strip_prefix("cmdstat_")?;
                let figure = |key: &str| {
                    value
                        .split(',')
                        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
                        .and_then(|v| v.parse::<u64>().ok())
                };
                Some((command.to_string(), (figure("calls")?, figure("usec")?)))
            })
            .collect();
        ServerCounters {
            cpu_s: number("used_cpu_sys") + number("used_cpu_user"),
            children_cpu_s: number("used_cpu_sys_children") + number("used_cpu_user_children"),
            forks: number("total_forks") as u64,
            commands,
        }
    }

    /// The work between `self` (before) and `after`.
    pub(super) fn work_until(&self, after: &ServerCounters) -> ServerWork {
        let mut commands: Vec<CommandWork> = after
            .commands
            .iter()
            .map(|(command, &(calls, usec))| {
                let (calls_before, usec_before) =
                    self.commands.get(command).copied().unwrap_or((0, 0));
                CommandWork {
                    command: command.clone(),
                    calls: calls.saturating_sub(calls_before),
                    usec: usec.saturating_sub(usec_before),
                }
            })
            .filter(|work| work.calls > 0)
            .collect();
        commands.sort_by(|a, b| b.usec.cmp(&a.usec).then(a.command.cmp(&b.command)));
        ServerWork {
            cpu_s: (after.cpu_s - self.cpu_s).max(0.0),
            children_cpu_s: (after.children_cpu_s - self.children_cpu_s).max(0.0),
            forks: after.forks.saturating_sub(self.forks),
            commands,
        }
    }
}

/// Every master's counters, by address.
pub(super) fn read_counters(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
) -> Result<BTreeMap<String, ServerCounters>, ExperimentError> {
    let mut counters = BTreeMap::new();
    for master in &snapshot.masters {
        let info: String = cluster.query(
            &master.address,
            redis::cmd("INFO")
                .arg("cpu")
                .arg("stats")
                .arg("commandstats"),
        )?;
        counters.insert(master.address.clone(), ServerCounters::parse(&info));
    }
    Ok(counters)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:0.5\r\n\
        used_cpu_sys_children:0.000\r\nused_cpu_user_children:0.000\r\n# Stats\r\n\
        total_forks:2\r\n# Commandstats\r\n\
        cmdstat_get:calls=10,usec=30,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=4,usec=800,usec_per_call=200.00,rejected_calls=0,failed_calls=0\r\n";

    const AFTER: &str = "# CPU\r\nused_cpu_sys:2.0\r\nused_cpu_user:1.25\r\n\
        used_cpu_sys_children:0.010\r\nused_cpu_user_children:0.030\r\n# Stats\r\n\
        total_forks:5\r\n# Commandstats\r\n\
        cmdstat_get:calls=110,usec=330,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=4,usec=800,usec_per_call=200.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_cluster|slots:calls=3,usec=1500,usec_per_call=500.00,rejected_calls=0,failed_calls=0\r\n";

    #[test]
    fn the_work_is_the_difference_of_the_counters_most_time_first() {
        let before = ServerCounters::parse(BEFORE);
        let work = before.work_until(&ServerCounters::parse(AFTER));
        assert!((work.cpu_s - 1.25).abs() < 1e-12);
        assert!((work.children_cpu_s - 0.04).abs() < 1e-12);
        assert_eq!(work.forks, 3);
        let commands: Vec<(&str, u64, u64)> = work
            .commands
            .iter()
            .map(|c| (c.command.as_str(), c.calls, c.usec))
            .collect();
        // `info` was not called in between: left out.
        assert_eq!(commands, [("cluster|slots", 3, 1500), ("get", 100, 300)]);
    }

    #[test]
    fn a_reply_without_the_fields_counts_nothing() {
        let nothing = ServerCounters::parse("# CPU\r\n");
        assert_eq!(nothing, ServerCounters::default());
        assert_eq!(nothing.work_until(&nothing), ServerWork::default());
    }
}
