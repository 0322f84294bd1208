//! One arm in one repeat, in its phases: a loaded cluster, the workload and the rebalancer
//! started, one measurement per step, everything stopped and settled, every key checked, and
//! the clients' latencies summarised.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ach_redis::cluster::{Cluster, Snapshot};
use ach_redis::control::imbalance;
use ach_redis::local::ServerKind;
use ach_redis::migrate::{MigrationOptions, fix};

use super::cluster::{LiveCluster, check_keys, connect, load_keys, start_cluster};
use super::observer::{CpuRules, IdleReaders, Observation, Observer, idle_cpu};
use super::outcome::{self, percentile};
use super::rebalancer::{Rebalancer, RebalancerSetup, finish_rebalancer, start_rebalancer};
use super::server_work::read_counters;
use super::{Arm, ArmRun, CpuReading, LiveConfig, NodeInfo, StepRecord};
use crate::calibrate::{ServiceRate, demand_per_step};
use crate::cgroup::CpuLimiter;
use crate::error::ExperimentError;
use crate::routes::ClientRoutes;
use crate::truth::{GroundTruth, NO_OWNER, Schedule, ground_truth, settle_step};
use crate::workload::{self, ClientReport, SenderShare, Shared, WorkloadConfig};

/// What every arm of a run shares: the server, the CPU limiter and the measured service
/// rates.
pub(crate) struct ArmSetup<'a> {
    pub(crate) kind: ServerKind,
    pub(crate) limiter: &'a CpuLimiter,
    pub(crate) service_rates: &'a [ServiceRate],
}

/// Runs `arm` of repeat `repeat` on a fresh cluster; `user_stop` ends it early.
pub(super) fn run_arm(
    config: &LiveConfig,
    arm: Arm,
    repeat: u32,
    setup: &ArmSetup<'_>,
    user_stop: &AtomicBool,
    progress: &mut dyn Write,
) -> Result<ArmRun, ExperimentError> {
    let limiter = setup.limiter;
    let mut loaded = LoadedCluster::start(config, setup.kind, limiter)?;
    let workload = config.workload(repeat);
    let hot = hot_keys(config, &loaded, &workload)?;
    let cpu = cpu_rules(config, &mut loaded, limiter, setup.service_rates)?;
    let mut observer = Observer::new(&mut loaded.cluster, &loaded.snapshot, &loaded.weights, &cpu)?;
    let counters_before = read_counters(&mut loaded.cluster, &loaded.snapshot)?;
    let running = start_workload(config, &arm, &loaded, &workload, hot.clone(), &cpu)?;
    let mut measured = measure(
        config,
        &arm,
        &mut loaded,
        &mut observer,
        &running.shared,
        StopRequest {
            user_stop,
            progress,
        },
    );
    let settled = settle(running, &mut loaded.cluster, &mut measured)?;
    let counters_after = read_counters(&mut loaded.cluster, &loaded.snapshot)?;
    let clients = ClientTotals::gather(settled.reports, config.steps());
    let keys = check_keys(&mut loaded.cluster, config.keys, &clients.versions)?;
    loaded.live.read_throttling();
    let mut nodes = latency_statistics(
        &mut measured.records,
        &loaded.nodes_in_snapshot_order(),
        &clients,
    );
    add_node_figures(&mut nodes, &cpu, (&counters_before, &counters_after));
    let interval_s = config.interval_ms as f64 / 1000.0;
    let schedule = Schedule::of(&workload, &hot, config.steps(), interval_s);
    let truth = arm_ground_truth(config, setup, &nodes, &schedule, &measured)?;
    fill_truth(&mut measured.records, &truth, config.warmup());
    let d_bar_telemetry = d_bar(&measured.records, config.warmup());
    let outcomes = outcome::Outcomes::of(
        &measured.records,
        &clients.latencies,
        &schedule,
        &outcome::phases(&workload, config.steps()),
        interval_s,
    );
    drop(loaded);
    Ok(ArmRun {
        algorithm: arm.name().into(),
        repeat,
        seed: workload.seed,
        d_bar_true: truth.d_bar_true,
        cv_bar_true: truth.cv_bar_true,
        d_bar_telemetry,
        keys_moved: measured.moved,
        stale_reads: clients.stale_reads,
        lost_keys: keys.lost,
        stale_keys: keys.stale,
        outcome: outcomes.whole,
        phases: outcomes.phases,
        migration_s: outcomes.migration_s,
        rebalancing: outcomes.rebalancing,
        settle_s: settle_seconds(&truth, interval_s),
        late_requests: clients.late,
        nodes,
        steps: measured.records,
        error_samples: clients.error_samples,
        rebalancer_notes: settled.notes,
        rebalance_log: settled.rebalance_log,
        latencies: clients.latencies,
    })
}

/// The arm's ground truth: the demand the schedule sent each node in every step, by the slot
/// map the arm had at that step, over the node's measured service rate.
fn arm_ground_truth(
    config: &LiveConfig,
    setup: &ArmSetup<'_>,
    nodes: &[NodeInfo],
    schedule: &Schedule,
    measured: &Measured,
) -> Result<GroundTruth, ExperimentError> {
    let interval_s = config.interval_ms as f64 / 1000.0;
    let service: Vec<f64> = nodes
        .iter()
        .map(|n| demand_per_step(setup.service_rates, n.class, interval_s))
        .collect();
    Ok(ground_truth(
        schedule,
        &measured.owners_per_step,
        &service,
        config.warmup(),
    )?)
}

/// The time in seconds after which the true imbalance stays within a tenth of its final
/// level ([`settle_step`]).
fn settle_seconds(truth: &GroundTruth, interval_s: f64) -> Option<f64> {
    let d_true: Vec<f64> = truth.steps.iter().map(|s| s.d_true).collect();
    settle_step(&d_true, 0.1).map(|step| step as f64 * interval_s)
}

/// Each node's idle cpu and request capacity from `cpu`, and the work its server counted
/// between the counters read `(before, after)` the clients ran.
fn add_node_figures(
    nodes: &mut [NodeInfo],
    cpu: &CpuRules,
    (before, after): (&ServerCounterMap, &ServerCounterMap),
) {
    for node in nodes {
        let named = |entries: &[(String, f64)]| {
            entries
                .iter()
                .find(|(address, _)| *address == node.address)
                .map(|&(_, value)| value)
        };
        node.idle_cpu_cores = named(&cpu.idle_cpu);
        node.request_capacity = named(&cpu.request_capacity);
        node.server_work = before
            .get(&node.address)
            .zip(after.get(&node.address))
            .map(|(before, after)| before.work_until(after));
    }
}

/// Every server's counters by its address.
type ServerCounterMap = std::collections::BTreeMap<String, super::server_work::ServerCounters>;

/// A started cluster with every key loaded, the measurement's connection to it and what the
/// arm needs to know about it. Field order matters: the connection closes before the servers
/// stop.
struct LoadedCluster {
    cluster: Cluster,
    live: LiveCluster,
    seed: String,
    /// The first snapshot (masters sorted by address: node indices follow it).
    snapshot: Snapshot,
    /// `(address, capacity)` of every master, in start order.
    weights: Vec<(String, f64)>,
    /// For every master of the snapshot, its index in start order.
    order: Vec<usize>,
    /// Keys per slot (keys are neither created nor deleted during the workload).
    slot_keys: Vec<u64>,
}

impl LoadedCluster {
    fn start(
        config: &LiveConfig,
        kind: ServerKind,
        limiter: &CpuLimiter,
    ) -> Result<LoadedCluster, ExperimentError> {
        let mut live = start_cluster(config, kind, limiter)?;
        let seed = live.cluster.seed();
        let mut cluster = connect(&seed)?;
        let snapshot = cluster.snapshot()?;
        if kind == ServerKind::Valkey {
            // Per-slot load for the controllers (the valkey backend reads CLUSTER SLOT-STATS).
            cluster
                .backend()
                .enable_slot_stats(&mut cluster, &snapshot)?;
        }
        load_keys(&mut cluster, &snapshot, config.keys)?;
        let weights: Vec<(String, f64)> = live
            .nodes
            .iter()
            .map(|n| (n.address.clone(), n.class.capacity()))
            .collect();
        let order = snapshot
            .masters
            .iter()
            .map(|m| {
                live.nodes
                    .iter()
                    .position(|n| n.address == m.address)
                    .ok_or_else(|| ExperimentError::UnknownMaster(m.address.clone()))
            })
            .collect::<Result<Vec<usize>, _>>()?;
        for (index, &node) in order.iter().enumerate() {
            live.nodes[node].initial_slots = slot_range(&snapshot, index);
        }
        let slot_keys = cluster.key_counts(&snapshot)?;
        Ok(LoadedCluster {
            cluster,
            live,
            seed,
            snapshot,
            weights,
            order,
            slot_keys,
        })
    }

    /// The masters' descriptions in snapshot (address) order.
    fn nodes_in_snapshot_order(&self) -> Vec<NodeInfo> {
        self.order
            .iter()
            .map(|&i| self.live.nodes[i].clone())
            .collect()
    }
}

/// The first and last slot the master of index `master` owns in `snapshot`, when they are
/// one range.
fn slot_range(snapshot: &Snapshot, master: usize) -> Option<(u16, u16)> {
    let owned = |slot: &usize| snapshot.owners[*slot] == Some(master);
    let first = (0..snapshot.owners.len()).find(owned)?;
    let last = (0..snapshot.owners.len()).rfind(owned)?;
    (first..=last)
        .all(|slot| owned(&slot))
        .then_some((first as u16, last as u16))
}

/// The hot keys: those in the initial slot range of the first medium node (a weak one if
/// none).
fn hot_keys(
    config: &LiveConfig,
    loaded: &LoadedCluster,
    workload: &WorkloadConfig,
) -> Result<Vec<usize>, ExperimentError> {
    let hot = &loaded.live.nodes[config.hot_node()];
    let range = hot
        .initial_slots
        .ok_or_else(|| ExperimentError::HotNodeOwnsNoSlot(hot.address.clone()))?;
    Ok(workload.hot_keys_in(range))
}

/// How the arm's observer and rebalancer read a master's cpu part, as `config.cpu_reading`
/// says: each master's data commands over its class's service rate, or its cpu use less the
/// idle use read now for `config.idle_cpu_s`.
fn cpu_rules(
    config: &LiveConfig,
    loaded: &mut LoadedCluster,
    limiter: &CpuLimiter,
    service_rates: &[ServiceRate],
) -> Result<CpuRules, ExperimentError> {
    let cpu_per_weight = cpu_per_weight(config, limiter);
    match config.cpu_reading {
        CpuReading::Requests => {
            let request_capacity = loaded
                .live
                .nodes
                .iter()
                .map(|node| {
                    let rate = service_rates
                        .iter()
                        .find(|r| r.class == node.class)
                        .map_or(f64::NAN, |r| r.requests_per_s);
                    (node.address.clone(), rate)
                })
                .collect();
            Ok(CpuRules {
                request_capacity,
                ..CpuRules::cores(cpu_per_weight)
            })
        }
        CpuReading::Cores => Ok(CpuRules {
            idle_cpu: idle_cpu(
                &mut loaded.cluster,
                &loaded.snapshot,
                IdleReaders {
                    seconds: config.idle_cpu_s,
                    interval: Duration::from_millis(config.interval_ms),
                    weights: &loaded.weights,
                    cpu_per_weight,
                },
            )?,
            ..CpuRules::cores(cpu_per_weight)
        }),
    }
}

/// The cpu of a node of relative weight 1: the mean quota, or the whole machine without
/// quotas.
fn cpu_per_weight(config: &LiveConfig, limiter: &CpuLimiter) -> f64 {
    match limiter {
        CpuLimiter::Unavailable(_) => 1.0,
        _ => {
            let classes = config.classes();
            let mean = classes.iter().map(|c| c.capacity()).sum::<f64>() / classes.len() as f64;
            config.cpu_per_strong_node * mean
        }
    }
}

/// The workload's clients and the arm's rebalancer, running.
struct Running {
    shared: Arc<Shared>,
    rebalancer: Rebalancer,
    rebalance_stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<ClientReport>>,
}

/// Starts the rebalancer, then the client threads.
fn start_workload(
    config: &LiveConfig,
    arm: &Arm,
    loaded: &LoadedCluster,
    workload: &WorkloadConfig,
    hot: Vec<usize>,
    cpu: &CpuRules,
) -> Result<Running, ExperimentError> {
    let interval = Duration::from_millis(config.interval_ms);
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        owners: loaded
            .snapshot
            .owners
            .iter()
            .map(|o| AtomicU8::new(o.unwrap_or(0) as u8))
            .collect(),
        started: Instant::now(),
        interval,
    });
    let rebalance_stop = Arc::new(AtomicBool::new(false));
    let security = loaded.live.cluster.security().harness();
    let rebalancer = start_rebalancer(
        arm,
        &RebalancerSetup {
            seed: &loaded.seed,
            weights: &loaded.weights,
            snapshot: &loaded.snapshot,
            steps: config.steps(),
            interval,
            cpu,
            security: &security,
            slot_stats: config.slot_stats_reading(),
            slot_split: config.slot_split,
            ach: &config.ach_config(),
            telemetry: config.controllers_telemetry(),
            atomic_from_keys: config.atomic_from_keys,
        },
        Arc::clone(&rebalance_stop),
    )?;
    let count = config.senders_per_client;
    // Each client starts with the slot map at hand, as one `CLUSTER SLOTS` would give it.
    let addresses: Vec<String> = loaded
        .snapshot
        .masters
        .iter()
        .map(|m| m.address.clone())
        .collect();
    let routes: Vec<Arc<ClientRoutes>> = (0..config.clients)
        .map(|_| {
            Arc::new(ClientRoutes::new(
                addresses.clone(),
                &loaded.snapshot.owners,
            ))
        })
        .collect();
    let clients = (0..config.clients)
        .flat_map(|client| (0..count).map(move |index| (client, SenderShare { index, count })))
        .map(|(client, share)| {
            let workload = workload.clone();
            let hot = hot.clone();
            let routes = Arc::clone(&routes[client]);
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                workload::run_client(&workload, client, share, &hot, routes, shared)
            })
        })
        .collect();
    Ok(Running {
        shared,
        rebalancer,
        rebalance_stop,
        clients,
    })
}

/// The user's request to stop, and where progress goes.
struct StopRequest<'a> {
    user_stop: &'a AtomicBool,
    progress: &'a mut dyn Write,
}

/// What the steps measured.
struct Measured {
    records: Vec<StepRecord>,
    /// The owner of every slot at the last observation.
    owners: Vec<Option<usize>>,
    /// Keys in slots that changed owner so far.
    moved: u64,
    /// The slot map at the end of every step (the observation closing it), owner indices in
    /// snapshot order ([`NO_OWNER`] for none); the last map again when an observation failed.
    owners_per_step: Vec<Vec<u8>>,
}

impl Measured {
    /// Takes the owners an observation saw: each slot that changed to a known owner counts its
    /// keys as moved and is passed on to the clients (`shared`).
    fn follow_owners(&mut self, owners: &[Option<usize>], slot_keys: &[u64], shared: &Shared) {
        for (slot, owner) in owners.iter().enumerate() {
            if *owner != self.owners[slot]
                && let Some(owner) = owner
            {
                self.moved += slot_keys[slot];
                self.owners[slot] = Some(*owner);
                shared.owners[slot].store(*owner as u8, Ordering::Relaxed);
            }
        }
    }

    /// Ends a step's slot map: the owners seen last, in snapshot order.
    fn close_slot_map(&mut self) {
        let map = self
            .owners
            .iter()
            .map(|o| o.map_or(NO_OWNER, |o| o as u8))
            .collect();
        self.owners_per_step.push(map);
    }
}

/// Sleeps until `due`, in naps of at most 50 ms, or until the user asks to stop.
fn sleep_until(due: Instant, user_stop: &AtomicBool) {
    while Instant::now() < due {
        if user_stop.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep((due - Instant::now()).min(Duration::from_millis(50)));
    }
}

/// One observation per step until the arm's duration or the user's stop; slot owners seen
/// changing are counted as moved keys and passed on to the clients.
fn measure(
    config: &LiveConfig,
    arm: &Arm,
    loaded: &mut LoadedCluster,
    observer: &mut Observer,
    shared: &Shared,
    stop: StopRequest<'_>,
) -> Measured {
    let StopRequest {
        user_stop,
        progress,
    } = stop;
    let interval = shared.interval;
    let mut measured = Measured {
        records: Vec::new(),
        owners: loaded.snapshot.owners.clone(),
        moved: 0,
        owners_per_step: Vec::new(),
    };
    for t in 0..config.steps() {
        sleep_until(shared.started + interval * (t + 1), user_stop);
        if user_stop.load(Ordering::SeqCst) {
            let _ = writeln!(progress, "  stopped by request at step {t}");
            break;
        }
        let (loads, readings, d) = match observer.observe(&mut loaded.cluster) {
            Ok(Observation {
                snapshot: now,
                loads,
                readings,
            }) => {
                measured.follow_owners(&now.owners, &loaded.slot_keys, shared);
                let d = imbalance(&loads);
                (loads, readings, d.is_finite().then_some(d))
            }
            Err(_) => (Vec::new(), Vec::new(), None),
        };
        measured.close_slot_map();
        let _ = writeln!(
            progress,
            "  {} t={:>3}s/{}s  D={}  keys moved {}",
            arm.name(),
            (t + 1) as f64 * interval.as_secs_f64(),
            config.duration_s,
            d.map_or("  n/a ".to_string(), |d| format!("{d:.4}")),
            measured.moved
        );
        measured.records.push(StepRecord {
            t,
            warmup: t < config.warmup(),
            d_true: f64::NAN,
            true_loads: Vec::new(),
            demand_over_capacity: Vec::new(),
            cv_true: f64::NAN,
            offered: 0,
            telemetry_loads: loads,
            telemetry_readings: readings,
            d_telemetry: d,
            keys_moved: measured.moved,
            client_errors: 0,
            p50_ms: Vec::new(),
            p99_ms: Vec::new(),
        });
    }
    measured
}

/// What the arm left once everything stopped.
struct Settled {
    reports: Vec<ClientReport>,
    notes: Vec<String>,
    rebalance_log: String,
}

/// Stops the clients and the rebalancer, closes the slots a stopped migration left open and
/// counts the moves of the final layout (redis-cli may have finished after the last step).
fn settle(
    running: Running,
    cluster: &mut Cluster,
    measured: &mut Measured,
) -> Result<Settled, ExperimentError> {
    running.shared.stop.store(true, Ordering::SeqCst);
    let reports = running
        .clients
        .into_iter()
        .map(|h| h.join().map_err(|_| ExperimentError::ClientPanicked))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut notes, rebalance_log) = finish_rebalancer(running.rebalancer, &running.rebalance_stop);
    let fixed = fix(cluster, &MigrationOptions::default())?;
    if !fixed.is_empty() {
        notes.push(format!(
            "{} open slots closed by fix after the arm",
            fixed.len()
        ));
    }
    let final_snapshot = cluster.snapshot()?;
    let slot_keys = cluster.key_counts(&final_snapshot)?;
    for (slot, owner) in final_snapshot.owners.iter().enumerate() {
        if *owner != measured.owners[slot] {
            measured.moved += slot_keys[slot];
        }
    }
    Ok(Settled {
        reports,
        notes,
        rebalance_log,
    })
}

/// The clients' reports added up.
struct ClientTotals {
    /// The last version written of every key written.
    versions: BTreeMap<usize, u64>,
    /// `(step, node, microseconds)` of every request answered.
    latencies: Vec<(u32, u8, f32)>,
    errors: u64,
    stale_reads: u64,
    requests: u64,
    error_samples: Vec<String>,
    /// Client errors per step (the last entry also takes those after the last step).
    errors_per_step: Vec<u32>,
    /// Requests sent more than a step late.
    late: u64,
}

impl ClientTotals {
    fn gather(reports: Vec<ClientReport>, steps: u32) -> ClientTotals {
        let mut totals = ClientTotals {
            versions: BTreeMap::new(),
            latencies: Vec::new(),
            errors: 0,
            stale_reads: 0,
            requests: 0,
            error_samples: Vec::new(),
            errors_per_step: vec![0u32; steps as usize + 1],
            late: 0,
        };
        for report in reports {
            totals.versions.extend(report.versions);
            totals.errors += report.errors;
            totals.stale_reads += report.stale_reads;
            totals.requests += report.requests;
            totals.late += report.late;
            totals.error_samples.extend(report.error_samples);
            for (step, count) in report.errors_per_step.iter().enumerate() {
                let step = step.min(totals.errors_per_step.len() - 1);
                totals.errors_per_step[step] += count;
            }
            totals.latencies.extend(report.latencies);
        }
        totals
    }
}

/// Fills every step's client errors and per-master latency percentiles; returns `nodes` with
/// their percentiles over the run.
fn latency_statistics(
    records: &mut [StepRecord],
    nodes: &[NodeInfo],
    clients: &ClientTotals,
) -> Vec<NodeInfo> {
    let masters = nodes.len();
    let mut per_step: BTreeMap<(u32, u8), Vec<f32>> = BTreeMap::new();
    let mut per_node: Vec<Vec<f32>> = vec![Vec::new(); masters];
    for &(step, node, micros) in &clients.latencies {
        per_step.entry((step, node)).or_default().push(micros);
        per_node[usize::from(node).min(masters - 1)].push(micros);
    }
    for values in per_step.values_mut().chain(per_node.iter_mut()) {
        values.sort_by(f32::total_cmp);
    }
    for record in records.iter_mut() {
        record.client_errors = clients.errors_per_step[record.t as usize];
        for node in 0..masters {
            let values = per_step.get(&(record.t, node as u8)).map_or(&[][..], |v| v);
            record.p50_ms.push(percentile(values, 0.5));
            record.p99_ms.push(percentile(values, 0.99));
        }
    }
    let mut nodes = nodes.to_vec();
    for (node, values) in nodes.iter_mut().zip(&per_node) {
        node.p50_ms = percentile(values, 0.5);
        node.p99_ms = percentile(values, 0.99);
    }
    nodes
}

/// Copies the ground truth of every step into its record.
fn fill_truth(records: &mut [StepRecord], truth: &GroundTruth, warmup: u32) {
    for (record, step) in records.iter_mut().zip(&truth.steps) {
        record.warmup = record.t < warmup;
        record.d_true = step.d_true;
        record.true_loads.clone_from(&step.loads);
        record
            .demand_over_capacity
            .clone_from(&step.demand_over_capacity);
        record.cv_true = step.cv;
        record.offered = step.offered;
    }
}

/// The mean of the INFO composite's `D(t)` after the warm-up (NaN when no step after it was
/// observed).
fn d_bar(records: &[StepRecord], warmup: u32) -> f64 {
    let measured: Vec<f64> = records
        .iter()
        .filter(|r| r.t >= warmup)
        .filter_map(|r| r.d_telemetry)
        .collect();
    if measured.is_empty() {
        f64::NAN
    } else {
        measured.iter().sum::<f64>() / measured.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d_bar_leaves_out_the_warm_up_and_unobserved_steps() {
        let record = |t: u32, d: Option<f64>| StepRecord::for_test(t, d, 0);
        let records = [
            record(0, Some(9.0)),
            record(1, Some(9.0)),
            record(2, Some(1.0)),
            record(3, None),
            record(4, Some(3.0)),
        ];
        assert_eq!(d_bar(&records, 2), 2.0);
        assert!(d_bar(&records[..2], 2).is_nan());
    }

    #[test]
    fn a_masters_initial_slots_are_its_one_range() {
        // Master 0 owns 0-2 and 6, master 1 owns 3-5, slot 7 is unassigned.
        let owners = [0, 0, 0, 1, 1, 1, 0]
            .map(Some)
            .into_iter()
            .chain([None])
            .collect();
        let snapshot = Snapshot {
            masters: Vec::new(),
            owners,
            open: Vec::new(),
            problems: Vec::new(),
        };
        assert_eq!(slot_range(&snapshot, 1), Some((3, 5)));
        assert_eq!(slot_range(&snapshot, 0), None, "two ranges");
        assert_eq!(slot_range(&snapshot, 2), None, "no slot");
    }
}
