//! REPORT.md of a live experiment: the set-up (server, quotas, measured service rates, load
//! average), the arms, ACH paired against each, the targets read from those figures, the
//! calibrated simulator's agreement, the phases, the CPU throttling of every node, the figures.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ach_report::report::Figure;
use ach_sim::algorithms::names;
use ach_sim::config::NodeClass;

use crate::experiment::REDIS_CLI;
use crate::experiment::{CpuReading, LiveResults, NodeInfo};
use crate::output::tables_markdown;
use crate::summary::{ArmSummary, Comparison, order_text, same_order};

/// The calibrated simulator's agreement target: relative error of every arm's `d_bar_true`.
pub const SIM_TOLERANCE: f64 = 0.15;

/// The tail-latency target: ACH's p99 at most this factor of A0's.
pub const P99_FACTOR: f64 = 1.2;

/// REPORT.md.
pub fn render(
    results: &LiveResults,
    arms: &[ArmSummary],
    comparisons: &[Comparison],
    figures: &[&Figure],
) -> String {
    let mut text = String::new();
    setup(&mut text, results);
    let (arms_md, comparisons_md, phases_md) = tables_markdown(results, arms, comparisons);
    let _ = writeln!(text, "## Arms side by side\n\n{arms_md}");
    let _ = writeln!(
        text,
        "D-bar true: the mean after the warm-up of D_true(t), the spread of every master's true \
         load (the requests scheduled for the slots it owned in the step, over its class's \
         measured service rate, through the simulator's rho and composite). CV true: the mean \
         coefficient of variation of the unclipped demand over capacity. D-bar telemetry: the \
         same mean of the composite of the readings the controllers steer by. Migration: from the first to \
         the last step that moved keys; settle: until D_true stays within 10 % of its final \
         level (the mean of the last tenth of the steps).\n"
    );
    if !comparisons_md.is_empty() {
        let _ = writeln!(text, "## ACH paired against every arm\n\n{comparisons_md}");
    }
    targets(&mut text, arms, comparisons);
    simulator_agreement(&mut text, arms);
    let _ = writeln!(text, "## Phases\n\n{phases_md}");
    throttling(&mut text, results);
    server_work(&mut text, results);
    idle_cpu(&mut text, results);
    let _ = writeln!(text, "## Figures\n");
    for figure in figures {
        let _ = writeln!(
            text,
            "![{}](figures/{}.svg)\n\n{}\n",
            figure.name, figure.name, figure.caption
        );
    }
    differences(&mut text, results);
    notes(&mut text, results);
    text
}

fn setup(text: &mut String, results: &LiveResults) {
    let config = &results.config;
    let _ = writeln!(text, "# Live experiment: a real cluster\n");
    let _ = writeln!(
        text,
        "{} masters ({}), {} keys, {} s per arm in steps of {} ms ({} warm-up steps left out of \
         every D-bar), {} clients sent by {} threads at {} requests/s before the load step, \
         seed {}, {} repeat(s).\n",
        config.nodes,
        config
            .classes()
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", "),
        config.keys,
        config.duration_s,
        config.interval_ms,
        config.warmup(),
        config.clients,
        config.client_threads(),
        config.rate,
        config.seed,
        config.repeats
    );
    let _ = writeln!(
        text,
        "Server: {}; ach-redis backend `{}`.\n",
        results.server, results.backend
    );
    match &results.cpu_limits_note {
        None => {
            let _ = writeln!(
                text,
                "CPU quotas: {} (period {} µs; a strong node gets {} CPU, medium 0.55 and weak \
                 0.25 of that).\n",
                results.cpu_limits,
                crate::cgroup::PERIOD_US,
                config.cpu_per_strong_node
            );
        }
        Some(reason) => {
            let _ = writeln!(
                text,
                "**CPU quotas could not be set ({reason}).** Every node had the whole machine; \
                 the capacities were only declared (as weights).\n"
            );
        }
    }
    let _ = writeln!(
        text,
        "Machine load average (1, 5, 15 min): {} before, {} after.\n",
        results.load_average.0, results.load_average.1
    );
    let _ = writeln!(
        text,
        "Service rates, measured before the arms ({} s per class, {} client threads at \
         saturation, the workload's GET/SET mix):\n\n| class | CPU | requests/s | demand/s | \
         errors |\n| :--- | ---: | ---: | ---: | ---: |",
        config.calibration_s,
        config.client_threads()
    );
    for rate in &results.service_rates {
        let _ = writeln!(
            text,
            "| {} | {} | {:.0} | {:.0} | {} |",
            rate.class.name(),
            rate.cpus.map_or("—".into(), |c| format!("{c:.3}")),
            rate.requests_per_s,
            rate.demand_per_s,
            rate.errors
        );
    }
    let _ = writeln!(text, "\n{}\n", cpu_part(config.cpu_reading));
    for warning in &results.warnings {
        let _ = writeln!(text, "**Warning:** {warning}\n");
    }
}

/// What the cpu part of every reading counted, in a sentence.
fn cpu_part(reading: CpuReading) -> &'static str {
    match reading {
        CpuReading::Requests => {
            "The cpu part of every reading (the controllers' and the observer's) counted the \
             master's data commands per second over its class's service rate (`--cpu-reading \
             requests`, `ach-redis --request-capacity`)."
        }
        CpuReading::Cores => {
            "The cpu part of every reading (the controllers' and the observer's) counted the \
             master's cpu use over its quota (`--cpu-reading cores`)."
        }
    }
}

fn find<'a>(arms: &'a [ArmSummary], name: &str) -> Option<&'a ArmSummary> {
    arms.iter().find(|a| a.algorithm == name)
}

fn holm<'a>(rows: &'a [Comparison], metric: &str, baseline: &str) -> Option<&'a Comparison> {
    rows.iter()
        .find(|r| r.metric == metric && r.baseline == baseline)
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**not met**" }
}

/// The targets, each read from the figures above.
fn targets(text: &mut String, arms: &[ArmSummary], comparisons: &[Comparison]) {
    let (Some(ach), Some(a0)) = (find(arms, names::ACH), find(arms, names::STATIC_W)) else {
        return;
    };
    let _ = writeln!(text, "## Targets\n");
    for baseline in [a0].into_iter().chain(find(arms, REDIS_CLI)) {
        let row = holm(comparisons, "d_bar_true", &baseline.algorithm);
        let p = row.and_then(|r| r.holm_p);
        let met = ach.d_bar_true < baseline.d_bar_true && p.is_some_and(|p| p < 0.05);
        let _ = writeln!(
            text,
            "- ACH's D-bar true below {}'s with Holm p < 0.05: {:.4} against {:.4}, Holm p {} \
             over {} repeats: {}.",
            baseline.algorithm,
            ach.d_bar_true,
            baseline.d_bar_true,
            p.map_or("n/a".into(), |p| format!("{p:.4}")),
            ach.repeats,
            verdict(met)
        );
    }
    if let Some(cli) = find(arms, REDIS_CLI) {
        let _ = writeln!(
            text,
            "- Fewer keys moved than redis-cli: {:.0} against {:.0}: {}.",
            ach.keys_moved,
            cli.keys_moved,
            verdict(ach.keys_moved < cli.keys_moved)
        );
    }
    match (ach.p99_rebalancing_ms, ach.static_p99_rebalancing_ms) {
        (Some(moving), Some(still)) => {
            let _ = writeln!(
                text,
                "- Client p99 during rebalancing (the steps from ACH's first to its last move) \
                 at most {:.0} % above A0's over the same steps: {moving:.2} ms against \
                 {still:.2} ms ({:+.0} %): {}.",
                (P99_FACTOR - 1.0) * 100.0,
                (moving / still - 1.0) * 100.0,
                verdict(moving <= P99_FACTOR * still)
            );
        }
        _ => {
            let _ = writeln!(
                text,
                "- Client p99 during rebalancing: n/a (ACH moved no key, or no A0 arm ran)."
            );
        }
    }
    let _ = writeln!(
        text,
        "- Over the whole run: {:.2} ms against {:.2} ms ({:+.0} %).\n",
        ach.p99_ms,
        a0.p99_ms,
        (ach.p99_ms / a0.p99_ms - 1.0) * 100.0,
    );
}

/// The calibrated simulator against the live arms.
fn simulator_agreement(text: &mut String, arms: &[ArmSummary]) {
    let errors: Vec<(&str, f64)> = arms
        .iter()
        .filter_map(|a| a.sim_relative_error.map(|e| (a.algorithm.as_str(), e)))
        .collect();
    if errors.is_empty() {
        return;
    }
    let simulated: Vec<(&str, f64, f64)> = arms
        .iter()
        .filter_map(|a| {
            a.sim_d_bar_true
                .map(|s| (a.algorithm.as_str(), a.d_bar_true, s))
        })
        .collect();
    let live = order_text(simulated.iter().map(|&(name, live, _)| (name, live)));
    let simulator = order_text(simulated.iter().map(|&(name, _, sim)| (name, sim)));
    let agrees = same_order(
        &simulated
            .iter()
            .map(|&(_, live, sim)| (live, sim))
            .collect::<Vec<_>>(),
    );
    let within = errors.iter().all(|(_, e)| e.abs() <= SIM_TOLERANCE);
    let _ = writeln!(
        text,
        "## The calibrated simulator\n\nRelative error of the simulator's D-bar true against \
         the live one: {}. Within {:.0} % for every arm: {}. Order, lowest first: live {}; \
         simulator {}; the same order: {}.\n",
        errors
            .iter()
            .map(|(name, e)| format!("{name} {:+.1} %", e * 100.0))
            .collect::<Vec<_>>()
            .join(", "),
        SIM_TOLERANCE * 100.0,
        verdict(within),
        live,
        simulator,
        verdict(agrees)
    );
}

/// The CPU throttling counters of every node's cgroup, per arm and repeat. Every arm and repeat
/// has its own cluster, so a column is a class, not an address: a run's masters are put in
/// class order (strong first, by address within a class) and each cell names its master's port.
fn throttling(text: &mut String, results: &LiveResults) {
    if results
        .runs
        .iter()
        .all(|r| r.nodes.iter().all(|n| n.throttling.is_none()))
    {
        return;
    }
    let _ = writeln!(
        text,
        "## CPU throttling\n\nShare of the {} µs periods in which each master's quota ran out \
         (and the time throttled), per arm and repeat; each run's masters in class order, its \
         port beside.\n",
        crate::cgroup::PERIOD_US
    );
    let header: Vec<&str> = results
        .runs
        .first()
        .map(|r| {
            in_class_order(&r.nodes)
                .iter()
                .map(|n| n.class.name())
                .collect()
        })
        .unwrap_or_default();
    let _ = writeln!(
        text,
        "| arm | repeat | {} |\n| :--- | ---: |{}",
        header.join(" | "),
        " ---: |".repeat(header.len())
    );
    for run in &results.runs {
        let cells: Vec<String> = in_class_order(&run.nodes)
            .iter()
            .map(|n| {
                let port = n.address.rsplit(':').next().unwrap_or(&n.address);
                n.throttling.map_or(format!("— ({port})"), |t| {
                    format!(
                        "{:.0} % ({:.1} s, {port})",
                        t.share() * 100.0,
                        t.throttled_ms / 1000.0
                    )
                })
            })
            .collect();
        let _ = writeln!(
            text,
            "| {} | {} | {} |",
            run.algorithm,
            run.repeat,
            cells.join(" | ")
        );
    }
    let _ = writeln!(text);
}

/// A run's masters, strong first, then medium, then weak (by capacity); by address within a
/// class.
fn in_class_order(nodes: &[NodeInfo]) -> Vec<&NodeInfo> {
    let mut ordered: Vec<&NodeInfo> = nodes.iter().collect();
    ordered.sort_by(|a, b| {
        b.class
            .capacity()
            .total_cmp(&a.class.capacity())
            .then_with(|| a.address.cmp(&b.address))
    });
    ordered
}

/// What the servers counted of their own work while the clients ran, per arm and class: the
/// mean over the class's masters and the repeats.
fn server_work(text: &mut String, results: &LiveResults) {
    let seconds = results.config.duration_s as f64;
    let cpu_per_strong_node = results.config.cpu_per_strong_node;
    let mut rows = Vec::new();
    for arm in results.config.arms.iter().map(|arm| arm.name()) {
        for class in [NodeClass::Strong, NodeClass::Medium, NodeClass::Weak] {
            let works: Vec<&crate::experiment::ServerWork> = results
                .runs
                .iter()
                .filter(|r| r.algorithm == arm)
                .flat_map(|r| &r.nodes)
                .filter(|n| n.class == class)
                .filter_map(|n| n.server_work.as_ref())
                .collect();
            if let Some(row) = server_work_row(arm, class, &works, seconds, cpu_per_strong_node) {
                rows.push(row);
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        text,
        "## The servers' own count of their work\n\nWhat each master counted while the clients \
         ran (`INFO cpu`, `stats` and `commandstats` before and after): its cpu and that of its \
         forked children (an atomic migration's snapshot), its forks, and the commands besides \
         GET and SET that took it the most time. Means per arm and class over the masters and \
         repeats. A command's time is wall time inside it, which on a throttled master includes \
         the wait for the next period.\n\n\
         | arm | class | cpu ms per s | of its quota | children ms per s | forks | GET and SET \
         per s | cpu µs per GET or SET | most time besides GET and SET (ms) |\n\
         | :--- | :--- | ---: | ---: | ---: | ---: | ---: | ---: | :--- |\n{}\n",
        rows.join("\n")
    );
}

/// One row of [`server_work`]; `None` without figures.
fn server_work_row(
    arm: &str,
    class: NodeClass,
    works: &[&crate::experiment::ServerWork],
    seconds: f64,
    cpu_per_strong_node: f64,
) -> Option<String> {
    if works.is_empty() || seconds <= 0.0 {
        return None;
    }
    let n = works.len() as f64;
    let cpu_s: f64 = works.iter().map(|w| w.cpu_s).sum();
    let children_s: f64 = works.iter().map(|w| w.children_cpu_s).sum();
    let forks: u64 = works.iter().map(|w| w.forks).sum();
    // The requests' commands on one side, every other command's time on the other.
    let mut data_calls = 0;
    let mut usec: BTreeMap<&str, u64> = BTreeMap::new();
    for command in works.iter().flat_map(|w| &w.commands) {
        if command.command == "get" || command.command == "set" {
            data_calls += command.calls;
        } else {
            *usec.entry(command.command.as_str()).or_default() += command.usec;
        }
    }
    let mut others: Vec<(&str, u64)> = usec.into_iter().collect();
    others.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let most: Vec<String> = others
        .iter()
        .take(3)
        // As it is typed (`CLUSTER SLOTS`): the server's `cluster|slots` would split the cell.
        .map(|(command, usec)| {
            let name = command.replace('|', " ").to_uppercase();
            format!("{name} {:.0}", *usec as f64 / n / 1000.0)
        })
        .collect();
    let quota = class.capacity() * cpu_per_strong_node;
    let cpu_ms_per_s = cpu_s / n / seconds * 1000.0;
    Some(format!(
        "| {arm} | {} | {:.1} | {:.0} % | {:.2} | {:.1} | {:.0} | {} | {} |",
        class.name(),
        cpu_ms_per_s,
        cpu_ms_per_s / 1000.0 / quota * 100.0,
        children_s / n / seconds * 1000.0,
        forks as f64 / n,
        data_calls as f64 / n / seconds,
        if data_calls > 0 {
            format!("{:.1}", cpu_s / data_calls as f64 * 1e6)
        } else {
            "—".into()
        },
        most.join(", ")
    ))
}

/// Every class's idle cpu use, measured before each arm's workload and taken off the
/// readings: the mean over its masters, arms and repeats.
fn idle_cpu(text: &mut String, results: &LiveResults) {
    let mut rows = Vec::new();
    for class in [NodeClass::Strong, NodeClass::Medium, NodeClass::Weak] {
        let cores: Vec<f64> = results
            .runs
            .iter()
            .flat_map(|r| &r.nodes)
            .filter(|n| n.class == class)
            .filter_map(|n| n.idle_cpu_cores)
            .collect();
        if cores.is_empty() {
            continue;
        }
        let mean = cores.iter().sum::<f64>() / cores.len() as f64;
        let quota = class.capacity() * results.config.cpu_per_strong_node;
        rows.push(format!(
            "| {} | {:.1} | {:.1} % | {} |",
            class.name(),
            mean * 1000.0,
            mean / quota * 100.0,
            cores.len()
        ));
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        text,
        "## Idle cpu\n\nEvery master's cpu use without clients, read for {} s once its keys were \
         loaded and before the workload, and taken off its cpu readings (the controllers' and \
         the observer's): the use of the rest of its quota. Mean by class over the masters, \
         arms and repeats.\n\n| class | ms of cpu per s | of its quota | masters read |\n\
         | :--- | ---: | ---: | ---: |\n{}\n",
        results.config.idle_cpu_s,
        rows.join("\n")
    );
}

fn differences(text: &mut String, results: &LiveResults) {
    let workload = results.config.workload(0);
    let _ = writeln!(
        text,
        "## Live and simulator: what differs\n\n\
         - Both D_true are in the same unit (the simulator's composite of rho, with the measured \
         service rates); the live one is computed from the requests the clients were scheduled \
         to send, not from what the nodes answered.\n\
         - The simulator has the live workload's keys (ach-sim's key table): each key on its \
         CRC16 slot, one token per slot, with the share of the requests the clients' streams \
         give it (each client Zipf over its own keys), in the hot-key phase too ({:.0} % of the \
         requests to {} keys that start on one medium node, for a quarter of the run); the \
         tokens start in contiguous blocks, as the live slots do.\n\
         - redis-cli is simulated as Redis 7's own rebalance plan, one slot at a time at the \
         keys per second its runs measured; live, it moves slots while the clients run. Nodes \
         of one class tie in its plan, and which of them gives or takes first follows from \
         their random ids: each simulated run takes the order its repeat's redis-cli printed \
         its transfers in (`simulator.calibration.redis_cli_listings`).\n\
         - A live step is a wall-clock interval and a slot move takes real time; the slot map \
         of a step is the one observed at its end. A rebalance loop plans its next step after \
         its migrations end, so one that moves much makes fewer control steps than the \
         run has (its notes below give its steps and time migrating; \
         `cargo xtask live-cadence DIR` prints them for a whole run). The simulated loops are \
         paced by the clock measured in the runs and read each node as the loops read its \
         class (`simulator.calibration` in summary.json; `cargo xtask live-resim DIR` runs the \
         simulator again).\n",
        workload.hot_share * 100.0,
        workload.hot_keys
    );
}

fn notes(text: &mut String, results: &LiveResults) {
    let notes: Vec<String> = results
        .runs
        .iter()
        .flat_map(|r| {
            r.rebalancer_notes
                .iter()
                .chain(&r.error_samples)
                .map(move |n| format!("- {} (repeat {}): {n}", r.algorithm, r.repeat))
        })
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(
            text,
            "## Rebalancer and client notes\n\n{}\n",
            notes.join("\n")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(address: &str, class: NodeClass) -> NodeInfo {
        NodeInfo {
            address: address.to_string(),
            class,
            initial_slots: None,
            quota_us: None,
            throttling: None,
            idle_cpu_cores: None,
            request_capacity: None,
            p50_ms: None,
            p99_ms: None,
            server_work: None,
        }
    }

    #[test]
    fn the_throttling_columns_are_classes_whatever_the_ports() {
        // Two runs' clusters: the same classes on other ports, in another address order.
        let first = [
            node("127.0.0.1:4001", NodeClass::Weak),
            node("127.0.0.1:4002", NodeClass::Strong),
            node("127.0.0.1:4003", NodeClass::Medium),
        ];
        let second = [
            node("127.0.0.1:5001", NodeClass::Medium),
            node("127.0.0.1:5002", NodeClass::Weak),
            node("127.0.0.1:5003", NodeClass::Strong),
        ];
        let classes = |nodes: &[NodeInfo]| -> Vec<NodeClass> {
            in_class_order(nodes).iter().map(|n| n.class).collect()
        };
        let expected = [NodeClass::Strong, NodeClass::Medium, NodeClass::Weak];
        assert_eq!(classes(&first), expected);
        assert_eq!(classes(&second), expected);
    }

    #[test]
    fn a_server_work_row_averages_over_the_masters_and_names_the_costliest_commands() {
        use crate::experiment::{CommandWork, ServerWork};
        let work = |cpu_s: f64, forks: u64, slots_usec: u64| ServerWork {
            cpu_s,
            children_cpu_s: 0.1,
            forks,
            commands: vec![
                CommandWork {
                    command: "get".into(),
                    calls: 600,
                    usec: 1200,
                },
                CommandWork {
                    command: "cluster|slots".into(),
                    calls: 4,
                    usec: slots_usec,
                },
                CommandWork {
                    command: "set".into(),
                    calls: 400,
                    usec: 900,
                },
                CommandWork {
                    command: "info".into(),
                    calls: 10,
                    usec: 1000,
                },
            ],
        };
        let (a, b) = (work(1.0, 3, 4000), work(2.0, 5, 2000));
        // A weak master's quota is 0.25 of a strong one's 0.2 cores: 0.05 cores.
        let row = server_work_row("ACH", NodeClass::Weak, &[&a, &b], 60.0, 0.2).unwrap();
        assert_eq!(
            row,
            "| ACH | weak | 25.0 | 50 % | 1.67 | 4.0 | 17 | 1500.0 | CLUSTER SLOTS 3, INFO 1 |"
        );
        assert_eq!(
            server_work_row("ACH", NodeClass::Weak, &[], 60.0, 0.2),
            None
        );
    }
}
