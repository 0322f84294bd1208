//! A router for a small cache: string keys, named weighted nodes, measured loads, a budgeted
//! rebalancing step, the ranges to copy, confirmation, and a restart from saved state.
//! Run with `cargo run -p ach-control --example live_router`.
use ach_control::{Ach, AchConfig, Balancer, Observation};
use ach_ring::{NamedRing, NodeSpec};
use ach_telemetry::{LoadTracker, TelemetryConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let nodes = vec![NodeSpec::new("cache-a", 2.0), NodeSpec::new("cache-b", 1.0)];
    let mut ring = NamedRing::new(4096, nodes)?;
    let mut ach = Ach::new(AchConfig::live())?;
    let mut tracker = LoadTracker::new(2, TelemetryConfig::paper())?;
    println!("user:42 -> {}", ring.lookup_key(b"user:42").name);
    for step in 0..20 {
        // Readings as scraped from the nodes: [cpu, memory, latency] in [0, 1].
        for (node, cpu) in [0.45, 0.95].into_iter().enumerate() {
            tracker.record(node, [cpu, 0.5, cpu * 0.8])?;
        }
        let loads = tracker.finish_step();
        let (live, total_load) = (ring.live(), loads.total_load);
        let observation = Observation {
            step,
            loads: loads.loads,
            total_load,
            live: &live,
            token_loads: None,
        };
        let plan = ach.plan(ring.ring(), &observation);
        for migration in plan.migrations(ring.ring()) {
            // Copy the keys whose hash lies in `migration.ranges` from `from` to `to` here.
            let _ = (migration.from, migration.to, migration.ranges);
        }
        ring.apply(&plan.moves)?; // switch the routing only after the copy,
        let spent = ach.confirm(&plan)?; // then charge the budget.
        println!("step {step}: moved {spent:.4} of the key space");
    }
    // Save, restart, and go on exactly where we stopped.
    let ring_json = serde_json::to_string(&ring.state())?;
    let ach_json = serde_json::to_string(&ach.state())?;
    let restored_ring = NamedRing::from_state(&serde_json::from_str(&ring_json)?)?;
    let restored_ach = Ach::from_state(AchConfig::live(), &serde_json::from_str(&ach_json)?)?;
    assert!(restored_ring == ring && restored_ach == ach);
    println!(
        "restarted exactly; cache-b owns {} tokens",
        ring.ring().count(ach_ring::NodeId(1))
    );
    Ok(())
}
