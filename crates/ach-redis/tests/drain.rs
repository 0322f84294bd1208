//! `ach-redis rebalance --drain` as an operator uses it (issue 23), on real local clusters:
//! a drain empties its master within the budget under clients, a drained slot larger than any
//! step's budget leaves the drain unfinished and says so, and the algorithm plans again only a
//! horizon after the drain.

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use ach_redis::local::ServerKind;
use common::{
    DataSet, Workload, ach_redis, assert_check_clean, assert_nothing_lost, moves_of, read_events,
    read_log, serial, slot_map, start_cluster_of, temp_log, text, used_memory_mb, wrong_values,
};

on_every_backend!(a_drain_empties_its_master_under_clients_within_the_budget);

/// The budget options of the drain tests: `M_max` 0.1 per step and `M_H` 0.25 over 4 steps.
const DRAIN_BUDGET: [&str; 6] = ["--m-max", "0.1", "--m-horizon", "0.25", "--horizon", "4"];

/// Every step's `moved_fraction` is at most `m_max`, and every window of `horizon` steps of
/// the log holds at most `m_horizon`.
fn assert_budget_held(steps: &[serde_json::Value], m_max: f64, m_horizon: f64, horizon: usize) {
    let moved: Vec<f64> = steps
        .iter()
        .map(|s| s["moved_fraction"].as_f64().unwrap())
        .collect();
    for (step, fraction) in moved.iter().enumerate() {
        assert!(
            *fraction <= m_max + 1e-9,
            "step {step} moved {fraction} > M_max {m_max}"
        );
    }
    for (first, window) in moved.windows(horizon.min(moved.len())).enumerate() {
        let spent: f64 = window.iter().sum();
        assert!(
            spent <= m_horizon + 1e-9,
            "steps {first}..{} moved {spent} > M_H {m_horizon}: {moved:?}",
            first + window.len()
        );
    }
}

/// Four masters with 8,000 keys and clients; `--drain` of one of them (a quarter of the keys,
/// more than the window budget `M_H` 0.25 lets one window move) under `--until-balanced 1`, a
/// tolerance every step meets: the run does not stop while the drained master owns slots, its
/// steps are drain steps that send nothing to the drained master and hold the budget, `plan`
/// shows the same first step, and at the end the drained master holds no slot and no key, no
/// client saw an error, no key is lost and the cluster checks clean.
fn a_drain_empties_its_master_under_clients_within_the_budget(kind: ServerKind) {
    let _serial = serial();
    let cluster = start_cluster_of(kind, 4);
    let data = Arc::new(DataSet::new(8000, 0, 0, (0, 16383)));
    data.load(&cluster, 2);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(60));
    let seed = cluster.seed();
    let drained = cluster.servers()[1].address();
    let common = ["--cluster", seed.as_str(), "--drain", drained.as_str()];

    let mut plan_args = vec!["plan", "--json", "--sample-ms", "300"];
    plan_args.extend(common);
    plan_args.extend(DRAIN_BUDGET);
    let plan = ach_redis(&plan_args);
    assert!(plan.status.success(), "plan failed: {}", text(&plan.stderr));
    let planned: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();

    let (log, log_path) = temp_log();
    let mut args = vec![
        "rebalance",
        "--steps",
        "12",
        "--interval-ms",
        "300",
        "--until-balanced",
        "1",
        "--log",
        &log_path,
    ];
    args.extend(common);
    args.extend(DRAIN_BUDGET);
    let rebalance = ach_redis(&args);
    let progress = text(&rebalance.stderr);
    let summary = text(&rebalance.stdout);
    eprintln!("{progress}\n{summary}");
    assert_eq!(rebalance.status.code(), Some(0), "{summary}");
    let report = workload.finish();
    let steps = read_log(log.path());

    // plan's drain step is rebalance's first: the same slots from the same source, the same
    // keys (the receivers follow the loads, which the clients make noisy).
    let slots_of = |plan: &serde_json::Value| -> Vec<(u64, String)> {
        moves_of(plan)
            .into_iter()
            .map(|(s, from, _)| (s, from))
            .collect()
    };
    assert_eq!(planned["plan"]["algorithm"], "drain");
    assert!(!slots_of(&planned["plan"]).is_empty());
    assert_eq!(slots_of(&planned["plan"]), slots_of(&steps[0]["plan"]));
    assert_eq!(
        planned["plan"]["keys_to_copy"],
        steps[0]["plan"]["keys_to_copy"]
    );

    let (last, draining) = steps.split_last().unwrap();
    assert!(
        draining.len() >= 3,
        "a window's budget cannot drain it:\n{progress}"
    );
    for step in draining {
        assert_eq!(step["plan"]["algorithm"], "drain", "{step}");
        for (_, from, to) in moves_of(&step["plan"]) {
            assert_eq!(
                from, drained,
                "a drain step moves the drained master's slots only"
            );
            assert_ne!(to, drained, "the drained master never receives");
        }
    }
    // --until-balanced 1 stopped at the first step the drained master owned nothing, which
    // the observation no longer shows.
    assert!(last["plan"].is_null(), "{last}");
    let nodes = last["observed"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{last}");
    assert!(nodes.iter().all(|n| n["address"] != drained.as_str()));
    for step in &steps {
        assert!(
            step["observed"]["imbalance"].as_f64().unwrap().is_finite(),
            "{step}"
        );
    }
    assert_budget_held(&steps, 0.1, 0.25, 4);
    let (owners, ranges) = slot_map(&cluster);
    assert!(owners.iter().all(|o| *o != drained), "no slot left on it");
    // A master that lost its last slot is a replica now (cluster-allow-replica-migration, on
    // by default): of the master that took that slot, whose keys it holds as copies.
    let mut connection = cluster.servers()[1].connection().unwrap();
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut connection).unwrap();
    let role = match &role[0] {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).to_string(),
        other => panic!("ROLE: {other:?}"),
    };
    if role == "master" {
        let keys: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
        assert_eq!(keys, 0, "no key left on the drained master");
    } else {
        assert_eq!(role, "slave", "the drained master became a replica");
    }
    eprintln!("{} slot ranges after the drain", ranges);
    assert!(
        ranges <= 12,
        "the drain moves ranges, not scattered slots: {ranges}"
    );
    assert!(!summary.contains("UNFINISHED"), "{summary}");
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
}

/// A drained master holding one slot of 1,500 keys under one hash tag, more than any drain
/// step may move (`M_max` 0.2 of 4,500 keys): the drain moves every other slot, names that
/// one with its tag at every step, never lets the algorithm plan, and the run exits 6 with the
/// summary saying the drain is unfinished. Planning only: one backend.
#[test]
fn a_drained_slot_larger_than_any_step_budget_leaves_the_drain_unfinished() {
    let _serial = serial();
    let cluster = start_cluster_of(ServerKind::Redis, 3);
    let data = DataSet::with_hot_slot(3000, 1500, (0, 5000));
    data.load(&cluster, 2);
    let slot = data.hot_slots[0];
    let tag = data.keys[3000].split('}').next().unwrap().to_string() + "}";
    let seed = cluster.seed();
    let drained = cluster.servers()[0].address();
    let weight = format!("{drained}=0");
    let plan = ach_redis(&[
        "plan",
        "--cluster",
        &seed,
        "--weight",
        &weight,
        "--sample-ms",
        "200",
        "--m-max",
        "0.2",
        "--m-horizon",
        "0.25",
        "--horizon",
        "3",
    ]);
    let plan_text = text(&plan.stdout);
    eprintln!("{plan_text}");
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert!(
        plan_text.contains(&format!("drain of {drained}: ")),
        "{plan_text}"
    );
    assert!(
        plan_text.contains(&format!(
            "notable slot {slot} (hash tag {tag}) on {drained}"
        )),
        "{plan_text}"
    );
    let (log, log_path) = temp_log();
    let rebalance = ach_redis(&[
        "rebalance",
        "--cluster",
        &seed,
        "--weight",
        &weight,
        "--steps",
        "5",
        "--interval-ms",
        "200",
        "--m-max",
        "0.2",
        "--m-horizon",
        "0.25",
        "--horizon",
        "3",
        "--log",
        &log_path,
    ]);
    let progress = text(&rebalance.stderr);
    let summary = text(&rebalance.stdout);
    eprintln!("{progress}\n{summary}");
    assert_eq!(rebalance.status.code(), Some(6), "{summary}");
    assert!(
        summary.contains(&format!(
            "drain UNFINISHED: {drained} still owns 1 slot ({slot})"
        )),
        "{summary}"
    );
    assert!(
        progress.contains(&format!(
            "notable slot {slot} (hash tag {tag}) on {drained}"
        )),
        "{progress}"
    );
    let steps = read_log(log.path());
    assert_eq!(steps.len(), 5);
    for step in &steps {
        assert_eq!(step["plan"]["algorithm"], "drain", "{step}");
        assert_eq!(step["plan"]["drain"]["unmovable"][0], slot, "{step}");
    }
    let reason = steps[4]["plan"]["nothing_moves_because"].as_str().unwrap();
    assert!(reason.contains("the drain cannot finish"), "{reason}");
    assert_budget_held(&steps, 0.2, 0.25, 3);
    let events = read_events(log.path());
    let last = &events.last().unwrap()["summary"];
    assert_eq!(
        last["drains_unfinished"].as_array().unwrap().len(),
        1,
        "{last}"
    );
    let expected = data
        .keys
        .iter()
        .enumerate()
        .map(|(i, key)| (key.clone(), data.value(i % 2, 0)))
        .collect();
    assert_eq!(wrong_values(&cluster, &expected), Vec::<String>::new());
    assert_check_clean(&cluster);
}

/// Three masters, the first hot (its memory near its capacity); `--drain` of the third: its
/// drain steps come first, then the algorithm waits until the drain's last moves have left the
/// horizon window (each waiting step says so), then ACH moves slots off the hot master; no
/// window of `H` steps of the log holds more than `M_H`, drain and algorithm together.
#[test]
fn the_algorithm_plans_only_a_horizon_after_the_drain() {
    let _serial = serial();
    let cluster = start_cluster_of(ServerKind::Redis, 3);
    let data = DataSet::new(4000, 20, 200, (0, 5000));
    data.load(&cluster, 2);
    let capacity = format!("{:.1}", used_memory_mb(&cluster.servers()[0]) * 1.05);
    let seed = cluster.seed();
    let drained = cluster.servers()[2].address();
    let (log, log_path) = temp_log();
    let rebalance = ach_redis(&[
        "rebalance",
        "--cluster",
        &seed,
        "--drain",
        &drained,
        "--memory-capacity-mb",
        &capacity,
        "--steps",
        "7",
        "--interval-ms",
        "300",
        "--m-max",
        "0.1",
        "--m-horizon",
        "0.25",
        "--horizon",
        "3",
        "--log",
        &log_path,
    ]);
    let progress = text(&rebalance.stderr);
    let summary = text(&rebalance.stdout);
    eprintln!("{progress}\n{summary}");
    assert_eq!(rebalance.status.code(), Some(0), "{summary}");
    let steps = read_log(log.path());
    let algorithm: Vec<&str> = steps
        .iter()
        .map(|s| s["plan"]["algorithm"].as_str().unwrap())
        .collect();
    let last_drain = algorithm.iter().rposition(|a| *a == "drain").unwrap();
    assert!(algorithm[..=last_drain].iter().all(|a| *a == "drain"));
    let last_drain_move = (0..=last_drain)
        .rev()
        .find(|&i| !moves_of(&steps[i]["plan"]).is_empty())
        .unwrap();
    for step in &steps[last_drain + 1..last_drain_move + 3] {
        assert!(moves_of(&step["plan"]).is_empty(), "{step}");
        let reason = step["plan"]["nothing_moves_because"].as_str().unwrap();
        assert!(
            reason.contains(&format!("the drain moved keys at step {last_drain_move}")),
            "{reason}"
        );
    }
    let after = &steps[last_drain_move + 3];
    assert_eq!(after["plan"]["algorithm"], "ACH", "{after}");
    assert!(
        !moves_of(&after["plan"]).is_empty(),
        "ACH moves off the hot master once it may: {}",
        after["plan"]["nothing_moves_because"]
    );
    assert_budget_held(&steps, 0.1, 0.25, 3);
    assert_check_clean(&cluster);
}
