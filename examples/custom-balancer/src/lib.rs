//! Example: a balancer of your own, Greedy-One, as one catalogue entry that runs everywhere the
//! built-ins run: on the paper's series, seeds and statistics (the `custom-balancer` binary,
//! `cargo run -p custom-balancer -- --series C1 --runs 4 --out DIR`, which takes the arguments
//! of `cargo xtask experiments` and writes the same results layout with one more row), and on a
//! live Redis Cluster (the `greedy-redis` binary: `ach-redis` with Greedy-One added,
//! `cargo run -p custom-balancer --bin greedy-redis -- rebalance --cluster HOST:PORT
//! --algorithm greedy-one --steps 10 --interval-ms 1000`).

use ach_baselines::catalogue::{Catalogue, Entry, Parameter, Rule};
use ach_control::{Balancer, Observation, Plan};
use ach_ring::{NodeId, TokenMove, TokenRing};

/// The name of the algorithm in series files, records, logs and `--algorithm`.
pub const NAME: &str = "Greedy-One";

/// Greedy-One: when the most loaded live node is more than `gap` above the least loaded one,
/// hand its shortest token to it (at most one token per step; a node keeps at least 3 tokens).
pub struct GreedyOne {
    /// The load gap above which a token moves.
    pub gap: f64,
}

impl Balancer for GreedyOne {
    fn name(&self) -> &'static str {
        NAME
    }

    fn plan(&mut self, ring: &TokenRing, observation: &Observation<'_>) -> Plan {
        let by_load =
            |a: &usize, b: &usize| observation.loads[*a].total_cmp(&observation.loads[*b]);
        let (Some(high), Some(low)) = (
            observation.live_nodes().max_by(by_load),
            observation.live_nodes().min_by(by_load),
        ) else {
            return Plan::none();
        };
        let from = NodeId(high as u32);
        if observation.loads[high] - observation.loads[low] <= self.gap || ring.count(from) <= 3 {
            return Plan::none();
        }
        let token = *ring
            .tokens_shortest_first()
            .iter()
            .find(|&&s| ring.owner(s) == from)
            .unwrap();
        Plan::from_moves(
            ring,
            vec![TokenMove {
                token,
                from,
                to: NodeId(low as u32),
            }],
        )
    }
}

/// Greedy-One's catalogue entry: label `G1`, parameter `greedy_one.gap` (default 0.1).
pub fn entry() -> Entry {
    Entry::new(NAME, "G1", |context| {
        Ok(Box::new(GreedyOne {
            gap: context.parameter("greedy_one.gap")?,
        }))
    })
    .parameter(Parameter::new(
        "greedy_one.gap",
        0.1,
        Rule::FinitePositive,
        "the load gap above which a token moves",
    ))
}

/// The built-in catalogue with Greedy-One added.
pub fn catalogue() -> Catalogue {
    let mut catalogue = Catalogue::built_in();
    catalogue.add(entry()).expect("a new name");
    catalogue
}
