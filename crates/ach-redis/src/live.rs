//! Every call into the live API of `ach-ring` and `ach-control` (issue 10), in one place.

use ach_control::{Ach, AchConfig, Balancer, ConfigError, ConfirmError, Plan};
use ach_ring::{NodeId, RingError, TokenMove, TokenRing};

/// Weight of a slot without keys, in keys: small enough that moving it costs next to nothing,
/// large enough that its arc stays positive.
pub const EMPTY_SLOT_WEIGHT: f64 = 1e-3;

/// One token per slot with an arc proportional to the slot's keys (token `s` is slot `s`).
pub fn key_weighted_ring(keys: &[u64], owners: Vec<NodeId>) -> Result<TokenRing, RingError> {
    let weights: Vec<f64> = keys
        .iter()
        .map(|&k| (k as f64).max(EMPTY_SLOT_WEIGHT))
        .collect();
    TokenRing::from_arc_weights(&weights, owners)
}

/// ACH's configuration for a live cluster: `AchConfig::live()` (sliding horizon, strict step
/// budget, per-token cool-down, target at the live mean load).
pub fn ach_config() -> AchConfig {
    AchConfig::live()
}

/// Creates the ACH controller.
pub fn ach(config: AchConfig) -> Result<Ach, ConfigError> {
    Ach::new(config)
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
