//! Compact moves: the slots a step moves from one source to one target, chosen as a few
//! contiguous ranges instead of the scattered slots a planner picks by size.
//!
//! A planner that takes a node's largest slots first (ACH, A2, A3) picks slots that are
//! scattered over the node's ranges when their key counts are alike: after a rebalance of a few
//! thousand slots, `CLUSTER SLOTS` has thousands of ranges, which every client refreshes. Among
//! slots of similar value nothing is lost by moving neighbours instead. So, per (source,
//! target), the planned slots of ordinary value are replaced by runs of adjacent slots of the
//! source holding at most as many keys (the keys moved never exceed the plan, so the budget
//! holds exactly), taken from the ends of the source's ranges, next to the target's slots where
//! possible. Slots of outstanding value (over twice the source's median keys, or its median
//! per-slot load) are kept as planned: they are why the planner moves anything.

use ach_ring::TokenMove;

use crate::slot::SLOT_COUNT;

/// How the slots of a step are chosen (`--slot-choice`; the command line's default is
/// `compact`, a [`crate::control::Controller`]'s is `planned` unless it is given one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlotChoice {
    /// Contiguous ranges among slots of similar value (this module).
    Compact,
    /// The slots exactly as the algorithm planned them.
    #[default]
    Planned,
}

/// A slot is of outstanding value when it holds more than this many times its source's median
/// (keys, or per-slot load): far above the spread of slots filled by hashing (Poisson: a slot of
/// a node with a median of 3 keys holds more than 30 with odds below 1e-20).
const OUTSTANDING: f64 = 10.0;

/// With per-slot loads, a slot is of outstanding value when its load is over this many times
/// its source's median slot load: the planner picks slots by load relieved, and a run of
/// ordinary slots relieves about the median per slot, so only slots near the median may be
/// swapped for it.
const OUTSTANDING_LOAD: f64 = 2.0;

/// A further run is started only while the keys left are at least this share of the group's:
/// a run of a few keys would split a range for little.
const MIN_RUN_SHARE: f64 = 0.1;

/// At most this many runs replace one (source, target) group's ordinary slots.
const MAX_RUNS_PER_GROUP: usize = 8;

/// What the compaction needs to know of the cluster.
pub struct CompactInputs<'a> {
    /// Keys per slot.
    pub slot_keys: &'a [u64],
    /// The owner (master index) of every slot.
    pub owners: &'a [Option<usize>],
    /// Each slot's load, with per-slot statistics.
    pub token_loads: Option<&'a [f64]>,
    /// Slots that may not move now (moved within the cool-down).
    pub blocked: &'a dyn Fn(u16) -> bool,
    /// Slots holding fewer keys never end a run.
    pub min_slot_keys: u64,
}

/// The slots to migrate from one source to one target, and the planned moves they stand for
/// (the ones to confirm to the algorithm).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupPlan {
    /// Source master index.
    pub from: usize,
    /// Target master index.
    pub to: usize,
    /// The slots to migrate, sorted.
    pub slots: Vec<u16>,
    /// The algorithm's moves this group carries out.
    pub planned: Vec<TokenMove>,
}

/// The planned `moves` (each changing an owner), grouped per (source, target) in the order of
/// each group's first move; under [`SlotChoice::Compact`] each group's ordinary slots are
/// replaced by contiguous runs of at most their keys.
pub fn group_moves(
    moves: &[TokenMove],
    choice: SlotChoice,
    inputs: &CompactInputs<'_>,
) -> Vec<GroupPlan> {
    let mut groups: Vec<GroupPlan> = Vec::new();
    for mv in moves {
        let (from, to) = (mv.from.index(), mv.to.index());
        match groups.iter_mut().find(|g| g.from == from && g.to == to) {
            Some(group) => {
                group.slots.push(mv.token as u16);
                group.planned.push(*mv);
            }
            None => groups.push(GroupPlan {
                from,
                to,
                slots: vec![mv.token as u16],
                planned: vec![*mv],
            }),
        }
    }
    if choice == SlotChoice::Compact {
        compact(&mut groups, inputs);
        // A group whose slots no run could replace moves nothing (and its planned moves are
        // not confirmed): no backend is asked to migrate an empty group.
        groups.retain(|g| !g.slots.is_empty());
    }
    for group in &mut groups {
        group.slots.sort_unstable();
    }
    groups
}

fn compact(groups: &mut [GroupPlan], inputs: &CompactInputs<'_>) {
    let mut sources: Vec<usize> = groups.iter().map(|g| g.from).collect();
    sources.sort_unstable();
    sources.dedup();
    // The slots of the runs chosen so far (outstanding slots are never in a run: they move as
    // planned, or not at all).
    let mut taken = vec![false; SLOT_COUNT];
    for source in sources {
        let outstanding = outstanding_rule(source, inputs);
        for group in groups.iter_mut().filter(|g| g.from == source) {
            let (kept, ordinary): (Vec<u16>, Vec<u16>) =
                group.slots.iter().partition(|&&s| outstanding(s));
            // An outstanding slot moved within the cool-down stays where it is.
            let kept: Vec<u16> = kept.into_iter().filter(|&s| !(inputs.blocked)(s)).collect();
            let budget: u64 = ordinary
                .iter()
                .map(|&s| inputs.slot_keys[usize::from(s)])
                .sum();
            let mut runs = Vec::new();
            let mut left = budget;
            for _ in 0..MAX_RUNS_PER_GROUP {
                if !runs.is_empty() && (left as f64) < MIN_RUN_SHARE * budget as f64 {
                    break;
                }
                let available = |s: u16| {
                    let i = usize::from(s);
                    inputs.owners[i] == Some(source)
                        && !taken[i]
                        && !(inputs.blocked)(s)
                        && !outstanding(s)
                };
                let Some(run) = best_run(left, group.to, &available, inputs) else {
                    break;
                };
                for &slot in &run {
                    taken[usize::from(slot)] = true;
                    left -= inputs.slot_keys[usize::from(slot)];
                }
                runs.extend(run);
            }
            group.slots = kept;
            group.slots.extend(runs);
        }
    }
}

/// The rule "slot `s` of `source` is of outstanding value".
fn outstanding_rule<'a>(source: usize, inputs: &'a CompactInputs<'a>) -> impl Fn(u16) -> bool + 'a {
    let owned = |i: &usize| inputs.owners[*i] == Some(source);
    let median_of = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(0.0)
    };
    let mut keys: Vec<f64> = (0..SLOT_COUNT)
        .filter(owned)
        .map(|i| inputs.slot_keys[i] as f64)
        .filter(|&k| k > 0.0)
        .collect();
    let median_keys = median_of(&mut keys);
    let median_load = inputs.token_loads.map(|loads| {
        let mut values: Vec<f64> = (0..SLOT_COUNT)
            .filter(owned)
            .map(|i| loads[i])
            .filter(|l| l.is_finite() && *l > 0.0)
            .collect();
        median_of(&mut values)
    });
    move |slot: u16| {
        let i = usize::from(slot);
        let keys = inputs.slot_keys[i] as f64;
        let by_keys = median_keys > 0.0 && keys > OUTSTANDING * median_keys;
        let by_load = match (inputs.token_loads, median_load) {
            (Some(loads), Some(median)) if median > 0.0 => loads[i] > OUTSTANDING_LOAD * median,
            _ => false,
        };
        by_keys || by_load
    }
}

/// The run of available slots holding the most keys up to `left`, grown from one end of a
/// maximal range of available slots (ties: the run next to a slot of `target`, then one next to
/// another node's slot or the end of the slot space, which splits no range, then the lower
/// slot); `None` when no run holds a key.
fn best_run(
    left: u64,
    target: usize,
    available: &dyn Fn(u16) -> bool,
    inputs: &CompactInputs<'_>,
) -> Option<Vec<u16>> {
    if left == 0 {
        return None;
    }
    let mut best: Option<(u64, u8, Vec<u16>)> = None;
    let mut slot = 0usize;
    while slot < SLOT_COUNT {
        if !available(slot as u16) {
            slot += 1;
            continue;
        }
        let start = slot;
        while slot < SLOT_COUNT && available(slot as u16) {
            slot += 1;
        }
        let end = slot - 1;
        let source = inputs.owners[start];
        // 2: next to the target; 1: next to another node or the end of the slot space; 0:
        // next to a slot of the source that stays (the run splits a range).
        let edge = |s: Option<usize>| match s.filter(|&s| s < SLOT_COUNT) {
            None => 1u8,
            Some(s) if inputs.owners[s] == Some(target) => 2,
            Some(s) if inputs.owners[s] != source => 1,
            Some(_) => 0,
        };
        let upward = grow(left, (start..=end).map(|s| s as u16), inputs);
        let downward = grow(left, (start..=end).rev().map(|s| s as u16), inputs);
        for (run, edge) in [
            (upward, edge(start.checked_sub(1))),
            (downward, edge(Some(end + 1))),
        ] {
            let keys: u64 = run.iter().map(|&s| inputs.slot_keys[usize::from(s)]).sum();
            let better = match &best {
                None => keys > 0,
                Some((best_keys, best_edge, _)) => {
                    keys > *best_keys || (keys == *best_keys && edge > *best_edge)
                }
            };
            if better {
                best = Some((keys, edge, run));
            }
        }
    }
    best.map(|(_, _, run)| run)
}

/// The slots of `order` taken while their keys stay within `left`, without the slots holding
/// fewer than `min_slot_keys` keys at the far end.
fn grow(left: u64, order: impl Iterator<Item = u16>, inputs: &CompactInputs<'_>) -> Vec<u16> {
    let mut run = Vec::new();
    let mut keys = 0u64;
    for slot in order {
        let k = inputs.slot_keys[usize::from(slot)];
        if keys + k > left {
            break;
        }
        keys += k;
        run.push(slot);
    }
    while run
        .last()
        .is_some_and(|&s| inputs.slot_keys[usize::from(s)] < inputs.min_slot_keys.max(1))
    {
        run.pop();
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use ach_ring::NodeId;

    fn moves(slots: &[u16], from: u32, to: u32) -> Vec<TokenMove> {
        slots
            .iter()
            .map(|&s| TokenMove {
                token: usize::from(s),
                from: NodeId(from),
                to: NodeId(to),
            })
            .collect()
    }

    /// Two masters: 0 owns 0-8191, 1 the rest; every slot of `keys` as given, others 3.
    fn cluster(keys: &[(u16, u64)]) -> (Vec<u64>, Vec<Option<usize>>) {
        let mut slot_keys = vec![3u64; SLOT_COUNT];
        for &(slot, k) in keys {
            slot_keys[usize::from(slot)] = k;
        }
        let owners = (0..SLOT_COUNT)
            .map(|s| Some(usize::from(s >= 8192)))
            .collect();
        (slot_keys, owners)
    }

    #[test]
    fn scattered_slots_of_like_value_become_one_run_next_to_the_target() {
        let (slot_keys, owners) = cluster(&[]);
        let planned: Vec<u16> = (0..100).map(|i| i * 80).collect();
        let inputs = CompactInputs {
            slot_keys: &slot_keys,
            owners: &owners,
            token_loads: None,
            blocked: &|_| false,
            min_slot_keys: 1,
        };
        let groups = group_moves(&moves(&planned, 0, 1), SlotChoice::Compact, &inputs);
        assert_eq!(groups.len(), 1);
        let slots = &groups[0].slots;
        assert_eq!(slots.len(), 100, "the same keys: 100 slots of 3");
        // One run, ending at 8191, next to the target's 8192.
        assert_eq!(slots.first(), Some(&8092));
        assert_eq!(slots.last(), Some(&8191));
        assert_eq!(groups[0].planned.len(), 100);
        let planned_groups = group_moves(&moves(&planned, 0, 1), SlotChoice::Planned, &inputs);
        assert_eq!(planned_groups[0].slots, planned);
    }

    #[test]
    fn a_group_no_run_can_replace_is_left_out() {
        // Every slot of the source holds 3 keys, the plan one of 3 keys, but all the source's
        // slots are blocked: no run, no group.
        let (slot_keys, owners) = cluster(&[]);
        let inputs = CompactInputs {
            slot_keys: &slot_keys,
            owners: &owners,
            token_loads: None,
            blocked: &|s| s < 8192,
            min_slot_keys: 1,
        };
        let groups = group_moves(&moves(&[100], 0, 1), SlotChoice::Compact, &inputs);
        assert!(groups.is_empty(), "{groups:?}");
    }

    #[test]
    fn outstanding_slots_stay_and_keys_never_exceed_the_plan() {
        let (slot_keys, owners) = cluster(&[(40, 500), (41, 70), (5000, 4)]);
        let blocked = |s: u16| s > 8150;
        let inputs = CompactInputs {
            slot_keys: &slot_keys,
            owners: &owners,
            token_loads: None,
            blocked: &blocked,
            min_slot_keys: 1,
        };
        let planned = [40u16, 41, 5000, 100, 200];
        let groups = group_moves(&moves(&planned, 0, 1), SlotChoice::Compact, &inputs);
        let slots = &groups[0].slots;
        assert!(slots.contains(&40) && slots.contains(&41), "{slots:?}");
        let keys = |s: &[u16]| s.iter().map(|&s| slot_keys[usize::from(s)]).sum::<u64>();
        // 500 + 70 kept; the ordinary 10 keys become a run of 9 (a fourth slot of 3 would pass
        // 10).
        assert_eq!(keys(slots), 579);
        assert!(keys(slots) <= keys(&planned));
        assert!(
            slots.iter().all(|&s| s <= 8150),
            "blocked slots stay: {slots:?}"
        );
    }
}
