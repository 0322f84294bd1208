//! The idle part of a master's cpu reading (`--idle-cpu NODE=CORES`).
//!
//! A node uses cpu without any client: the cluster bus, the server's timers and the readings
//! of the rebalancer and its observers. That cost is about the same on every node, whatever
//! slots it owns (about 9 ms of cpu per second per node measured on a local Valkey 9
//! cluster), so moving slots cannot change it. Under a small CPU quota it is a large part of
//! the reading (a fifth of a weak node's quota in the live experiment), and a controller that
//! counts it takes slots off the small nodes that their clients' load does not call for.
//!
//! With a master's idle use `idle` (in cores) and its allowance `a` (the cores its reading
//! counts as 1: `cpu_per_weight` times its relative weight), its cpu reading `c` becomes
//! `max(0, c - b) / (1 - b)` with `b = idle / a`: the use of the part of its allowance that
//! its clients can have. That is the model's `cpu = rho`, the requests over what the node
//! can serve.

use crate::cluster::Snapshot;
use crate::error::Error;

use super::{Named, named};

/// The idle share of every master's allowance (0 for a master no entry names), in the order
/// of `snapshot.masters`, from `--idle-cpu` entries (`NODE=CORES`, NODE an address or an id
/// prefix of at least 4 characters); `relative_weights` are the masters' (a drained master's
/// 0 reads as weight 1, as its readings are taken undivided). Fails, naming the entry, on a
/// node that is no master and on an idle use of the whole allowance or more.
pub fn idle_shares(
    idle_cpu: &[(String, f64)],
    snapshot: &Snapshot,
    relative_weights: &[f64],
    cpu_per_weight: f64,
) -> Result<Vec<f64>, Error> {
    let mut shares = vec![0.0; snapshot.masters.len()];
    for (name, cores) in idle_cpu {
        let index = match named(snapshot, "--idle-cpu", name, *cores)? {
            Named::Master(index) => index,
            // A drained master that became a replica has no reading left to correct.
            Named::Replica => continue,
        };
        let weight = match relative_weights[index] {
            w if w > 0.0 => w,
            _ => 1.0,
        };
        let allowance = cpu_per_weight * weight;
        let share = cores / allowance;
        if !(0.0..1.0).contains(&share) {
            return Err(Error::Input(format!(
                "--idle-cpu {name}={cores}: must be below the node's cpu allowance, {allowance} \
                 cores (its relative weight {weight} times {cpu_per_weight} cores per weight)"
            )));
        }
        shares[index] = share;
    }
    Ok(shares)
}

/// The cpu reading `cpu` (a share of the allowance) without the idle share `idle`: the use of
/// the rest of the allowance, never below 0. A missing reading (NaN) stays missing.
pub fn without_idle(cpu: f64, idle: f64) -> f64 {
    if idle == 0.0 || cpu.is_nan() {
        return cpu;
    }
    ((cpu - idle) / (1.0 - idle)).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{Master, Replica};

    fn snapshot() -> Snapshot {
        let master = |port: u16, id: &str, replicas: Vec<Replica>| Master {
            id: id.repeat(40),
            address: format!("127.0.0.1:{port}"),
            slots: 1,
            replicas,
        };
        let replica = Replica {
            id: "c".repeat(40),
            address: "127.0.0.1:7009".into(),
            flags: Vec::new(),
            link_connected: true,
        };
        Snapshot {
            masters: vec![
                master(7000, "a", vec![replica]),
                master(7001, "b", Vec::new()),
            ],
            owners: Vec::new(),
            open: Vec::new(),
            problems: Vec::new(),
        }
    }

    #[test]
    fn the_idle_share_is_of_each_masters_own_allowance() {
        let idle = [
            ("127.0.0.1:7001".to_string(), 0.01),
            ("aaaa".to_string(), 0.01),
        ];
        // Allowances 0.5 x 0.1 and 1.5 x 0.1 cores.
        let shares = idle_shares(&idle, &snapshot(), &[0.5, 1.5], 0.1).unwrap();
        assert!((shares[0] - 0.2).abs() < 1e-12 && (shares[1] - 0.01 / 0.15).abs() < 1e-12);
        // A drained master reads undivided: its allowance is one weight's.
        let shares = idle_shares(&idle[1..], &snapshot(), &[0.0, 2.0], 0.1).unwrap();
        assert!((shares[0] - 0.1).abs() < 1e-12 && shares[1] == 0.0);
        // A drained master that is a replica now has nothing to correct.
        let replica = [("127.0.0.1:7009".to_string(), 0.01)];
        assert_eq!(
            idle_shares(&replica, &snapshot(), &[1.0, 1.0], 0.1).unwrap(),
            [0.0, 0.0]
        );
    }

    #[test]
    fn an_idle_use_the_node_cannot_have_or_no_master_is_refused_by_name() {
        let at_allowance = [("127.0.0.1:7000".to_string(), 0.05)];
        let error = idle_shares(&at_allowance, &snapshot(), &[0.5, 1.5], 0.1).unwrap_err();
        assert!(
            error.to_string().contains(
                "--idle-cpu 127.0.0.1:7000=0.05: must be below the node's cpu allowance, 0.05 cores"
            ),
            "{error}"
        );
        let unknown = [("127.0.0.1:7005".to_string(), 0.01)];
        let error = idle_shares(&unknown, &snapshot(), &[1.0, 1.0], 0.1).unwrap_err();
        assert!(
            error.to_string().contains("no master \"127.0.0.1:7005\""),
            "{error}"
        );
    }

    #[test]
    fn the_reading_becomes_the_use_of_the_rest_of_the_allowance() {
        assert_eq!(without_idle(0.6, 0.0), 0.6);
        assert!((without_idle(0.6, 0.2) - 0.5).abs() < 1e-12);
        assert_eq!(without_idle(1.0, 0.2), 1.0);
        assert_eq!(without_idle(0.1, 0.2), 0.0);
        assert!(without_idle(f64::NAN, 0.2).is_nan());
    }
}
