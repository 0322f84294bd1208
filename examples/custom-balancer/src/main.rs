//! Example: a balancer of your own beside ACH and A0-A3, on the paper's series, seeds and
//! statistics. `cargo run -p custom-balancer -- --series C1 --runs 4 --out DIR` takes the
//! arguments of `cargo xtask experiments` and writes the same results layout with one more row.

use ach_control::{Balancer, Observation, Plan};
use ach_report::experiments::{Args, run_with};
use ach_ring::{NodeId, TokenMove, TokenRing};
use ach_sim::algorithms::{AlgorithmInfo, Marker, Registry};
use clap::Parser;

/// Greedy-One: when the most loaded live node is more than `gap` above the least loaded one,
/// hand its shortest token to it (at most one token per step; a node keeps at least 3 tokens).
struct GreedyOne {
    gap: f64,
}

impl Balancer for GreedyOne {
    fn name(&self) -> &'static str {
        "Greedy-One"
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

#[derive(Parser)]
#[command(
    name = "custom-balancer",
    about = "The paper's matrix with Greedy-One added"
)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn main() -> std::process::ExitCode {
    let mut registry = Registry::built_in();
    let info = AlgorithmInfo::new("Greedy-One", "G1", [0x56, 0xB4, 0xE9], Marker::Cross);
    registry
        .register(info, |_config| Ok(Box::new(GreedyOne { gap: 0.1 })))
        .expect("a new name");
    let mut args = Cli::parse().args;
    args.add_algorithms = vec!["Greedy-One".to_string()];
    run_with(args, registry)
}
