//! The docs' tables, numbers and figures, generated from saved results (`cargo xtask docs`).
//!
//! A *dataset* is the per-run aggregates of one `experiments` command, saved in the repository
//! under `docs/data/<name>/` (its series configurations and `runs.json`), and listed with the
//! command's arguments in `docs/data/datasets.toml`. From a dataset the report's tables are
//! rebuilt exactly as REPORT.md has them (the summary is recomputed from the per-run values), and
//! a Markdown file under `docs/` pulls from them with two kinds of marked blocks:
//!
//! ```text
//! <!-- table data=beyond; table=all_algorithms; Series=C1,C2; Algorithm=ACH,ACH-F -->
//! (generated: the rows of the report's table whose cells match every filter)
//! <!-- /table -->
//!
//! ACH-F's D-bar in C4 is <!-- value data=beyond; table=all_algorithms; Series=C4;
//! Algorithm=ACH-F; column=D-bar; part=mean -->0.2235<!-- /value -->.
//! ```
//!
//! Options are `key=value` pairs separated by `;`. `data` names the dataset and `table` the
//! report table (its file name under `tables/`). Every other key is a column header whose cell
//! must be one of the comma-separated values; `columns` keeps only the named columns, in
//! their order. A value block names one `column` of exactly one matching row; `part=mean`
//! keeps the text before ` ± `. The figures a dataset lists are written to `docs/figures/`.
//!
//! [`check`] says which generated parts differ from what the saved data give; the workspace's
//! test runs it, and also reruns the first run of every series of every dataset to check that the
//! saved data are what the code computes today.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ach_sim::matrix::{Job, jobs};
use ach_sim::record::{Aggregates, AlgorithmRecord, RunRecord};
use ach_sim::summary::summarize;
use ach_sim::{Profile, Registry, SeriesConfig, SweepPoint};
use serde::{Deserialize, Serialize};

use super::builders::build_tables;
use super::figures;
use super::load::Results;
use super::tables::Table;
use crate::experiments::{self, ExperimentError};
use crate::store::write_atomic;

mod blocks;

pub use blocks::{BlockError, BlockRule};
use blocks::{TABLE_OPEN, VALUE_OPEN, fill_blocks};

/// Why the docs could not be generated, checked or their data rerun. Each message names the
/// file (and line of a block), the field, the value and the rule.
#[derive(Debug, thiserror::Error)]
pub enum DocsError {
    /// A file or folder cannot be read.
    #[error("{}: cannot read: {source}", .path.display())]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A saved file of a dataset cannot be read.
    #[error("{}: cannot read: {source} — regenerate it with `{command}`", .path.display())]
    SavedMissing {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
        /// The command that regenerates the dataset.
        command: String,
    },
    /// `datasets.toml` is not a manifest.
    #[error("{}: {source}", .path.display())]
    NotAManifest {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: toml::de::Error,
    },
    /// Two datasets of the manifest share a name.
    #[error("{}: dataset[{index}].name = {name:?} is given twice: names must be unique", .path.display())]
    DatasetTwice {
        /// The manifest.
        path: PathBuf,
        /// The later entry.
        index: usize,
        /// The name.
        name: String,
    },
    /// `runs.json` is not a saved dataset.
    #[error("{}: not a saved dataset: {source} — regenerate it with `{command}`", .path.display())]
    NotADataset {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: serde_json::Error,
        /// The command that regenerates the dataset.
        command: String,
    },
    /// A saved series file is not a series configuration.
    #[error("{}: not a series configuration: {source}", .path.display())]
    NotASeries {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: toml::de::Error,
    },
    /// A dataset's command failed.
    #[error("dataset {name}: {source}")]
    Experiment {
        /// The dataset.
        name: String,
        /// The cause.
        source: Box<ExperimentError>,
    },
    /// A run's record is missing after the dataset's command ran (a bug).
    #[error("dataset {name}: a run record is missing after the run")]
    RecordMissing {
        /// The dataset.
        name: String,
    },
    /// A folder cannot be created.
    #[error("{}: cannot create: {source}", .path.display())]
    Create {
        /// The folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file cannot be written.
    #[error("{}: cannot write: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A block of a Markdown file is wrong.
    #[error("{}: {source}", .path.display())]
    Block {
        /// The Markdown file.
        path: PathBuf,
        /// What is wrong, and on which line.
        source: BlockError,
    },
    /// The manifest lists a figure the dataset's report does not draw.
    #[error(
        "{}: dataset {dataset}: figures: {name:?} is not a figure of its report ({known})",
        .path.display()
    )]
    UnknownFigure {
        /// The manifest.
        path: PathBuf,
        /// The dataset.
        dataset: String,
        /// The figure named.
        name: String,
        /// The report's figures, comma-separated.
        known: String,
    },
    /// `--rerun` names a dataset the manifest does not list.
    #[error("--rerun: {name:?} is not a dataset of {} ({known}, or all)", .path.display())]
    UnknownDataset {
        /// The name given.
        name: String,
        /// The manifest.
        path: PathBuf,
        /// The datasets, comma-separated.
        known: String,
    },
}

/// `docs/data/datasets.toml`: the saved datasets and the commands that make them.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The datasets, in the order they are regenerated.
    pub dataset: Vec<DatasetSpec>,
}

/// One dataset: the arguments of the `experiments` command that produced it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetSpec {
    /// Folder name under `docs/data/`, and the `data=` of the blocks that use it.
    pub name: String,
    /// `--series` (empty: the default matrix).
    #[serde(default)]
    pub series: Vec<String>,
    /// `--runs` (absent: each series' own count).
    #[serde(default)]
    pub runs: Option<u32>,
    /// `--add-algorithm`, in order.
    #[serde(default)]
    pub add_algorithms: Vec<String>,
    /// `--against-a0`.
    #[serde(default)]
    pub against_a0: bool,
    /// Figures of the report (names without `.svg`) written to `docs/figures/`.
    #[serde(default)]
    pub figures: Vec<String>,
}

impl DatasetSpec {
    /// The `experiments` arguments of this dataset, writing into `out`.
    pub fn args(&self, out: &Path) -> experiments::Args {
        experiments::Args {
            series: self.series.clone(),
            runs: self.runs,
            add_algorithms: self.add_algorithms.clone(),
            against_a0: self.against_a0,
            no_report: true,
            ..experiments::Args::new(out)
        }
    }

    /// The command line that regenerates it, for messages and docs.
    pub fn command(&self) -> String {
        format!("cargo xtask docs --rerun {}", self.name)
    }
}

/// Reads `docs/data/datasets.toml`.
pub fn read_manifest(docs: &Path) -> Result<Manifest, DocsError> {
    let path = docs.join("data").join("datasets.toml");
    let text = std::fs::read_to_string(&path).map_err(|source| DocsError::Read {
        path: path.clone(),
        source,
    })?;
    let manifest: Manifest = toml::from_str(&text).map_err(|source| DocsError::NotAManifest {
        path: path.clone(),
        source,
    })?;
    for (k, spec) in manifest.dataset.iter().enumerate() {
        if manifest.dataset[..k].iter().any(|d| d.name == spec.name) {
            return Err(DocsError::DatasetTwice {
                path,
                index: k,
                name: spec.name.clone(),
            });
        }
    }
    Ok(manifest)
}

/// `runs.json`: every run of a dataset, aggregates only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedRuns {
    /// Format of this file.
    pub format_version: u32,
    /// Profile of the runs.
    pub profile: Profile,
    /// The series, in the command's order (their configurations are `config/<name>.toml`).
    pub series: Vec<String>,
    /// Every run, in job order.
    pub runs: Vec<SavedRun>,
}

/// One run of a dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedRun {
    /// Series.
    pub series: String,
    /// Sweep point, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<SweepPoint>,
    /// Run index.
    pub run_index: u32,
    /// Seed.
    pub seed: u64,
    /// Configuration fingerprint of the run.
    pub fingerprint: u64,
    /// Per algorithm, in the series' order.
    pub algorithms: Vec<SavedAlgorithm>,
}

/// One algorithm's aggregates in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedAlgorithm {
    /// Algorithm name.
    pub name: String,
    /// Its aggregates (the ones the record format keeps in its body).
    #[serde(flatten)]
    pub aggregates: Aggregates,
    /// Mean CV of the true loads (series with `report_cv`), which the record format keeps in an
    /// optional block and `Aggregates` therefore does not serialise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv_true_mean: Option<f64>,
    /// Forwarded fraction (algorithms that route requests, CH-BL), kept the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_fraction: Option<f64>,
}

impl SavedRun {
    /// The aggregates of a record.
    pub fn of(record: &RunRecord) -> SavedRun {
        SavedRun {
            series: record.series.clone(),
            point: record.point.clone(),
            run_index: record.run_index,
            seed: record.seed,
            fingerprint: record.fingerprint,
            algorithms: record
                .algorithms
                .iter()
                .map(|a| SavedAlgorithm {
                    name: a.name.clone(),
                    // The CV travels in its own field, as it does in the record format.
                    aggregates: Aggregates {
                        cv_true_mean: None,
                        forwarded_fraction: None,
                        ..a.aggregates
                    },
                    cv_true_mean: a.aggregates.cv_true_mean,
                    forwarded_fraction: a.aggregates.forwarded_fraction,
                })
                .collect(),
        }
    }

    /// A record with these aggregates and no traces: all a summary needs.
    pub fn to_record(&self, profile: Profile) -> RunRecord {
        RunRecord {
            series: self.series.clone(),
            point: self.point.clone(),
            run_index: self.run_index,
            seed: self.seed,
            profile,
            fingerprint: self.fingerprint,
            algorithms: self
                .algorithms
                .iter()
                .map(|a| AlgorithmRecord {
                    name: a.name.clone(),
                    aggregates: Aggregates {
                        cv_true_mean: a.cv_true_mean,
                        forwarded_fraction: a.forwarded_fraction,
                        ..a.aggregates
                    },
                    d_trace: Vec::new(),
                    d_true_trace: Vec::new(),
                    m_trace: Vec::new(),
                    violations: Vec::new(),
                })
                .collect(),
        }
    }
}

/// A dataset read back: its configurations and runs.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// What made it.
    pub spec: DatasetSpec,
    /// The configurations, in the command's order.
    pub configs: Vec<SeriesConfig>,
    /// The configuration files as saved.
    pub config_texts: Vec<String>,
    /// The runs.
    pub runs: SavedRuns,
}

impl Dataset {
    /// The report's tables and figures input: the summary recomputed from the saved runs.
    pub fn results(&self) -> Results {
        let records: Vec<RunRecord> = self
            .runs
            .runs
            .iter()
            .map(|r| r.to_record(self.runs.profile))
            .collect();
        Results {
            summary: summarize(&self.configs, &records, self.runs.profile),
            configs: self.configs.clone(),
            config_texts: self.config_texts.clone(),
            registry: Registry::built_in(),
        }
    }

    /// What differs between the saved runs and the runs the saved configurations give today:
    /// a missing or extra run, or a fingerprint that changed (a new model version or
    /// configuration). Empty when the saved runs are the runs of the saved configurations.
    pub fn stale_runs(&self) -> Vec<String> {
        let expected = jobs(&self.configs, self.spec.runs);
        let mut stale = Vec::new();
        if expected.len() != self.runs.runs.len() {
            stale.push(format!(
                "{} runs saved, the configurations give {}",
                self.runs.runs.len(),
                expected.len()
            ));
        }
        for job in &expected {
            match self.saved(job) {
                None => stale.push(format!("{}: not saved", job.id())),
                Some(run) if run.fingerprint != job.fingerprint(self.runs.profile) => {
                    stale.push(format!("{}: its fingerprint changed", job.id()));
                }
                Some(_) => {}
            }
        }
        stale
    }

    /// One job per series (its first point, run 0), to rerun and compare with the saved runs.
    pub fn sample_jobs(&self) -> Vec<Job> {
        let all = jobs(&self.configs, self.spec.runs);
        let mut sample: Vec<Job> = Vec::new();
        for job in all {
            if !sample.iter().any(|j| j.config.name == job.config.name) {
                sample.push(job);
            }
        }
        sample
    }

    /// The saved run of a job.
    pub fn saved(&self, job: &Job) -> Option<&SavedRun> {
        self.runs.runs.iter().find(|r| {
            r.series == job.config.name && r.point == job.point && r.run_index == job.run_index
        })
    }
}

fn data_folder(docs: &Path, name: &str) -> PathBuf {
    docs.join("data").join(name)
}

/// Reads a saved dataset.
pub fn read_dataset(docs: &Path, spec: &DatasetSpec) -> Result<Dataset, DocsError> {
    let folder = data_folder(docs, &spec.name);
    let missing = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DocsError::SavedMissing {
            path,
            source,
            command: spec.command(),
        }
    };
    let runs_path = folder.join("runs.json");
    let text = std::fs::read_to_string(&runs_path).map_err(missing(&runs_path))?;
    let runs: SavedRuns = serde_json::from_str(&text).map_err(|source| DocsError::NotADataset {
        path: runs_path.clone(),
        source,
        command: spec.command(),
    })?;
    let mut configs = Vec::new();
    let mut config_texts = Vec::new();
    for name in &runs.series {
        let path = folder.join("config").join(format!("{name}.toml"));
        let text = std::fs::read_to_string(&path).map_err(missing(&path))?;
        let config = SeriesConfig::from_toml(&text).map_err(|source| DocsError::NotASeries {
            path: path.clone(),
            source,
        })?;
        configs.push(config);
        config_texts.push(text);
    }
    Ok(Dataset {
        spec: spec.clone(),
        configs,
        config_texts,
        runs,
    })
}

/// Runs a dataset's command in a scratch folder and saves its configurations and per-run
/// aggregates under `docs/data/<name>/` (the old files of the dataset are replaced).
pub fn rerun_dataset(
    docs: &Path,
    spec: &DatasetSpec,
    threads: Option<usize>,
) -> Result<(), DocsError> {
    let scratch =
        std::env::temp_dir().join(format!("ach-docs-{}-{}", spec.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let args = experiments::Args {
        threads,
        ..spec.args(&scratch)
    };
    let failed = |source| DocsError::Experiment {
        name: spec.name.clone(),
        source: Box::new(source),
    };
    let plan = experiments::plan(&args).map_err(failed)?;
    experiments::execute(&plan, &args).map_err(failed)?;
    let mut runs = Vec::new();
    for job in jobs(&plan.series, plan.runs) {
        let record =
            crate::store::reusable_record(&scratch, &job, plan.profile).ok_or_else(|| {
                DocsError::RecordMissing {
                    name: spec.name.clone(),
                }
            })?;
        runs.push(SavedRun::of(&record));
    }
    let saved = SavedRuns {
        format_version: 1,
        profile: plan.profile,
        series: plan.series.iter().map(|c| c.name.clone()).collect(),
        runs,
    };
    let folder = data_folder(docs, &spec.name);
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(folder.join("config")).map_err(|source| DocsError::Create {
        path: folder.clone(),
        source,
    })?;
    for config in &plan.series {
        let name = format!("{}.toml", config.name);
        let text = std::fs::read(scratch.join("config").join(&name)).map_err(|source| {
            DocsError::Read {
                path: scratch.clone(),
                source,
            }
        })?;
        write(&folder.join("config").join(&name), &text)?;
    }
    write(&folder.join("runs.json"), render_runs(&saved).as_bytes())?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// `runs.json`, one run per line so that a change reads well in a diff.
fn render_runs(saved: &SavedRuns) -> String {
    let mut out = String::new();
    let header = serde_json::json!({
        "format_version": saved.format_version,
        "profile": saved.profile,
        "series": saved.series,
    });
    let header = serde_json::to_string(&header).expect("a header serialises");
    out.push_str(header.trim_end_matches('}'));
    out.push_str(",\"runs\":[\n");
    for (k, run) in saved.runs.iter().enumerate() {
        let line = serde_json::to_string(run).expect("a run serialises");
        let comma = if k + 1 < saved.runs.len() { "," } else { "" };
        let _ = writeln!(out, "{line}{comma}");
    }
    out.push_str("]}\n");
    out
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), DocsError> {
    write_atomic(path, bytes).map_err(|source| DocsError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// A generated file: its path and the text or bytes it should hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    /// The file.
    pub path: PathBuf,
    /// What the saved data give.
    pub bytes: Vec<u8>,
}

/// Every file the saved data generate: each `docs/*.md` with a generated block, with its blocks
/// filled in, and each listed figure.
pub fn generate(docs: &Path) -> Result<Vec<Generated>, DocsError> {
    let manifest = read_manifest(docs)?;
    let mut datasets = Vec::new();
    for spec in &manifest.dataset {
        let dataset = read_dataset(docs, spec)?;
        let results = dataset.results();
        let tables: Vec<Table> = build_tables(&results).all().into_iter().cloned().collect();
        datasets.push((spec.name.clone(), results, tables));
    }
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(docs)
        .map_err(|source| DocsError::Read {
            path: docs.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).map_err(|source| DocsError::Read {
            path: path.clone(),
            source,
        })?;
        let lookup = |name: &str| {
            datasets
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, _, tables)| tables.as_slice())
        };
        if !(text.contains(TABLE_OPEN) || text.contains(VALUE_OPEN)) {
            continue;
        }
        let filled = fill_blocks(&text, &lookup).map_err(|source| DocsError::Block {
            path: path.clone(),
            source,
        })?;
        out.push(Generated {
            path,
            bytes: filled.into_bytes(),
        });
    }
    for (spec, (_, results, _)) in manifest.dataset.iter().zip(&datasets) {
        if spec.figures.is_empty() {
            continue;
        }
        let (drawn, _) = figures::summary_figures(results, &figures::Styles::built_in());
        for name in &spec.figures {
            let figure = drawn.iter().find(|f| &f.name == name).ok_or_else(|| {
                let names: Vec<&str> = drawn.iter().map(|f| f.name.as_str()).collect();
                DocsError::UnknownFigure {
                    path: docs.join("data").join("datasets.toml"),
                    dataset: spec.name.clone(),
                    name: name.clone(),
                    known: names.join(", "),
                }
            })?;
            out.push(Generated {
                path: docs.join("figures").join(format!("{name}.svg")),
                bytes: figure.svg.clone().into_bytes(),
            });
        }
    }
    Ok(out)
}

/// The generated files whose content on disk differs from what the saved data give.
fn stale(docs: &Path) -> Result<Vec<Generated>, DocsError> {
    Ok(generate(docs)?
        .into_iter()
        .filter(|g| std::fs::read(&g.path).ok().as_deref() != Some(&g.bytes[..]))
        .collect())
}

/// The paths of the generated files whose content on disk differs from what the saved data
/// give.
pub fn check(docs: &Path) -> Result<Vec<PathBuf>, DocsError> {
    Ok(stale(docs)?.into_iter().map(|g| g.path).collect())
}

/// Writes every generated file that changed; returns them.
pub fn write_generated(docs: &Path) -> Result<Vec<PathBuf>, DocsError> {
    let mut written = Vec::new();
    for g in stale(docs)? {
        write(&g.path, &g.bytes)?;
        written.push(g.path);
    }
    Ok(written)
}

/// Arguments of `cargo xtask docs`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The docs folder (with `data/datasets.toml`).
    #[arg(long, default_value = "docs")]
    pub docs: PathBuf,
    /// Only check: list the generated files that differ from what the saved data give and
    /// exit 1 if there are any; write nothing.
    #[arg(long)]
    pub check: bool,
    /// First rerun these datasets' experiments (comma-separated names, or `all`) and save
    /// their data, then regenerate.
    #[arg(long, value_delimiter = ',')]
    pub rerun: Vec<String>,
    /// Worker threads of a rerun (default: all cores). The data do not depend on it.
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `cargo xtask docs`: exit 0 when done (or current, with `--check`), 1 when `--check` finds
/// stale files, 2 for an error.
pub fn run(args: Args) -> std::process::ExitCode {
    use std::process::ExitCode;
    match run_inner(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run_inner(args: &Args) -> Result<bool, DocsError> {
    let docs = &args.docs;
    if args.check {
        let stale = check(docs)?;
        for path in &stale {
            eprintln!("stale: {} (run `cargo xtask docs`)", path.display());
        }
        return Ok(stale.is_empty());
    }
    let manifest = read_manifest(docs)?;
    let all = args.rerun.iter().any(|n| n == "all");
    for name in &args.rerun {
        if name != "all" && !manifest.dataset.iter().any(|d| &d.name == name) {
            let names: Vec<&str> = manifest.dataset.iter().map(|d| d.name.as_str()).collect();
            return Err(DocsError::UnknownDataset {
                name: name.clone(),
                path: docs.join("data").join("datasets.toml"),
                known: names.join(", "),
            });
        }
    }
    for spec in &manifest.dataset {
        if all || args.rerun.contains(&spec.name) {
            eprintln!("docs: rerunning dataset {}", spec.name);
            rerun_dataset(docs, spec, args.threads)?;
        }
    }
    for path in write_generated(docs)? {
        eprintln!("docs: wrote {}", path.display());
    }
    Ok(true)
}
