//! `ach-redis` as an operator uses it (issue 23), on real local clusters under clients: `plan`
//! is the first step of `rebalance` with the same options, and a step that moves nothing says
//! which rule stopped it. Every test runs once per backend.

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use ach_redis::local::{LocalCluster, ServerKind};
use common::{
    DataSet, STEP_OPTIONS, Workload, ach_redis, add_replicas, assert_check_clean,
    assert_nothing_lost, command_calls, first_step_of_rebalance, moves_of, read_events, read_log,
    serial, slot_map, start_cluster_of, temp_log, text, used_memory_mb, wrong_values,
};

on_every_backend!(
    plan_is_the_first_step_of_rebalance_with_the_same_options,
    a_step_that_moves_nothing_says_which_rule_stopped_it,
    a_big_hash_tagged_slot_is_named_in_plan_and_log,
    status_lists_each_replica_under_its_master_and_plan_never_targets_one,
    until_balanced_stops_at_the_first_step_within_the_tolerance,
    max_keys_per_second_holds_the_step_to_its_rate,
    slot_stats_every_reads_the_per_slot_figures_at_every_nth_step,
);

/// Compaction is planning, the same on both backends; the figures are taken on Redis, whose
/// key-by-key migration switches slot by slot (Valkey's atomic jobs move whole ranges anyway).
#[test]
fn a_rebalance_of_2000_slots_leaves_at_most_64_ranges() {
    let _serial = serial();
    let compact = ranges_after_a_big_rebalance("compact");
    let planned = ranges_after_a_big_rebalance("planned");
    eprintln!(
        "--slot-choice compact: {} slots moved, {} ranges, epoch {}; \
         --slot-choice planned: {} slots moved, {} ranges, epoch {}",
        compact.moved, compact.ranges, compact.epoch, planned.moved, planned.ranges, planned.epoch
    );
    assert!(
        compact.moved >= 2000,
        "2,000+ slots moved: {}",
        compact.moved
    );
    assert!(
        compact.ranges <= 64,
        "{} ranges in CLUSTER SLOTS",
        compact.ranges
    );
    // The measure can fail: the slots exactly as ACH planned them shred the map.
    assert!(planned.moved >= 2000, "{}", planned.moved);
    assert!(planned.ranges > 64, "{}", planned.ranges);
}

/// What a rebalance left in `CLUSTER SLOTS`.
struct SlotMap {
    moved: usize,
    ranges: usize,
    epoch: u64,
}

/// Six masters, the first owning 6001 slots and the others about 2077 each, 30,000 keys over
/// all slots and clients: ACH moves slots off the first until it is within eps_off.
fn ranges_after_a_big_rebalance(slot_choice: &str) -> SlotMap {
    let mut slots = vec![vec![(0u16, 6000u16)]];
    let rest: Vec<u16> = (6001..16384).collect();
    for chunk in rest.chunks(rest.len().div_ceil(5)) {
        slots.push(vec![(chunk[0], *chunk.last().unwrap())]);
    }
    let cluster = LocalCluster::start_with_slots(&slots).unwrap_or_else(|e| panic!("{e}"));
    let data = Arc::new(DataSet::new(30_000, 0, 0, (0, 16383)));
    data.load(&cluster, 2);
    let capacity = format!("{:.1}", used_memory_mb(&cluster.servers()[0]) * 1.05);
    let (owners_before, ranges_before) = slot_map(&cluster);
    assert_eq!(ranges_before, 6);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(120));
    let seed = cluster.seed();
    let rebalance = ach_redis(&[
        "rebalance",
        "--cluster",
        &seed,
        "--memory-capacity-mb",
        &capacity,
        "--steps",
        "8",
        "--interval-ms",
        "300",
        "--m-max",
        "0.1",
        "--m-horizon",
        "1",
        "--horizon",
        "10",
        "--slot-choice",
        slot_choice,
    ]);
    let progress = text(&rebalance.stderr);
    assert!(rebalance.status.success(), "{progress}");
    let report = workload.finish();
    let (owners_after, ranges) = slot_map(&cluster);
    let mut connection = cluster.servers()[0].connection().unwrap();
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query(&mut connection)
        .unwrap();
    let epoch = info
        .lines()
        .find_map(|l| l.strip_prefix("cluster_current_epoch:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("CLUSTER INFO has the current epoch");
    let moved = owners_before
        .iter()
        .zip(&owners_after)
        .filter(|(a, b)| a != b)
        .count();
    let steps: Vec<&str> = progress.lines().filter(|l| l.starts_with("step")).collect();
    eprintln!("--slot-choice {slot_choice}:\n{}", steps.join("\n"));
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    SlotMap {
        moved,
        ranges,
        epoch,
    }
}

/// A 2-master cluster whose first master holds `hot_slots` slots of 200 keys besides 4000 keys
/// over all slots, and the `--memory-capacity-mb` that puts its memory reading at about 0.95.
fn two_masters(kind: ServerKind, hot_slots: usize) -> (LocalCluster, Arc<DataSet>, String) {
    let cluster = start_cluster_of(kind, 2);
    let data = Arc::new(DataSet::new(4000, hot_slots, 200, (0, 8191)));
    data.load(&cluster, 2);
    let capacity = format!("{:.1}", used_memory_mb(&cluster.servers()[0]) * 1.05);
    (cluster, data, capacity)
}

fn plan_is_the_first_step_of_rebalance_with_the_same_options(kind: ServerKind) {
    let _serial = serial();
    let (cluster, data, capacity) = two_masters(kind, 20);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(60));
    let seed = cluster.seed();
    let common = ["--cluster", &seed, "--memory-capacity-mb", &capacity];

    let mut plan_args = vec!["plan", "--json", "--sample-ms", "500"];
    plan_args.extend(common);
    plan_args.extend(STEP_OPTIONS);
    let plan = ach_redis(&plan_args);
    assert!(plan.status.success(), "plan failed: {}", text(&plan.stderr));
    let planned: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let planned_moves = moves_of(&planned["plan"]);

    let (steps, progress) = first_step_of_rebalance(&common);
    let report = workload.finish();
    let first = &steps[0];
    let executed = moves_of(&first["plan"]);
    eprintln!(
        "plan: {} moves, D {} -> {}; rebalance step 0: {} moves, D {} -> {}\n{progress}",
        planned_moves.len(),
        planned["plan"]["imbalance_now"],
        planned["plan"]["imbalance_predicted"],
        executed.len(),
        first["plan"]["imbalance_now"],
        first["plan"]["imbalance_predicted"],
    );

    assert!(!planned_moves.is_empty(), "the plan moves something");
    assert_eq!(
        planned_moves, executed,
        "plan's moves are rebalance's first step"
    );
    assert_eq!(
        planned["plan"]["keys_to_copy"], first["plan"]["keys_to_copy"],
        "the same keys to copy"
    );
    // The budget the two steps planned under is the window budget, in both.
    for step_plan in [&planned["plan"], &first["plan"]] {
        let budget = step_plan["diagnosis"]["budget"].as_f64().unwrap();
        assert!(
            (budget - 0.03).abs() < 1e-12,
            "budget {budget}: {step_plan}"
        );
    }
    // What was planned was migrated.
    let migrated: u64 = first["outcome"]["keys_moved"].as_u64().unwrap();
    assert_eq!(
        migrated,
        first["plan"]["keys_to_copy"].as_u64().unwrap(),
        "every planned slot migrated:\n{progress}"
    );
    // The summary groups the moves per source and target.
    let summary = planned["plan"]["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 1, "one source, one target: {summary:?}");
    assert_eq!(
        summary[0]["slots"].as_u64().unwrap() as usize,
        planned_moves.len()
    );
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
}

fn a_step_that_moves_nothing_says_which_rule_stopped_it(kind: ServerKind) {
    let _serial = serial();
    // A balanced cluster: three masters with the same keys and no clients. It is read over
    // the default sample (1 s): idle masters differ by at most 0.0011 in 300 ms windows on a
    // quiet machine, but one 300 ms window in CI, with other suites' clusters busy on the
    // two cores, read the seed master 0.006 above the mean (the sampler's own commands fall
    // in the window), over the 0.005 that makes a source.
    let cluster = start_cluster_of(kind, 3);
    let data = Arc::new(DataSet::new(6000, 0, 0, (0, 16383)));
    data.load(&cluster, 2);
    let seed = cluster.seed();
    let plan = ach_redis(&["plan", "--cluster", &seed]);
    let plan_text = text(&plan.stdout);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    eprintln!("{plan_text}");
    assert!(
        plan_text.contains("nothing moves: no source: no node is overloaded"),
        "{plan_text}"
    );
    drop(cluster);

    // A hot master whose window budget the first step spends: the second step says so.
    let (cluster, data, capacity) = two_masters(kind, 20);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(60));
    let seed = cluster.seed();
    let (log, log_path) = temp_log();
    let mut args = vec![
        "rebalance",
        "--cluster",
        &seed,
        "--memory-capacity-mb",
        &capacity,
        "--steps",
        "2",
        "--interval-ms",
        "300",
        "--log",
        &log_path,
    ];
    // Every slot with keys moves when planned (the default --min-slot-keys 1), so step 0
    // charges the window with all it planned.
    args.extend(&STEP_OPTIONS[..8]);
    let rebalance = ach_redis(&args);
    let progress = text(&rebalance.stderr);
    assert!(rebalance.status.success(), "{progress}");
    let report = workload.finish();
    eprintln!("{progress}");
    let steps = read_log(log.path());
    assert!(
        !moves_of(&steps[0]["plan"]).is_empty(),
        "step 0 moves:\n{progress}"
    );
    let reason = steps[1]["plan"]["nothing_moves_because"]
        .as_str()
        .unwrap_or_else(|| panic!("step 1 moves nothing and says why:\n{progress}"));
    assert!(
        reason.contains("budget") && reason.contains("0.0300"),
        "the window budget stopped step 1: {reason}"
    );
    assert!(
        progress.contains(&format!("nothing moves: {reason}")),
        "{progress}"
    );
    assert_nothing_lost(&cluster, &report);
}

/// A migration that fails (the target refuses writes, `CONFIG SET maxmemory 1` under the
/// default `noeviction` policy, so `MIGRATE`'s `RESTORE-ASKING` there fails with OOM; a write
/// pause was tried first, but on a loaded machine it could end before the first `MIGRATE`, as
/// it also held the run's start) makes the run exit non-zero, and its summary, on stdout and as the log's last line, says which migration
/// failed; the slot it left open is closed (by the run's last `fix` or by `fix` after) and no
/// key is lost. Key-by-key migration only (the redis backend); the Valkey failover test in
/// valkey.rs checks the same exit code for a failed atomic job.
#[test]
fn a_failed_migration_exits_non_zero_and_the_summary_says_so() {
    let _serial = serial();
    let (cluster, data, capacity) = two_masters(ServerKind::Redis, 20);
    let mut connection = cluster.servers()[1].connection().unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut connection)
        .unwrap();
    let seed = cluster.seed();
    let (log, log_path) = temp_log();
    // A full target reads as loaded, so the algorithm would send it nothing: draining the
    // first master sends it slots whatever its load.
    let drained = cluster.servers()[0].address();
    let mut args = vec![
        "rebalance",
        "--cluster",
        &seed,
        "--memory-capacity-mb",
        &capacity,
        "--drain",
        &drained,
        "--steps",
        "2",
        "--interval-ms",
        "300",
        "--log",
        &log_path,
    ];
    args.extend(STEP_OPTIONS);
    let rebalance = ach_redis(&args);
    let summary_text = text(&rebalance.stdout);
    let progress = text(&rebalance.stderr);
    eprintln!("{progress}\n{summary_text}");
    let code = rebalance.status.code();
    assert!(
        code == Some(3) || code == Some(5),
        "a failed migration exits 3 (or 5 when the slot it left open cannot be closed): \
         {code:?}\n{summary_text}"
    );
    assert!(
        summary_text.contains("rebalance summary:"),
        "{summary_text}"
    );
    let failed_line = summary_text
        .lines()
        .find(|l| l.contains("migrations failed"))
        .unwrap();
    assert!(
        !failed_line.trim_start().starts_with("0 "),
        "{summary_text}"
    );
    assert!(summary_text.contains("error: step 0:"), "{summary_text}");
    let events = read_events(log.path());
    let summary = &events.last().unwrap()["summary"];
    assert!(
        summary["migrations_failed"].as_u64().unwrap() >= 1,
        "{summary}"
    );
    assert_eq!(
        events.last().unwrap()["event"],
        "summary",
        "the log ends with the summary"
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "fix" && e["when"] == "start"),
        "every fix has a line, the one at the start too"
    );

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut connection)
        .unwrap();
    // Wait until every node says ok.
    let started = std::time::Instant::now();
    while !cluster.servers().iter().all(|server| {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut server.connection().unwrap())
            .unwrap();
        info.contains("cluster_state:ok")
    }) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the cluster recovers"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let fix = ach_redis(&["fix", "--cluster", &seed]);
    assert!(fix.status.success(), "{}", text(&fix.stderr));
    let expected = data
        .keys
        .iter()
        .enumerate()
        .map(|(i, key)| (key.clone(), data.value(i % 2, 0)))
        .collect();
    assert_eq!(wrong_values(&cluster, &expected), Vec::<String>::new());
    assert_check_clean(&cluster);
}

/// One slot holding 3000 of 7000 keys under one hash tag, on the first of two masters, with
/// 70 % of the clients' requests: larger than any step budget. `plan` names it with its tag,
/// every step of the log carries it, and each step's log holds the previous step's predicted
/// `D` beside its own measured one.
fn a_big_hash_tagged_slot_is_named_in_plan_and_log(kind: ServerKind) {
    let _serial = serial();
    let cluster = start_cluster_of(kind, 2);
    let data = Arc::new(DataSet::with_hot_slot(4000, 3000, (0, 8191)));
    data.load(&cluster, 2);
    let tag = format!(
        "{{{}}}",
        data.keys[4000]
            .split('}')
            .next()
            .unwrap()
            .trim_start_matches('{')
    );
    let slot = data.hot_slots[0];
    let capacity = format!("{:.1}", used_memory_mb(&cluster.servers()[0]) * 1.05);
    let workload = Workload::start_hot(&cluster, &data, 2, Duration::from_secs(60), 70);
    let seed = cluster.seed();
    let common = ["--cluster", &seed, "--memory-capacity-mb", &capacity];
    let mut plan_args = vec!["plan", "--sample-ms", "500", "--m-max", "0.05"];
    plan_args.extend(common);
    let plan = ach_redis(&plan_args);
    let plan_text = text(&plan.stdout);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    eprintln!("{plan_text}");
    let named = format!("notable slot {slot} (hash tag {tag}) on");
    assert!(plan_text.contains(&named), "{named}:\n{plan_text}");
    // Its keys: the 3000 of the tag, and any of the 4000 others hashed to the same slot.
    let keys = 3000
        + data.keys[..4000]
            .iter()
            .filter(|k| ach_redis::slot::key_slot(k.as_bytes()) == slot)
            .count();
    assert!(
        plan_text.contains(&format!("{keys} keys, load")),
        "{plan_text}"
    );
    assert!(
        plan_text.contains(&format!("larger than the step budget ({keys} keys >")),
        "{plan_text}"
    );

    let (log, log_path) = temp_log();
    let mut args = vec![
        "rebalance",
        "--steps",
        "3",
        "--interval-ms",
        "400",
        "--m-max",
        "0.05",
        "--log",
        &log_path,
    ];
    args.extend(common);
    let rebalance = ach_redis(&args);
    let progress = text(&rebalance.stderr);
    eprintln!("{progress}");
    let report = workload.finish();
    let steps = read_log(log.path());
    assert_eq!(steps.len(), 3, "{progress}");
    for step in &steps {
        let named = &step["plan"]["notable_slots"][0];
        assert_eq!(named["slot"], slot, "{step}");
        assert_eq!(named["hash_tag"], tag.as_str(), "{step}");
    }
    assert!(steps[0]["previous_predicted"].is_null());
    for pair in steps.windows(2) {
        assert_eq!(
            pair[1]["previous_predicted"], pair[0]["plan"]["imbalance_predicted"],
            "each step holds the previous step's prediction"
        );
    }
    assert!(progress.contains(&format!("step 0: notable slot {slot} (hash tag {tag})")));
    assert_nothing_lost(&cluster, &report);
}

/// A replica per master: `status` lists each under its master (text and JSON), and a plan
/// that moves slots sends none to a replica.
fn status_lists_each_replica_under_its_master_and_plan_never_targets_one(kind: ServerKind) {
    let _serial = serial();
    // The plan reads no memory capacity: a replica's backlog adds to both masters' memory and
    // narrows their gap until the hot master's lead sits near the dead band (seen in CI at
    // +0.074 against +0.100). Over the machine's memory the masters' readings are alike, and
    // the cpu of 40 hot slots sets the hot master well above the band.
    let (cluster, data, _) = two_masters(kind, 40);
    let replicas = add_replicas(&cluster, kind);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(60));
    let seed = cluster.seed();
    let status = ach_redis(&["status", "--cluster", &seed, "--sample-ms", "300"]);
    let status_text = text(&status.stdout);
    assert!(status.status.success(), "{}", text(&status.stderr));
    eprintln!("{status_text}");
    let lines: Vec<&str> = status_text.lines().collect();
    for (master, replica) in cluster.servers().iter().zip(&replicas) {
        let row = lines
            .iter()
            .position(|l| l.starts_with(&master.address()))
            .unwrap_or_else(|| panic!("{status_text}"));
        assert!(
            lines[row + 1].starts_with(&format!("  replica {} ", replica.address())),
            "the replica under its master:\n{status_text}"
        );
    }
    let json = ach_redis(&["status", "--cluster", &seed, "--json", "--sample-ms", "100"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    for master in value["snapshot"]["masters"].as_array().unwrap() {
        assert_eq!(master["replicas"].as_array().unwrap().len(), 1, "{master}");
    }
    let mut plan_args = vec!["plan", "--json", "--sample-ms", "300", "--cluster", &seed];
    plan_args.extend(STEP_OPTIONS);
    let plan = ach_redis(&plan_args);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    let planned: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let moves = moves_of(&planned["plan"]);
    eprintln!(
        "plan: {} moves, D {} -> {}",
        moves.len(),
        planned["plan"]["imbalance_now"],
        planned["plan"]["imbalance_predicted"]
    );
    assert!(
        !moves.is_empty(),
        "the hot master sheds slots: {}",
        planned["plan"]["nothing_moves_because"]
    );
    let masters: Vec<String> = cluster.servers().iter().map(|s| s.address()).collect();
    assert!(
        moves.iter().all(|(_, _, to)| masters.contains(to)),
        "every target is a master: {moves:?}"
    );
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
    drop(replicas);
}

/// `--until-balanced 0.08` with a cap of 40 steps on a hot master: the run stops at the first
/// step whose measured `D` is within 0.08, well before the cap, and says so.
fn until_balanced_stops_at_the_first_step_within_the_tolerance(kind: ServerKind) {
    let _serial = serial();
    let (cluster, data, capacity) = two_masters(kind, 20);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(60));
    let seed = cluster.seed();
    let (log, log_path) = temp_log();
    let rebalance = ach_redis(&[
        "rebalance",
        "--cluster",
        &seed,
        "--memory-capacity-mb",
        &capacity,
        "--steps",
        "40",
        "--interval-ms",
        "300",
        "--until-balanced",
        "0.08",
        "--m-max",
        "0.3",
        "--m-horizon",
        "1",
        "--log",
        &log_path,
    ]);
    let progress = text(&rebalance.stderr);
    let summary = text(&rebalance.stdout);
    eprintln!("{progress}\n{summary}");
    assert!(rebalance.status.success(), "{progress}");
    let steps = read_log(log.path());
    assert!(
        steps.len() < 40,
        "stopped before the cap: {} steps",
        steps.len()
    );
    let last = steps.last().unwrap();
    let d = last["observed"]["imbalance"].as_f64().unwrap();
    assert!(d <= 0.08, "the last step is balanced: D {d}");
    assert!(last["plan"].is_null(), "the balanced step plans nothing");
    for step in &steps[..steps.len() - 1] {
        let d = step["observed"]["imbalance"].as_f64().unwrap();
        assert!(d > 0.08, "no earlier step was within the tolerance: D {d}");
    }
    assert!(
        summary.contains(&format!(
            "balanced at step {} (--until-balanced)",
            steps.len() - 1
        )),
        "{summary}"
    );
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
}

/// On a terminal (a pseudo-terminal from util-linux's `script`), `rebalance` asks first and an
/// answer other than yes moves nothing; `--yes` starts without asking; off a terminal (every
/// other test) it never asks.
#[test]
fn rebalance_asks_on_a_terminal_unless_yes() {
    let _serial = serial();
    let (cluster, _data, capacity) = two_masters(ServerKind::Redis, 20);
    let seed = cluster.seed();
    let on_terminal = |extra: &str, answer: &str| {
        let command = format!(
            "{} rebalance --cluster {seed} --memory-capacity-mb {capacity} --steps 1 \
             --interval-ms 300 {extra}",
            env!("CARGO_BIN_EXE_ach-redis")
        );
        let mut child = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("util-linux's script runs (apt-get install bsdutils)");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(answer.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        (output.status.code(), text(&output.stdout))
    };
    let keys_on = |server: usize| -> u64 {
        let mut connection = cluster.servers()[server].connection().unwrap();
        redis::cmd("DBSIZE").query(&mut connection).unwrap()
    };
    let before = (keys_on(0), keys_on(1));
    let (code, declined) = on_terminal("", "n\n");
    eprintln!("{declined}");
    assert_eq!(code, Some(0), "{declined}");
    assert!(
        declined.contains("ach-redis: rebalance 2 masters (") && declined.contains("[y/N]"),
        "{declined}"
    );
    assert!(
        declined.contains("rebalance not confirmed: nothing moved"),
        "{declined}"
    );
    assert_eq!((keys_on(0), keys_on(1)), before, "nothing moved");
    let (code, started) = on_terminal("--yes", "");
    eprintln!("{started}");
    assert_eq!(code, Some(0), "{started}");
    assert!(!started.contains("[y/N]"), "{started}");
    assert!(started.contains("rebalance summary:"), "{started}");
    // On a terminal every migration's line ends with the step's progress and time left.
    assert!(
        started
            .lines()
            .any(|l| l.contains("[slots 1/") && l.contains(" s]") && l.contains("ETA ")),
        "{started}"
    );
    assert_ne!(
        (keys_on(0), keys_on(1)),
        before,
        "the confirmed run moved keys"
    );
}

/// `--max-keys-per-second 1000` on a step that copies about 1,500 keys: the step's keys over its
/// time (both from its progress line) stay within the rate.
fn max_keys_per_second_holds_the_step_to_its_rate(kind: ServerKind) {
    let _serial = serial();
    let (cluster, data, capacity) = two_masters(kind, 20);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(60));
    let seed = cluster.seed();
    let rebalance = ach_redis(&[
        "rebalance",
        "--cluster",
        &seed,
        "--memory-capacity-mb",
        &capacity,
        "--steps",
        "1",
        "--interval-ms",
        "300",
        "--m-max",
        "0.3",
        "--m-horizon",
        "1",
        "--max-keys-per-second",
        "1000",
    ]);
    let progress = text(&rebalance.stderr);
    assert!(rebalance.status.success(), "{progress}");
    let line = progress
        .lines()
        .find(|l| l.starts_with("step 0: loads"))
        .unwrap_or_else(|| panic!("{progress}"));
    eprintln!("{line}");
    let (head, tail) = line.split_once(" keys moved in ").unwrap();
    let keys: f64 = head.rsplit(' ').next().unwrap().parse().unwrap();
    let millis: f64 = tail.split(' ').next().unwrap().parse().unwrap();
    assert!(keys >= 500.0, "a step big enough to throttle: {line}");
    let rate = keys / (millis / 1000.0);
    // The time is printed to the millisecond.
    assert!(rate <= 1000.0 * 1.001, "{rate:.0} keys/s: {line}");
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
}

/// `--slot-stats-every 3` over 7 steps of an algorithm that never moves: the steps' per-slot
/// figures are 0, 1, 2, 0, 1, 2, 0 observations old, and each master is asked for them once
/// to prime the loop and once per step of age 0 (Valkey: one `CLUSTER SLOT-STATS` a reading;
/// Redis: one `COUNTKEYSINSLOT` per slot it owns). A reused reading keeps the keys per slot.
fn slot_stats_every_reads_the_per_slot_figures_at_every_nth_step(kind: ServerKind) {
    let _serial = serial();
    let cluster = start_cluster_of(kind, 2);
    let data = DataSet::new(2_000, 0, 0, (0, 0));
    data.load(&cluster, 2);
    let (command, per_reading): (&str, fn(u64) -> u64) = match kind {
        ServerKind::Valkey => ("cluster|slot-stats", |_| 1),
        // Redis and Valkey 8 take the standard protocol's backend.
        _ => ("cluster|countkeysinslot", |slots| slots),
    };
    let before = command_calls(&cluster, &[command]);
    let seed = cluster.seed();
    let (log, log_path) = temp_log();
    let mut args = vec![
        "rebalance",
        "--cluster",
        &seed,
        "--algorithm",
        "static-w",
        "--steps",
        "7",
        "--interval-ms",
        "100",
        "--slot-stats-every",
        "3",
        "--log",
        &log_path,
    ];
    if kind == ServerKind::Valkey {
        args.push("--enable-slot-stats");
    }
    let rebalance = ach_redis(&args);
    assert!(rebalance.status.success(), "{}", text(&rebalance.stderr));
    let steps = read_log(log.path());
    let ages: Vec<u64> = steps
        .iter()
        .map(|step| step["observed"]["slot_figures_age"].as_u64().unwrap())
        .collect();
    assert_eq!(ages, [0, 1, 2, 0, 1, 2, 0]);
    for step in &steps {
        let keys: u64 = step["observed"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|node| node["keys"].as_u64().unwrap())
            .sum();
        assert_eq!(keys, 2_000, "{step}");
    }
    let readings = 1 + ages.iter().filter(|&&age| age == 0).count() as u64;
    let after = command_calls(&cluster, &[command]);
    for node in steps[0]["observed"]["nodes"].as_array().unwrap() {
        let address = node["address"].as_str().unwrap();
        let slots = node["slots"].as_u64().unwrap();
        assert_eq!(
            after[address] - before[address],
            readings * per_reading(slots),
            "{command} calls on {address}"
        );
    }
}
