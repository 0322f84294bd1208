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
use super::tables::{Table, markdown_cell, to_markdown};
use crate::experiments::{self, ExperimentError};
use crate::store::write_atomic;

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

/// A wrong block of a Markdown file: the line it opens on and the rule it breaks.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {rule}")]
pub struct BlockError {
    /// The line the block opens on (from 1).
    pub line: usize,
    /// The rule broken.
    pub rule: BlockRule,
}

/// The rules a marked block must follow.
#[derive(Debug, thiserror::Error)]
pub enum BlockRule {
    /// The opening comment has no `-->`.
    #[error("a block opened here is never closed by -->")]
    Unclosed,
    /// No closing comment follows.
    #[error("no {close} after this block")]
    NoClose {
        /// The closing comment expected.
        close: &'static str,
    },
    /// An option is not `key=value`.
    #[error("option {pair:?} must be key=value")]
    NotKeyValue {
        /// The option's text.
        pair: String,
    },
    /// `part` is not `mean`.
    #[error("part = {value:?}: the only part is mean")]
    Part {
        /// The value given.
        value: String,
    },
    /// `data` or `table` is missing.
    #[error("a block needs data=<dataset> and table=<table name>")]
    DataAndTable,
    /// `data` names no dataset.
    #[error("data = {data:?} is not a dataset of docs/data/datasets.toml")]
    UnknownDataset {
        /// The value given.
        data: String,
    },
    /// `table` names no table of the dataset.
    #[error("table = {table:?} is not a table of dataset {data} ({known})")]
    UnknownTable {
        /// The value given.
        table: String,
        /// The dataset.
        data: String,
        /// The dataset's tables, comma-separated.
        known: String,
    },
    /// A filter or `columns` names no column of the table.
    #[error("{header:?} is not a column of table {table} ({known})")]
    UnknownColumn {
        /// The header given.
        header: String,
        /// The table.
        table: String,
        /// The table's headers, comma-separated.
        known: String,
    },
    /// No row passes the filters.
    #[error("no row of table {table} of dataset {data} matches the filters")]
    NoRow {
        /// The table.
        table: String,
        /// The dataset.
        data: String,
    },
    /// A value block has no `column`.
    #[error("a value block needs column=<header>")]
    ValueColumn,
    /// A value block's filters pass more or fewer than one row.
    #[error(
        "{rows} rows of table {table} of dataset {data} match the filters: a value block needs exactly one"
    )]
    NotOneRow {
        /// How many rows pass.
        rows: usize,
        /// The table.
        table: String,
        /// The dataset.
        data: String,
    },
    /// A value block's `column` is not one of the kept columns.
    #[error("{column:?} is not a column of table {table}")]
    ValueColumnMissing {
        /// The header given.
        column: String,
        /// The table.
        table: String,
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

const TABLE_OPEN: &str = "<!-- table ";
const TABLE_CLOSE: &str = "<!-- /table -->";
const VALUE_OPEN: &str = "<!-- value ";
const VALUE_CLOSE: &str = "<!-- /value -->";

/// `text` with every block filled from the tables `lookup` gives per dataset name.
fn fill_blocks<'t>(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<&'t [Table]>,
) -> Result<String, BlockError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let next_table = rest.find(TABLE_OPEN);
        let next_value = rest.find(VALUE_OPEN);
        let (start, is_table) = match (next_table, next_value) {
            (None, None) => break,
            (Some(t), Some(v)) if v < t => (v, false),
            (Some(t), _) => (t, true),
            (None, Some(v)) => (v, false),
        };
        let line = text[..text.len() - rest.len() + start]
            .matches('\n')
            .count()
            + 1;
        let (open, close) = if is_table {
            (TABLE_OPEN, TABLE_CLOSE)
        } else {
            (VALUE_OPEN, VALUE_CLOSE)
        };
        let at_line = |rule| BlockError { line, rule };
        out.push_str(&rest[..start]);
        let after_open = &rest[start + open.len()..];
        let options_end = after_open
            .find("-->")
            .ok_or_else(|| at_line(BlockRule::Unclosed))?;
        let options_text = &after_open[..options_end];
        let body_start = &after_open[options_end + 3..];
        let body_end = body_start
            .find(close)
            .ok_or_else(|| at_line(BlockRule::NoClose { close }))?;
        let options = Options::parse(options_text).map_err(at_line)?;
        let tables = lookup(&options.data).ok_or_else(|| {
            at_line(BlockRule::UnknownDataset {
                data: options.data.clone(),
            })
        })?;
        let generated = if is_table {
            options
                .select(tables)
                .map(|table| format!("\n\n{}\n", to_markdown(&table)))
        } else {
            options.value(tables)
        }
        .map_err(at_line)?;
        let _ = write!(out, "{open}{options_text}-->{generated}{close}");
        rest = &body_start[body_end + close.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The options of one block.
#[derive(Debug)]
struct Options {
    data: String,
    table: String,
    /// Column header -> accepted cell texts.
    filters: Vec<(String, Vec<String>)>,
    columns: Option<Vec<String>>,
    column: Option<String>,
    mean_only: bool,
}

impl Options {
    fn parse(text: &str) -> Result<Options, BlockRule> {
        let mut options = Options {
            data: String::new(),
            table: String::new(),
            filters: Vec::new(),
            columns: None,
            column: None,
            mean_only: false,
        };
        for pair in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| BlockRule::NotKeyValue {
                pair: pair.to_string(),
            })?;
            let (key, value) = (key.trim(), value.trim());
            let list = || value.split(',').map(|v| v.trim().to_string()).collect();
            match key {
                "data" => options.data = value.to_string(),
                "table" => options.table = value.to_string(),
                "columns" => options.columns = Some(list()),
                "column" => options.column = Some(value.to_string()),
                "part" if value == "mean" => options.mean_only = true,
                "part" => {
                    return Err(BlockRule::Part {
                        value: value.to_string(),
                    });
                }
                _ => options.filters.push((key.to_string(), list())),
            }
        }
        if options.data.is_empty() || options.table.is_empty() {
            return Err(BlockRule::DataAndTable);
        }
        Ok(options)
    }

    /// The rows of the named table that pass every filter, with the chosen columns.
    fn select(&self, tables: &[Table]) -> Result<Table, BlockRule> {
        let table = tables
            .iter()
            .find(|t| t.name == self.table)
            .ok_or_else(|| {
                let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
                BlockRule::UnknownTable {
                    table: self.table.clone(),
                    data: self.data.clone(),
                    known: names.join(", "),
                }
            })?;
        let index = |header: &str| {
            table
                .columns
                .iter()
                .position(|c| c.header == header)
                .ok_or_else(|| {
                    let headers: Vec<&str> =
                        table.columns.iter().map(|c| c.header.as_str()).collect();
                    BlockRule::UnknownColumn {
                        header: header.to_string(),
                        table: self.table.clone(),
                        known: headers.join(", "),
                    }
                })
        };
        let mut filters = Vec::new();
        for (header, accepted) in &self.filters {
            filters.push((index(header)?, accepted));
        }
        let keep: Vec<usize> = match &self.columns {
            Some(headers) => headers.iter().map(|h| index(h)).collect::<Result<_, _>>()?,
            None => (0..table.columns.len()).collect(),
        };
        let rows: Vec<Vec<_>> = table
            .rows
            .iter()
            .filter(|row| {
                filters
                    .iter()
                    .all(|(k, accepted)| accepted.contains(&markdown_cell(&row[*k])))
            })
            .map(|row| keep.iter().map(|&k| row[k].clone()).collect())
            .collect();
        if rows.is_empty() {
            return Err(BlockRule::NoRow {
                table: self.table.clone(),
                data: self.data.clone(),
            });
        }
        Ok(Table {
            columns: keep.iter().map(|&k| table.columns[k].clone()).collect(),
            rows,
            ..table.clone()
        })
    }

    /// The text of `column` in the one row that passes every filter.
    fn value(&self, tables: &[Table]) -> Result<String, BlockRule> {
        let column = self.column.as_ref().ok_or(BlockRule::ValueColumn)?;
        let table = self.select(tables)?;
        if table.rows.len() != 1 {
            return Err(BlockRule::NotOneRow {
                rows: table.rows.len(),
                table: self.table.clone(),
                data: self.data.clone(),
            });
        }
        let k = table
            .columns
            .iter()
            .position(|c| &c.header == column)
            .ok_or_else(|| BlockRule::ValueColumnMissing {
                column: column.clone(),
                table: self.table.clone(),
            })?;
        let text = markdown_cell(&table.rows[0][k]);
        Ok(if self.mean_only {
            text.split(" ± ").next().unwrap_or_default().to_string()
        } else {
            text
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::{Cell, Column, CsvShape};

    fn tables() -> Vec<Table> {
        let table = Table {
            name: "all_algorithms".into(),
            title: "All".into(),
            columns: vec![
                Column::key("Series", "series"),
                Column::key("Algorithm", "algorithm"),
                Column::value("D-bar", "d_mean"),
            ],
            rows: vec![
                vec![
                    Cell::text("C1"),
                    Cell::text("ACH"),
                    Cell::Estimate {
                        mean: Some(0.1787),
                        ci95: Some(0.0051),
                        decimals: 4,
                    },
                ],
                vec![
                    Cell::text("C2"),
                    Cell::text("ACH"),
                    Cell::Estimate {
                        mean: Some(0.0159),
                        ci95: Some(0.0005),
                        decimals: 4,
                    },
                ],
            ],
            csv_shape: CsvShape::AsRows,
        };
        vec![table]
    }

    fn fill(text: &str) -> Result<String, BlockError> {
        let tables = tables();
        fill_blocks(text, &|name| (name == "d").then_some(tables.as_slice()))
    }

    #[test]
    fn blocks_are_filled_and_filling_twice_changes_nothing() {
        let text = "Before\n<!-- table data=d; table=all_algorithms; Series=C2 -->\nold\n<!-- /table -->\nC1: <!-- value data=d; table=all_algorithms; Series=C1; column=D-bar; part=mean -->x<!-- /value -->.\n";
        let filled = fill(text).unwrap();
        assert_eq!(
            filled,
            "Before\n<!-- table data=d; table=all_algorithms; Series=C2 -->\n\n| Series | Algorithm | D-bar |\n| :--- | :--- | ---: |\n| C2 | ACH | 0.0159 ± 0.0005 |\n\n<!-- /table -->\nC1: <!-- value data=d; table=all_algorithms; Series=C1; column=D-bar; part=mean -->0.1787<!-- /value -->.\n"
        );
        assert_eq!(fill(&filled).unwrap(), filled);
    }

    #[test]
    fn bad_blocks_say_what_is_wrong_and_where() {
        let cases = [
            (
                "<!-- table data=d; table=nope -->\n<!-- /table -->",
                "line 1: table = \"nope\"",
            ),
            (
                "\n<!-- table data=x; table=all_algorithms -->\n<!-- /table -->",
                "line 2: data = \"x\"",
            ),
            (
                "<!-- table data=d; table=all_algorithms; Series=C9 -->\n<!-- /table -->",
                "no row",
            ),
            (
                "<!-- table data=d; table=all_algorithms; Colour=red -->\n<!-- /table -->",
                "\"Colour\" is not a column",
            ),
            (
                "<!-- value data=d; table=all_algorithms; column=D-bar -->1<!-- /value -->",
                "2 rows",
            ),
            (
                "<!-- table data=d; table=all_algorithms -->\n",
                "no <!-- /table -->",
            ),
            (
                "<!-- value data=d; table=all_algorithms; part=sd; Series=C1 -->1<!-- /value -->",
                "part",
            ),
            (
                "text\nC1: <!-- value data=d; table=nope; column=D-bar -->1<!-- /value -->",
                "line 2: table",
            ),
        ];
        for (text, expected) in cases {
            let error = fill(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
