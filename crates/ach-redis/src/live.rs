//! Every call into the live API of `ach-ring` and `ach-control` (issue 10), in one place.

use ach_control::{AchConfig, Balancer, ConfirmError, Plan};
use ach_ring::{NodeId, RingError, TokenMove, TokenRing};

/// Weight of a slot without keys, as a share of all keys: positive, so that its arc exists, and
/// small enough that the 16384 slots' floors add at most 1.7e-10 to the total. A budget on the
/// ring's arcs is then a budget on keys copied over all keys to within that, well inside
/// [`ach_control::BUDGET_SLACK`] (1e-9) for any budget up to 1.
pub const EMPTY_SLOT_SHARE: f64 = 1e-14;

/// One token per slot with an arc proportional to the slot's keys (token `s` is slot `s`);
/// an empty slot weighs [`EMPTY_SLOT_SHARE`] of all keys (of one key in an empty cluster).
pub fn key_weighted_ring(keys: &[u64], owners: Vec<NodeId>) -> Result<TokenRing, RingError> {
    let total = keys.iter().sum::<u64>().max(1) as f64;
    let floor = total * EMPTY_SLOT_SHARE;
    let weights: Vec<f64> = keys.iter().map(|&k| (k as f64).max(floor)).collect();
    TokenRing::from_arc_weights(&weights, owners)
}

/// ACH's configuration for a live cluster: `AchConfig::live()` (sliding horizon, strict step
/// budget, per-token cool-down, target at the live mean load).
pub fn ach_config() -> AchConfig {
    AchConfig::live()
}

/// Confirms (charges) the moves of `plan` that were switched, `done`, and returns their
/// `M_keys`.
pub fn confirm(
    balancer: &mut dyn Balancer,
    ring: &TokenRing,
    plan: &Plan,
    done: &[TokenMove],
) -> Result<f64, ConfirmError> {
    balancer.confirm(&plan.subset(ring, done))
}
