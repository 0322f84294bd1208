//! `cargo xtask experiments`: runs the experiment matrix, saves every run, prints and writes the
//! summary.
//!
//! Every argument and configuration file is checked before any work starts. Runs whose record
//! is already on disk with the same configuration fingerprint and seed are reused, so an
//! interrupted matrix started again with the same arguments runs only what is missing.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use ach_sim::config::ConfigError;
use ach_sim::config::opt_in_series;
use ach_sim::matrix::{Job, jobs, plan_fingerprint, run_jobs_with, shard_assignment};
use ach_sim::summary::{MatrixSummary, summarize};
use ach_sim::{Profile, RunRecord, SeriesConfig, built_in_series};
use ach_sim::{Registry, SimError};

use crate::report::ReportError;
use crate::shard::ShardError;
use crate::{outputs, store};

/// Why the matrix could not be planned or run. Each message names the argument or file, the
/// field, the value and the rule; [`run`] prints it and exits with code 2.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A count argument is 0.
    #[error("{argument} = 0 must be >= 1")]
    Zero {
        /// The argument (`--runs`, `--threads`).
        argument: &'static str,
    },
    /// Two `--config` files give the same series.
    #[error(
        "{}: series {name:?} is already given by {}: give each series in one file only",
        .path.display(),
        .earlier.display()
    )]
    SeriesInTwoFiles {
        /// The later file.
        path: PathBuf,
        /// The series.
        name: String,
        /// The earlier file.
        earlier: PathBuf,
    },
    /// `--series` names a series that is neither built in nor in a file.
    #[error("--series: unknown series {name:?} (known: {known})")]
    UnknownSeries {
        /// The name given.
        name: String,
        /// The known series, comma-separated.
        known: String,
    },
    /// `--series` names a series twice.
    #[error("--series: series {name:?} is named twice")]
    SeriesNamedTwice {
        /// The series.
        name: String,
    },
    /// `--add-algorithm` names an algorithm the registry does not hold.
    #[error("--add-algorithm: {name:?} is not a registered algorithm ({known})")]
    UnknownAlgorithm {
        /// The name given.
        name: String,
        /// The registered names.
        known: String,
    },
    /// A series file cannot be read.
    #[error("{}: cannot read: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A series file is not a series configuration.
    #[error("{}: {}", .path.display(), .source.to_string().trim_end().replace('\n', "\n  "))]
    NotASeries {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: toml::de::Error,
    },
    /// A series file gives no name.
    #[error(
        "{}: name is missing: a series file must give its name (e.g. name = \"C7\")",
        .path.display()
    )]
    NameMissing {
        /// The file.
        path: PathBuf,
    },
    /// A series of a file breaks a rule.
    #[error("{}: {source}", .path.display())]
    InvalidInFile {
        /// The file.
        path: PathBuf,
        /// The rule broken.
        source: ConfigError,
    },
    /// A built-in series breaks a rule (after `--add-algorithm`, for example).
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    /// `--out` is not a folder this process can write.
    #[error("--out = {}: cannot write there: {source}", .path.display())]
    OutNotWritable {
        /// The folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Stray temporary files of an interrupted run cannot be removed.
    #[error("{}: cannot clean temporary files: {source}", .path.display())]
    Clean {
        /// The results folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The worker threads cannot be started.
    #[error("cannot start {threads} threads: {source}")]
    Threads {
        /// The number asked for.
        threads: usize,
        /// The cause.
        source: rayon::ThreadPoolBuildError,
    },
    /// A run's record cannot be saved.
    #[error("{}: cannot write: {source}", .path.display())]
    WriteRecord {
        /// The record's file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A run failed.
    #[error(transparent)]
    Run(#[from] SimError),
    /// The summary, the tables or the timing could not be written.
    #[error(transparent)]
    Output(#[from] ReportError),
    /// The report could not be rendered.
    #[error("report: {0}")]
    Report(ReportError),
    /// A shard's manifest could not be written.
    #[error(transparent)]
    Shard(Box<ShardError>),
}

/// Arguments of `cargo xtask experiments`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Series to run, comma-separated (default: every built-in series and every series of
    /// `--config`; the opt-in built-in series `noise` and `scale` run only when named).
    #[arg(long, value_delimiter = ',')]
    pub series: Vec<String>,
    /// Runs per series (per sweep point for C5); default: each series' own count (30; C5: 10).
    #[arg(long)]
    pub runs: Option<u32>,
    /// Output folder.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Modelling profile: `paper` (the published simulation, quirks included) or `corrected`.
    #[arg(long, default_value = "paper", value_parser = parse_profile)]
    pub profile: Profile,
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
    /// A series file (TOML) that adds a series or replaces the built-in one of the same name.
    /// May be given several times.
    #[arg(long = "config")]
    pub configs: Vec<PathBuf>,
    /// Also write each run in the published simulation's JSON schema (`DIR/<series>/run_NNN.json`,
    /// `DIR/C5/sensitivity.json`).
    #[arg(long)]
    pub reference_json: bool,
    /// Do not render the report (REPORT.md, tables, figures) at the end.
    #[arg(long)]
    pub no_report: bool,
    /// Run only one part of the run list: `INDEX/COUNT` (0 <= INDEX < COUNT; a deterministic
    /// split balanced by estimated cost) or `slurm` (from SLURM_ARRAY_TASK_ID and
    /// SLURM_ARRAY_TASK_COUNT). A shard saves its runs and its manifest, not the summary: gather
    /// the shards with `merge`, then run again without `--shard` (see docs/slurm.md).
    #[arg(long, value_parser = crate::shard::Shard::parse)]
    pub shard: Option<crate::shard::Shard>,
    /// Also run this registered algorithm in every series (appended to each series' list
    /// unless it is there already). May be given several times.
    #[arg(long = "add-algorithm")]
    pub add_algorithms: Vec<String>,
    /// Also pair every algorithm against Static-W (A0) in the statistics of every series (as
    /// `against_a0 = true` in a series file); saved runs are reused.
    #[arg(long)]
    pub against_a0: bool,
}

impl Args {
    /// The command line's defaults (every series, each series' own run count, the `paper`
    /// profile, all cores, no extra files), writing into `out`: what a user's binary or a test
    /// starts from, setting only the fields it needs with `Args { .., ..Args::new(out) }`.
    pub fn new(out: impl Into<PathBuf>) -> Args {
        Args {
            series: Vec::new(),
            runs: None,
            out: out.into(),
            profile: Profile::Paper,
            threads: None,
            configs: Vec::new(),
            reference_json: false,
            no_report: false,
            shard: None,
            add_algorithms: Vec::new(),
            against_a0: false,
        }
    }
}

/// `--profile` names no profile.
#[derive(Debug, thiserror::Error)]
#[error("{text:?} is not a profile (paper, corrected)")]
pub struct UnknownProfile {
    /// The text given.
    pub text: String,
}

fn parse_profile(text: &str) -> Result<Profile, UnknownProfile> {
    match text {
        "paper" => Ok(Profile::Paper),
        "corrected" => Ok(Profile::Corrected),
        other => Err(UnknownProfile {
            text: other.to_string(),
        }),
    }
}

/// What to run, checked.
#[derive(Debug)]
pub struct Plan {
    /// The series, validated.
    pub series: Vec<SeriesConfig>,
    /// Run-count override.
    pub runs: Option<u32>,
    /// Output folder, writable.
    pub out: PathBuf,
    /// Profile.
    pub profile: Profile,
    /// Worker threads.
    pub threads: usize,
    /// The algorithms the series may name.
    pub registry: Registry,
    /// The part of the run list to run (all of it when `None`).
    pub shard: Option<crate::shard::Shard>,
}

/// Checks every argument and configuration file; the error names the argument or file, the
/// field, the value and the rule.
pub fn plan(args: &Args) -> Result<Plan, ExperimentError> {
    plan_with(args, Registry::built_in())
}

/// [`plan`] with the algorithms of `registry`: series files may name any of them.
pub fn plan_with(args: &Args, registry: Registry) -> Result<Plan, ExperimentError> {
    if args.runs == Some(0) {
        return Err(ExperimentError::Zero { argument: "--runs" });
    }
    if args.threads == Some(0) {
        return Err(ExperimentError::Zero {
            argument: "--threads",
        });
    }
    let (available, from_files) = series_with_files(&args.configs)?;
    let mut series = if args.series.is_empty() {
        available
    } else {
        chosen_series(&args.series, &available)?
    };
    add_to_every_series(&mut series, args, &registry)?;
    // Every file given is checked, including one whose series `--series` does not select, so
    // that a typo never waits for the run that would have used it.
    for (path, config) in &from_files {
        config
            .validate_with(args.profile, &registry)
            .map_err(|source| ExperimentError::InvalidInFile {
                path: path.to_path_buf(),
                source,
            })?;
    }
    for config in &series {
        config.validate_with(args.profile, &registry)?;
    }
    check_writable(&args.out)?;
    Ok(Plan {
        series,
        runs: args.runs,
        out: args.out.clone(),
        profile: args.profile,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        registry,
        shard: args.shard,
    })
}

/// The series read from `--config` files, with their files, in argument order.
type SeriesFromFiles<'a> = Vec<(&'a Path, SeriesConfig)>;

/// The built-in series with those of the `--config` files, each replacing the built-in one
/// of its name, and the files' series with their files, in argument order.
fn series_with_files(
    configs: &[PathBuf],
) -> Result<(Vec<SeriesConfig>, SeriesFromFiles<'_>), ExperimentError> {
    let mut available = built_in_series();
    let mut from_files = SeriesFromFiles::new();
    for path in configs {
        let config = read_series_file(path)?;
        if let Some((earlier, _)) = from_files.iter().find(|(_, s)| s.name == config.name) {
            return Err(ExperimentError::SeriesInTwoFiles {
                path: path.clone(),
                name: config.name,
                earlier: earlier.to_path_buf(),
            });
        }
        from_files.push((path, config.clone()));
        match available.iter_mut().find(|s| s.name == config.name) {
            Some(slot) => *slot = config,
            None => available.push(config),
        }
    }
    Ok((available, from_files))
}

/// The series `--series` names, in its order: each one of `available` or an opt-in series
/// (`noise`, `scale`) not replaced there, named once.
fn chosen_series(
    names: &[String],
    available: &[SeriesConfig],
) -> Result<Vec<SeriesConfig>, ExperimentError> {
    let mut chosen = Vec::new();
    let opt_in = opt_in_series();
    for name in names {
        let name = name.trim();
        let found = available
            .iter()
            .chain(
                opt_in
                    .iter()
                    .filter(|o| !available.iter().any(|a| a.name == o.name)),
            )
            .find(|s| s.name == name);
        let Some(config) = found else {
            let known: Vec<&str> = available
                .iter()
                .chain(&opt_in)
                .map(|s| s.name.as_str())
                .collect();
            return Err(ExperimentError::UnknownSeries {
                name: name.to_string(),
                known: known.join(", "),
            });
        };
        if chosen.iter().any(|s: &SeriesConfig| s.name == name) {
            return Err(ExperimentError::SeriesNamedTwice {
                name: name.to_string(),
            });
        }
        chosen.push(config.clone());
    }
    Ok(chosen)
}

/// `--add-algorithm` (each registered, appended to every series that lacks it) and
/// `--against-a0` applied to `series`.
fn add_to_every_series(
    series: &mut [SeriesConfig],
    args: &Args,
    registry: &Registry,
) -> Result<(), ExperimentError> {
    for name in &args.add_algorithms {
        if registry.get(name).is_none() {
            return Err(ExperimentError::UnknownAlgorithm {
                name: name.clone(),
                known: registry.names(),
            });
        }
        for config in series.iter_mut() {
            if !config.algorithms.contains(name) {
                config.algorithms.push(name.clone());
            }
        }
    }
    if args.against_a0 {
        for config in series.iter_mut() {
            config.against_a0 = true;
        }
    }
    Ok(())
}

/// Reads one series file.
pub fn read_series_file(path: &Path) -> Result<SeriesConfig, ExperimentError> {
    let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config = SeriesConfig::from_toml(&text).map_err(|source| ExperimentError::NotASeries {
        path: path.to_path_buf(),
        source,
    })?;
    if config.name.trim().is_empty() {
        return Err(ExperimentError::NameMissing {
            path: path.to_path_buf(),
        });
    }
    Ok(config)
}

fn check_writable(out: &Path) -> Result<(), ExperimentError> {
    let fail = |source| ExperimentError::OutNotWritable {
        path: out.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(out).map_err(fail)?;
    let probe = out.join(".write-test");
    std::fs::write(&probe, b"").map_err(fail)?;
    std::fs::remove_file(&probe).map_err(fail)
}

/// `experiments`: checks the arguments, runs the matrix and writes every output; exit code 0 when
/// every run passed its invariants, 1 when some did not, 2 for bad input or a write error.
pub fn run(args: Args) -> ExitCode {
    run_with(args, Registry::built_in())
}

/// [`run`] with the algorithms of `registry` (a user's binary registers its own there).
pub fn run_with(args: Args, registry: Registry) -> ExitCode {
    let plan = match plan_with(&args, registry) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    if let Some(shard) = plan.shard {
        return match execute_shard(&plan, shard) {
            Ok(0) => ExitCode::SUCCESS,
            Ok(violations) => {
                eprintln!("error: {violations} invariant violations (a bug): see the records");
                ExitCode::from(1)
            }
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
        };
    }
    match execute(&plan, &args) {
        Ok(summary) if summary.total_violations == 0 => ExitCode::SUCCESS,
        Ok(summary) => {
            eprintln!(
                "error: {} invariant violations (a bug): see summary.json",
                summary.total_violations
            );
            ExitCode::from(1)
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Runs the plan: reuses saved runs, runs the rest in parallel, writes every output.
pub fn execute(plan: &Plan, args: &Args) -> Result<MatrixSummary, ExperimentError> {
    let start = Instant::now();
    store::remove_stray_temporaries(&plan.out).map_err(|source| ExperimentError::Clean {
        path: plan.out.clone(),
        source,
    })?;
    let all_jobs = jobs(&plan.series, plan.runs);
    let job_refs: Vec<&Job> = all_jobs.iter().collect();
    let (records, executed) = run_missing(plan, &job_refs)?;
    let reused = all_jobs.len() - executed;
    let summary = summarize(&plan.series, &records, plan.profile);
    let ran_seconds = start.elapsed().as_secs_f64();
    outputs::write_all(
        &plan.out,
        &plan.series,
        &records,
        &summary,
        &outputs::Extras {
            reference_json: args.reference_json,
        },
    )?;
    outputs::write_timing(
        &plan.out,
        &outputs::Timing {
            wall_seconds: ran_seconds,
            threads: plan.threads,
            runs_executed: executed,
            runs_reused: reused,
        },
    )?;
    print!("{}", outputs::render_summary_text(&summary));
    if !args.no_report {
        crate::report::render_with(&plan.out, &plan.registry).map_err(ExperimentError::Report)?;
        eprintln!("report: {}", plan.out.join("REPORT.md").display());
    }
    eprintln!(
        "{} runs in {:.2} s ({} reused); results in {}",
        all_jobs.len(),
        ran_seconds,
        reused,
        plan.out.display()
    );
    Ok(summary)
}

/// Runs the jobs whose record is not saved yet (in parallel, saving each as it finishes, with
/// progress) and returns every job's record in order, and how many ran.
fn run_missing(plan: &Plan, all_jobs: &[&Job]) -> Result<(Vec<RunRecord>, usize), ExperimentError> {
    let mut records: Vec<Option<RunRecord>> = all_jobs
        .iter()
        .map(|job| store::reusable_record(&plan.out, job, plan.profile))
        .collect();
    let todo: Vec<(usize, Job)> = all_jobs
        .iter()
        .enumerate()
        .filter(|(k, _)| records[*k].is_none())
        .map(|(k, job)| (k, (*job).clone()))
        .collect();
    let reused = all_jobs.len() - todo.len();
    eprintln!(
        "{} runs ({} series, profile {}{}), {} saved, {} to run on {} threads",
        all_jobs.len(),
        plan.series.len(),
        plan.profile.name(),
        plan.shard.map_or(String::new(), |s| format!(
            ", shard {}/{}",
            s.index, s.count
        )),
        reused,
        todo.len(),
        plan.threads
    );
    let bar = indicatif::ProgressBar::new(all_jobs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} runs, ETA {eta} {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_position(reused as u64);
    let write_errors = Mutex::new(Vec::new());
    let todo_jobs: Vec<Job> = todo.iter().map(|(_, job)| job.clone()).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(plan.threads)
        .build()
        .map_err(|source| ExperimentError::Threads {
            threads: plan.threads,
            source,
        })?;
    let results = pool.install(|| {
        run_jobs_with(&todo_jobs, plan.profile, &plan.registry, |job, result| {
            if let Ok(record) = result {
                let path = store::record_path(&plan.out, job);
                if let Err(source) = store::write_atomic(&path, &store::encode(record)) {
                    write_errors
                        .lock()
                        .expect("no panics while holding the lock")
                        .push(ExperimentError::WriteRecord { path, source });
                }
            }
            bar.set_message(job.id());
            bar.inc(1);
        })
    });
    bar.finish_and_clear();
    if let Some(error) = write_errors.into_inner().expect("lock").into_iter().next() {
        return Err(error);
    }
    for ((k, _), result) in todo.iter().zip(results) {
        records[*k] = Some(result?);
    }
    let records = records
        .into_iter()
        .map(|r| r.expect("every job has a record"))
        .collect();
    Ok((records, todo.len()))
}

/// Runs one shard of the plan: its part of the run list, saved as a whole run saves it, then
/// its manifest (see [`crate::shard`]). Returns the number of invariant violations.
pub fn execute_shard(plan: &Plan, shard: crate::shard::Shard) -> Result<u64, ExperimentError> {
    let start = Instant::now();
    // Stray temporary files are not removed here: in a folder shared by several shards they may
    // belong to another shard still running. The run without --shard removes them.
    let all_jobs = jobs(&plan.series, plan.runs);
    let assignment = shard_assignment(&all_jobs, plan.profile, shard.count);
    let mine: Vec<&Job> = all_jobs
        .iter()
        .zip(&assignment)
        .filter(|&(_, &s)| s == shard.index)
        .map(|(job, _)| job)
        .collect();
    let (records, executed) = run_missing(plan, &mine)?;
    let violations = records
        .iter()
        .flat_map(|r| &r.algorithms)
        .map(|a| a.aggregates.n_viol)
        .sum();
    crate::shard::Manifest::new(
        shard,
        plan.profile,
        plan_fingerprint(&all_jobs, plan.profile),
        &mine,
        &plan.out,
    )
    .write(&plan.out)
    .map_err(|e| ExperimentError::Shard(Box::new(e)))?;
    eprintln!(
        "shard {}/{}: {} of {} runs in {:.2} s ({} reused); results in {}",
        shard.index,
        shard.count,
        mine.len(),
        all_jobs.len(),
        start.elapsed().as_secs_f64(),
        mine.len() - executed,
        plan.out.display()
    );
    Ok(violations)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Args;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn new_gives_the_command_lines_defaults() {
        let parsed = Cli::parse_from(["experiments", "--out", "some/dir"]).args;
        assert_eq!(
            format!("{parsed:?}"),
            format!("{:?}", Args::new("some/dir"))
        );
    }
}
