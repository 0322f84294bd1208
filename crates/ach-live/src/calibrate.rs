//! The service rate of every capacity class, measured before the arms: a one-node cluster of
//! that class (the same server, quota and settings as in the arms) is loaded with keys and
//! driven at saturation by as many threads as send the experiment's clients' requests (GET and
//! SET of the workload's values, the workload's write share, no pause between requests) for a
//! few seconds; the requests it answers per second is its service rate.
//!
//! The simulator's unit of load is demand, `requests + 0.5 writes`, so the rate is also given
//! in demand per second: `requests_per_s * (1 + 0.5 * write_fraction)`. A node answering this
//! mix at its measured rate has `rho = 1`.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ach_redis::local::{LocalCluster, ServerKind};
use ach_sim::config::NodeClass;
use ach_telemetry::WRITE_EXTRA_COST;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::cgroup::CpuLimiter;
use crate::error::ExperimentError;
use crate::experiment::LiveConfig;
use crate::workload::{LOAD_BATCH, initial_load, key_name, value};

/// Seconds the clients send before the counting starts (connections made, caches warm).
const WARM_UP_S: f64 = 0.5;

/// Keys loaded into the calibration node (at most the experiment's own).
const CALIBRATION_KEYS: usize = 10_000;

/// The measured service rate of one class.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ServiceRate {
    /// The class.
    pub class: NodeClass,
    /// Its CPU quota in CPUs (`None`: no quota could be set).
    pub cpus: Option<f64>,
    /// Requests answered per second at saturation.
    pub requests_per_s: f64,
    /// The same in the simulator's unit, `requests + 0.5 writes` per second.
    pub demand_per_s: f64,
    /// Requests answered in the counted window.
    pub requests: u64,
    /// Length of the counted window, in seconds.
    pub seconds: f64,
    /// Requests that failed (none expected).
    pub errors: u64,
}

/// Measures every class of `config` (strong, medium, weak, those present), one node at a time.
pub fn measure(
    config: &LiveConfig,
    kind: ServerKind,
    limiter: &CpuLimiter,
    progress: &mut dyn Write,
) -> Result<Vec<ServiceRate>, ExperimentError> {
    let mut classes = config.classes();
    classes.dedup();
    let mut rates = Vec::new();
    for class in classes {
        let rate = measure_class(config, kind, limiter, class)?;
        let _ = writeln!(
            progress,
            "service rate of a {} node{}: {:.0} requests/s ({:.0} demand/s) over {:.1} s",
            class.name(),
            rate.cpus
                .map_or(String::new(), |c| format!(" ({c:.3} CPU)")),
            rate.requests_per_s,
            rate.demand_per_s,
            rate.seconds
        );
        rates.push(rate);
    }
    Ok(rates)
}

fn measure_class(
    config: &LiveConfig,
    kind: ServerKind,
    limiter: &CpuLimiter,
    class: NodeClass,
) -> Result<ServiceRate, ExperimentError> {
    let cluster = LocalCluster::start_of(kind, 1)?;
    let server = &cluster.servers()[0];
    let cpus = class.capacity() * config.cpu_per_strong_node;
    let quota = match limiter {
        CpuLimiter::Unavailable(_) => None,
        _ => {
            let name = format!("ach-live-{}-{}", std::process::id(), server.port());
            Some(limiter.limit(&name, server.pid(), cpus)?)
        }
    };
    let keys = config.keys.min(CALIBRATION_KEYS);
    load_keys(server, kind, keys)?;
    let counters = Arc::new(ClientCounters::default());
    let write_fraction = config.workload(0).write_fraction;
    let threads: Vec<_> = (0..config.client_threads())
        .map(|client| {
            let load = ClientLoad {
                seed: config.seed ^ (client as u64 + 1),
                keys,
                write_fraction,
            };
            spawn_client(server.connection(), load, Arc::clone(&counters))
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(WARM_UP_S));
    let started = Instant::now();
    let before = counters.answered.load(Ordering::Relaxed);
    counters.counting.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs_f64(config.calibration_s));
    let requests = counters.answered.load(Ordering::Relaxed) - before;
    let seconds = started.elapsed().as_secs_f64();
    counters.counting.store(false, Ordering::SeqCst);
    counters.stop.store(true, Ordering::SeqCst);
    for thread in threads {
        let _ = thread.join();
    }
    let requests_per_s = requests as f64 / seconds;
    if requests == 0 {
        return Err(ExperimentError::Calibration(format!(
            "a {class:?} node answered no request in {seconds:.1} s"
        )));
    }
    Ok(ServiceRate {
        class,
        cpus: quota.as_ref().map(|_| cpus),
        requests_per_s,
        demand_per_s: requests_per_s * (1.0 + WRITE_EXTRA_COST * write_fraction),
        requests,
        seconds,
        errors: counters.errors.load(Ordering::Relaxed),
    })
}

/// What the calibration's client threads share: whether requests count yet, whether to stop,
/// and the requests answered and failed while counting.
#[derive(Default)]
struct ClientCounters {
    counting: AtomicBool,
    stop: AtomicBool,
    answered: AtomicU64,
    errors: AtomicU64,
}

/// One client thread's requests: its generator's seed, the keys it picks from uniformly, and
/// the share of writes.
struct ClientLoad {
    seed: u64,
    keys: usize,
    write_fraction: f64,
}

/// Loads the calibration's `keys` keys into `server`, with per-slot statistics on for Valkey
/// as in the arms.
fn load_keys(
    server: &ach_redis::local::LocalServer,
    kind: ServerKind,
    keys: usize,
) -> Result<(), ExperimentError> {
    let mut connection = server
        .connection()
        .map_err(|e| ExperimentError::Calibration(format!("cannot connect: {e}")))?;
    if kind == ServerKind::Valkey {
        // As in the arms: per-slot statistics on.
        let _: redis::RedisResult<()> = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-slot-stats-enabled")
            .arg("yes")
            .query(&mut connection);
    }
    for chunk in (0..keys).collect::<Vec<_>>().chunks(LOAD_BATCH) {
        initial_load(chunk)
            .query::<()>(&mut connection)
            .map_err(|e| ExperimentError::Calibration(format!("cannot load keys: {e}")))?;
    }
    Ok(())
}

/// A client thread sending `load`'s requests on `connection`, one at a time, until told to
/// stop, counting its answers and errors while `counters` say so.
fn spawn_client(
    connection: redis::RedisResult<redis::Connection>,
    load: ClientLoad,
    counters: Arc<ClientCounters>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Ok(mut connection) = connection else {
            counters.errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut rng = Pcg64::seed_from_u64(load.seed);
        while !counters.stop.load(Ordering::Relaxed) {
            let key = rng.random_range(0..load.keys);
            let outcome = if rng.random::<f64>() < load.write_fraction {
                redis::cmd("SET")
                    .arg(key_name(key))
                    .arg(value(key, 0))
                    .query::<()>(&mut connection)
            } else {
                redis::cmd("GET")
                    .arg(key_name(key))
                    .query::<Option<String>>(&mut connection)
                    .map(|_| ())
            };
            if counters.counting.load(Ordering::Relaxed) {
                match outcome {
                    Ok(()) => counters.answered.fetch_add(1, Ordering::Relaxed),
                    Err(_) => counters.errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        }
    })
}

/// The demand per step a node of `class` serves, from `rates`.
pub fn demand_per_step(rates: &[ServiceRate], class: NodeClass, interval_s: f64) -> f64 {
    rates
        .iter()
        .find(|r| r.class == class)
        .map_or(f64::NAN, |r| r.demand_per_s * interval_s)
}
