use super::arm::imbalance;
use super::*;
use crate::config::{Churn, Degradation, NodeClass, built_in_series};

/// A small series of the built-in `name`: 4 nodes, 60 tokens, 600 keys, 30 steps, no events.
pub(crate) fn small(name: &str) -> SeriesConfig {
    let mut c = built_in_series()
        .into_iter()
        .find(|s| s.name == name)
        .expect("built-in series");
    c.tokens = 60;
    c.keys = 600;
    c.steps = 30;
    c.warmup = 5;
    c.cluster.classes.truncate(4);
    c.churn.clear();
    c.degradation.clear();
    c
}

fn refs(arms: &mut [Arm]) -> Vec<&mut Arm> {
    arms.iter_mut().collect()
}

fn setup(config: &SeriesConfig, profile: Profile) -> (Cluster, Vec<Arm>) {
    let positions: Vec<f64> = (0..config.tokens)
        .map(|s| (s as f64 + 0.5) / config.tokens as f64)
        .collect();
    let ring = TokenRing::round_robin(positions, config.cluster.classes.len()).unwrap();
    let arms = config
        .algorithms
        .iter()
        .map(|name| {
            let registry = Registry::built_in();
            Arm::new(name, registry.get(name).unwrap(), config, ring.clone()).unwrap()
        })
        .collect();
    (Cluster::new(config, profile), arms)
}

#[test]
fn paper_removal_gives_tokens_to_node_zero_and_keeps_the_node_in_view() {
    let config = small("C1");
    let (mut cluster, mut arms) = setup(&config, Profile::Paper);
    remove_node(NodeId(2), &mut cluster, &mut refs(&mut arms));
    for arm in &arms {
        assert_eq!(arm.ring.count(NodeId(2)), 0);
        // Round-robin over 4 nodes: node 0 had 15 tokens and now also has node 2's 15.
        assert_eq!(arm.ring.count(NodeId(0)), 30);
    }
    assert_eq!(cluster.service_rate[2], 0.0);
    assert!(!cluster.member[2]);
    assert!(
        cluster.usable[2],
        "the paper profile keeps the removed node in view"
    );
}

#[test]
fn corrected_removal_hands_each_token_to_the_next_live_owner_clockwise() {
    let config = small("C1");
    let (mut cluster, mut arms) = setup(&config, Profile::Corrected);
    remove_node(NodeId(2), &mut cluster, &mut refs(&mut arms));
    let ring = &arms[0].ring;
    // Token 2 (owned by node 2) is followed by token 3, owned by node 3.
    assert_eq!(ring.owner(2), NodeId(3));
    // The last token of node 2 is 58; token 59 is node 3's.
    assert_eq!(ring.owner(58), NodeId(3));
    assert_eq!(ring.counts(4), vec![15, 15, 0, 30]);
    assert!(!cluster.usable[2]);
    // Remove node 3 too: its tokens go clockwise to node 0 (token 60 wraps to token 0).
    remove_node(NodeId(3), &mut cluster, &mut refs(&mut arms));
    assert_eq!(arms[0].ring.owner(59), NodeId(0));
    assert_eq!(arms[0].ring.owner(2), NodeId(0));
    assert_eq!(arms[0].ring.counts(4), vec![45, 15, 0, 0]);
}

#[test]
fn a_joining_node_takes_v_min_tokens_from_the_largest_owner() {
    let config = small("C1");
    let (mut cluster, mut arms) = setup(&config, Profile::Paper);
    remove_node(NodeId(3), &mut cluster, &mut refs(&mut arms));
    join_node(
        NodeClass::Medium.capacity(),
        &config,
        &mut cluster,
        &mut refs(&mut arms),
    );
    let ring = &arms[0].ring;
    // Node 0 owns the most (30); its three lowest-indexed tokens are 0, 3 and 4.
    assert_eq!(ring.tokens_of(NodeId(4)), vec![0, 3, 4]);
    assert_eq!(cluster.capacity.len(), 5);
    assert_eq!(cluster.service_rate[4], 0.55 * 350.0);
    assert_eq!(arms[0].telemetry.node_count(), 5);
}

#[test]
fn degradation_scales_service_rates_at_its_step_only() {
    let mut config = small("C1");
    config.degradation.push(Degradation {
        t: 3,
        nodes: vec![1],
        factor: 0.4,
    });
    let (mut cluster, mut arms) = setup(&config, Profile::Paper);
    assert!(!apply_events(
        &config,
        2,
        &mut cluster,
        &mut refs(&mut arms)
    ));
    assert!(apply_events(&config, 3, &mut cluster, &mut refs(&mut arms)));
    assert_eq!(cluster.service_rate[1], 350.0 * 0.4);
    assert_eq!(cluster.service_rate[0], 350.0);
}

/// Run `run_index` of `config`, which must succeed.
pub(crate) fn run(config: &SeriesConfig, profile: Profile, run_index: u32) -> RunRecord {
    simulate(&RunSpec {
        config,
        point: None,
        profile,
        run_index,
    })
    .unwrap()
}

/// Node 3 leaves at t = 10; a strong node joins at t = 20.
fn node_3_leaves_then_a_strong_node_joins() -> Vec<Churn> {
    vec![
        Churn {
            t: 10,
            remove: vec![3],
            add: vec![],
        },
        Churn {
            t: 20,
            remove: vec![],
            add: vec![NodeClass::Strong],
        },
    ]
}

#[test]
fn churn_runs_cleanly_in_both_profiles() {
    let mut config = small("C3");
    config.steps = 40;
    config.churn = node_3_leaves_then_a_strong_node_joins();
    for profile in [Profile::Paper, Profile::Corrected] {
        let record = run(&config, profile, 0);
        for a in &record.algorithms {
            assert_eq!(
                a.aggregates.n_viol, 0,
                "{} {profile:?}: {:?}",
                a.name, a.violations
            );
            assert_eq!(a.d_trace.len(), 40);
            assert!(a.d_trace.iter().all(|d| d.is_finite() && *d >= 0.0));
        }
    }
}

#[test]
fn a_run_is_a_pure_function_of_config_profile_and_index() {
    let config = small("C4c");
    let a = run(&config, Profile::Paper, 1);
    assert_eq!(a, run(&config, Profile::Paper, 1));
    assert_ne!(a, run(&config, Profile::Paper, 2));
    assert_ne!(a.algorithms, run(&config, Profile::Corrected, 1).algorithms);
    // Noisy telemetry: the true imbalance is recorded and differs from the observed one.
    let ach = a.algorithm("ACH").unwrap();
    assert_eq!(ach.d_true_trace.len(), ach.d_trace.len());
    assert_ne!(ach.d_true_trace, ach.d_trace);
}

#[test]
fn algorithms_see_the_same_requests() {
    // A0 and A1 never move after the first step, so in a noise-free run with all arms seeing
    // one request stream, a second run with A0 alone must give A0 the very same trace.
    let mut config = small("C1");
    let all = run(&config, Profile::Paper, 0);
    config.algorithms = vec!["Static-W".into()];
    let alone = run(&config, Profile::Paper, 0);
    assert_eq!(all.algorithm("Static-W"), alone.algorithm("Static-W"));
}

#[test]
fn corrected_profile_excludes_removed_nodes_from_the_imbalance() {
    let config = small("C1");
    let (mut cluster, mut arms) = setup(&config, Profile::Corrected);
    remove_node(NodeId(1), &mut cluster, &mut refs(&mut arms));
    let mut scratch = Vec::new();
    let loads = [0.5, 0.0, 0.5, 0.5];
    assert_eq!(imbalance(&loads, &cluster.usable, &mut scratch), 0.0);
    assert!(imbalance(&loads, &[true; 4], &mut scratch) > 0.1);
}

#[test]
fn a_group_gives_each_run_its_own_record() {
    let base = small("C1");
    let mut noisy = small("C4c");
    noisy.algorithms = vec!["ACH".into(), "Static-W".into()];
    let mut other_seed = small("C1");
    other_seed.seed_base = 7;
    let mut tighter = small("C1");
    tighter.ach.eps_on = 0.2;
    tighter.algorithms = vec!["ACH".into()];
    let configs = [&base, &noisy, &other_seed, &tighter];
    let specs: Vec<RunSpec<'_>> = configs
        .iter()
        .map(|config| RunSpec {
            config,
            point: None,
            profile: Profile::Paper,
            run_index: 1,
        })
        .collect();
    assert_eq!(
        shared_workload_key(&specs[0]),
        shared_workload_key(&specs[1])
    );
    assert_eq!(
        shared_workload_key(&specs[0]),
        shared_workload_key(&specs[3])
    );
    assert_ne!(
        shared_workload_key(&specs[0]),
        shared_workload_key(&specs[2])
    );
    let grouped = simulate_group(&specs);
    for (spec, record) in specs.iter().zip(grouped) {
        assert_eq!(record.unwrap(), simulate(spec).unwrap());
    }
}

#[test]
fn ch_bl_moves_nothing_and_forwards_under_c1s_capacities() {
    let mut config = small("C1");
    config.algorithms = vec!["Static-W".into(), "ACH".into(), "CH-BL".into()];
    let record = run(&config, Profile::Paper, 0);
    let ch_bl = record.algorithm("CH-BL").unwrap();
    assert_eq!(ch_bl.aggregates.m_cum, 0.0);
    assert!(ch_bl.m_trace.iter().all(|&m| m == 0.0));
    let fraction = ch_bl.aggregates.forwarded_fraction.unwrap();
    // Round-robin tokens over three strong nodes and a medium one: the medium node's equal
    // share of the requests (1/4) is above its bound (1.25 * 0.55 / 3.55 of them).
    assert!(fraction > 0.0 && fraction <= 1.0, "{fraction}");
    for other in ["Static-W", "ACH"] {
        assert_eq!(
            record
                .algorithm(other)
                .unwrap()
                .aggregates
                .forwarded_fraction,
            None
        );
    }
    // The other arms are exactly those of a run without CH-BL.
    config.algorithms.pop();
    let without = run(&config, Profile::Paper, 0);
    assert_eq!(record.algorithms[..2], without.algorithms[..]);
}

#[test]
fn ch_bl_with_bounds_never_reached_is_static_w() {
    // With a huge eps nothing is ever forwarded, and CH-BL's own routing must give exactly
    // the loads of the owner routing: Static-W's traces, bit for bit.
    let mut config = small("C3");
    config.algorithms = vec!["Static-W".into(), "CH-BL".into()];
    config.ch_bl = Some(crate::config::ChBlConfig { eps: 1e9 });
    config.churn = node_3_leaves_then_a_strong_node_joins();
    for profile in [Profile::Paper, Profile::Corrected] {
        let record = run(&config, profile, 0);
        let (static_w, ch_bl) = (&record.algorithms[0], &record.algorithms[1]);
        assert_eq!(ch_bl.aggregates.forwarded_fraction, Some(0.0));
        assert_eq!(static_w.d_trace, ch_bl.d_trace, "{profile:?}");
        assert_eq!(static_w.aggregates.n_viol, ch_bl.aggregates.n_viol);
    }
}

#[test]
fn a_hot_key_phase_changes_only_its_own_steps_and_raises_the_imbalance() {
    let mut config = small("C1");
    config.algorithms = vec!["Static-W".into()];
    let plain = run(&config, Profile::Paper, 0);
    config.hot_keys = Some(crate::config::HotKeys {
        from: 10,
        to: 20,
        share: 0.5,
        keys: 5,
        node: 1,
    });
    let hot = run(&config, Profile::Paper, 0);
    let (plain, hot) = (
        &plain.algorithm("Static-W").unwrap().d_trace,
        &hot.algorithm("Static-W").unwrap().d_trace,
    );
    // The same random words are drawn in every step: before the phase nothing changes, and
    // after it only the smoothed loads remember it, less at every step (beta 0.3).
    assert_eq!(plain[..10], hot[..10]);
    let after: Vec<f64> = (20..30).map(|t| (hot[t] - plain[t]).abs()).collect();
    assert!(after[9] < 0.2 * after[0], "{after:?}");
    let mean = |trace: &[f64]| trace.iter().sum::<f64>() / trace.len() as f64;
    assert!(
        mean(&hot[10..20]) > 1.5 * mean(&plain[10..20]),
        "hot {:?} against plain {:?}",
        &hot[10..20],
        &plain[10..20]
    );
}

#[test]
fn a_hot_key_phase_outside_the_run_is_refused_with_its_field() {
    let mut config = small("C1");
    config.hot_keys = Some(crate::config::HotKeys {
        from: 10,
        to: 31,
        share: 0.5,
        keys: 5,
        node: 1,
    });
    let error = config.validate(Profile::Paper).unwrap_err().to_string();
    assert!(error.contains("hot_keys.to"), "{error}");
    config.hot_keys.as_mut().unwrap().to = 20;
    config.hot_keys.as_mut().unwrap().node = 4;
    let error = config.validate(Profile::Paper).unwrap_err().to_string();
    assert!(error.contains("hot_keys.node"), "{error}");
}

fn paced(config: &SeriesConfig, pacing: crate::pacing::Pacing) -> SeriesConfig {
    let mut paced = config.clone();
    paced.pacing = vec![pacing];
    paced
}

fn every_algorithm_paced(config: &SeriesConfig) -> crate::pacing::Pacing {
    crate::pacing::Pacing {
        algorithms: config.algorithms.clone(),
        step_s: 2.0,
        control_s: 0.0,
        wait_s: 2.0,
        job_s: 0.0,
        key_s: 0.0,
        jobs: crate::pacing::JobGrouping::SourceTarget,
    }
}

#[test]
fn pacing_without_delays_is_the_instant_model_step_for_step() {
    for name in ["C1", "C2", "C4"] {
        let config = small(name);
        let instant = run(&config, Profile::Paper, 1);
        let paced_config = paced(&config, every_algorithm_paced(&config));
        paced_config.validate(Profile::Paper).unwrap();
        let paced = run(&paced_config, Profile::Paper, 1);
        assert_ne!(
            paced.fingerprint, instant.fingerprint,
            "pacing is in the fingerprint"
        );
        assert_eq!(paced.algorithms, instant.algorithms, "series {name}");
    }
}

#[test]
fn paced_moves_switch_later_and_the_arm_plans_less_often() {
    let mut config = small("C2");
    config.algorithms = vec!["ACH".into(), "Dynamic-R".into()];
    config.steps = 60;
    config.load = crate::config::LoadProfile::Constant { lambda: 700.0 };
    config.degradation = vec![Degradation {
        t: 10,
        nodes: vec![0],
        factor: 0.3,
    }];
    let instant = run(&config, Profile::Paper, 0);
    let mut pacing = every_algorithm_paced(&config);
    pacing.algorithms = vec!["ACH".into()];
    (pacing.step_s, pacing.wait_s, pacing.job_s) = (1.0, 1.0, 1.5);
    let paced = run(&paced(&config, pacing), Profile::Paper, 0);
    // Dynamic-R is not paced: its records are unchanged.
    assert_eq!(paced.algorithms[1], instant.algorithms[1]);
    let (ach_instant, ach_paced) = (&instant.algorithms[0], &paced.algorithms[0]);
    let plans = |m: &[f64]| m.iter().filter(|&&m| m > 0.0).count();
    assert!(
        plans(&ach_instant.m_trace) > 1,
        "ACH moves after the degradation"
    );
    // A plan with moves takes at least 1 s of wait and one 1.5 s job: ACH cannot plan at two
    // steps in a row after moving.
    for pair in ach_paced.m_trace.windows(2) {
        assert!(pair[0] == 0.0 || pair[1] == 0.0, "{:?}", ach_paced.m_trace);
    }
    assert_ne!(ach_paced.d_trace, ach_instant.d_trace);
    assert_eq!(ach_paced.aggregates.n_viol, 0, "{:?}", ach_paced.violations);
}

#[test]
fn pacing_is_refused_with_churn_and_for_an_algorithm_twice() {
    let mut config = small("C1");
    config.pacing = vec![every_algorithm_paced(&config)];
    config.churn = node_3_leaves_then_a_strong_node_joins();
    let error = config.validate(Profile::Paper).unwrap_err();
    assert_eq!(error.field, "pacing");
    assert!(error.to_string().contains("churn"), "{error}");
    config.churn.clear();
    config.pacing.push(every_algorithm_paced(&config));
    let error = config.validate(Profile::Paper).unwrap_err();
    assert_eq!(error.field, "pacing[1].algorithms[0]");
}

#[test]
fn an_identity_reading_changes_nothing_but_records_the_true_loads() {
    let config = small("C2");
    let plain = run(&config, Profile::Paper, 0);
    let mut read = config.clone();
    read.readings = vec![crate::reading::Reading {
        nodes: (0..4).collect(),
        offset: 0.0,
        scale: 1.0,
        knee: None,
        scatter: None,
    }];
    let read = run(&read, Profile::Paper, 0);
    for (plain, read) in plain.algorithms.iter().zip(&read.algorithms) {
        assert_eq!(read.d_trace, plain.d_trace);
        assert_eq!(read.m_trace, plain.m_trace);
        assert_eq!(
            read.d_true_trace, plain.d_trace,
            "the true loads are recorded"
        );
    }
}

#[test]
fn the_controllers_own_smoothing_moves_their_loads_and_leaves_the_truth_alone() {
    // C1's heterogeneous cluster, in which ACH moves tokens from the first steps on.
    let config = SeriesConfig {
        steps: 120,
        algorithms: vec!["Static-W".into(), "ACH".into()],
        ..built_in_series()
            .into_iter()
            .find(|s| s.name == "C1")
            .expect("built-in series")
    };
    let plain = run(&config, Profile::Paper, 0);
    // The series' own factor, given as the controllers': the same run, the truth recorded.
    let mut same = config.clone();
    same.telemetry.controller_beta = Some(config.telemetry.beta);
    let same = run(&same, Profile::Paper, 0);
    for (plain, same) in plain.algorithms.iter().zip(&same.algorithms) {
        assert_eq!(same.d_trace, plain.d_trace);
        assert_eq!(same.m_trace, plain.m_trace);
        assert_eq!(same.d_true_trace, plain.d_trace);
    }
    // No smoothing for the controllers: what they read changes, and so do ACH's moves; the
    // truth of an algorithm that never moves does not.
    let mut raw = config.clone();
    raw.telemetry.controller_beta = Some(1.0);
    let raw = run(&raw, Profile::Paper, 0);
    let arm = |record: &RunRecord, name: &str| {
        record
            .algorithms
            .iter()
            .find(|a| a.name == name)
            .cloned()
            .expect("the series runs it")
    };
    let (a0_plain, a0_raw) = (arm(&plain, "Static-W"), arm(&raw, "Static-W"));
    assert_eq!(a0_raw.d_true_trace, a0_plain.d_trace);
    assert_ne!(a0_raw.d_trace, a0_plain.d_trace);
    assert_ne!(arm(&raw, "ACH").m_trace, arm(&plain, "ACH").m_trace);
    let mut bad = config.clone();
    bad.telemetry.controller_beta = Some(0.0);
    let error = bad.validate(Profile::Paper).unwrap_err();
    assert_eq!(
        error.to_string(),
        "series C1: telemetry.controller_beta = 0 must be in (0, 1]"
    );
}

#[test]
fn a_node_that_reads_high_is_relieved_of_tokens_its_load_does_not_call_for() {
    let mut config = small("C1");
    config.algorithms = vec!["Dynamic-R".into()];
    let plain = run(&config, Profile::Paper, 0);
    assert!(plain.algorithms[0].m_trace.iter().all(|&m| m == 0.0));
    config.readings = vec![crate::reading::Reading {
        nodes: vec![0],
        offset: 0.9,
        scale: 1.0,
        knee: None,
        scatter: None,
    }];
    let read = run(&config, Profile::Paper, 0);
    let arm = &read.algorithms[0];
    assert!(
        arm.m_trace.iter().any(|&m| m > 0.0),
        "Dynamic-R sheds node 0's tokens"
    );
    // It sees node 0 overloaded: the observed D is above the true one.
    assert!(arm.d_trace[10] > arm.d_true_trace[10]);
}

#[test]
fn a_contiguous_layout_deals_out_blocks_with_the_hot_keys_in_the_hot_nodes_block() {
    use crate::config::InitialLayout;
    let owners: Vec<u32> = InitialLayout::Contiguous
        .owners(10, 3)
        .iter()
        .map(|n| n.0)
        .collect();
    // As the live clusters deal out slots: node i from floor(i V / n) on.
    assert_eq!(owners, [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]);
    let round_robin: Vec<u32> = InitialLayout::RoundRobin
        .owners(5, 2)
        .iter()
        .map(|n| n.0)
        .collect();
    assert_eq!(round_robin, [0, 1, 0, 1, 0]);
    let mut config = small("C1");
    config.hot_keys = Some(crate::config::HotKeys {
        from: 5,
        to: 20,
        share: 0.5,
        keys: 5,
        node: 1,
    });
    config.initial_layout = InitialLayout::Contiguous;
    let ring = TokenRing::new(
        (0..60).map(|s| (s as f64 + 0.5) / 60.0).collect(),
        InitialLayout::Contiguous.owners(60, 4),
    )
    .unwrap();
    let hashes: Vec<f64> = (0..600).map(|k| (k as f64 + 0.25) / 600.0).collect();
    let hot = RunKeys::new(&config, ring.positions(), &hashes).hot_phase_workload(
        &config,
        config.hot_keys.as_ref().unwrap(),
        &ring,
    );
    // Half the requests go to the hot keys, all on node 1's block (a quarter of the keys).
    let on_node_1: f64 = (0..60)
        .filter(|&s| ring.owner(s) == NodeId(1))
        .map(|s| hot.token_probability()[s])
        .sum();
    assert!(on_node_1 > 0.6, "{on_node_1}");
    let record = run(&config, Profile::Paper, 0);
    assert!(record.algorithms.iter().all(|a| a.aggregates.n_viol == 0));
}

#[test]
fn a_knee_above_every_load_reads_as_its_line() {
    let mut config = small("C1");
    config.algorithms = vec!["Dynamic-R".into()];
    let line = crate::reading::Reading {
        nodes: vec![0, 1],
        offset: 0.4,
        scale: 0.7,
        knee: None,
        scatter: None,
    };
    config.readings = vec![line.clone()];
    let straight = run(&config, Profile::Paper, 0);
    config.readings = vec![crate::reading::Reading {
        knee: Some(crate::reading::Knee {
            load: 1e6,
            scale: 0.0,
        }),
        ..line.clone()
    }];
    let far = run(&config, Profile::Paper, 0);
    assert_eq!(far.algorithms[0].d_trace, straight.algorithms[0].d_trace);
    // A knee inside the loads' range reads them otherwise.
    config.readings = vec![crate::reading::Reading {
        knee: Some(crate::reading::Knee {
            load: 0.05,
            scale: 5.0,
        }),
        ..line
    }];
    let bent = run(&config, Profile::Paper, 0);
    assert_ne!(bent.algorithms[0].d_trace, straight.algorithms[0].d_trace);
}

#[test]
fn a_scatter_moves_the_readings_off_their_line_and_leaves_the_truth_alone() {
    use crate::reading::{Reading, Scatter};
    let mut config = small("C1");
    config.algorithms = vec!["Dynamic-R".into(), "ACH".into()];
    let line = Reading {
        nodes: (0..4).collect(),
        offset: 0.1,
        scale: 0.9,
        knee: None,
        scatter: None,
    };
    config.readings = vec![line.clone()];
    let straight = run(&config, Profile::Paper, 0);
    let scattered = |sd: f64, autocorrelation: f64| {
        let mut config = config.clone();
        config.readings = vec![Reading {
            scatter: Some(Scatter {
                sd,
                autocorrelation,
            }),
            ..line.clone()
        }];
        run(&config, Profile::Paper, 0)
    };
    // A scatter of no spread reads the line, bit for bit.
    let none = scattered(0.0, 0.5);
    for (a, b) in straight.algorithms.iter().zip(&none.algorithms) {
        assert_eq!(a.d_trace, b.d_trace);
        assert_eq!(a.d_true_trace, b.d_true_trace);
    }
    // A spread moves the observed D; before the first plan acts on it, not the true one.
    let wide = scattered(0.05, 0.5);
    let (plain, off) = (&straight.algorithms[0], &wide.algorithms[0]);
    assert_ne!(off.d_trace[0], plain.d_trace[0]);
    assert_eq!(off.d_true_trace[0], plain.d_true_trace[0]);
    // Every arm of a run reads the same deviations: the same seed, the same traces.
    assert_eq!(wide, scattered(0.05, 0.5));
}
