//! Draining masters (`--weight NODE=0`, `--drain NODE`): while a drained master owns slots,
//! every step is a drain step that gives its slots, in slot order, to the other masters, within
//! the same budget as the balancing algorithm's (`--m-max` per step, `--m-horizon` over
//! `--horizon` steps).
//!
//! The budget promise holds across the drain and the algorithm by keeping them apart in time:
//! the algorithm does not plan while a drained master owns slots, and plans again only
//! `horizon` steps after the last step whose drain moved keys. A window of `horizon` steps then
//! holds drain moves or the algorithm's moves, never both, and each keeps its own within the
//! window budget: the drain by [`DrainLedger`], the algorithm by its own rules.

use std::collections::VecDeque;

use ach_control::AchConfig;

use crate::compact::GroupPlan;
use crate::control::{Observed, PlannedMove, StepPlan, summarise_moves, undrained_imbalance};
use crate::error::Error;
use crate::notable::NotableSlot;

/// What the drain has moved in the last steps, by controller step (each call of
/// [`crate::control::Controller::plan`] is one step).
#[derive(Clone, Debug, Default)]
pub struct DrainLedger {
    /// `(step, fraction of all keys moved)` of the drain steps still in a window.
    spent: VecDeque<(u64, f64)>,
    /// The last step whose drain moved keys or slots.
    last_move: Option<u64>,
}

impl DrainLedger {
    /// The share of all keys the drain may move at `step`: `M_max`, and what the window of the
    /// `horizon` steps ending at `step` has left of `M_H`; never below 0.
    pub fn step_budget(&self, ach: &AchConfig, step: u64) -> f64 {
        ach.m_max
            .min(ach.m_horizon - self.window_spent(ach, step))
            .max(0.0)
    }

    /// The share of all keys the drain moved in the `horizon - 1` steps before `step`.
    pub fn window_spent(&self, ach: &AchConfig, step: u64) -> f64 {
        let first = (step + 1).saturating_sub(ach.horizon as u64);
        self.spent
            .iter()
            .filter(|(s, _)| *s >= first && *s < step)
            // From +0.0: an empty f64 sum is -0.0, which would print as "-0.0000".
            .fold(0.0, |sum, (_, f)| sum + f)
    }

    /// Charges `fraction` of all keys to `step`, a drain step that switched `slots` slots.
    pub fn charge(&mut self, ach: &AchConfig, step: u64, fraction: f64, slots: usize) {
        if slots > 0 || fraction > 0.0 {
            self.last_move = Some(step);
        }
        self.spent.push_back((step, fraction));
        let first = (step + 1).saturating_sub(ach.horizon as u64);
        while self.spent.front().is_some_and(|(s, _)| *s < first) {
            self.spent.pop_front();
        }
    }

    /// The first step at which the algorithm may plan: `horizon` steps after the last drain
    /// move (`None` when the drain never moved anything).
    pub fn algorithm_resumes_at(&self, ach: &AchConfig) -> Option<u64> {
        self.last_move.map(|step| step + ach.horizon as u64)
    }
}

/// A drain step as `plan` and the log show it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DrainStep {
    /// The drained masters that own slots, by address.
    pub draining: Vec<String>,
    /// The share of all keys this step may move: `M_max`, and what the window has left of
    /// `M_H`.
    pub budget: f64,
    /// The same in keys (rounded down).
    pub budget_keys: u64,
    /// The share of all keys the drain moved in the window's earlier steps.
    pub window_spent: f64,
    /// Keys of the largest slot any drain step may move (`min(M_max, M_H)` of all keys).
    pub cap_keys: u64,
    /// Slots the drained masters own now.
    pub slots_owned: usize,
    /// Slots this step would move.
    pub slots_to_move: usize,
    /// Drained slots larger than `cap_keys`: no step can move them, and the drain stays
    /// unfinished.
    pub unmovable: Vec<u16>,
}

/// What one master brings to a drain step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DrainMaster {
    /// True when the master is drained (a source only).
    pub drained: bool,
    /// Its load (a receiver's over its relative weight; a drained master's unweighted).
    pub load: f64,
    /// Keys it holds.
    pub keys: u64,
    /// Its relative weight (0 for a drained master).
    pub weight: f64,
}

/// A drain step's slots, and the slots it cannot move.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrainChoice {
    /// The slots to migrate per (drained source, receiver), in slot order of their first slot.
    pub groups: Vec<GroupPlan>,
    /// Every master's predicted load after the step.
    pub predicted_loads: Vec<f64>,
    /// Drained slots holding more keys than any drain step may move (`cap_keys`): no step can
    /// move them.
    pub unmovable: Vec<u16>,
}

/// The inputs of [`choose_drain`].
pub struct DrainInputs<'a> {
    /// Every master, in the snapshot's order.
    pub masters: &'a [DrainMaster],
    /// The owner of every slot.
    pub owners: &'a [Option<usize>],
    /// Keys per slot.
    pub slot_keys: &'a [u64],
    /// Keys this step may move.
    pub budget_keys: u64,
    /// Keys the largest drain step may move (`min(M_max, M_H)` of all keys): a larger slot
    /// never moves.
    pub cap_keys: u64,
}

/// Takes the drained masters' slots in slot order while their keys fit `budget_keys`
/// (skipping, and naming, slots over `cap_keys`; stopping at the first slot that does not fit
/// what is left), cuts them into contiguous runs of about an equal share of the drained keys
/// per receiver, and gives each run to the receiver with the lowest predicted load (per
/// weight), updating the predictions as it goes. Fails with `None` when no master can receive.
pub fn choose_drain(inputs: &DrainInputs<'_>) -> Option<DrainChoice> {
    let masters = inputs.masters;
    let receivers: Vec<usize> = (0..masters.len())
        .filter(|&i| !masters[i].drained)
        .collect();
    if receivers.is_empty() {
        return None;
    }
    let drained_keys: u64 = masters.iter().filter(|m| m.drained).map(|m| m.keys).sum();
    let quota = (drained_keys / receivers.len() as u64).max(1);
    let mut predicted: Vec<f64> = masters.iter().map(|m| m.load).collect();
    let mut choice = DrainChoice::default();
    let mut left = inputs.budget_keys;
    let mut run = Run::default();
    'slots: for (slot, owner) in inputs.owners.iter().enumerate() {
        let Some(source) = owner.filter(|&o| masters[o].drained) else {
            continue;
        };
        let slot = slot as u16;
        let keys = inputs.slot_keys[usize::from(slot)];
        if keys > inputs.cap_keys {
            choice.unmovable.push(slot);
            run.close(&mut choice.groups, &mut predicted, masters, &receivers);
            continue;
        }
        if keys > left {
            break 'slots;
        }
        if run.source != Some(source) || run.next != Some(slot) || run.keys >= quota {
            run.close(&mut choice.groups, &mut predicted, masters, &receivers);
            run.source = Some(source);
        }
        run.slots.push(slot);
        run.keys += keys;
        run.next = slot.checked_add(1);
        left -= keys;
    }
    run.close(&mut choice.groups, &mut predicted, masters, &receivers);
    for group in &mut choice.groups {
        group.slots.sort_unstable();
    }
    choice.predicted_loads = predicted;
    Some(choice)
}

/// A contiguous run of one drained master's slots being gathered.
#[derive(Default)]
struct Run {
    source: Option<usize>,
    slots: Vec<u16>,
    keys: u64,
    next: Option<u16>,
}

impl Run {
    /// Gives the run to the receiver with the lowest predicted load (the first on a tie),
    /// moves its predicted load from the source to that receiver, and starts afresh.
    fn close(
        &mut self,
        groups: &mut Vec<GroupPlan>,
        predicted: &mut [f64],
        masters: &[DrainMaster],
        receivers: &[usize],
    ) {
        let run = std::mem::take(self);
        let Some(source) = run.source.filter(|_| !run.slots.is_empty()) else {
            return;
        };
        let to = *receivers
            .iter()
            .min_by(|&&a, &&b| predicted[a].total_cmp(&predicted[b]).then(a.cmp(&b)))
            .expect("at least one receiver");
        let from = &masters[source];
        // The source's load per key, spread over the receiver's relative weight (> 0).
        let per_key = if from.keys == 0 {
            0.0
        } else {
            from.load / from.keys as f64
        };
        let load = per_key * run.keys as f64;
        predicted[source] = (predicted[source] - load).max(0.0);
        predicted[to] += load / masters[to].weight;
        match groups.iter_mut().find(|g| g.from == source && g.to == to) {
            Some(group) => group.slots.extend(run.slots),
            None => groups.push(GroupPlan {
                from: source,
                to,
                slots: run.slots,
                planned: Vec::new(),
            }),
        }
    }
}

/// The drain step `step` on `observed`, filled into `plan` (a plan that moves nothing): the
/// drained masters' slots in slot order, within the drain's step budget
/// ([`DrainLedger::step_budget`]), each contiguous run to the receiver with the lowest
/// predicted load ([`choose_drain`]).
pub(crate) fn drain_plan(
    observed: &Observed,
    ledger: &DrainLedger,
    ach: &AchConfig,
    step: u64,
    mut plan: StepPlan,
) -> Result<StepPlan, Error> {
    let total_keys: u64 = observed.slot_keys.iter().sum();
    let keys_of = |fraction: f64| (fraction * total_keys as f64).floor() as u64;
    let budget = ledger.step_budget(ach, step);
    let cap_keys = keys_of(ach.m_max.min(ach.m_horizon).max(0.0));
    let masters: Vec<DrainMaster> = observed
        .nodes
        .iter()
        .map(|n| DrainMaster {
            drained: n.drained,
            load: n.load,
            keys: n.keys,
            weight: n.weight,
        })
        .collect();
    let snapshot = &observed.snapshot;
    let choice = choose_drain(&DrainInputs {
        masters: &masters,
        owners: &snapshot.owners,
        slot_keys: &observed.slot_keys,
        budget_keys: keys_of(budget),
        cap_keys,
    })
    .ok_or_else(|| Error::Input("every master is drained: none can receive".into()))?;
    let address = |i: usize| snapshot.masters[i].address.clone();
    let moves: Vec<PlannedMove> = choice
        .groups
        .iter()
        .flat_map(|g| {
            g.slots.iter().map(move |&slot| PlannedMove {
                slot,
                from: address(g.from),
                to: address(g.to),
                keys: observed.slot_keys[usize::from(slot)],
            })
        })
        .collect();
    let owned = snapshot
        .owners
        .iter()
        .filter(|o| o.is_some_and(|o| masters[o].drained))
        .count();
    let drain = DrainStep {
        draining: (0..masters.len())
            .filter(|&i| masters[i].drained && observed.nodes[i].slots > 0)
            .map(address)
            .collect(),
        budget,
        budget_keys: keys_of(budget),
        window_spent: ledger.window_spent(ach, step),
        cap_keys,
        slots_owned: owned,
        slots_to_move: moves.len(),
        unmovable: choice.unmovable.clone(),
    };
    let keys_to_copy: u64 = moves.iter().map(|m| m.keys).sum();
    plan.algorithm = "drain";
    plan.nothing_moves_because = moves.is_empty().then(|| drain_stopped(&drain, ach));
    plan.notable_slots = unmovable_slots(observed, &drain);
    plan.imbalance_predicted = undrained_imbalance(&observed.nodes, &choice.predicted_loads);
    plan.predicted_loads = choice.predicted_loads;
    plan.keys_to_copy = keys_to_copy;
    plan.planned_fraction = if total_keys == 0 {
        0.0
    } else {
        keys_to_copy as f64 / total_keys as f64
    };
    plan.budget_bound = Some(budget);
    plan.summary = summarise_moves(&moves, observed.token_loads.as_deref());
    plan.moves = moves;
    plan.groups = choice.groups;
    plan.drain = Some(drain);
    Ok(plan)
}

/// Why a drain step moves nothing, in one line.
fn drain_stopped(drain: &DrainStep, ach: &AchConfig) -> String {
    if drain.unmovable.len() == drain.slots_owned {
        return format!(
            "drain: every slot left on the drained masters ({}) holds more keys than any drain \
             step may move ({} keys, min(M_max, M_H) of all keys): the drain cannot finish",
            drain.slots_owned, drain.cap_keys
        );
    }
    format!(
        "drain: the next slot of the drained masters holds more keys than this step's budget \
         of {} keys (M_max {:.4}; window {:.4} of M_H {:.4} spent over {} steps)",
        drain.budget_keys, ach.m_max, drain.window_spent, ach.m_horizon, ach.horizon
    )
}

/// The drained slots no drain step can move, as notable slots (the first few).
fn unmovable_slots(observed: &Observed, drain: &DrainStep) -> Vec<NotableSlot> {
    drain
        .unmovable
        .iter()
        .take(5)
        .filter_map(|&slot| {
            let owner = observed.snapshot.owners[usize::from(slot)]?;
            let node = &observed.nodes[owner];
            let keys = observed.slot_keys[usize::from(slot)];
            Some(NotableSlot {
                slot,
                owner: node.address.clone(),
                keys,
                load: if node.keys == 0 {
                    0.0
                } else {
                    node.load * keys as f64 / node.keys as f64
                },
                reason: format!(
                    "a drained master's slot larger than any drain step's budget ({keys} keys \
                     > {}, min(M_max, M_H) of all keys): it cannot move, and the drain stays \
                     unfinished",
                    drain.cap_keys
                ),
                hash_tag: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master(drained: bool, load: f64, keys: u64) -> DrainMaster {
        DrainMaster {
            drained,
            load,
            keys,
            weight: if drained { 0.0 } else { 1.0 },
        }
    }

    fn config(m_max: f64, m_horizon: f64, horizon: usize) -> AchConfig {
        AchConfig {
            m_max,
            m_horizon,
            horizon,
            ..AchConfig::live()
        }
    }

    #[test]
    fn the_drain_takes_slots_in_order_within_the_budget_and_names_the_unmovable() {
        // Master 0 is drained: slots 0-9 of 10 keys each, slot 4 holding 500.
        let mut owners = vec![Some(1); 30];
        let mut keys = vec![10; 30];
        for owner in &mut owners[..10] {
            *owner = Some(0);
        }
        keys[4] = 500;
        let masters = [
            master(true, 0.5, 590),
            master(false, 0.2, 200),
            master(false, 0.1, 0),
        ];
        let choice = choose_drain(&DrainInputs {
            masters: &masters,
            owners: &owners,
            slot_keys: &keys,
            budget_keys: 45,
            cap_keys: 100,
        })
        .unwrap();
        assert_eq!(choice.unmovable, vec![4]);
        let moved: Vec<u16> = choice.groups.iter().flat_map(|g| g.slots.clone()).collect();
        // 0-3 (40 keys), then slot 5 would pass the budget of 45.
        assert_eq!(moved, vec![0, 1, 2, 3]);
        // The least loaded receiver gets the run; nothing goes to the drained master.
        assert!(choice.groups.iter().all(|g| g.from == 0 && g.to != 0));
        assert_eq!(choice.groups[0].to, 2);
        assert!(choice.predicted_loads.iter().all(|l| l.is_finite()));
    }

    #[test]
    fn a_whole_drain_is_shared_by_the_receivers_in_few_ranges() {
        let owners: Vec<Option<usize>> = (0..300).map(|s| Some(s / 100)).collect();
        let keys = vec![1; 300];
        let masters = [
            master(false, 0.3, 100),
            master(true, 0.3, 100),
            master(false, 0.3, 100),
        ];
        let choice = choose_drain(&DrainInputs {
            masters: &masters,
            owners: &owners,
            slot_keys: &keys,
            budget_keys: 1000,
            cap_keys: 1000,
        })
        .unwrap();
        assert_eq!(choice.groups.len(), 2, "{:?}", choice.groups);
        let slots: usize = choice.groups.iter().map(|g| g.slots.len()).sum();
        assert_eq!(slots, 100);
        assert!(choice.groups.iter().all(|g| g.slots.len() == 50));
        assert!(choice.unmovable.is_empty());
    }

    #[test]
    fn no_receiver_is_none() {
        let masters = [master(true, 0.3, 1)];
        let owners = vec![Some(0); 4];
        let inputs = DrainInputs {
            masters: &masters,
            owners: &owners,
            slot_keys: &[1, 0, 0, 0],
            budget_keys: 10,
            cap_keys: 10,
        };
        assert!(choose_drain(&inputs).is_none());
    }

    #[test]
    fn the_ledger_keeps_the_window_budget_and_the_algorithm_waits_a_horizon() {
        let ach = config(0.1, 0.25, 4);
        let mut ledger = DrainLedger::default();
        assert_eq!(ledger.step_budget(&ach, 0), 0.1);
        ledger.charge(&ach, 0, 0.1, 5);
        ledger.charge(&ach, 1, 0.1, 5);
        // Steps 0 and 1 spent 0.2 of the window of steps 0-3: 0.05 is left at step 2.
        assert!((ledger.step_budget(&ach, 2) - 0.05).abs() < 1e-12);
        ledger.charge(&ach, 2, 0.05, 1);
        assert_eq!(ledger.step_budget(&ach, 3), 0.0);
        // At step 4 the window is steps 1-4: step 0's 0.1 has left it.
        assert!((ledger.step_budget(&ach, 4) - 0.1).abs() < 1e-12);
        assert_eq!(ledger.algorithm_resumes_at(&ach), Some(6));
        ledger.charge(&ach, 4, 0.0, 0);
        assert_eq!(ledger.algorithm_resumes_at(&ach), Some(6));
    }
}
