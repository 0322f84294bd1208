//! `ach-baselines`: the baseline algorithms A0-A3 the ACH paper compares against, and the
//! baselines beyond the paper (CH-BL, ACH-F).
//!
//! All implement [`ach_control::Balancer`]; CH-BL also brings its own [`ach_control::Router`]
//! (which node serves each request). They work on the same [`ach_ring::TokenRing`]
//! and observations as ACH (spec section 5). Every mover keeps at least `v_min` tokens per
//! node. Ties in any ordering (equal fractional parts, loads or arcs) go to the lower node id
//! or token index first.
//!
//! | algorithm | type | what it does |
//! |---|---|---|
//! | A0 | [`StaticW`] | round-robin owners, never changes |
//! | A1 | [`StaticWt`] | owners proportional to capacity on the first step, then never changes |
//! | A2 | [`DynamicR`] | dynamic reweighting: 5 % of each overloaded node's share per step, no budget |
//! | A3 | [`BoundedLoads`] | the published simulation's token-moving heuristic named after bounded loads |
//! | redis-cli | [`RedisCliRebalance`] | `redis-cli --cluster rebalance` with weights: its transfers in its order, one per plan (the live experiment's arm, in the simulator; not in the paper) |
//! | CH-BL | [`BoundedLoadsRouting`] + [`RoutingOnly`] | consistent hashing with bounded loads as published (Mirrokni, Thorup, Zadimoghaddam, SODA 2018), capacity-weighted: routes requests past full nodes, never moves a token (not in the paper) |
//! | ACH-F | [`MedianFiltered`] | any balancer (ACH in the matrix) behind a per-node median filter of its loads (not in the paper) |
//!
//! [`catalogue`] lists them all by name (with ACH), with the factories that build each from
//! the node capacities, ACH's configuration and named parameters: the one place an algorithm
//! is registered and found, for the simulator and the live rebalancer alike.
//!
//! The crate depends on `ach-ring` and `ach-control` only. It does no I/O, reads no clock and
//! draws no random numbers.
//!
//! # Example
//!
//! ```
//! use ach_baselines::DynamicR;
//! use ach_control::{Balancer, Observation, commit};
//! use ach_ring::TokenRing;
//!
//! let positions: Vec<f64> = (0..40).map(|s| (s as f64 + 0.5) / 40.0).collect();
//! let mut ring = TokenRing::round_robin(positions, 2).unwrap();
//! let mut a2 = DynamicR::paper();
//! let loads = [0.80, 0.50];
//! let observation = Observation { step: 0, loads: &loads, total_load: 0.7, live: &[true, true], token_loads: None };
//! let plan = a2.plan(&ring, &observation);
//! commit(&mut ring, &plan).unwrap();
//! // Node 0 gave its shortest tokens until it had given 5 % of its share (0.025 of the key
//! // space); the arcs are 1/40 up to rounding, so that took two tokens.
//! assert_eq!(ring.counts(2), vec![18, 22]);
//! ```

mod adaptive;
mod bounded_loads;
mod bounded_loads_routing;
pub mod catalogue;
mod dynamic_r;
mod filtered;
mod oracle;
mod redis_cli;
mod static_w;

pub use adaptive::{Adaptive, AdaptiveRules};
pub use bounded_loads::BoundedLoads;
pub use bounded_loads_routing::{BoundedLoadsRouting, RoutingOnly};
pub use dynamic_r::DynamicR;
pub use filtered::{MedianFiltered, median};
pub use oracle::Oracle;
pub use redis_cli::{REDIS_CLI_THRESHOLD, RedisCliRebalance, Transfer as RedisCliTransfer};
pub use static_w::{StaticW, StaticWt};

/// Minimum tokens per node kept by every mover (spec section 5).
pub const V_MIN: usize = 3;

/// Live nodes whose load satisfies `keep`, in increasing id order.
fn nodes_where(obs: &ach_control::Observation<'_>, keep: impl Fn(f64) -> bool) -> Vec<usize> {
    // Room for every node up front: a filter gives `collect` no size, and the vector would
    // grow (and move) a few times at every step.
    let mut nodes = Vec::with_capacity(obs.n_nodes());
    nodes.extend(obs.live_nodes().filter(|&i| keep(obs.loads[i])));
    nodes
}

/// Rings and observations shared by the unit tests of the baselines.
#[cfg(test)]
pub(crate) mod test_support {
    use ach_control::{Observation, Plan};
    use ach_ring::{NodeId, TokenRing};

    /// `v` tokens at `(s + 0.5) / v`, owned round robin by `n` nodes.
    pub fn even_ring(v: usize, n: usize) -> TokenRing {
        let positions = (0..v).map(|s| (s as f64 + 0.5) / v as f64).collect();
        TokenRing::round_robin(positions, n).unwrap()
    }

    /// An observation of every node live.
    pub fn observe<'a>(loads: &'a [f64], live: &'a [bool]) -> Observation<'a> {
        Observation {
            step: 0,
            loads,
            total_load: loads.iter().sum::<f64>() / loads.len() as f64,
            live,
            token_loads: None,
        }
    }

    /// How many tokens of the plan go from `from` to `to`.
    pub fn moved(plan: &Plan, from: u32, to: u32) -> usize {
        plan.moves
            .iter()
            .filter(|mv| mv.from == NodeId(from) && mv.to == NodeId(to))
            .count()
    }
}
