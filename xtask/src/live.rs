//! `cargo xtask live`: the command line over [`ach_live`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ach_live::{Arm, ConfigError, CpuReading, LiveBackend, LiveConfig, LiveError};

/// Arguments of `cargo xtask live`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Masters of the local cluster (strong, medium and weak in the paper's 3 : 4 : 3 mix).
    #[arg(long, default_value_t = 6)]
    nodes: usize,
    /// Keys loaded before the workload.
    #[arg(long, default_value_t = 100_000)]
    keys: usize,
    /// Seconds of workload per arm.
    #[arg(long, default_value_t = 60)]
    duration_s: u64,
    /// Arms, comma-separated: redis-cli or any algorithm of the catalogue by name, label or
    /// alias (static-w or a0, dynamic-r, bounded-loads, ach, ach-f, ...).
    #[arg(long, default_value = "static-w,redis-cli,dynamic-r,bounded-loads,ach")]
    algorithms: String,
    /// Seed of repeat 0 (repeat r uses seed + r).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Repeats of every arm (paired statistics when more than 1).
    #[arg(long, default_value_t = 1)]
    repeats: u32,
    /// Output folder.
    #[arg(long, default_value = "results/live")]
    out: PathBuf,
    /// Clients: seeded request streams, each over its own keys.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Threads that send each client's requests, each for a fixed part of its keys (a request
    /// waiting on a slow master holds up only its thread's part of the schedule).
    #[arg(long, default_value_t = 8)]
    senders_per_client: usize,
    /// Requests per second of all clients before the load step.
    #[arg(long, default_value_t = 6000.0)]
    rate: f64,
    /// CPUs of a strong node's quota (medium: 0.55 of it, weak: 0.25).
    #[arg(long, default_value_t = 0.2)]
    cpu_per_strong_node: f64,
    /// Measurement and control step, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Server and backend: valkey (Valkey 9, per-slot load, atomic migration), redis
    /// (Redis 7), or auto (Valkey 9 when its server is found, Redis 7 otherwise).
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Seconds each class's service rate is measured for, before the arms.
    #[arg(long, default_value_t = 3.0)]
    calibration_s: f64,
    /// Seconds every arm's masters are read without clients, for their idle cpu use, which
    /// the controllers take off their cpu readings (0: whole readings; only with
    /// --cpu-reading cores).
    #[arg(long, default_value_t = 2.0)]
    idle_cpu_s: f64,
    /// What the cpu part of the controllers' and the observer's readings counts: requests
    /// (each master's data commands per second over its class's measured service rate,
    /// ach-redis --request-capacity) or cores (its cpu use over its quota, less its idle use).
    #[arg(long, default_value = "requests")]
    cpu_reading: String,
    /// Valkey: the most slots of a master one of the rebalance loop's per-slot statistics
    /// requests asks for (default: all in one request); smaller requests go one round per CPU
    /// quota period (20 ms), so that a weak master's reply does not use its quota up at once.
    #[arg(long, default_value_t = 16384)]
    slot_stats_chunk: usize,
    /// The rebalance loop reads the per-slot figures (keys per slot, Valkey's per-slot cpu)
    /// at every N-th control step and reuses them between (default 1: every step).
    #[arg(long, default_value_t = 1)]
    slot_stats_every: u32,
    /// Valkey: each slot's load in the rebalance loop is its per-slot counter's growth over
    /// the last N readings (ach-redis --slot-stats-window; default 1: since the last one).
    #[arg(long, default_value_t = 1)]
    slot_stats_window: u32,
    /// Valkey: which rate over those readings weights a master's slots in the rebalance loop:
    /// mean or median (ach-redis --slot-rate; default mean).
    #[arg(long, value_enum, default_value = "mean")]
    slot_rate: ach_redis::telemetry::SlotRateStatistic,
    /// Valkey: the per-slot counter that splits each master's load among its slots in the
    /// rebalance loop: cpu (cpu-usec) or network (bytes in and out).
    #[arg(long, value_enum, default_value = "cpu")]
    slot_split: ach_redis::control::SlotSplit,
    /// ACH, in the loop and in the simulator: carry out a step's plan only when it is
    /// predicted to remove at least this fraction of the load above the mean (ach-redis
    /// --min-gain; default 0: every plan).
    #[arg(long, default_value_t = 0.0)]
    min_gain: f64,
    /// Valkey 9: the rebalance loop moves a group of slots holding fewer keys than this key
    /// by key instead of in an atomic job, which forks its source (ach-redis
    /// --atomic-from-keys; default 0: every group atomic).
    #[arg(long, default_value_t = 0)]
    atomic_from_keys: u64,
    /// The EWMA weight of the new reading in the rebalancers' load trackers and in what the
    /// simulator's algorithms read (ach-redis --beta; default 0.3, the paper's; 1: no
    /// smoothing). The observer and the ground truth keep 0.3.
    #[arg(long, default_value_t = 0.3)]
    beta: f64,
}

fn config(args: Args) -> Result<LiveConfig, ConfigError> {
    let arms = args
        .algorithms
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(Arm::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let config = LiveConfig {
        nodes: args.nodes,
        keys: args.keys,
        duration_s: args.duration_s,
        arms,
        seed: args.seed,
        repeats: args.repeats,
        out: args.out,
        clients: args.clients,
        senders_per_client: args.senders_per_client,
        rate: args.rate,
        cpu_per_strong_node: args.cpu_per_strong_node,
        interval_ms: args.interval_ms,
        backend: LiveBackend::parse(&args.backend)?,
        calibration_s: args.calibration_s,
        idle_cpu_s: args.idle_cpu_s,
        cpu_reading: CpuReading::parse(&args.cpu_reading)?,
        slot_stats_chunk: args.slot_stats_chunk,
        slot_stats_every: args.slot_stats_every,
        slot_stats_window: args.slot_stats_window,
        slot_rate: args.slot_rate,
        slot_split: args.slot_split,
        min_gain: args.min_gain,
        atomic_from_keys: args.atomic_from_keys,
        beta: args.beta,
    };
    config.validate()?;
    Ok(config)
}

/// Runs the experiment and writes its files; exit code 2 on bad input, 1 on a failure.
pub fn run(args: Args) -> ExitCode {
    let config = match config(args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    // Ctrl-C ends the current arm; its servers and cgroups are removed on the way out.
    let stop = Arc::new(AtomicBool::new(false));
    let handler_stop = Arc::clone(&stop);
    let _ = ctrlc::set_handler(move || handler_stop.store(true, Ordering::SeqCst));
    let outcome = (|| -> Result<_, LiveError> {
        let results = ach_live::experiment::run(&config, &stop, &mut std::io::stderr())?;
        eprintln!(
            "simulator: the same scenario ({} steps), calibrated to the measured service rates",
            config.steps()
        );
        let sim = ach_live::simulator::run(
            &config,
            &results.service_rates,
            &ach_live::pace::of_results(&results),
        )?;
        let arms = ach_live::output::write_all(&results, &sim)?;
        Ok((results, arms))
    })();
    match outcome {
        Ok((results, arms)) => {
            print_arms(&arms);
            println!("server: {}", results.server);
            println!(
                "load average (1, 5, 15 min): {} before, {} after",
                results.load_average.0, results.load_average.1
            );
            for warning in &results.warnings {
                println!("warning: {warning}");
            }
            println!("wrote {}", config.out.join("REPORT.md").display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The arms' figures, one line each.
fn print_arms(arms: &[ach_live::summary::ArmSummary]) {
    println!(
        "{:<14} {:>8} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8} {:>7} {:>9}",
        "algorithm",
        "D true",
        "sim",
        "D telem",
        "moved",
        "answered",
        "p99 ms",
        "p99.9 ms",
        "errors",
        "lost/stale"
    );
    for arm in arms {
        println!(
            "{:<14} {:>8.4} {:>8.4} {:>8.4} {:>10.0} {:>10.0} {:>8.2} {:>8.2} {:>7} {:>9}",
            arm.algorithm,
            arm.d_bar_true,
            arm.sim_d_bar_true.unwrap_or(f64::NAN),
            arm.d_bar_telemetry,
            arm.keys_moved,
            arm.requests_answered,
            arm.p99_ms,
            arm.p999_ms,
            arm.client_errors,
            format!("{}/{}", arm.lost_keys, arm.stale_keys)
        );
    }
}

/// Arguments of `cargo xtask live-cadence`.
#[derive(clap::Args, Debug)]
pub struct CadenceArgs {
    /// The output folder of `cargo xtask live` (its runs/ holds the rebalance logs).
    folder: PathBuf,
}

/// Prints every rebalance loop's cadence (control steps, steps with moves, migrations and
/// their time) and each arm's mean over its repeats; exit code 2 when the folder has no logs.
pub fn run_cadence(args: CadenceArgs) -> ExitCode {
    let cadences = match ach_live::cadence::read_run_folder(&args.folder) {
        Ok(cadences) => cadences,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    println!(
        "{:<24} {:>7} {:>11} {:>10} {:>8} {:>12} {:>9}",
        "run", "steps", "with moves", "migrations", "keys", "migrating s", "ms each"
    );
    let mut arms: Vec<(String, Vec<ach_live::cadence::LoopCadence>)> = Vec::new();
    for (run, cadence) in &cadences {
        println!(
            "{:<24} {:>7} {:>11} {:>10} {:>8} {:>12.1} {:>9}",
            run,
            cadence.control_steps,
            cadence.steps_with_moves,
            cadence.migrations,
            cadence.keys_migrated,
            cadence.migrating_s,
            cadence
                .mean_migration_ms()
                .map_or("-".to_string(), |ms| format!("{ms:.0}"))
        );
        // "ACH-r0" belongs to the arm "ACH".
        let arm = run.rsplit_once("-r").map_or(run.as_str(), |(arm, _)| arm);
        match arms.iter_mut().find(|(name, _)| name == arm) {
            Some((_, list)) => list.push(*cadence),
            None => arms.push((arm.to_string(), vec![*cadence])),
        }
    }
    println!("\nmeans over the repeats:");
    for (arm, list) in &arms {
        let n = list.len() as f64;
        let mean =
            |f: fn(&ach_live::cadence::LoopCadence) -> f64| list.iter().map(f).sum::<f64>() / n;
        let migrations = mean(|c| c.migrations as f64);
        let migrating_s = mean(|c| c.migrating_s);
        println!(
            "{:<24} {:>7.1} {:>11.1} {:>10.1} {:>8.0} {:>12.1} {:>9}",
            format!("{arm} ({} runs)", list.len()),
            mean(|c| c.control_steps as f64),
            mean(|c| c.steps_with_moves as f64),
            migrations,
            mean(|c| c.keys_migrated as f64),
            migrating_s,
            if migrations > 0.0 {
                format!("{:.0}", migrating_s * 1000.0 / migrations)
            } else {
                "-".to_string()
            }
        );
    }
    ExitCode::SUCCESS
}

/// The arguments of `cargo xtask live-resim`.
#[derive(clap::Args, Debug)]
pub struct ResimArgs {
    /// The output folder of `cargo xtask live` (its summary.json and runs/).
    folder: PathBuf,
    /// Also write the resimulation (the measured calibration, the series, every arm's
    /// figures) as JSON to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The simulator's initial layout: `contiguous` (one block of tokens per node, as the live
    /// servers own their slots; what `live` simulates) or `round-robin` (the paper's).
    #[arg(long, default_value = "contiguous")]
    initial_layout: ach_live::resimulate::InitialLayout,
    /// The simulator's keys: `live` (the live workload's own keys on their slots, with the
    /// clients' shares; what `live` simulates) or `drawn` (the paper's: seeded hash positions,
    /// Zipf ranks over all keys).
    #[arg(long, default_value = "live")]
    keys: ach_live::resimulate::Keys,
    /// Take the calibration from this resimulation JSON (an earlier `--out`) instead of
    /// measuring it in the folder's runs/, for a folder kept without them (docs/live).
    #[arg(long)]
    calibration: Option<PathBuf>,
}

/// Prints the simulator's D-bar true, instant and paced, against every live arm's, with the
/// relative errors, whether the order of the arms agrees, and the measured clock; exit code 2
/// when the folder cannot be read.
pub fn run_resim(args: ResimArgs) -> ExitCode {
    let options = ach_live::resimulate::Options {
        layout: args.initial_layout,
        keys: args.keys,
        calibration: args.calibration,
    };
    let resimulation = match ach_live::resimulate::resimulate(&args.folder, &options) {
        Ok(resimulation) => resimulation,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    if let Some(out) = &args.out
        && let Err(error) = resimulation.write_json(out)
    {
        eprintln!("error: {error}");
        return ExitCode::FAILURE;
    }
    print_calibration(&resimulation.calibration);
    print_reading_parts(&resimulation.reading_parts);
    print_arm_agreement(&resimulation.arms);
    print_orders(&resimulation.arms);
    ExitCode::SUCCESS
}

/// The measured clock, redis-cli's order of the nodes, and each class's reading line.
fn print_calibration(calibration: &ach_live::pace::ArmCalibration) {
    println!("measured: {}", calibration.pace.describe());
    for listing in &calibration.redis_cli_listings {
        println!(
            "redis-cli of repeat {} took the simulator's nodes in the order {:?}",
            listing.repeat, listing.nodes
        );
    }
    for line in &calibration.class_readings {
        let bend = line.knee.map_or(String::new(), |knee| {
            format!(
                " up to {:.3}, then {:.3} per unit more",
                knee.load, knee.scale
            )
        });
        let scatter = line
            .residual_sd
            .map_or(String::new(), |sd| format!(", scattering {sd:.4} about it"));
        let own = line.own_sd.map_or(String::new(), |sd| {
            let r = line
                .own_autocorrelation
                .map_or("—".to_string(), |r| format!("{r:.3}"));
            format!("; each master's own part {sd:.4}, lag-1 autocorrelation {r}")
        });
        println!(
            "reading of a {} node: {:.3} + {:.3} x true load{bend} ({} samples{scatter}{own})",
            line.class.name(),
            line.offset,
            line.scale,
            line.samples
        );
    }
}

/// The observer's readings against the truth, per arm and class, when the folder has them.
fn print_reading_parts(reading_parts: &[ach_live::readings::ClassParts]) {
    if !reading_parts.is_empty() {
        println!(
            "the observer's readings against the truth (means per arm and class), and the \
             clients' p99 of a master's step (its median and 90th percentile over the steps):"
        );
        println!(
            "{:<14} {:<7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>14} {:>14}",
            "algorithm",
            "class",
            "samples",
            "true",
            "cpu",
            "memory",
            "latency",
            "composite",
            "step p99 p50",
            "step p99 p90"
        );
        let ms = |value: Option<f64>| value.map_or("—".to_string(), |v| format!("{v:.1} ms"));
        for part in reading_parts {
            println!(
                "{:<14} {:<7} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>14} {:>14}",
                part.algorithm,
                part.class.name(),
                part.samples,
                part.true_load,
                part.cpu,
                part.memory,
                part.latency,
                part.composite,
                ms(part.step_p99_ms_median),
                ms(part.step_p99_ms_p90)
            );
        }
    }
}

/// Every arm's live D-bar true beside the simulators', with the relative errors.
fn print_arm_agreement(arms: &[ach_live::resimulate::ArmAgreement]) {
    println!(
        "{:<14} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8}",
        "algorithm",
        "live",
        "instant",
        "error",
        "paced",
        "error",
        "lines",
        "error",
        "calibrated",
        "error"
    );
    let error = |sim: f64, live: f64| format!("{:+.1} %", 100.0 * (sim - live) / live);
    for arm in arms {
        println!(
            "{:<14} {:>8.4} {:>8.4} {:>8} {:>8.4} {:>8} {:>8.4} {:>8} {:>10.4} {:>8}",
            arm.algorithm,
            arm.live,
            arm.instant,
            error(arm.instant, arm.live),
            arm.paced,
            error(arm.paced, arm.live),
            arm.lines,
            error(arm.lines, arm.live),
            arm.calibrated,
            error(arm.calibrated, arm.live)
        );
    }
}

/// The order of the arms by each simulator's figure, and whether it is the live order.
fn print_orders(arms: &[ach_live::resimulate::ArmAgreement]) {
    /// One of the simulators' figures of an arm.
    type Figure = fn(&ach_live::resimulate::ArmAgreement) -> f64;
    let order = |value: Figure| {
        ach_live::summary::order_text(arms.iter().map(|a| (a.algorithm.as_str(), value(a))))
    };
    let orders: [(&str, Figure); 4] = [
        ("instant", |a| a.instant),
        ("paced", |a| a.paced),
        ("lines", |a| a.lines),
        ("calibrated", |a| a.calibrated),
    ];
    for (name, value) in orders {
        let pairs: Vec<(f64, f64)> = arms.iter().map(|a| (a.live, value(a))).collect();
        println!(
            "order {name}: {} ({})",
            order(value),
            if ach_live::summary::same_order(&pairs) {
                "same as live"
            } else {
                "differs from live"
            }
        );
    }
    println!("order live: {}", order(|a| a.live));
}
