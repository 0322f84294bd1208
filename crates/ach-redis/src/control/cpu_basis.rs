//! What a master's cpu part counts: its cpu use over its allowance (the default, less its idle
//! use with `--idle-cpu`), or its requests over its capacity (`--request-capacity
//! NODE=REQUESTS_PER_S`).
//!
//! A server's cpu use is not its load alone: the cluster bus, the timers, the readings of the
//! rebalancer and its observers, the forks and transfers of migrations and the clients' slot
//! map refreshes all take cpu, and under a small CPU quota they are a large and uneven part of
//! the reading. The requests a master answers are what its clients ask of it and nothing else.
//! With its capacity `mu` (the data commands per second it answers at saturation, measured by
//! a benchmark of the workload's mix) its cpu part is `min(1, r / mu)` for `r` data commands
//! per second over the interval (`INFO commandstats`, or the exporter's
//! `redis_commands_total`, without the rebalancer's and operators' commands): the model's
//! `cpu = rho`. A capacity is the node's own, so the reading is not divided by its relative
//! weight again.

use crate::cluster::Snapshot;
use crate::error::Error;

use super::idle::{idle_shares, without_idle};
use super::{Named, named};

/// What one master's cpu part counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CpuBasis {
    /// Its cpu use over its allowance, less this idle share of the allowance.
    Cores {
        /// The idle share of its allowance (0: the whole reading).
        idle_share: f64,
    },
    /// Its data commands per second over this capacity.
    Requests {
        /// The data commands per second it answers at saturation.
        capacity: f64,
    },
}

impl CpuBasis {
    /// A master's `[cpu, memory, latency]` reading as the load tracker takes it: every part
    /// divided by its relative weight (a drained master's, weight 0, taken as it is), then
    /// the cpu part as this basis counts it.
    pub fn weighted(
        &self,
        reading: [f64; 3],
        relative_weight: f64,
        data_ops_per_sec: f64,
    ) -> [f64; 3] {
        let divisor = if relative_weight > 0.0 {
            relative_weight
        } else {
            1.0
        };
        let mut weighted = reading.map(|value| value / divisor);
        weighted[0] = self.cpu_part(weighted[0], data_ops_per_sec);
        weighted
    }

    /// The cpu part from the master's cpu reading (over its allowance, divided by its relative
    /// weight) and its data commands per second; NaN (a missing sample) when the figure it
    /// counts is missing.
    pub fn cpu_part(&self, weighted_cpu: f64, data_ops_per_sec: f64) -> f64 {
        match *self {
            CpuBasis::Cores { idle_share } => without_idle(weighted_cpu, idle_share),
            // `clamp` keeps a missing count missing (`min` would read it as full load).
            CpuBasis::Requests { capacity } => (data_ops_per_sec / capacity).clamp(0.0, 1.0),
        }
    }
}

/// The cpu basis of every master, in the order of `snapshot.masters`, from `--idle-cpu` and
/// `--request-capacity` entries (NODE an address or an id prefix of at least 4 characters; see
/// [`idle_shares`] for the idle entries' rules). Fails, naming the entry, on a capacity of a
/// node that is no master, on a capacity that is not above 0, and on a master given both (a
/// reading of requests has no idle part).
pub fn cpu_bases(
    idle_cpu: &[(String, f64)],
    request_capacity: &[(String, f64)],
    snapshot: &Snapshot,
    relative_weights: &[f64],
    cpu_per_weight: f64,
) -> Result<Vec<CpuBasis>, Error> {
    let idle = idle_shares(idle_cpu, snapshot, relative_weights, cpu_per_weight)?;
    let mut bases: Vec<CpuBasis> = idle
        .into_iter()
        .map(|idle_share| CpuBasis::Cores { idle_share })
        .collect();
    for (name, capacity) in request_capacity {
        let index = match named(snapshot, "--request-capacity", name, *capacity)? {
            Named::Master(index) => index,
            // A drained master that became a replica answers no requests to count.
            Named::Replica => continue,
        };
        if !(capacity.is_finite() && *capacity > 0.0) {
            return Err(Error::Input(format!(
                "--request-capacity {name}={capacity}: the capacity must be a number of \
                 requests per second above 0"
            )));
        }
        if let CpuBasis::Cores { idle_share } = bases[index]
            && idle_share > 0.0
        {
            return Err(Error::Input(format!(
                "--request-capacity {name}={capacity}: {} also has an --idle-cpu; a reading \
                 of requests over capacity has no idle part, give one of the two",
                snapshot.masters[index].address
            )));
        }
        bases[index] = CpuBasis::Requests {
            capacity: *capacity,
        };
    }
    Ok(bases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Master;

    fn snapshot() -> Snapshot {
        let master = |port: u16, id: &str| Master {
            id: id.repeat(40),
            address: format!("127.0.0.1:{port}"),
            slots: 1,
            replicas: Vec::new(),
        };
        Snapshot {
            masters: vec![master(7000, "a"), master(7001, "b")],
            owners: Vec::new(),
            open: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn entry(name: &str, value: f64) -> Vec<(String, f64)> {
        vec![(name.to_string(), value)]
    }

    #[test]
    fn a_capacity_makes_the_cpu_part_the_requests_over_it() {
        let bases = cpu_bases(&[], &entry("bbbb", 2000.0), &snapshot(), &[1.0, 1.0], 1.0).unwrap();
        assert_eq!(bases[0], CpuBasis::Cores { idle_share: 0.0 });
        assert_eq!(bases[1], CpuBasis::Requests { capacity: 2000.0 });
        // The cpu reading does not count under a capacity, the requests do not without one.
        assert_eq!(bases[1].cpu_part(0.9, 500.0), 0.25);
        assert_eq!(bases[0].cpu_part(0.9, 500.0), 0.9);
        // Requests beyond the capacity read as full load, as the model clips rho; a missing
        // count is a missing sample.
        assert_eq!(bases[1].cpu_part(0.1, 3000.0), 1.0);
        assert!(bases[1].cpu_part(0.1, f64::NAN).is_nan());
        // Weighting divides every part but a capacity's cpu part; a drained master (weight 0)
        // reads as it is.
        assert_eq!(
            bases[0].weighted([0.4, 0.2, 0.1], 2.0, 500.0),
            [0.2, 0.1, 0.05]
        );
        assert_eq!(
            bases[1].weighted([0.4, 0.2, 0.1], 2.0, 500.0),
            [0.25, 0.1, 0.05]
        );
        assert_eq!(
            bases[0].weighted([0.4, 0.2, 0.1], 0.0, 500.0),
            [0.4, 0.2, 0.1]
        );
    }

    #[test]
    fn bad_capacities_are_refused_naming_the_entry() {
        let fails = |idle: &[(String, f64)], capacity: &[(String, f64)]| -> String {
            match cpu_bases(idle, capacity, &snapshot(), &[1.0, 1.0], 1.0) {
                Err(Error::Input(message)) => message,
                other => panic!("{other:?}"),
            }
        };
        assert!(
            fails(&[], &entry("127.0.0.1:7000", 0.0))
                .contains("--request-capacity 127.0.0.1:7000=0: the capacity must be")
        );
        assert!(
            fails(&[], &entry("127.0.0.1:9999", 10.0))
                .contains("--request-capacity 127.0.0.1:9999=10: no master")
        );
        let both = fails(
            &entry("127.0.0.1:7000", 0.01),
            &entry("127.0.0.1:7000", 10.0),
        );
        assert!(both.contains("also has an --idle-cpu"), "{both}");
    }
}
