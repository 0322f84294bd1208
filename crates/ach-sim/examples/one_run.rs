//! Runs one run of a built-in series and prints each algorithm's aggregates.
//!
//! `cargo run --release -p ach-sim --example one_run -- C3 0 [paper|corrected]`

use ach_sim::{Profile, RunSpec, built_in_series, simulate};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map_or("C1", String::as_str);
    let run_index: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0);
    let profile = match args.get(3).map(String::as_str) {
        Some("corrected") => Profile::Corrected,
        _ => Profile::Paper,
    };
    let series = built_in_series();
    let Some(config) = series.iter().find(|s| s.name == name) else {
        eprintln!("unknown series {name}");
        std::process::exit(2);
    };
    let start = std::time::Instant::now();
    let record = simulate(&RunSpec {
        config,
        point: None,
        profile,
        run_index,
    })
    .expect("run");
    let elapsed = start.elapsed();
    for a in &record.algorithms {
        let g = &a.aggregates;
        println!(
            "{:<14} D_mean {:.4}  D_true {:.4}  D_max {:.4}  M_cum {:.4}  pi_chg {:.4}  n_viol {}",
            a.name, g.d_mean, g.d_true_mean, g.d_max, g.m_cum, g.pi_chg, g.n_viol
        );
    }
    println!(
        "seed {}, {:.1} ms",
        record.seed,
        elapsed.as_secs_f64() * 1e3
    );
}
