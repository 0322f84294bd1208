//! The order a step's slots are migrated in: never through a moment at which a master that
//! keeps slots after the step owns none.
//!
//! Redis 7 and Valkey turn a master that loses its last slot into a replica of the slot's new
//! owner (`cluster-allow-replica-migration`, on by default), and `CLUSTER SETSLOT` refuses to
//! give a slot to a replica. A plan that reshuffles many slots (a token ring rebuilt under new
//! weights, say) can move all of a master's slots out in one group and others in by a later
//! group: migrated in the plan's order, the master is a replica when its incoming slots come,
//! and the step fails half done. So the groups are migrated in an order that keeps every
//! master that ends the step with slots owning at least one throughout: a group that would
//! empty its source waits until slots have come in, or migrates all but one of its slots now
//! and the rest later; among the groups that may go, first those whose slots can come back to
//! their source (an exchange), as slots given along a cycle return and can be given again. A
//! master the step empties on purpose (a drain) is emptied as planned.

use crate::compact::GroupPlan;

/// One migration of a step: slots of one of the step's groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The index of the group in the step's groups.
    pub group: usize,
    /// The slots to migrate now, ascending.
    pub slots: Vec<u16>,
}

/// The step's `groups` as batches in the order to migrate them, given `owners` (the master
/// index of every slot at observation) and the number of masters.
///
/// Every slot of every group is in exactly one batch. When the groups' order empties no master
/// that keeps slots, it is kept, a batch per group. Otherwise the order changes as the module
/// says; where it still passes through an empty master, no order of the single slots avoids
/// it (the tests check this against an exhaustive search on a million random small plans).
pub fn migration_batches(
    groups: &[GroupPlan],
    owners: &[Option<usize>],
    masters: usize,
) -> Vec<Batch> {
    let mut count = SlotCounts::new(groups, owners, masters);
    let mut pending: Vec<Batch> = groups
        .iter()
        .enumerate()
        .map(|(group, g)| Batch {
            group,
            slots: g.slots.clone(),
        })
        .collect();
    if count.clone().never_empties(groups, &pending) {
        return pending;
    }
    let mut order = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let (index, now) = next_batch(groups, &pending, &count);
        let mut batch = pending.remove(index);
        if now < batch.slots.len() {
            // The source keeps the rest until slots have come in: they go at the end.
            let rest = batch.slots.split_off(now);
            pending.push(Batch {
                group: batch.group,
                slots: rest,
            });
        }
        let group = &groups[batch.group];
        count.migrate(group.from, group.to, batch.slots.len());
        order.push(batch);
    }
    order
}

/// The slots each master owns as the step goes on, and how many it keeps after the step.
#[derive(Clone)]
struct SlotCounts {
    owned: Vec<usize>,
    kept: Vec<usize>,
    /// Slots still to migrate out of each master.
    leaving: Vec<usize>,
}

impl SlotCounts {
    fn new(groups: &[GroupPlan], owners: &[Option<usize>], masters: usize) -> SlotCounts {
        let mut owned = vec![0usize; masters];
        for owner in owners.iter().flatten() {
            owned[*owner] += 1;
        }
        let mut kept = owned.clone();
        let mut leaving = vec![0usize; masters];
        for group in groups {
            kept[group.from] -= group.slots.len();
            kept[group.to] += group.slots.len();
            leaving[group.from] += group.slots.len();
        }
        SlotCounts {
            owned,
            kept,
            leaving,
        }
    }

    /// How many slots `master` may give away now: all it owns when the step empties it on
    /// purpose, otherwise all but one.
    fn may_give(&self, master: usize) -> usize {
        if self.kept[master] == 0 {
            self.owned[master]
        } else {
            self.owned[master].saturating_sub(1)
        }
    }

    /// True when `master` cannot give all the slots it still has to give before some come in.
    fn waits_for_slots(&self, master: usize) -> bool {
        self.leaving[master] > self.may_give(master)
    }

    /// True when migrating `batches` in their order empties no master that keeps slots.
    fn never_empties(mut self, groups: &[GroupPlan], batches: &[Batch]) -> bool {
        batches.iter().all(|batch| {
            let group = &groups[batch.group];
            let fits = batch.slots.len() <= self.may_give(group.from);
            self.migrate(group.from, group.to, batch.slots.len());
            fits
        })
    }

    fn migrate(&mut self, from: usize, to: usize, slots: usize) {
        self.owned[from] -= slots;
        self.owned[to] += slots;
        self.leaving[from] -= slots;
    }
}

/// The pending batch to migrate next and how many of its slots. Whole batches go before parts
/// of one; among those, first a batch whose slots can come back to its source through the
/// pending batches (slots given along a cycle return, slots given towards a master that gives
/// nothing are spent), then one whose target waits for slots to give its own away, then the
/// plan's order. When no batch may migrate a slot, the first migrates all (no order avoids an
/// empty master then).
fn next_batch(groups: &[GroupPlan], pending: &[Batch], count: &SlotCounts) -> (usize, usize) {
    let rank = |(index, batch): (usize, &Batch)| {
        let group = &groups[batch.group];
        let now = batch.slots.len().min(count.may_give(group.from));
        let whole = now == batch.slots.len();
        let returns = reaches(groups, pending, group.to, group.from);
        let unblocks = count.waits_for_slots(group.to);
        (now > 0).then_some(((!whole, !returns, !unblocks, index), now))
    };
    pending
        .iter()
        .enumerate()
        .filter_map(rank)
        .min_by_key(|&(key, _)| key)
        .map(|((.., index), now)| (index, now))
        .unwrap_or((0, pending[0].slots.len()))
}

/// True when slots can go from master `from` to master `to` along pending batches.
fn reaches(groups: &[GroupPlan], pending: &[Batch], from: usize, to: usize) -> bool {
    let mut seen = vec![from];
    let mut frontier = vec![from];
    while let Some(master) = frontier.pop() {
        if master == to {
            return true;
        }
        for batch in pending {
            let group = &groups[batch.group];
            if group.from == master && !seen.contains(&group.to) {
                seen.push(group.to);
                frontier.push(group.to);
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn group(from: usize, to: usize, slots: &[u16]) -> GroupPlan {
        GroupPlan {
            from,
            to,
            slots: slots.to_vec(),
            planned: Vec::new(),
        }
    }

    /// Master `i` owns `counts[i]` consecutive slots, in master order.
    fn owners(counts: &[usize]) -> Vec<Option<usize>> {
        counts
            .iter()
            .enumerate()
            .flat_map(|(master, &n)| std::iter::repeat_n(Some(master), n))
            .collect()
    }

    /// The first moment (batch index) at which a master that keeps slots after the step owns
    /// none, if any.
    fn first_empty_moment(
        groups: &[GroupPlan],
        owners: &[Option<usize>],
        masters: usize,
        batches: &[Batch],
    ) -> Option<usize> {
        let mut count = SlotCounts::new(groups, owners, masters);
        batches.iter().position(|batch| {
            let g = &groups[batch.group];
            count.migrate(g.from, g.to, batch.slots.len());
            count.owned[g.from] == 0 && count.kept[g.from] > 0
        })
    }

    #[test]
    fn a_group_that_would_empty_its_source_waits_for_the_slots_coming_in() {
        // Master 0 gives all its 3 slots to master 1, and gets 2 of master 2's afterwards.
        let owners = owners(&[3, 3, 3]);
        let groups = [group(0, 1, &[0, 1, 2]), group(2, 0, &[6, 7])];
        let batches = migration_batches(&groups, &owners, 3);
        assert_eq!(
            batches,
            vec![
                Batch {
                    group: 1,
                    slots: vec![6, 7]
                },
                Batch {
                    group: 0,
                    slots: vec![0, 1, 2]
                },
            ]
        );
    }

    #[test]
    fn the_plans_order_stands_when_it_empties_no_master() {
        let owners = owners(&[3, 3, 3]);
        let groups = [group(0, 1, &[0, 1]), group(2, 0, &[6, 7])];
        let batches = migration_batches(&groups, &owners, 3);
        let order: Vec<usize> = batches.iter().map(|b| b.group).collect();
        assert_eq!(order, [0, 1]);
    }

    #[test]
    fn a_master_emptied_on_purpose_is_emptied_in_the_plans_order() {
        // A drain: master 0 gives everything away and gets nothing back.
        let owners = owners(&[4, 2, 2]);
        let groups = [group(0, 1, &[0, 1]), group(0, 2, &[2, 3])];
        let order: Vec<usize> = migration_batches(&groups, &owners, 3)
            .iter()
            .map(|b| b.group)
            .collect();
        assert_eq!(order, [0, 1]);
    }

    #[test]
    fn an_exchange_of_all_slots_holds_back_one_slot_until_the_end() {
        // Masters 0 and 1 swap all their slots: one slot of the first group waits.
        let owners = owners(&[2, 2]);
        let groups = [group(0, 1, &[0, 1]), group(1, 0, &[2, 3])];
        let batches = migration_batches(&groups, &owners, 2);
        assert_eq!(
            batches,
            vec![
                Batch {
                    group: 0,
                    slots: vec![0]
                },
                Batch {
                    group: 1,
                    slots: vec![2, 3]
                },
                Batch {
                    group: 0,
                    slots: vec![1]
                },
            ]
        );
        assert_eq!(first_empty_moment(&groups, &owners, 2, &batches), None);
    }

    /// Whether some order of the single slot moves of `groups` never empties a master that
    /// keeps slots (a search over the sets of slots moved: plans of a few slots only).
    fn some_order_keeps_every_master(
        groups: &[GroupPlan],
        owners: &[Option<usize>],
        masters: usize,
    ) -> bool {
        let moves: Vec<(usize, usize)> = groups
            .iter()
            .flat_map(|g| g.slots.iter().map(move |_| (g.from, g.to)))
            .collect();
        assert!(moves.len() <= 16, "the search is for small plans");
        let count = SlotCounts::new(groups, owners, masters);
        let mut dead = vec![false; 1 << moves.len()];
        fn search(
            done: usize,
            owned: &mut Vec<usize>,
            moves: &[(usize, usize)],
            kept: &[usize],
            dead: &mut [bool],
        ) -> bool {
            if done == (1 << moves.len()) - 1 {
                return true;
            }
            if dead[done] {
                return false;
            }
            for (i, &(from, to)) in moves.iter().enumerate() {
                if done & (1 << i) != 0 || (owned[from] == 1 && kept[from] > 0) {
                    continue;
                }
                owned[from] -= 1;
                owned[to] += 1;
                let found = search(done | (1 << i), owned, moves, kept, dead);
                owned[from] += 1;
                owned[to] -= 1;
                if found {
                    return true;
                }
            }
            dead[done] = true;
            false
        }
        let mut owned = count.owned.clone();
        search(0, &mut owned, &moves, &count.kept, &mut dead)
    }

    /// Random plans over 2 to 5 masters of 1 to 4 slots: each group takes some of its source's
    /// slots at observation (disjoint across groups), 12 slots at most in all.
    fn plans() -> impl Strategy<Value = (Vec<Option<usize>>, usize, Vec<GroupPlan>)> {
        (2usize..=5)
            .prop_flat_map(|masters| {
                (
                    Just(masters),
                    proptest::collection::vec(1usize..=4, masters),
                    proptest::collection::vec((0..masters, 0..masters, 0u8..=255), 0..12),
                )
            })
            .prop_map(|(masters, counts, picks)| {
                let owners = owners(&counts);
                let mut taken = vec![false; owners.len()];
                let mut groups: Vec<GroupPlan> = Vec::new();
                for (from, to, pick) in picks {
                    if from == to {
                        continue;
                    }
                    let free: Vec<u16> = (0..owners.len())
                        .filter(|&s| owners[s] == Some(from) && !taken[s])
                        .map(|s| s as u16)
                        .collect();
                    if free.is_empty() {
                        continue;
                    }
                    let slot = free[usize::from(pick) % free.len()];
                    taken[usize::from(slot)] = true;
                    match groups.iter_mut().find(|g| g.from == from && g.to == to) {
                        Some(g) => {
                            g.slots.push(slot);
                            g.slots.sort_unstable();
                        }
                        None => groups.push(group(from, to, &[slot])),
                    }
                }
                (owners, masters, groups)
            })
    }

    proptest! {
        #[test]
        fn every_slot_is_migrated_once_and_no_master_that_keeps_slots_is_emptied(
            (owners, masters, groups) in plans()
        ) {
            let batches = migration_batches(&groups, &owners, masters);
            let mut migrated: Vec<(usize, u16)> = batches
                .iter()
                .flat_map(|b| b.slots.iter().map(move |&s| (b.group, s)))
                .collect();
            migrated.sort_unstable();
            let mut planned: Vec<(usize, u16)> = groups
                .iter()
                .enumerate()
                .flat_map(|(i, g)| g.slots.iter().map(move |&s| (i, s)))
                .collect();
            planned.sort_unstable();
            prop_assert_eq!(migrated, planned);
            // Where the order passes through an empty master, no order of the single slots
            // avoids it.
            if first_empty_moment(&groups, &owners, masters, &batches).is_some() {
                prop_assert!(!some_order_keeps_every_master(&groups, &owners, masters));
            }
        }
    }
}
