//! What the rebalance loop read of each node class's load, against the ground truth: a
//! least-squares line `reading = offset + scale * true load` per class, pooled over every
//! control step of every loop arm, for the calibrated simulator's readings
//! ([`ach_sim::reading`]). Where a line bent at a knee fits the readings better (a node's
//! CPU reading saturates as its quota runs out), the class's reading is that bent line: the
//! knee is chosen among the true loads' percentiles 5 to 95 by the Bayesian information
//! criterion, which charges the bend its two more parameters.
//!
//! A control step's reading covers the time since the one before; it is paired with the true
//! load of the step it ended in (`round((t_k - t_0) / interval)` steps after the loop's first
//! step, which reads step 0), after the warm-up.
//!
//! How the readings scatter about the fit is measured too: the root mean square of their
//! differences from it, and of each master's own part of its difference (its difference less
//! the mean difference of every master in the same step: a part all masters share moves every
//! reading together and says nothing of which master is loaded), with the lag-one
//! autocorrelation of a master's own part from one step to the next. The simulator's readings
//! scatter as the own parts do ([`ach_sim::reading::Scatter`]).

use ach_sim::config::NodeClass;
use ach_sim::reading::{Knee, Reading, Scatter, read};

/// One loop run's figures for the fit.
#[derive(Clone, Copy, Debug)]
pub struct LoopReadings<'a> {
    /// The loop's step events ([`crate::cadence::step_events`]).
    pub steps: &'a [serde_json::Value],
    /// Every master's address and class, in the order of `true_loads`.
    pub nodes: &'a [(String, NodeClass)],
    /// Every step's true loads.
    pub true_loads: &'a [Vec<f64>],
}

/// One class's line.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClassReading {
    /// The class.
    pub class: NodeClass,
    /// Readings paired with a true load.
    pub samples: usize,
    /// The reading of an idle node of the class.
    pub offset: f64,
    /// The reading's growth per unit of true load (up to the knee, if there is one).
    pub scale: f64,
    /// Where the reading bends (`None`: a line; absent in calibrations saved before knees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<Knee>,
    /// How far the readings scatter about the fit: the root of their mean squared difference
    /// from it (absent in calibrations saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual_sd: Option<f64>,
    /// How far the masters' own parts of their differences scatter (the root of their mean
    /// square; absent in calibrations saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_sd: Option<f64>,
    /// The correlation of a master's own part with its own part one step later, over every
    /// pair of consecutive steps of a master of the class (absent with fewer than
    /// [`MIN_PAIRS`] pairs or no spread, and in calibrations saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_autocorrelation: Option<f64>,
}

/// The fewest pairs of consecutive readings an autocorrelation is measured from.
pub const MIN_PAIRS: usize = 30;

/// The largest autocorrelation a measurement gives (the simulator's process needs one below 1).
pub const MAX_AUTOCORRELATION: f64 = 0.99;

/// The smallest scale a fit is given: a reading that does not grow with the load (or falls)
/// is taken as flat, not as inverted.
pub const MIN_SCALE: f64 = 1e-3;

/// The fewest readings on either side of a knee.
pub const MIN_KNEE_SIDE: usize = 30;

/// The line of every class with readings, for steps of `interval_s` seconds and a warm-up of
/// `warmup` steps.
pub fn measure(runs: &[LoopReadings<'_>], interval_s: f64, warmup: usize) -> Vec<ClassReading> {
    let mut samples: Vec<Sample> = Vec::new();
    for (index, run) in runs.iter().enumerate() {
        pair_readings(run, index, interval_s, warmup, &mut samples);
    }
    let mut lines = Vec::new();
    for class in [NodeClass::Strong, NodeClass::Medium, NodeClass::Weak] {
        let mut points: Vec<(f64, f64)> = samples
            .iter()
            .filter(|s| s.class == class)
            .map(|s| (s.load, s.reading))
            .collect();
        // Sorted, so that the sums do not depend on the order the runs come in (a run's own
        // and a saved folder's read back agree to the last bit).
        points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        lines.extend(fit_class(class, &points));
    }
    let own = own_parts(&lines, &samples);
    for line in &mut lines {
        let of_class: Vec<(&Sample, f64)> = samples
            .iter()
            .zip(&own)
            .filter_map(|(s, own)| own.filter(|_| s.class == line.class).map(|own| (s, own)))
            .collect();
        let mut squares: Vec<f64> = of_class.iter().map(|(_, own)| own * own).collect();
        squares.sort_by(f64::total_cmp);
        line.own_sd = (!squares.is_empty())
            .then(|| (squares.iter().sum::<f64>() / squares.len() as f64).sqrt());
        line.own_autocorrelation = lag_one_autocorrelation(of_class);
    }
    lines
}

/// One reading paired with its true load.
#[derive(Clone, Copy, Debug)]
struct Sample {
    class: NodeClass,
    /// The run's index and the master's in it.
    run: usize,
    node: usize,
    /// The step of the truth it is paired with.
    step: usize,
    load: f64,
    reading: f64,
}

/// Every sample's own part of its difference from its class's line in `lines`: the difference
/// less the mean difference of the samples of the same run and step (`None` for a sample
/// without a line, or alone in its step).
fn own_parts(lines: &[ClassReading], samples: &[Sample]) -> Vec<Option<f64>> {
    let difference = |s: &Sample| {
        let line = lines.iter().find(|line| line.class == s.class)?;
        Some(s.reading - read(line.offset, line.scale, line.knee, s.load))
    };
    let differences: Vec<Option<f64>> = samples.iter().map(difference).collect();
    let mut steps: std::collections::BTreeMap<(usize, usize), (f64, usize)> = Default::default();
    for (s, d) in samples.iter().zip(&differences) {
        if let Some(d) = d {
            let step = steps.entry((s.run, s.step)).or_default();
            *step = (step.0 + d, step.1 + 1);
        }
    }
    samples
        .iter()
        .zip(differences)
        .map(|(s, d)| {
            let (sum, count) = steps.get(&(s.run, s.step)).copied().unwrap_or_default();
            d.filter(|_| count > 1).map(|d| d - sum / count as f64)
        })
        .collect()
}

/// The lag-one autocorrelation of the values of `samples`: over every pair of values of one
/// master in consecutive steps, `sum(a b) / sqrt(sum(a^2) sum(b^2))`, at most
/// [`MAX_AUTOCORRELATION`] in size (`None` with fewer than [`MIN_PAIRS`] pairs or no spread).
fn lag_one_autocorrelation(mut samples: Vec<(&Sample, f64)>) -> Option<f64> {
    samples.sort_by_key(|(s, _)| (s.run, s.node, s.step));
    let mut pairs: Vec<(f64, f64)> = samples
        .windows(2)
        .filter(|w| {
            let (a, b) = (w[0].0, w[1].0);
            (a.run, a.node, a.step + 1) == (b.run, b.node, b.step)
        })
        .map(|w| (w[0].1, w[1].1))
        .collect();
    if pairs.len() < MIN_PAIRS {
        return None;
    }
    // Sorted, for sums that do not depend on the order of the runs.
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let sum = |f: fn(&(f64, f64)) -> f64| pairs.iter().map(f).sum::<f64>();
    let (ab, aa, bb) = (sum(|p| p.0 * p.1), sum(|p| p.0 * p.0), sum(|p| p.1 * p.1));
    (aa > 0.0 && bb > 0.0)
        .then(|| (ab / (aa * bb).sqrt()).clamp(-MAX_AUTOCORRELATION, MAX_AUTOCORRELATION))
}

/// The reading of one class from its (true load, reading) points: the least-squares line, or
/// the bent line whose knee fits best when the information criterion prefers it.
fn fit_class(class: NodeClass, points: &[(f64, f64)]) -> Option<ClassReading> {
    let (_, scale) = crate::pace::least_squares(points)?;
    let scale = scale.max(MIN_SCALE);
    let n = points.len() as f64;
    let mean = |f: fn(&(f64, f64)) -> f64| points.iter().map(f).sum::<f64>() / n;
    // Through the means, whatever the scale became.
    let offset = mean(|p| p.1) - scale * mean(|p| p.0);
    let line_sse = squared_error(points, |x| read(offset, scale, None, x));
    let line = ClassReading {
        class,
        samples: points.len(),
        offset,
        scale,
        knee: None,
        residual_sd: Some((line_sse / n).sqrt()),
        own_sd: None,
        own_autocorrelation: None,
    };
    let Some(bent) = best_knee(points) else {
        return Some(line);
    };
    // BIC = n ln(SSE / n) + parameters * ln n: the line has 2, the bent line 4 (its knee and
    // the second slope besides).
    let bic = |sse: f64, parameters: f64| n * (sse / n).ln() + parameters * n.ln();
    if line_sse > 0.0 && bic(bent.sse, 4.0) < bic(line_sse, 2.0) {
        Some(ClassReading {
            offset: bent.offset,
            scale: bent.scale,
            knee: Some(bent.knee),
            residual_sd: Some((bent.sse / n).sqrt()),
            ..line
        })
    } else {
        Some(line)
    }
}

/// A bent line fitted to some points, and its sum of squared errors.
struct BentFit {
    offset: f64,
    scale: f64,
    knee: Knee,
    sse: f64,
}

/// The best bent line with its knee at one of the true loads' percentiles 5 to 95, at least
/// [`MIN_KNEE_SIDE`] points on either side, rising on both sides (`None`: no such knee).
fn best_knee(points: &[(f64, f64)]) -> Option<BentFit> {
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    let mut best: Option<BentFit> = None;
    let mut tried = f64::NAN;
    for percentile in 5..=95 {
        let Some(knee) = nearest_rank(&xs, f64::from(percentile) / 100.0) else {
            continue;
        };
        if knee == tried || knee <= 0.0 {
            continue;
        }
        tried = knee;
        let below = xs.partition_point(|&x| x <= knee);
        if below < MIN_KNEE_SIDE || xs.len() - below < MIN_KNEE_SIDE {
            continue;
        }
        let Some([offset, scale, above]) = bent_least_squares(points, knee) else {
            continue;
        };
        if scale < MIN_SCALE || above < 0.0 {
            continue;
        }
        let knee = Knee {
            load: knee,
            scale: above,
        };
        let sse = squared_error(points, |x| read(offset, scale, Some(knee), x));
        if best.as_ref().is_none_or(|b| sse < b.sse) {
            best = Some(BentFit {
                offset,
                scale,
                knee,
                sse,
            });
        }
    }
    best
}

/// The least-squares `[a, b, c]` of `y = a + b min(x, knee) + c max(x - knee, 0)` (`None`
/// when the points do not determine them).
fn bent_least_squares(points: &[(f64, f64)], knee: f64) -> Option<[f64; 3]> {
    // The normal equations, solved by Gaussian elimination with partial pivoting.
    let mut m = [[0.0f64; 4]; 3];
    for &(x, y) in points {
        let row = [1.0, x.min(knee), (x - knee).max(0.0)];
        for i in 0..3 {
            for j in 0..3 {
                m[i][j] += row[i] * row[j];
            }
            m[i][3] += row[i] * y;
        }
    }
    for column in 0..3 {
        let pivot =
            (column..3).max_by(|&a, &b| m[a][column].abs().total_cmp(&m[b][column].abs()))?;
        m.swap(column, pivot);
        if m[column][column].abs() < 1e-12 {
            return None;
        }
        let pivot_row = m[column];
        for row in &mut m[column + 1..] {
            let factor = row[column] / pivot_row[column];
            for (value, pivot_value) in row.iter_mut().zip(pivot_row).skip(column) {
                *value -= factor * pivot_value;
            }
        }
    }
    let mut solution = [0.0; 3];
    for i in (0..3).rev() {
        let rest: f64 = (i + 1..3).map(|j| m[i][j] * solution[j]).sum();
        solution[i] = (m[i][3] - rest) / m[i][i];
    }
    solution.iter().all(|v| v.is_finite()).then_some(solution)
}

/// The sum of the squared differences between the points' readings and `f` of their loads.
fn squared_error(points: &[(f64, f64)], f: impl Fn(f64) -> f64) -> f64 {
    points.iter().map(|&(x, y)| (y - f(x)).powi(2)).sum()
}

/// The simulator's readings of a cluster of `classes` (node `i` of class `classes[i]`), each
/// scattering about its line as the class's own parts did, when both figures were measured.
pub fn readings(lines: &[ClassReading], classes: &[NodeClass]) -> Vec<Reading> {
    lines
        .iter()
        .map(|line| Reading {
            nodes: (0..classes.len() as u32)
                .filter(|&i| classes[i as usize] == line.class)
                .collect(),
            offset: line.offset,
            scale: line.scale,
            knee: line.knee,
            scatter: line
                .own_sd
                .zip(line.own_autocorrelation)
                .map(|(sd, autocorrelation)| Scatter {
                    sd,
                    autocorrelation,
                }),
        })
        .filter(|reading| !reading.nodes.is_empty())
        .collect()
}

/// Adds the readings of run `index`, each paired with its true load, to `samples`.
fn pair_readings(
    run: &LoopReadings<'_>,
    index: usize,
    interval_s: f64,
    warmup: usize,
    samples: &mut Vec<Sample>,
) {
    let mut first_ms: Option<f64> = None;
    for event in run.steps {
        let Some(unix_ms) = event["unix_ms"].as_f64() else {
            continue;
        };
        let first = *first_ms.get_or_insert(unix_ms);
        let t = ((unix_ms - first) / (interval_s * 1000.0)).round() as usize;
        let Some(truth) = run.true_loads.get(t).filter(|_| t >= warmup) else {
            continue;
        };
        for node in event["observed"]["nodes"].as_array().into_iter().flatten() {
            let (Some(address), Some(load)) = (node["address"].as_str(), node["load"].as_f64())
            else {
                continue;
            };
            let position = run.nodes.iter().position(|(a, _)| a == address);
            if let Some((node, &true_load)) = position.and_then(|i| truth.get(i).map(|l| (i, l))) {
                samples.push(Sample {
                    class: run.nodes[node].1,
                    run: index,
                    node,
                    step: t,
                    load: true_load,
                    reading: load,
                });
            }
        }
    }
}

/// One step of the observer's readings of every master (in the order of the run's nodes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedStep {
    /// True for a warm-up step (left out).
    pub warmup: bool,
    /// Every master's composite, as the observer read it.
    pub composite: Vec<f64>,
    /// Every master's `[cpu, memory, latency]` as the load tracker took them (`None`: not
    /// read).
    pub parts: Vec<[Option<f64>; 3]>,
    /// Every master's client p99 in the step, in milliseconds (`None`: no request answered).
    pub p99_ms: Vec<Option<f64>>,
}

/// One run's observed steps, for [`parts_by_class`].
#[derive(Clone, Copy, Debug)]
pub struct PartsRun<'a> {
    /// The arm.
    pub algorithm: &'a str,
    /// Every master's address and class, in the order of `true_loads`.
    pub nodes: &'a [(String, NodeClass)],
    /// Every step's true loads.
    pub true_loads: &'a [Vec<f64>],
    /// Every step's readings.
    pub steps: &'a [ObservedStep],
}

/// The mean parts of the observer's readings of one class's masters under one arm, beside
/// their mean true load: which part of the composite carries an offset the truth does not
/// have; and the clients' p99 of those masters' steps: where a tail comes from.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClassParts {
    /// The arm.
    pub algorithm: String,
    /// The class.
    pub class: NodeClass,
    /// Master-steps after the warm-up with all three parts read.
    pub samples: usize,
    /// Mean true load.
    pub true_load: f64,
    /// Mean cpu part.
    pub cpu: f64,
    /// Mean memory part.
    pub memory: f64,
    /// Mean latency part.
    pub latency: f64,
    /// Mean composite.
    pub composite: f64,
    /// The median, over the class's master-steps after the warm-up, of the clients' p99 in
    /// the step, in milliseconds (`None`: no step with a request answered).
    #[serde(default)]
    pub step_p99_ms_median: Option<f64>,
    /// The 90th percentile of the same.
    #[serde(default)]
    pub step_p99_ms_p90: Option<f64>,
}

/// Every (arm, class) of `runs`' means, arms in the order they first come, classes strong,
/// medium, weak; an (arm, class) without samples is left out.
pub fn parts_by_class(runs: &[PartsRun<'_>]) -> Vec<ClassParts> {
    let mut algorithms: Vec<&str> = Vec::new();
    for run in runs {
        if !algorithms.contains(&run.algorithm) {
            algorithms.push(run.algorithm);
        }
    }
    let mut means = Vec::new();
    for algorithm in algorithms {
        for class in [NodeClass::Strong, NodeClass::Medium, NodeClass::Weak] {
            let mut sums = [0.0; 5];
            let mut samples = 0;
            let mut step_p99s = Vec::new();
            for run in runs.iter().filter(|r| r.algorithm == algorithm) {
                let steps = run.steps.iter().zip(run.true_loads);
                for (step, truth) in steps.filter(|(s, _)| !s.warmup) {
                    for (i, _) in run.nodes.iter().enumerate().filter(|(_, n)| n.1 == class) {
                        step_p99s.extend(step.p99_ms.get(i).copied().flatten());
                        let (
                            Some(truth),
                            Some(composite),
                            Some([Some(cpu), Some(memory), Some(latency)]),
                        ) = (truth.get(i), step.composite.get(i), step.parts.get(i))
                        else {
                            continue;
                        };
                        for (sum, value) in sums
                            .iter_mut()
                            .zip([*truth, *cpu, *memory, *latency, *composite])
                        {
                            *sum += value;
                        }
                        samples += 1;
                    }
                }
            }
            if samples > 0 {
                let mean = |k: usize| sums[k] / samples as f64;
                step_p99s.sort_by(f64::total_cmp);
                means.push(ClassParts {
                    algorithm: algorithm.to_string(),
                    class,
                    samples,
                    true_load: mean(0),
                    cpu: mean(1),
                    memory: mean(2),
                    latency: mean(3),
                    composite: mean(4),
                    step_p99_ms_median: nearest_rank(&step_p99s, 0.5),
                    step_p99_ms_p90: nearest_rank(&step_p99s, 0.9),
                });
            }
        }
    }
    means
}

/// The `q`-quantile of `sorted` by the nearest rank (`None` when empty): the one rule of the
/// live experiment's percentiles.
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(unix_ms: u64, loads: &[(&str, f64)]) -> String {
        let nodes: Vec<serde_json::Value> = loads
            .iter()
            .map(|&(address, load)| serde_json::json!({"address": address, "load": load}))
            .collect();
        serde_json::json!({"event": "step", "unix_ms": unix_ms, "observed": {"nodes": nodes}})
            .to_string()
    }

    #[test]
    fn fits_a_line_per_class_from_the_loops_readings_and_the_truth() {
        // A weak node reads 0.4 + 0.5 x, a strong one 2 x; step k's reading pairs with true
        // step k (1 s apart), and the warm-up (step 0) is left out.
        let truth: Vec<Vec<f64>> = (0..4)
            .map(|t| vec![0.1 * t as f64, 0.05 * t as f64])
            .collect();
        let log: Vec<String> = (0..4)
            .map(|t| {
                let (weak, strong) = (truth[t][0], truth[t][1]);
                step(
                    1000 * t as u64 + 7,
                    &[("w", 0.4 + 0.5 * weak), ("s", 2.0 * strong)],
                )
            })
            .collect();
        let log = log.join("\n");
        let nodes = [
            ("w".to_string(), NodeClass::Weak),
            ("s".to_string(), NodeClass::Strong),
        ];
        let steps = crate::cadence::step_events(&log);
        let run = LoopReadings {
            steps: &steps,
            nodes: &nodes,
            true_loads: &truth,
        };
        let lines = measure(&[run], 1.0, 1);
        assert_eq!(lines.len(), 2);
        let (strong, weak) = (lines[0], lines[1]);
        assert_eq!((strong.class, strong.samples), (NodeClass::Strong, 3));
        assert!(strong.offset.abs() < 1e-12 && (strong.scale - 2.0).abs() < 1e-12);
        assert!((weak.offset - 0.4).abs() < 1e-12 && (weak.scale - 0.5).abs() < 1e-12);
        let readings = readings(
            &lines,
            &[NodeClass::Strong, NodeClass::Weak, NodeClass::Weak],
        );
        assert_eq!(readings[1].nodes, [1, 2]);
    }

    #[test]
    fn the_parts_are_averaged_per_arm_and_class_over_the_steps_read() {
        let step = |warmup: bool, cpu: Option<f64>, weak_p99: Option<f64>| ObservedStep {
            warmup,
            composite: vec![0.3, 0.6],
            parts: vec![
                [cpu, Some(0.0), Some(0.1)],
                [Some(0.7), Some(0.0), Some(0.0)],
            ],
            p99_ms: vec![weak_p99, Some(2.0)],
        };
        // The warm-up step and the step whose weak cpu was not read are left out for the weak
        // master; the strong one is read at both measured steps.
        // The weak master's step p99s after the warm-up: 40, 10 and none.
        let steps = [
            step(true, Some(9.0), Some(99.0)),
            step(false, Some(0.4), Some(40.0)),
            step(false, None, Some(10.0)),
            step(false, Some(0.6), None),
        ];
        let nodes = [
            ("w".to_string(), NodeClass::Weak),
            ("s".to_string(), NodeClass::Strong),
        ];
        let truth = vec![vec![0.2, 0.5]; steps.len()];
        let run = PartsRun {
            algorithm: "ach",
            nodes: &nodes,
            true_loads: &truth,
            steps: &steps,
        };
        let parts = parts_by_class(&[
            run,
            PartsRun {
                algorithm: "a0",
                ..run
            },
        ]);
        assert_eq!(parts.len(), 4);
        assert_eq!(
            (
                parts[0].algorithm.as_str(),
                parts[0].class,
                parts[0].samples
            ),
            ("ach", NodeClass::Strong, 3)
        );
        let weak = &parts[1];
        assert_eq!((weak.class, weak.samples), (NodeClass::Weak, 2));
        assert!((weak.cpu - 0.5).abs() < 1e-12 && (weak.latency - 0.1).abs() < 1e-12);
        assert!((weak.true_load - 0.2).abs() < 1e-12 && (weak.composite - 0.3).abs() < 1e-12);
        // Every step with a p99 counts, read or not: the median of [10, 40] by nearest rank.
        assert_eq!(
            (weak.step_p99_ms_median, weak.step_p99_ms_p90),
            (Some(10.0), Some(40.0))
        );
        assert_eq!(parts[0].step_p99_ms_median, Some(2.0));
        assert_eq!(parts[2].algorithm, "a0");
    }

    #[test]
    fn a_reading_that_falls_with_the_load_is_taken_as_flat() {
        let truth = vec![vec![0.1], vec![0.2], vec![0.3]];
        let log = [
            step(0, &[("m", 0.5)]),
            step(1000, &[("m", 0.4)]),
            step(2000, &[("m", 0.3)]),
        ]
        .join("\n");
        let nodes = [("m".to_string(), NodeClass::Medium)];
        let steps = crate::cadence::step_events(&log);
        let run = LoopReadings {
            steps: &steps,
            nodes: &nodes,
            true_loads: &truth,
        };
        let line = measure(&[run], 1.0, 0)[0];
        assert_eq!(line.scale, MIN_SCALE);
        assert!((line.offset - (0.4 - MIN_SCALE * 0.2)).abs() < 1e-12);
    }

    /// A run of one weak master whose reading is `reading(x)` at the true loads `xs`.
    fn fit_one(xs: &[f64], reading: impl Fn(f64) -> f64) -> ClassReading {
        let truth: Vec<Vec<f64>> = xs.iter().map(|&x| vec![x]).collect();
        let log: Vec<String> = xs
            .iter()
            .enumerate()
            .map(|(t, &x)| step(1000 * t as u64, &[("w", reading(x))]))
            .collect();
        let steps = crate::cadence::step_events(&log.join("\n"));
        let nodes = [("w".to_string(), NodeClass::Weak)];
        let run = LoopReadings {
            steps: &steps,
            nodes: &nodes,
            true_loads: &truth,
        };
        measure(&[run], 1.0, 0)[0]
    }

    /// 200 true loads spread over [0, 0.8), not in order.
    fn spread_loads() -> Vec<f64> {
        (0..200)
            .map(|i| f64::from((i * 37) % 200) * 0.004)
            .collect()
    }

    #[test]
    fn a_reading_that_saturates_is_fitted_with_its_knee() {
        // Rises by 1 per unit of load up to 0.4, then by 0.2; a small deterministic wobble
        // stands in for the noise.
        let wobble = |x: f64| 0.01 * (x * 97.0).sin();
        let line = fit_one(&spread_loads(), |x| {
            0.25 + x.min(0.4) + 0.2 * (x - 0.4).max(0.0) + wobble(x)
        });
        let knee = line.knee.expect("the bend is found");
        assert!((knee.load - 0.4).abs() <= 0.02, "knee at {}", knee.load);
        assert!((knee.scale - 0.2).abs() < 0.05, "{}", knee.scale);
        assert!((line.scale - 1.0).abs() < 0.05 && (line.offset - 0.25).abs() < 0.02);
        // The simulator reads the same bent line.
        let reading = &readings(&[line], &[NodeClass::Weak])[0];
        assert_eq!(reading.knee, line.knee);
    }

    #[test]
    fn a_straight_reading_stays_a_line() {
        let wobble = |x: f64| 0.01 * (x * 97.0).sin();
        let line = fit_one(&spread_loads(), |x| 0.3 + 0.6 * x + wobble(x));
        assert_eq!(line.knee, None, "the bend does not pay for its parameters");
        assert!((line.scale - 0.6).abs() < 0.02);
        // Too few readings on a side of any knee: a line, however bent the readings.
        let few: Vec<f64> = spread_loads().into_iter().take(50).collect();
        assert_eq!(fit_one(&few, |x| 0.2 + x.min(0.4)).knee, None);
    }

    /// Two weak masters' step logs over 200 steps: each reads `0.2 + 0.5 x` off by
    /// `deviation(master, step)`, their true loads spread as [`spread_loads`].
    fn deviating_logs(deviation: impl Fn(usize, usize) -> f64) -> (Vec<Vec<f64>>, String) {
        let xs = spread_loads();
        let truth: Vec<Vec<f64>> = (0..xs.len())
            .map(|t| vec![xs[t], xs[(t + 50) % xs.len()]])
            .collect();
        let log: Vec<String> = truth
            .iter()
            .enumerate()
            .map(|(t, loads)| {
                let reading = |m: usize| 0.2 + 0.5 * loads[m] + deviation(m, t);
                step(1000 * t as u64, &[("a", reading(0)), ("b", reading(1))])
            })
            .collect();
        (truth, log.join("\n"))
    }

    /// The weak class's line from one or more runs of [`deviating_logs`].
    fn fit_runs(runs: &[(Vec<Vec<f64>>, String)]) -> ClassReading {
        let nodes = [
            ("a".to_string(), NodeClass::Weak),
            ("b".to_string(), NodeClass::Weak),
        ];
        let steps: Vec<Vec<serde_json::Value>> = runs
            .iter()
            .map(|(_, log)| crate::cadence::step_events(log))
            .collect();
        let runs: Vec<LoopReadings<'_>> = runs
            .iter()
            .zip(&steps)
            .map(|((truth, _), steps)| LoopReadings {
                steps,
                nodes: &nodes,
                true_loads: truth,
            })
            .collect();
        measure(&runs, 1.0, 0)[0]
    }

    #[test]
    fn the_scatter_about_the_line_and_its_autocorrelation_are_measured() {
        // A deviation that changes sign every step: autocorrelation -1, taken as the bound.
        let alternating = fit_runs(&[deviating_logs(|m, t| {
            0.01 * if (t + m) % 2 == 0 { 1.0 } else { -1.0 }
        })]);
        // The two masters' deviations cancel in every step: all of it is their own.
        assert!((alternating.residual_sd.unwrap() - 0.01).abs() < 1e-3);
        assert!((alternating.own_sd.unwrap() - 0.01).abs() < 1e-3);
        assert_eq!(alternating.own_autocorrelation, Some(-MAX_AUTOCORRELATION));
        // A deviation every master shares in a step is none of theirs (but for what the
        // line's fit took of it).
        let shared = fit_runs(&[deviating_logs(|_, t| 0.01 * ((t * 7) % 5) as f64)]);
        let (total, own) = (shared.residual_sd.unwrap(), shared.own_sd.unwrap());
        assert!(total > 0.01 && own < 0.05 * total, "{total} {own}");
        // A deviation that drifts: a sine of a third of a radian per step, whose lag-one
        // autocorrelation is cos(1/3) = 0.945.
        let drifting = |m: usize, t: usize| 0.02 * ((t as f64) / 3.0 + m as f64).sin();
        let slow = fit_runs(&[deviating_logs(drifting)]);
        let r = slow.own_autocorrelation.unwrap();
        assert!((r - (1.0f64 / 3.0).cos()).abs() < 0.02, "{r}");
        // The simulator's readings scatter as measured.
        let reading = &readings(&[slow], &[NodeClass::Weak])[0];
        assert_eq!(
            reading.scatter,
            Some(Scatter {
                sd: slow.own_sd.unwrap(),
                autocorrelation: r
            })
        );
        // Pairs are taken within a run and a master only, whatever order the runs come in.
        let other = deviating_logs(|m, t| 0.01 * ((t * 7 + m) % 5) as f64);
        let both = fit_runs(&[deviating_logs(drifting), other.clone()]);
        assert_eq!(both, fit_runs(&[other, deviating_logs(drifting)]));
    }

    #[test]
    fn a_calibration_saved_before_knees_reads_back_as_lines() {
        let saved = r#"{"class": "weak", "samples": 9, "offset": 0.38, "scale": 0.46}"#;
        let line: ClassReading = serde_json::from_str(saved).unwrap();
        assert_eq!(line.knee, None);
        assert_eq!((line.own_sd, line.own_autocorrelation), (None, None));
        assert_eq!(readings(&[line], &[NodeClass::Weak])[0].scatter, None);
        let written = serde_json::to_value(line).unwrap();
        assert!(written.get("knee").is_none());
    }
}
