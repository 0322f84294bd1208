//! The experiment matrix: every run of every series, in parallel, in a fixed order.

use std::collections::HashMap;

use ahash::RandomState;
use rayon::prelude::*;

use crate::algorithms::Registry;
use crate::config::{Profile, SeriesConfig, SweepPoint};
use crate::record::{RunRecord, fingerprint};
use crate::run::{RunSpec, SimError, shared_workload_key, simulate, simulate_group_with};

/// One run to do: a series at a sweep point (if any) and a run index.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// The configuration, already set to the sweep point.
    pub config: SeriesConfig,
    /// The sweep point, for a sensitivity series.
    pub point: Option<SweepPoint>,
    /// Index of the run within its series or sweep point.
    pub run_index: u32,
}

impl Job {
    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.config.seed(self.run_index)
    }

    /// Fingerprint of the run's inputs (see [`fingerprint`]).
    pub fn fingerprint(&self, profile: Profile) -> u64 {
        fingerprint(&self.config, profile)
    }

    /// A path-like identity: `C1/run_003`, `C5/eps_on=0.05/run_003`.
    pub fn id(&self) -> String {
        match &self.point {
            Some(point) => format!(
                "{}/{}/run_{:03}",
                self.config.name,
                point.label(),
                self.run_index
            ),
            None => format!("{}/run_{:03}", self.config.name, self.run_index),
        }
    }

    /// What the simulator needs to run the job.
    pub fn spec(&self, profile: Profile) -> RunSpec<'_> {
        RunSpec {
            config: &self.config,
            point: self.point.as_ref(),
            profile,
            run_index: self.run_index,
        }
    }

    /// Runs the job.
    pub fn run(&self, profile: Profile) -> Result<RunRecord, SimError> {
        simulate(&self.spec(profile))
    }
}

/// The jobs of the given series, in order: series by series, sweep point by sweep point, run
/// by run. `runs` overrides every series' run count. The series must be validated
/// ([`SeriesConfig::validate`]).
pub fn jobs(series: &[SeriesConfig], runs: Option<u32>) -> Vec<Job> {
    let mut jobs = Vec::new();
    for config in series {
        let n = runs.unwrap_or(config.runs);
        let points = config.sweep_points();
        if points.is_empty() {
            jobs.extend((0..n).map(|run_index| Job {
                config: config.clone(),
                point: None,
                run_index,
            }));
        } else {
            for point in points {
                let at = config
                    .at_point(&point)
                    .expect("a validated series' sweep points apply");
                jobs.extend((0..n).map(|run_index| Job {
                    config: at.clone(),
                    point: Some(point.clone()),
                    run_index,
                }));
            }
        }
    }
    jobs
}

impl Job {
    /// The estimated cost of the job, in arbitrary units: steps x (tokens + nodes) x
    /// algorithms (each step of each algorithm touches every token and every node).
    pub fn estimated_cost(&self) -> u64 {
        let c = &self.config;
        u64::from(c.steps) * (c.tokens + c.max_nodes()) as u64 * c.algorithms.len().max(1) as u64
    }
}

/// Which of `count` shards runs each job: a deterministic, balanced split by estimated cost.
///
/// Jobs that share a workload (see [`run_jobs`]) stay in one shard, so a shard loses none of
/// the sharing. The groups are dealt, most expensive first (ties: the earlier group), each to
/// the shard with the least cost so far (ties: the lower index). The split depends only on the
/// jobs and `count`, so every shard computes the same one on its own.
pub fn shard_assignment(jobs: &[Job], profile: Profile, count: usize) -> Vec<usize> {
    let count = count.max(1);
    let groups = workload_groups(jobs, profile);
    let mut by_cost: Vec<(u64, usize)> = groups
        .iter()
        .enumerate()
        .map(|(g, members)| (members.iter().map(|&k| jobs[k].estimated_cost()).sum(), g))
        .collect();
    by_cost.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut load = vec![0u64; count];
    let mut shard_of = vec![0; jobs.len()];
    for (cost, g) in by_cost {
        let shard = (0..count)
            .min_by_key(|&s| (load[s], s))
            .expect("at least one shard");
        load[shard] += cost;
        for &k in &groups[g] {
            shard_of[k] = shard;
        }
    }
    shard_of
}

/// A fingerprint of a whole job list: every job's id, seed and configuration fingerprint, and
/// the profile. Shards of one matrix share it; shards of different matrices (other series,
/// run counts, configurations or profile) do not.
pub fn plan_fingerprint(jobs: &[Job], profile: Profile) -> u64 {
    let mut text = String::from(profile.name());
    for job in jobs {
        text.push_str(&format!(
            "\n{}|{}|{:016x}",
            job.id(),
            job.seed(),
            job.fingerprint(profile)
        ));
    }
    ach_ring::classic::key_hash(text.as_bytes())
}

/// The jobs grouped by shared workload, each group in job order, groups in order of first job.
fn workload_groups(jobs: &[Job], profile: Profile) -> Vec<Vec<usize>> {
    // A fixed-seed hasher: the crate uses no unseeded randomness (the map is only looked up,
    // never iterated, so the order of groups is the order of first appearance either way).
    let mut group_of_key: HashMap<String, usize, RandomState> =
        HashMap::with_hasher(RandomState::with_seeds(1, 2, 3, 4));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (k, job) in jobs.iter().enumerate() {
        let next = groups.len();
        let g = *group_of_key
            .entry(shared_workload_key(&job.spec(profile)))
            .or_insert(next);
        if g == next {
            groups.push(Vec::new());
        }
        groups[g].push(k);
    }
    groups
}

/// Runs the jobs on the current rayon thread pool and returns their results in job order.
/// `on_done` is called, from the worker threads, as each job finishes (for progress and for
/// saving results as they come).
///
/// Jobs that share a workload (same scenario, seed and profile: for example run `r` of C1, of
/// the noise series C4-C4c and of every C5 sweep point) are simulated together in one pass
/// ([`crate::run::simulate_group`]); each still gets exactly the record it would get alone.
pub fn run_jobs<F>(jobs: &[Job], profile: Profile, on_done: F) -> Vec<Result<RunRecord, SimError>>
where
    F: Fn(&Job, &Result<RunRecord, SimError>) + Sync,
{
    run_jobs_with(jobs, profile, &Registry::built_in(), on_done)
}

/// [`run_jobs`] with the algorithms of `registry` (the series name theirs).
pub fn run_jobs_with<F>(
    jobs: &[Job],
    profile: Profile,
    registry: &Registry,
    on_done: F,
) -> Vec<Result<RunRecord, SimError>>
where
    F: Fn(&Job, &Result<RunRecord, SimError>) + Sync,
{
    let specs: Vec<RunSpec<'_>> = jobs.iter().map(|job| job.spec(profile)).collect();
    let groups = workload_groups(jobs, profile);
    let done: Vec<Vec<(usize, Result<RunRecord, SimError>)>> = groups
        .par_iter()
        .map(|members| {
            let group: Vec<RunSpec<'_>> = members.iter().map(|&k| specs[k].clone()).collect();
            let results = simulate_group_with(&group, registry);
            for (&k, result) in members.iter().zip(&results) {
                on_done(&jobs[k], result);
            }
            members.iter().copied().zip(results).collect()
        })
        .collect();
    let mut results: Vec<Option<Result<RunRecord, SimError>>> = vec![None; jobs.len()];
    for (k, result) in done.into_iter().flatten() {
        results[k] = Some(result);
    }
    results
        .into_iter()
        .map(|r| r.expect("every job belongs to one group"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::built_in_series;

    #[test]
    fn the_default_matrix_has_the_papers_run_counts() {
        let all = jobs(&built_in_series(), None);
        // C1, C2, C3, C4, C4a, C4b, C4c: 30 runs each; C5: 19 points x 10 runs.
        assert_eq!(all.len(), 7 * 30 + 19 * 10);
        assert_eq!(all[0].id(), "C1/run_000");
        assert_eq!(all[31].seed(), 42 + 1000);
        assert_eq!(all.last().unwrap().id(), "C5/M_max=0.1/run_009");
    }

    #[test]
    fn shards_split_the_matrix_evenly_and_keep_shared_workloads_together() {
        let all = jobs(&built_in_series(), None);
        let count = 3;
        let shard_of = shard_assignment(&all, Profile::Paper, count);
        assert_eq!(shard_of, shard_assignment(&all, Profile::Paper, count));
        let mut cost = vec![0u64; count];
        for (job, &s) in all.iter().zip(&shard_of) {
            cost[s] += job.estimated_cost();
        }
        let (low, high) = (*cost.iter().min().unwrap(), *cost.iter().max().unwrap());
        assert!(high - low <= high / 10, "unbalanced: {cost:?}");
        let mut shard_of_workload: HashMap<String, usize> = HashMap::new();
        for (job, &s) in all.iter().zip(&shard_of) {
            let key = shared_workload_key(&job.spec(Profile::Paper));
            assert_eq!(*shard_of_workload.entry(key).or_insert(s), s);
        }
        assert!(
            shard_assignment(&all, Profile::Paper, 1)
                .iter()
                .all(|&s| s == 0)
        );
    }

    #[test]
    fn records_do_not_depend_on_the_thread_count() {
        let mut series = built_in_series();
        series.retain(|s| s.name == "C3" || s.name == "C4c");
        for s in &mut series {
            s.steps = 60;
            s.warmup = 10;
            s.churn.iter_mut().for_each(|c| c.t /= 10);
        }
        let all = jobs(&series, Some(3));
        let run_on = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| run_jobs(&all, Profile::Paper, |_, _| {}))
        };
        let one = run_on(1);
        let two = run_on(2);
        assert_eq!(one.len(), 6);
        assert!(one.iter().all(Result::is_ok));
        assert_eq!(one, two);
    }

    #[test]
    fn a_registered_algorithm_runs_beside_the_built_ins() {
        let mut registry = Registry::built_in();
        registry
            .register(crate::AlgorithmInfo::new("Round-Robin", "RR"), |_| {
                Ok(Box::new(ach_baselines::StaticW))
            })
            .unwrap();
        let mut config = built_in_series().remove(0);
        config.steps = 40;
        config.warmup = 5;
        config.algorithms = vec!["Round-Robin".into(), "Static-W".into()];
        assert!(config.validate(Profile::Paper).is_err(), "not a built-in");
        config.validate_with(Profile::Paper, &registry).unwrap();
        let all = jobs(&[config], Some(2));
        let records = run_jobs_with(&all, Profile::Paper, &registry, |_, _| {});
        for record in records {
            let record = record.unwrap();
            let mine = record.algorithm("Round-Robin").unwrap();
            let static_w = record.algorithm("Static-W").unwrap();
            assert_eq!(mine.aggregates, static_w.aggregates);
        }
        // Without the registration the run is an error naming the algorithm, not a fallback.
        let unknown = run_jobs(&all, Profile::Paper, |_, _| {});
        let error = unknown[0].as_ref().unwrap_err().to_string();
        assert!(error.contains("\"Round-Robin\""), "{error}");
    }

    #[test]
    fn ach_f_with_a_window_of_one_is_ach() {
        let mut config = built_in_series()
            .into_iter()
            .find(|s| s.name == "C4c")
            .unwrap();
        config.steps = 120;
        config.warmup = 10;
        config.algorithms = vec!["ACH".into(), "ACH-F".into()];
        config.ach_f = Some(crate::AchFilter { window: 1 });
        let record = jobs(&[config.clone()], Some(1))[0]
            .run(Profile::Paper)
            .unwrap();
        let ach = record.algorithm("ACH").unwrap();
        let filtered = record.algorithm("ACH-F").unwrap();
        assert_eq!(ach.aggregates, filtered.aggregates);
        assert_eq!(ach.d_trace, filtered.d_trace);
        // A real window filters the noisy telemetry, so ACH-F acts differently.
        config.ach_f = Some(crate::AchFilter { window: 5 });
        let record = jobs(&[config], Some(1))[0].run(Profile::Paper).unwrap();
        assert_ne!(
            record.algorithm("ACH").unwrap().m_trace,
            record.algorithm("ACH-F").unwrap().m_trace
        );
    }
}
