//! A step's plan (the moves, their summary, why nothing moves) and what executing it did.

use ach_control::{Observation, Plan, Withheld};
use ach_ring::{NodeId, TokenMove, TokenRing};

use crate::compact::{GroupPlan, SlotChoice};
use crate::drain::DrainStep;
use crate::error::Error;
use crate::explain::Diagnosis;
use crate::live;
use crate::migrate::SlotMigration;
use crate::notable::NotableSlot;
use crate::topology::format_slot_ranges;

use super::Observed;

/// A planned slot move.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PlannedMove {
    /// The slot.
    pub slot: u16,
    /// Source address.
    pub from: String,
    /// Target address.
    pub to: String,
    /// Keys in the slot when planned.
    pub keys: u64,
}

/// One control step's plan and its score.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StepPlan {
    /// The algorithm's name.
    pub algorithm: &'static str,
    /// The moves, by slot.
    pub moves: Vec<PlannedMove>,
    /// Imbalance now.
    pub imbalance_now: f64,
    /// Imbalance predicted after the plan, assuming each node's load scales with its share of
    /// the keys (the model's premise).
    pub imbalance_predicted: f64,
    /// Loads predicted after the plan.
    pub predicted_loads: Vec<f64>,
    /// Keys the plan would copy.
    pub keys_to_copy: u64,
    /// Planned moves skipped because their slot holds fewer than `min_slot_keys` keys.
    pub skipped_moves: usize,
    /// Fraction of all keys the plan would copy (`M_keys` of the key-weighted ring).
    pub planned_fraction: f64,
    /// The predicted gain of the algorithm's moves: the fraction of the load above the mean
    /// they would remove (each slot taking its per-slot load, or else its share of its owner's
    /// keys' load, from its source to its target; [`ach_control::gain`]); for moves held back
    /// by `--min-gain`, the gain they would have had. `None` when the algorithm planned none.
    pub predicted_gain: Option<f64>,
    /// The budget bound of the plan, for budgeted algorithms.
    pub budget_bound: Option<f64>,
    /// The moves grouped per (source, target), in the plan's order (the executor migrates them
    /// in it, except where it would empty a master that keeps slots).
    pub summary: Vec<MoveSummary>,
    /// When nothing moves: which rule stopped the step, in one line.
    pub nothing_moves_because: Option<String>,
    /// ACH's sources, receivers, intensity and budget at this step (`--algorithm ach` only).
    pub diagnosis: Option<Diagnosis>,
    /// Slots larger than the step budget, or too hot to help by moving (hash tags named by
    /// [`crate::notable::name_hash_tags`]).
    pub notable_slots: Vec<NotableSlot>,
    /// The plan as the algorithm made it (not serialised).
    #[serde(skip)]
    pub plan: Plan,
    /// The ring it was made on (not serialised).
    #[serde(skip)]
    pub ring: Option<TokenRing>,
    /// How the slots were chosen among those of similar value.
    pub slot_choice: SlotChoice,
    /// The drain of this step, when a drained master owns slots (the algorithm does not plan
    /// then).
    pub drain: Option<DrainStep>,
    /// The slots to migrate per (source, target), with the algorithm's moves each stands for
    /// (not serialised: `moves` and `summary` say the same).
    #[serde(skip)]
    pub groups: Vec<GroupPlan>,
}

/// The planned moves from one source to one target.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MoveSummary {
    /// Source address.
    pub from: String,
    /// Target address.
    pub to: String,
    /// Slots moved.
    pub slots: usize,
    /// The slots as ranges (`0-5,9`).
    pub ranges: String,
    /// Number of contiguous ranges.
    pub range_count: usize,
    /// Keys in them when planned.
    pub keys: u64,
    /// Their per-slot loads summed at observation (per-slot statistics only): the load the
    /// plan moves from `from` to `to`, in the masters' load units. Absent without per-slot
    /// statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<f64>,
}

/// The moves of `moves` grouped per (source, target) in the order of each group's first move,
/// each with its slots' `slot_loads` summed when given (one per slot).
pub fn summarise_moves(moves: &[PlannedMove], slot_loads: Option<&[f64]>) -> Vec<MoveSummary> {
    let mut groups: Vec<(String, String, Vec<u16>, u64)> = Vec::new();
    for mv in moves {
        match groups.iter_mut().find(|g| g.0 == mv.from && g.1 == mv.to) {
            Some(group) => {
                group.2.push(mv.slot);
                group.3 += mv.keys;
            }
            None => groups.push((mv.from.clone(), mv.to.clone(), vec![mv.slot], mv.keys)),
        }
    }
    groups
        .into_iter()
        .map(|(from, to, mut slots, keys)| {
            slots.sort_unstable();
            MoveSummary {
                from,
                to,
                slots: slots.len(),
                ranges: format_slot_ranges(&slots),
                range_count: slot_range_count(&slots),
                keys,
                load: slot_loads.map(|loads| {
                    slots
                        .iter()
                        .filter_map(|&slot| loads.get(usize::from(slot)))
                        .filter(|load| load.is_finite())
                        .sum()
                }),
            }
        })
        .collect()
}

/// The number of contiguous ranges of sorted, distinct `slots`.
pub fn slot_range_count(slots: &[u16]) -> usize {
    slots
        .iter()
        .enumerate()
        .filter(|&(i, &slot)| i == 0 || slots[i - 1] + 1 != slot)
        .count()
}

/// What executing a plan did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StepOutcome {
    /// Slots migrated and switched.
    pub migrations: Vec<SlotMigration>,
    /// Keys copied.
    pub keys_moved: u64,
    /// Errors (the step stops at the first failed migration).
    pub errors: Vec<String>,
    /// True when a stop request (Ctrl-C) ended the step early.
    pub interrupted: bool,
}

/// Why a step moves nothing, in one line: the rule of ACH that stopped it, or that every
/// planned move was of a slot below `--min-slot-keys`, or that the algorithm planned nothing.
pub(super) fn nothing_moves_because(
    algorithm: &str,
    diagnosis: Option<&Diagnosis>,
    names: &[String],
    skipped_moves: usize,
    min_slot_keys: u64,
    withheld: Option<Withheld>,
) -> String {
    if let Some(rule) = diagnosis.and_then(|d| d.stopping_rule(names)) {
        return rule;
    }
    if let Some(withheld) = withheld {
        // The gain is the planner's prediction, so it is printed as is; under the live
        // configuration the target load is the masters' mean.
        return format!(
            "{algorithm} planned {} move(s) predicted to remove {:.1} % of the load above the \
             target load, below --min-gain {:.1} %: a migration costs its source a copy of the keys \
             whatever it gains",
            withheld.moves,
            100.0 * withheld.gain,
            100.0 * withheld.min_gain
        );
    }
    let budget = diagnosis.map(|d| {
        format!(
            "step budget m = {:.5} of all keys (M_max {:.4} x C {:.3}, window {:.4} of {:.4} \
             spent)",
            d.budget, d.m_max, d.intensity, d.window_spent, d.m_horizon
        )
    });
    match (skipped_moves, budget) {
        (1.., budget) => format!(
            "every planned move ({skipped_moves}) was of a slot holding fewer than \
             --min-slot-keys {min_slot_keys} keys{}",
            budget.map(|b| format!("; {b}")).unwrap_or_default()
        ),
        (0, Some(budget)) => format!(
            "no slot fits the {budget}: every slot the sources could give holds more, or is in \
             its cool-down"
        ),
        (0, None) => format!("{algorithm} planned no move"),
    }
}

/// The algorithm's moves a group carried out when `switched` of its slots were switched: all
/// of them when every slot was, otherwise the planned moves in order until their keys cover
/// the keys switched (so the budget is charged at least what moved).
pub(super) fn confirmed_moves(
    group: &GroupPlan,
    switched: &[u16],
    slot_keys: &[u64],
) -> Vec<TokenMove> {
    if group.slots.iter().all(|s| switched.contains(s)) {
        return group.planned.clone();
    }
    if switched.is_empty() {
        return Vec::new();
    }
    let moved: u64 = switched.iter().map(|&s| slot_keys[usize::from(s)]).sum();
    let mut covered = 0u64;
    let mut confirmed = Vec::new();
    for mv in &group.planned {
        if covered >= moved {
            break;
        }
        covered += slot_keys[mv.token];
        confirmed.push(*mv);
    }
    confirmed
}

/// The ring of the slots, each weighted by its keys, owned as the snapshot says.
pub(super) fn key_weighted_ring(observed: &Observed) -> Result<TokenRing, Error> {
    let owners: Vec<NodeId> = observed
        .snapshot
        .owners
        .iter()
        .map(|o| NodeId(o.unwrap_or(0) as u32))
        .collect();
    live::key_weighted_ring(&observed.slot_keys, owners).map_err(|e| {
        Error::Input(format!(
            "cannot build the key-weighted ring of the slots: {e}"
        ))
    })
}

/// Every slot move of `groups`, and each master's load predicted after them (its load times
/// its keys after over its keys now; a master without keys keeps its load).
pub(super) fn planned_moves(
    observed: &Observed,
    groups: &[GroupPlan],
) -> (Vec<PlannedMove>, Vec<f64>) {
    let snapshot = &observed.snapshot;
    let mut keys_after: Vec<f64> = observed.nodes.iter().map(|n| n.keys as f64).collect();
    let mut moves = Vec::new();
    for group in groups {
        for &slot in &group.slots {
            let keys = observed.slot_keys[usize::from(slot)];
            keys_after[group.from] -= keys as f64;
            keys_after[group.to] += keys as f64;
            moves.push(PlannedMove {
                slot,
                from: snapshot.masters[group.from].address.clone(),
                to: snapshot.masters[group.to].address.clone(),
                keys,
            });
        }
    }
    let predicted_loads = observed
        .nodes
        .iter()
        .zip(&keys_after)
        .map(|(node, after)| {
            if node.keys == 0 {
                node.load
            } else {
                node.load * after / node.keys as f64
            }
        })
        .collect();
    (moves, predicted_loads)
}

/// The gain in `D` the algorithm predicted for `plan` on `observation`: the withheld plan's
/// when the algorithm held it back, none when nothing moves.
pub(super) fn predicted_gain(
    ring: &TokenRing,
    plan: &Plan,
    observation: &Observation<'_>,
) -> Option<f64> {
    match plan.withheld {
        Some(withheld) => Some(withheld.gain),
        None if plan.moves.iter().all(|mv| mv.from == mv.to) => None,
        None => {
            let loads = observation.loads;
            let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
            Some(ach_control::gain::predicted_gain(
                ring,
                &plan.moves,
                loads,
                observation.live,
                observation.token_loads,
                mean,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(slot: u16, from: &str, to: &str, keys: u64) -> PlannedMove {
        PlannedMove {
            slot,
            from: from.into(),
            to: to.into(),
            keys,
        }
    }

    #[test]
    fn a_groups_load_is_its_slots_loads_summed_when_there_are_any() {
        let moves = [
            planned(3, "a", "b", 2),
            planned(9, "a", "c", 1),
            planned(4, "a", "b", 5),
        ];
        let mut loads = vec![0.0; 16];
        (loads[3], loads[4], loads[9]) = (0.25, 0.5, f64::NAN);
        let summary = summarise_moves(&moves, Some(&loads));
        assert_eq!(summary.len(), 2);
        assert_eq!(
            (summary[0].ranges.as_str(), summary[0].keys, summary[0].load),
            ("3-4", 7, Some(0.75))
        );
        // A slot never sampled (NaN) adds nothing.
        assert_eq!(summary[1].load, Some(0.0));
        assert!(
            summarise_moves(&moves, None)
                .iter()
                .all(|g| g.load.is_none())
        );
    }
}
