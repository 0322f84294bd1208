//! The timed benchmark behind `cargo xtask bench-scale`: how long one run takes as the cluster
//! grows, against one run of series C1 on the same machine, and how much memory it needs.
//!
//! Each point is measured in its own process (the caller spawns it, see
//! [`measure_in_this_process`]), so that its peak resident memory (`VmHWM` of
//! `/proc/self/status`) is its own. A point's time is the best of `repeats` runs of
//! [`ach_sim::simulate`] (run 0, profile `paper`, one thread), timed with the wall clock around
//! the call: the configuration is built and validated before the clock starts, nothing is
//! written. This module only times; it never judges the figures against a target.

use std::fmt::Write as _;
use std::time::Instant;

use ach_sim::config::ConfigError;
use ach_sim::config::opt_in_series;
use ach_sim::{Profile, RunSpec, SeriesConfig, SimError, SweepPoint, built_in_series, simulate};

/// Why a benchmark point could not be chosen, set up, run or read back.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A point on the command line is neither `C1` nor a node count.
    #[error("bench point {text:?} must be C1 or a number of nodes >= 1")]
    Point {
        /// The text given.
        text: String,
    },
    /// A series the benchmark runs is not built in (a bug of the build).
    #[error("the {0} is missing")]
    SeriesMissing(&'static str),
    /// The point cannot be applied to the `scale` series.
    #[error(transparent)]
    AtPoint(#[from] ConfigError),
    /// The point's configuration breaks a rule.
    #[error("bench point {point}: {source}")]
    Invalid {
        /// The point.
        point: String,
        /// The rule broken.
        source: ConfigError,
    },
    /// The run failed.
    #[error(transparent)]
    Run(#[from] SimError),
    /// A measuring process printed a line that is not a measurement.
    #[error("unexpected measurement line {line:?}")]
    Line {
        /// The line.
        line: String,
    },
}

/// What one benchmark point runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchPoint {
    /// One run of the built-in series C1 (10 nodes, 1000 tokens, 2000 steps).
    C1,
    /// One run of the opt-in `scale` series at this many nodes (`cluster.nodes`, with the
    /// series' links: 100 tokens per node, the load scaled to C1's utilisation).
    Scale(usize),
}

impl BenchPoint {
    /// Parses `C1` or a node count.
    pub fn parse(text: &str) -> Result<BenchPoint, BenchError> {
        if text.eq_ignore_ascii_case("c1") {
            return Ok(BenchPoint::C1);
        }
        match text.trim().parse::<usize>() {
            Ok(nodes) if nodes > 0 => Ok(BenchPoint::Scale(nodes)),
            _ => Err(BenchError::Point {
                text: text.to_string(),
            }),
        }
    }

    /// The point's name on the command line of the measuring process (`C1` or the node count).
    pub fn argument(&self) -> String {
        match self {
            BenchPoint::C1 => "C1".to_string(),
            BenchPoint::Scale(nodes) => nodes.to_string(),
        }
    }

    /// The validated series configuration this point runs.
    pub fn config(&self) -> Result<SeriesConfig, BenchError> {
        let config = match self {
            BenchPoint::C1 => built_in_series()
                .into_iter()
                .find(|s| s.name == "C1")
                .ok_or(BenchError::SeriesMissing("built-in series C1"))?,
            BenchPoint::Scale(nodes) => {
                let scale = opt_in_series()
                    .into_iter()
                    .find(|s| s.name == "scale")
                    .ok_or(BenchError::SeriesMissing("opt-in series scale"))?;
                let point = SweepPoint::single("cluster.nodes", *nodes as f64);
                scale.at_point(&point)?
            }
        };
        config
            .validate(Profile::Paper)
            .map_err(|source| BenchError::Invalid {
                point: self.argument(),
                source,
            })?;
        Ok(config)
    }
}

/// The figures of one point, as its measuring process reports them.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// Nodes of the initial cluster.
    pub nodes: usize,
    /// Tokens `V`.
    pub tokens: usize,
    /// Steps of a run.
    pub steps: u32,
    /// Seconds of every repeat, in the order run.
    pub seconds: Vec<f64>,
    /// Peak resident memory of the measuring process in KiB (`VmHWM`), when the system says.
    pub peak_kib: Option<u64>,
}

impl Measurement {
    /// The fastest repeat.
    pub fn best(&self) -> f64 {
        self.seconds.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// Tokens times steps: the work of one run.
    pub fn token_steps(&self) -> f64 {
        self.tokens as f64 * f64::from(self.steps)
    }

    /// Nanoseconds per token and step of the fastest repeat.
    pub fn ns_per_token_step(&self) -> f64 {
        self.best() * 1e9 / self.token_steps()
    }

    /// One line a parent process reads back with [`Measurement::parse`].
    pub fn to_line(&self) -> String {
        let seconds: Vec<String> = self.seconds.iter().map(|s| format!("{s:.6}")).collect();
        format!(
            "nodes={} tokens={} steps={} seconds={} peak_kib={}",
            self.nodes,
            self.tokens,
            self.steps,
            seconds.join(","),
            self.peak_kib.map_or("none".to_string(), |k| k.to_string())
        )
    }

    /// Reads a line written by [`Measurement::to_line`].
    pub fn parse(line: &str) -> Result<Measurement, BenchError> {
        let bad = || BenchError::Line {
            line: line.to_string(),
        };
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
                .ok_or_else(bad)
        };
        let number = |name: &str| field(name)?.parse::<u64>().map_err(|_| bad());
        let seconds = field("seconds")?
            .split(',')
            .map(|s| s.parse::<f64>().map_err(|_| bad()))
            .collect::<Result<Vec<f64>, BenchError>>()?;
        let peak_kib = match field("peak_kib")? {
            "none" => None,
            kib => Some(kib.parse::<u64>().map_err(|_| bad())?),
        };
        Ok(Measurement {
            nodes: number("nodes")? as usize,
            tokens: number("tokens")? as usize,
            steps: u32::try_from(number("steps")?).map_err(|_| bad())?,
            seconds,
            peak_kib,
        })
    }
}

/// What every benchmark point runs: run 0 of `config`, profile `paper`, no sweep point.
pub fn run_zero(config: &SeriesConfig) -> RunSpec<'_> {
    RunSpec {
        config,
        point: None,
        profile: Profile::Paper,
        run_index: 0,
    }
}

/// Runs `point` `repeats` times in this process and returns the figures, with this process's
/// peak resident memory. Call it in a fresh process per point (the peak is the process's).
pub fn measure_in_this_process(point: BenchPoint, repeats: u32) -> Result<Measurement, BenchError> {
    let config = point.config()?;
    let spec = run_zero(&config);
    let mut seconds = Vec::new();
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        let record = simulate(&spec)?;
        seconds.push(start.elapsed().as_secs_f64());
        drop(record);
    }
    Ok(Measurement {
        nodes: config.cluster.classes.len(),
        tokens: config.tokens,
        steps: config.steps,
        seconds,
        peak_kib: peak_resident_kib(),
    })
}

/// `VmHWM` of `/proc/self/status` in KiB (Linux); `None` elsewhere.
fn peak_resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The table of the measured points: one row per point, times against the C1 row's best.
pub fn table(c1: &Measurement, points: &[Measurement]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| run | nodes | tokens | steps | best s | repeats s | ns per token-step | x C1 | peak MB |"
    );
    let _ = writeln!(
        out,
        "| :--- | ---: | ---: | ---: | ---: | :--- | ---: | ---: | ---: |"
    );
    let rows = std::iter::once(("C1", c1)).chain(points.iter().map(|m| ("scale", m)));
    for (name, m) in rows {
        let repeats: Vec<String> = m.seconds.iter().map(|s| format!("{s:.3}")).collect();
        let peak = m
            .peak_kib
            .map_or("n/a".to_string(), |k| format!("{:.1}", k as f64 / 1024.0));
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {:.3} | {} | {:.2} | {:.1} | {peak} |",
            m.nodes,
            m.tokens,
            m.steps,
            m.best(),
            repeats.join(", "),
            m.ns_per_token_step(),
            m.best() / c1.best(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measurement_line_reads_back() {
        let m = Measurement {
            nodes: 1000,
            tokens: 100_000,
            steps: 2000,
            seconds: vec![4.25, 4.125],
            peak_kib: Some(22_528),
        };
        assert_eq!(Measurement::parse(&m.to_line()).unwrap(), m);
        let none = Measurement {
            peak_kib: None,
            ..m.clone()
        };
        assert_eq!(Measurement::parse(&none.to_line()).unwrap(), none);
        assert!(Measurement::parse("nodes=3").is_err());
    }

    #[test]
    fn points_are_the_scale_series_and_c1() {
        assert_eq!(BenchPoint::parse("c1").unwrap(), BenchPoint::C1);
        assert_eq!(BenchPoint::parse("300").unwrap(), BenchPoint::Scale(300));
        assert!(BenchPoint::parse("0").is_err());
        assert!(BenchPoint::parse("many").is_err());
        let c = BenchPoint::Scale(100).config().unwrap();
        assert_eq!(c.cluster.classes.len(), 100);
        assert_eq!(c.tokens, 10_000);
        assert_eq!(c.steps, 2000);
        assert_eq!(BenchPoint::C1.config().unwrap().tokens, 1000);
    }

    #[test]
    fn the_table_divides_by_the_c1_best() {
        let c1 = Measurement {
            nodes: 10,
            tokens: 1000,
            steps: 2000,
            seconds: vec![0.05, 0.04],
            peak_kib: Some(6144),
        };
        let big = Measurement {
            nodes: 1000,
            tokens: 100_000,
            steps: 2000,
            seconds: vec![4.0],
            peak_kib: None,
        };
        let table = table(&c1, &[big]);
        assert!(
            table.contains("| C1 | 10 | 1000 | 2000 | 0.040 | 0.050, 0.040 | 20.00 | 1.0 | 6.0 |")
        );
        assert!(
            table
                .contains("| scale | 1000 | 100000 | 2000 | 4.000 | 4.000 | 20.00 | 100.0 | n/a |")
        );
    }
}
