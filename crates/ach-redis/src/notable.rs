//! Slots an operator must hear about: a slot larger than the step budget (no step may move
//! it), and a slot so hot that moving it would only move the hotspot. Named in `plan` and in
//! every step of the log, with the slot's hash tag when its keys have one.

use crate::cluster::{Cluster, Snapshot};
use crate::control::Observed;

/// At most this many slots are named per step.
const MAX_NAMED: usize = 5;

/// A slot named in a plan.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NotableSlot {
    /// The slot.
    pub slot: u16,
    /// Its owner's address.
    pub owner: String,
    /// Keys in it.
    pub keys: u64,
    /// Its part of its owner's load: measured (per-slot statistics) or assumed in proportion
    /// to keys.
    pub load: f64,
    /// Why it is named, in a sentence.
    pub reason: String,
    /// The hash tag of its keys (`{tag}`), when one of its keys has one.
    pub hash_tag: Option<String>,
}

/// The slots of `observed` larger than `budget_keys` (the step budget in keys; `None` for an
/// algorithm without a budget), and the slots of a master loaded above the mean whose part of
/// their owner's load is at least the owner's lead over the least loaded master (moving one
/// anywhere makes its receiver at least as loaded as its source was), the largest first. A
/// master at or below the mean is no hotspot: on nearly even loads its lead is about 0, which
/// every slot would pass.
pub fn notable_slots(observed: &Observed, budget_keys: Option<f64>) -> Vec<NotableSlot> {
    let snapshot = &observed.snapshot;
    let loads: Vec<f64> = observed.nodes.iter().map(|n| n.load).collect();
    let least = loads.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
    let mut named = Vec::new();
    for (slot, owner) in snapshot.owners.iter().enumerate() {
        let (Some(owner), keys) = (*owner, observed.slot_keys[slot]) else {
            continue;
        };
        if keys == 0 {
            continue;
        }
        let node = &observed.nodes[owner];
        let load = match &observed.token_loads {
            Some(token_loads) => token_loads[slot],
            None if node.keys > 0 => node.load * keys as f64 / node.keys as f64,
            None => 0.0,
        };
        let lead = node.load - least;
        let mut reasons = Vec::new();
        if let Some(budget) = budget_keys
            && keys as f64 > budget
        {
            reasons.push(format!(
                "larger than the step budget ({keys} keys > {budget:.0}): no step can move it"
            ));
        }
        if node.load > mean && lead > 0.0 && load >= lead && load > 0.0 {
            reasons.push(format!(
                "hot: {load:.3} of its owner's load {:.3}, at least the owner's lead {lead:.3} \
                 over the least loaded master, so moving it would only move the hotspot",
                node.load
            ));
        }
        if !reasons.is_empty() {
            named.push(NotableSlot {
                slot: slot as u16,
                owner: node.address.clone(),
                keys,
                load,
                reason: reasons.join("; "),
                hash_tag: None,
            });
        }
    }
    named.sort_by(|a, b| b.keys.cmp(&a.keys).then(a.slot.cmp(&b.slot)));
    named.truncate(MAX_NAMED);
    named
}

/// Names the hash tag of every slot of `named` from one of its keys (`CLUSTER GETKEYSINSLOT
/// slot 1` on its owner); a slot whose key has no tag, or whose owner does not answer, keeps
/// `None`.
pub fn name_hash_tags(cluster: &mut Cluster, snapshot: &Snapshot, named: &mut [NotableSlot]) {
    for slot in named.iter_mut() {
        if snapshot.masters.iter().all(|m| m.address != slot.owner) {
            continue;
        }
        let keys: Result<Vec<Vec<u8>>, _> = cluster.query(
            &slot.owner,
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot.slot)
                .arg(1),
        );
        if let Ok(keys) = keys
            && let Some(key) = keys.first()
        {
            slot.hash_tag = hash_tag(key).map(|tag| format!("{{{tag}}}"));
        }
    }
}

/// The hash tag of `key` as Redis Cluster reads it: the bytes between the first `{` and the
/// first `}` after it, when not empty.
pub fn hash_tag(key: &[u8]) -> Option<String> {
    let open = key.iter().position(|&b| b == b'{')?;
    let close = key[open + 1..].iter().position(|&b| b == b'}')?;
    (close > 0).then(|| String::from_utf8_lossy(&key[open + 1..open + 1 + close]).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tags_follow_the_cluster_rule() {
        assert_eq!(
            hash_tag(b"{user1000}.following").as_deref(),
            Some("user1000")
        );
        assert_eq!(hash_tag(b"foo{}{bar}"), None);
        assert_eq!(hash_tag(b"foo{{bar}}zap").as_deref(), Some("{bar"));
        assert_eq!(hash_tag(b"plain"), None);
    }
}
