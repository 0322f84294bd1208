//! The arm's cluster: started under CPU quotas, loaded with version 0 of every key, and every
//! key checked at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use ach_redis::cluster::{Cluster, Snapshot};
use ach_redis::local::{LocalCluster, ServerKind};

use super::{LiveConfig, NodeInfo};
use crate::cgroup::{CpuLimiter, CpuQuota};
use crate::error::ExperimentError;
use crate::workload::{self, key_name};

/// A local cluster whose servers run under CPU quotas. Field order matters: the servers are
/// stopped (dropped) before their cgroups are removed.
pub(super) struct LiveCluster {
    pub(super) cluster: LocalCluster,
    quotas: Vec<CpuQuota>,
    pub(super) nodes: Vec<NodeInfo>,
}

/// Starts `config.nodes` masters and puts each under the quota of its class.
pub(super) fn start_cluster(
    config: &LiveConfig,
    kind: ServerKind,
    limiter: &CpuLimiter,
) -> Result<LiveCluster, ExperimentError> {
    let cluster = LocalCluster::start_of(kind, config.nodes)?;
    let classes = config.classes();
    let mut quotas = Vec::new();
    let mut nodes = Vec::new();
    for (server, class) in cluster.servers().iter().zip(&classes) {
        let quota_us = match limiter {
            CpuLimiter::Unavailable(_) => None,
            _ => {
                let name = format!("ach-live-{}-{}", std::process::id(), server.port());
                let quota = limiter.limit(
                    &name,
                    server.pid(),
                    class.capacity() * config.cpu_per_strong_node,
                )?;
                let us = quota.quota_us();
                quotas.push(quota);
                Some(us)
            }
        };
        nodes.push(NodeInfo {
            address: server.address(),
            class: *class,
            initial_slots: None,
            quota_us,
            throttling: None,
            idle_cpu_cores: None,
            request_capacity: None,
            p50_ms: None,
            p99_ms: None,
            server_work: None,
        });
    }
    Ok(LiveCluster {
        cluster,
        quotas,
        nodes,
    })
}

impl LiveCluster {
    /// Reads every node's CPU throttling counters into its description.
    pub(super) fn read_throttling(&mut self) {
        for (node, server) in self.nodes.iter_mut().zip(self.cluster.servers()) {
            node.throttling = self
                .quotas
                .iter()
                .find(|q| q.pid() == server.pid())
                .and_then(|q| q.throttling());
        }
    }
}

/// A connection to the cluster through `seed`.
pub(super) fn connect(seed: &str) -> Result<Cluster, ExperimentError> {
    Ok(Cluster::connect(seed, Duration::from_secs(10))?)
}

/// The keys `0..keys` grouped by the index of their owner in `snapshot`.
fn keys_per_owner(snapshot: &Snapshot, keys: usize) -> Result<Vec<Vec<usize>>, ExperimentError> {
    let mut per_node: Vec<Vec<usize>> = vec![Vec::new(); snapshot.masters.len()];
    for i in 0..keys {
        let slot = ach_redis::slot::key_slot(key_name(i).as_bytes());
        let owner = snapshot.owners[usize::from(slot)].ok_or(ExperimentError::SlotWithoutOwner)?;
        per_node[owner].push(i);
    }
    Ok(per_node)
}

/// Writes version 0 of every key, pipelined per owner.
pub(super) fn load_keys(
    cluster: &mut Cluster,
    snapshot: &Snapshot,
    keys: usize,
) -> Result<(), ExperimentError> {
    for (node, keys) in keys_per_owner(snapshot, keys)?.iter().enumerate() {
        let address = snapshot.masters[node].address.clone();
        for chunk in keys.chunks(workload::LOAD_BATCH) {
            cluster.pipeline::<()>(&address, &workload::initial_load(chunk), "SET")?;
        }
    }
    Ok(())
}

/// Keys missing and keys holding another value than the last one written, at the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct KeyCheck {
    pub(super) lost: u64,
    pub(super) stale: u64,
}

/// Reads every key from its owner and counts the missing ones and those that do not hold the
/// last value written.
pub(super) fn check_keys(
    cluster: &mut Cluster,
    keys: usize,
    versions: &BTreeMap<usize, u64>,
) -> Result<KeyCheck, ExperimentError> {
    let snapshot = cluster.snapshot()?;
    if !snapshot.healthy() {
        return Err(ExperimentError::UnhealthyAtCheck(snapshot.problems.clone()));
    }
    let mut check = KeyCheck::default();
    for (node, keys) in keys_per_owner(&snapshot, keys)?.iter().enumerate() {
        let address = snapshot.masters[node].address.clone();
        for chunk in keys.chunks(1000) {
            let mut pipeline = redis::pipe();
            for &i in chunk {
                pipeline.cmd("GET").arg(key_name(i));
            }
            let values: Vec<Option<String>> = cluster.pipeline(&address, &pipeline, "GET")?;
            for (&i, value) in chunk.iter().zip(values) {
                let expected = workload::value(i, versions.get(&i).copied().unwrap_or(0));
                match value {
                    None => check.lost += 1,
                    Some(value) if value != expected => check.stale += 1,
                    Some(_) => {}
                }
            }
        }
    }
    Ok(check)
}
