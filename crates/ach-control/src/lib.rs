//! `ach-control`: the ACH controller and the interface every balancing algorithm implements.
//!
//! # The method
//!
//! ACH (adaptive consistent hashing with a budgeted redistribution cost) watches the load
//! vector `l` of the cluster and, at each control step, hands a few tokens of the ring from
//! overloaded to underloaded nodes, never spending more than a budget of migrated key space.
//! One step ([`Ach`], spec section 4):
//!
//! 1. **Hysteresis** ([`hysteresis`]): with `xi = l_i - l*`, a neutral node turns overloaded at
//!    `xi >= eps_on` and underloaded at `xi <= -eps_on`; it returns to neutral at
//!    `xi <= eps_off` (resp. `xi >= -eps_off`).
//! 2. **Intensity** ([`intensity`]): `gamma = clip((tau - total_load) / (tau - tau_min), 0, 1)`,
//!    `I = max_i max(l_i - l*, 0)`, `eta = I / (I + kappa)`, `C = gamma * eta`.
//! 3. **Budget** ([`budget`]): `m = min(M_max, M_H / H) * C`, or 0 once the last `H` steps
//!    spent `M_H`.
//! 4. Sources `O` (state +1) and receivers `U` (state -1); gains `g_i = l_i - l*`, needs
//!    `r_j = l* - l_j`.
//! 5. **Planner** ([`planner`]): each source gives its longest tokens until it has given
//!    `m * g_i / sum g` of key space, keeping `v_min`; the pooled tokens are split among the
//!    receivers by `floor(n * r_j / sum r)` and largest remainder.
//! 6. The **budget invariant** `M_keys <= m + |O| * max_s L[s]` holds at every step.
//!
//! Every algorithm, ACH and the baselines alike, implements [`Balancer`]: it receives an
//! [`Observation`] and returns a [`Plan`] of token moves, which the caller commits to the ring
//! (at once in a simulation; after the data has migrated in a real deployment).
//!
//! Beside it, a [`Router`] decides which node serves each request of a step: [`OwnerRouting`]
//! (the token's owner, the model of the paper) unless an algorithm brings its own rule, such as
//! consistent hashing with bounded loads, which forwards requests past full nodes.
//!
//! The crate depends on `ach-ring` only. It does no I/O, reads no clock and draws no random
//! numbers.
//!
//! # What can fail
//!
//! Only two operations return errors: [`Ach::new`] (and [`AchConfig::validate`]) rejects
//! parameters that break a rule of the spec, naming the field, the value and the rule; and
//! [`commit`] passes on the ring's error when a plan does not fit the ring it is applied to (a
//! plan made for another ring, or committed twice). Planning itself cannot fail and does not
//! panic: any load vector (NaN and infinities included), any live mask and any ring whose
//! owners are nodes give a plan, at worst an empty one. The helpers in [`planner`] and
//! [`apportion`] take any input as well.
//!
//! # Example
//!
//! ```
//! use ach_control::{Ach, AchConfig, Balancer, Observation, commit};
//! use ach_ring::TokenRing;
//!
//! let positions: Vec<f64> = (0..60).map(|s| (s as f64 + 0.5) / 60.0).collect();
//! let mut ring = TokenRing::round_robin(positions, 3).unwrap();
//! let mut ach = Ach::new(AchConfig::paper()).unwrap();
//! // Hand-made load vectors: node 0 runs hot, node 2 idles.
//! let steps = [[0.92, 0.66, 0.35], [0.88, 0.65, 0.40], [0.80, 0.64, 0.47]];
//! let mut spent = 0.0;
//! for (t, loads) in steps.iter().enumerate() {
//!     let total = 0.5 * loads.iter().sum::<f64>() / 3.0 + 0.5 * 0.92;
//!     let observation =
//!         Observation { step: t as u64, loads, total_load: total, live: &[true; 3], token_loads: None };
//!     let plan = ach.plan(&ring, &observation);
//!     assert!(plan.within_budget());
//!     spent += commit(&mut ring, &plan).unwrap();
//!     ach.confirm(&plan).unwrap(); // the budget is charged once the switch is done
//! }
//! let counts = ring.counts(3);
//! assert!(counts[0] < 20 && counts[2] > 20);
//! assert!(spent > 0.0);
//! ```

mod ach;
pub mod apportion;
mod balancer;
pub mod budget;
mod config;
pub mod gain;
pub mod hysteresis;
pub mod intensity;
pub mod planner;
mod routing;

pub use ach::{ACH_STATE_VERSION, Ach, AchState, AchStep, StateError};
pub use balancer::{
    BUDGET_SLACK, Balancer, ConfirmError, Observation, Plan, TokenLoadNeed, Withheld, commit,
};
pub use config::{
    AchConfig, AssignRule, ConfigError, HorizonRule, SelectRule, StepRule, TargetRule,
    ThresholdRule,
};
pub use routing::{OwnerRouting, Router, Served, StepLoad};
