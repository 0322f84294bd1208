//! Text renderings of `status` and `plan` for people (the `--json` forms serialise the same
//! data).

use std::fmt::Write;

use crate::cluster::{Snapshot, short};
use crate::control::{Observed, StepPlan};

/// The `status` report: health, masters with their slots, keys and load inputs, open slots.
pub fn status_text(snapshot: &Snapshot, observed: Option<&Observed>) -> String {
    let mut out = String::new();
    let health = if snapshot.healthy() {
        "healthy".to_string()
    } else {
        format!("DEGRADED: {}", snapshot.problems.join("; "))
    };
    let _ = writeln!(out, "cluster: {} masters, {health}", snapshot.masters.len());
    match observed {
        Some(observed) => {
            observation_lines(&mut out, observed);
            node_table(&mut out, snapshot, observed);
            hot_slots_line(&mut out, observed);
        }
        None => master_lines(&mut out, snapshot),
    }
    open_slot_lines(&mut out, snapshot);
    out
}

/// Where the readings came from, the keys, the total load and the imbalance.
fn observation_lines(out: &mut String, observed: &Observed) {
    let total: u64 = observed.nodes.iter().map(|n| n.keys).sum();
    let signals = &observed.signals;
    let _ = writeln!(
        out,
        "telemetry: {} from {}",
        signals.telemetry, signals.source
    );
    let _ = writeln!(
        out,
        "backend: {}; per-slot statistics: {}",
        signals.backend.name(),
        if signals.slot_stats { "on" } else { "off" }
    );
    let _ = writeln!(
        out,
        "signals: cpu from {}; latency from {}; memory from {}; slots: {}",
        signals.cpu, signals.latency, signals.memory, signals.slots
    );
    if let Some(note) = &signals.note {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(
        out,
        "keys: {total}; total load {:.3}; imbalance D = max - mean = {:.3}",
        observed.total_load, observed.imbalance
    );
}

/// One row per master: its slots, keys, weight, readings and load, its replicas under it.
fn node_table(out: &mut String, snapshot: &Snapshot, observed: &Observed) {
    let signals = &observed.signals;
    let _ = writeln!(
        out,
        "{:<21} {:<8} {:>5} {:>8} {:>6} {:>6} {:>6} {:>7} {:>8} {:>12} {:>6}",
        "node",
        "id",
        "slots",
        "keys",
        "weight",
        "cpu",
        "memory",
        "latency",
        if signals.telemetry == "prometheus" {
            "mean us"
        } else {
            "p99 us"
        },
        // INFO: the data commands' rate from commandstats, without the rebalancer's own
        // (CLUSTER, INFO, CONFIG, MIGRATE, LATENCY, ...); Prometheus: every command.
        if signals.telemetry == "prometheus" {
            "all ops/s"
        } else {
            "data ops/s"
        },
        "load"
    );
    for node in &observed.nodes {
        let latency_usec = if signals.telemetry == "prometheus" {
            node.mean_latency_usec
        } else {
            node.p99_usec
        };
        // Memory only over a known capacity (maxmemory or --memory-capacity-mb).
        let memory = node
            .memory
            .map_or_else(|| "n/a".to_string(), |m| format!("{m:.3}"));
        let _ = writeln!(
            out,
            "{:<21} {:<8} {:>5} {:>8} {:>6} {:>6.3} {:>6} {:>7.3} {:>8.1} {:>12.0} {:>6.3}",
            node.address,
            short(&node.id),
            node.slots,
            node.keys,
            // As given on the command line (the readings are divided by it over the mean).
            format!("{}", node.weight_given),
            node.reading[0],
            memory,
            node.reading[2],
            latency_usec,
            node.ops_per_sec,
            node.load
        );
        if let Some(master) = snapshot.masters.iter().find(|m| m.id == node.id) {
            replica_lines(out, master);
        }
    }
}

/// The hottest slots, when the per-slot statistics name some.
fn hot_slots_line(out: &mut String, observed: &Observed) {
    if !observed.hot_slots.is_empty() {
        let hot: Vec<String> = observed
            .hot_slots
            .iter()
            .map(|h| {
                format!(
                    "{} on {} ({} keys, cpu {:.3}, {:.1} %)",
                    h.slot,
                    h.owner,
                    h.keys,
                    h.cpu,
                    h.share * 100.0
                )
            })
            .collect();
        let _ = writeln!(out, "hottest slots: {}", hot.join("; "));
    }
}

/// One row per master with its slots, its replicas under it (no readings).
fn master_lines(out: &mut String, snapshot: &Snapshot) {
    for master in &snapshot.masters {
        let _ = writeln!(
            out,
            "{:<21} {:<8} {:>5} slots",
            master.address,
            short(&master.id),
            master.slots
        );
        replica_lines(out, master);
    }
}

/// The slots left open, or none.
fn open_slot_lines(out: &mut String, snapshot: &Snapshot) {
    if snapshot.open.is_empty() {
        let _ = writeln!(out, "open slots: none");
    } else {
        for open in &snapshot.open {
            let _ = writeln!(
                out,
                "open slot {}: {} on {} (peer {})",
                open.slot,
                open.state,
                snapshot.masters[open.node].address,
                short(&open.peer)
            );
        }
    }
}

/// One line per replica of `master`, under its row: a replica is never a target.
fn replica_lines(out: &mut String, master: &crate::cluster::Master) {
    for replica in &master.replicas {
        let state = if replica.flags.is_empty() && replica.link_connected {
            String::new()
        } else {
            format!(
                " ({}{})",
                replica.flags.join(","),
                if replica.link_connected {
                    ""
                } else {
                    " link down"
                }
            )
        };
        let _ = writeln!(
            out,
            "  replica {} {}{state}",
            replica.address,
            short(&replica.id)
        );
    }
}

/// The `plan` report: the score and the moves.
pub fn plan_text(plan: &StepPlan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} slot moves ({} of empty or small slots skipped), {} keys to copy ({:.4} of all keys{})",
        plan.algorithm,
        plan.moves.len(),
        plan.skipped_moves,
        plan.keys_to_copy,
        plan.planned_fraction,
        plan.budget_bound
            .map(|b| format!(", budget bound {b:.4}"))
            .unwrap_or_default()
    );
    let loads: Vec<String> = plan
        .predicted_loads
        .iter()
        .map(|l| format!("{l:.3}"))
        .collect();
    let _ = writeln!(
        out,
        "imbalance D: now {:.3}, predicted {:.3} (loads after: [{}])",
        plan.imbalance_now,
        plan.imbalance_predicted,
        loads.join(", ")
    );
    if let Some(gain) = plan.predicted_gain {
        let _ = writeln!(
            out,
            "predicted gain: the planned moves remove {:.1} % of the load above the mean",
            100.0 * gain
        );
    }
    if let Some(drain) = &plan.drain {
        let _ = writeln!(
            out,
            "drain of {}: {} of the {} slots they own this step, budget {} keys ({:.4} of all \
             keys; window {:.4} spent)",
            drain.draining.join(", "),
            drain.slots_to_move,
            drain.slots_owned,
            drain.budget_keys,
            drain.budget,
            drain.window_spent
        );
    }
    if let Some(reason) = &plan.nothing_moves_because {
        let _ = writeln!(out, "nothing moves: {reason}");
    }
    for line in notable_lines(plan) {
        let _ = writeln!(out, "{line}");
    }
    for group in &plan.summary {
        let load = group
            .load
            .map(|load| format!(", load {load:.4}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} -> {}: {} slots in {} ranges, {} keys{load}: {}",
            group.from, group.to, group.slots, group.range_count, group.keys, group.ranges
        );
    }
    // Every move, slot by slot, is in the `--json` form; the text gives the ranges.
    out
}

/// One line per slot the plan names (larger than the step budget, or too hot to help by
/// moving).
pub fn notable_lines(plan: &StepPlan) -> Vec<String> {
    plan.notable_slots
        .iter()
        .map(|n| {
            format!(
                "notable slot {}{} on {}: {} keys, load {:.3}: {}",
                n.slot,
                n.hash_tag
                    .as_ref()
                    .map(|t| format!(" (hash tag {t})"))
                    .unwrap_or_default(),
                n.owner,
                n.keys,
                n.load,
                n.reason
            )
        })
        .collect()
}
