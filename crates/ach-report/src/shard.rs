//! Shards: one matrix split over several processes or machines (for example the tasks of a
//! Slurm array job), and `merge`, which gathers their results into one folder.
//!
//! A shard (`experiments --shard INDEX/COUNT`, or `--shard slurm`) runs only its part of the
//! run list ([`ach_sim::matrix::shard_assignment`]), saves its records as a whole run would, and
//! ends by writing its manifest `shards/shard-INDEX-of-COUNT.json`: the plan fingerprint, and
//! the path, seed and fingerprint of every record it holds. A shard without a manifest did not
//! finish; run it again with the same arguments (it reuses what it saved).
//!
//! Shards may write into one shared folder or into separate ones. `merge --out DIR SHARD_DIR...`
//! checks that every manifest belongs to the same plan (same series, configurations, run
//! counts and profile) and that every shard is there, checks every record against its
//! manifest, and copies records and manifests into DIR. `experiments --out DIR` with the same
//! arguments and no shard then runs nothing and writes the summary, the report, the tables and
//! the figures, byte-identical to a one-machine run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ach_sim::Profile;
use ach_sim::matrix::Job;
use serde::{Deserialize, Serialize};

use crate::store;

/// Why a shard could not be chosen, or shards could not be merged. Each message names the
/// argument, variable, file or shard, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// `--shard` is neither `INDEX/COUNT` nor `slurm`.
    #[error("--shard = {text} must be INDEX/COUNT with 0 <= INDEX < COUNT (e.g. 0/4), or slurm")]
    Syntax {
        /// The text given.
        text: String,
    },
    /// A Slurm array variable is not a whole number.
    #[error("--shard slurm: {name} = {text:?} must be a whole number")]
    SlurmNotANumber {
        /// The variable.
        name: &'static str,
        /// Its value.
        text: String,
    },
    /// A Slurm array variable is not set.
    #[error("--shard slurm: {name} is not set: run inside a Slurm array job (sbatch --array=0-N)")]
    SlurmUnset {
        /// The variable.
        name: &'static str,
    },
    /// The task's index is outside the array.
    #[error(
        "--shard slurm: task {id} (first task {min}) is not one of the {count} tasks: give the \
         array as a contiguous range (sbatch --array=0-{})",
        .count.saturating_sub(1)
    )]
    SlurmTaskOutside {
        /// `SLURM_ARRAY_TASK_ID`.
        id: usize,
        /// `SLURM_ARRAY_TASK_MIN`.
        min: usize,
        /// `SLURM_ARRAY_TASK_COUNT`.
        count: usize,
    },
    /// Two manifests belong to different matrices.
    #[error(transparent)]
    DifferentPlans(Box<PlanMismatch>),
    /// No folder given holds a manifest.
    #[error(
        "no shard manifest (shards/shard-*-of-*.json) in {folders}: no shard has finished there"
    )]
    NoManifest {
        /// The folders searched, comma-separated.
        folders: String,
    },
    /// Some shards have no manifest.
    #[error(
        "shard {missing} has no manifest in the folders given: it did not finish; run it again \
         with the same arguments, then merge"
    )]
    Unfinished {
        /// The missing shards (`k/COUNT`), comma-separated.
        missing: String,
    },
    /// A record a manifest lists cannot be read.
    #[error("{}: cannot read ({source}): rerun shard {index}/{count}", .path.display())]
    RecordUnreadable {
        /// The record.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
        /// The shard.
        index: usize,
        /// The shard count.
        count: usize,
    },
    /// A record a manifest lists is truncated or not a record.
    #[error("{}: not a complete record: rerun shard {index}/{count}", .path.display())]
    RecordIncomplete {
        /// The record.
        path: PathBuf,
        /// The shard.
        index: usize,
        /// The shard count.
        count: usize,
    },
    /// A record differs from what its manifest says.
    #[error(
        "{}: the record does not match its shard's manifest (seed {seed} / fingerprint \
         {fingerprint:016x} against {expected_seed} / {expected_fingerprint}): it was \
         overwritten by another matrix; rerun shard {index}/{count}",
        .path.display()
    )]
    RecordMismatch {
        /// The record.
        path: PathBuf,
        /// Its seed.
        seed: u64,
        /// Its fingerprint.
        fingerprint: u64,
        /// The manifest's seed.
        expected_seed: u64,
        /// The manifest's fingerprint.
        expected_fingerprint: String,
        /// The shard.
        index: usize,
        /// The shard count.
        count: usize,
    },
    /// A results folder has no readable `shards/` folder.
    #[error("{}: cannot read ({source}): no shard has finished in {}", .folder.display(), .dir.display())]
    NoShardFolder {
        /// The `shards/` folder.
        folder: PathBuf,
        /// The cause.
        source: std::io::Error,
        /// The results folder.
        dir: PathBuf,
    },
    /// A file or folder cannot be read.
    #[error("{}: cannot read: {source}", .path.display())]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is not a shard manifest.
    #[error("{}: not a shard manifest: {source}", .path.display())]
    NotAManifest {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// A file cannot be written.
    #[error("{}: cannot write: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Which part of the run list a process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// From 0 to `count - 1`.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

/// Two shard manifests that belong to different matrices.
#[derive(Debug, thiserror::Error)]
#[error(
    "{} (plan {plan}, {count} shards, profile {profile}) and a manifest in {} (plan \
     {first_plan}, {first_count} shards, profile {first_profile}) belong to different \
     matrices (series, run counts, configurations or profile differ): refusing to mix them",
    .path.display(),
    .first_dir.display()
)]
pub struct PlanMismatch {
    /// The manifest that differs.
    pub path: PathBuf,
    /// Its plan fingerprint.
    pub plan: String,
    /// Its shard count.
    pub count: usize,
    /// Its profile's name.
    pub profile: &'static str,
    /// The folder of the first manifest found.
    pub first_dir: PathBuf,
    /// The first manifest's plan fingerprint.
    pub first_plan: String,
    /// The first manifest's shard count.
    pub first_count: usize,
    /// The first manifest's profile's name.
    pub first_profile: &'static str,
}

impl Shard {
    /// Parses `INDEX/COUNT`, or `slurm` (read from the environment of a Slurm array task:
    /// `SLURM_ARRAY_TASK_ID` minus `SLURM_ARRAY_TASK_MIN`, and `SLURM_ARRAY_TASK_COUNT`).
    pub fn parse(text: &str) -> Result<Shard, ShardError> {
        if text == "slurm" {
            return Shard::from_slurm(|name| std::env::var(name).ok());
        }
        let syntax = || ShardError::Syntax {
            text: text.to_string(),
        };
        let (index, count) = text.split_once('/').ok_or_else(syntax)?;
        let number = |s: &str| s.trim().parse::<usize>().ok();
        match (number(index), number(count)) {
            (Some(index), Some(count)) if index < count => Ok(Shard { index, count }),
            _ => Err(syntax()),
        }
    }

    /// The shard of a Slurm array task, from its environment (`var` reads a variable).
    pub fn from_slurm(var: impl Fn(&str) -> Option<String>) -> Result<Shard, ShardError> {
        let read = |name: &'static str, default: Option<usize>| -> Result<usize, ShardError> {
            match var(name) {
                Some(text) => text
                    .trim()
                    .parse()
                    .map_err(|_| ShardError::SlurmNotANumber { name, text }),
                None => default.ok_or(ShardError::SlurmUnset { name }),
            }
        };
        let id = read("SLURM_ARRAY_TASK_ID", None)?;
        let min = read("SLURM_ARRAY_TASK_MIN", Some(0))?;
        let count = read("SLURM_ARRAY_TASK_COUNT", None)?;
        let index = id
            .checked_sub(min)
            .filter(|&i| i < count)
            .ok_or(ShardError::SlurmTaskOutside { id, min, count })?;
        Ok(Shard { index, count })
    }

    /// The manifest's path in `out`.
    pub fn manifest_path(&self, out: &Path) -> PathBuf {
        out.join("shards")
            .join(format!("shard-{}-of-{}.json", self.index, self.count))
    }
}

/// What a finished shard holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version of this document.
    pub format_version: u32,
    /// The shard's index.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
    /// Profile of the runs.
    pub profile: Profile,
    /// Fingerprint of the whole run list ([`ach_sim::matrix::plan_fingerprint`]), in hex.
    pub plan: String,
    /// Every record of the shard.
    pub records: Vec<ManifestRecord>,
}

/// One record of a shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ManifestRecord {
    /// The job's id (`C5/eps_on=0.05/run_003`).
    pub id: String,
    /// The record file, relative to the results folder.
    pub path: String,
    /// The run's seed.
    pub seed: u64,
    /// The configuration fingerprint, in hex.
    pub fingerprint: String,
}

impl Manifest {
    /// The manifest of `shard`, which ran `jobs` of the plan with fingerprint `plan`.
    pub fn new(shard: Shard, profile: Profile, plan: u64, jobs: &[&Job], out: &Path) -> Manifest {
        Manifest {
            format_version: 1,
            index: shard.index,
            count: shard.count,
            profile,
            plan: format!("{plan:016x}"),
            records: jobs
                .iter()
                .map(|job| ManifestRecord {
                    id: job.id(),
                    path: relative(&store::record_path(out, job), out),
                    seed: job.seed(),
                    fingerprint: format!("{:016x}", job.fingerprint(profile)),
                })
                .collect(),
        }
    }

    /// Writes it (atomically) into `out/shards/`.
    pub fn write(&self, out: &Path) -> Result<(), ShardError> {
        let path = Shard {
            index: self.index,
            count: self.count,
        }
        .manifest_path(out);
        let text = serde_json::to_string_pretty(self).expect("a manifest serialises") + "\n";
        store::write_atomic(&path, text.as_bytes())
            .map_err(|e| ShardError::Write { source: e, path })
    }
}

/// `path` relative to `root`, with `/` separators.
fn relative(path: &Path, root: &Path) -> String {
    let rest = path.strip_prefix(root).unwrap_or(path);
    rest.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Arguments of `cargo xtask merge`.
#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The folder that receives every shard's records (it may be one of the shard folders).
    #[arg(long)]
    pub out: PathBuf,
    /// The folders the shards wrote into (one shared folder, or one per shard).
    #[arg(required = true)]
    pub shard_dirs: Vec<PathBuf>,
}

/// `merge`: exit code 0 when every shard was gathered, 2 otherwise.
pub fn run_merge(args: MergeArgs) -> ExitCode {
    match merge(&args.out, &args.shard_dirs) {
        Ok(copied) => {
            eprintln!(
                "merged {copied} records into {}; now run `experiments --out {}` with the \
                 shards' arguments (and no --shard) to write the summary and the report",
                args.out.display(),
                args.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Gathers the records of every shard manifest found in `shard_dirs` into `out`; returns the
/// number of records. Refuses manifests of different plans, missing shards, and records that
/// do not match their manifest.
pub fn merge(out: &Path, shard_dirs: &[PathBuf]) -> Result<usize, ShardError> {
    let found = manifests_of_one_plan(out, shard_dirs)?;
    let count = shard_count_if_all_finished(&found, shard_dirs)?;
    let mut copied = 0;
    let mut done: Vec<usize> = Vec::new();
    for (dir, manifest) in &found {
        if done.contains(&manifest.index) {
            continue;
        }
        done.push(manifest.index);
        for entry in &manifest.records {
            copy_record(out, dir, manifest, entry, count)?;
            copied += 1;
        }
        manifest.write(out)?;
    }
    Ok(copied)
}

/// Every manifest in `shard_dirs` and then in `out`, each with its folder, in that order;
/// refuses a manifest whose plan, shard count or profile differs from the first one's.
fn manifests_of_one_plan(
    out: &Path,
    shard_dirs: &[PathBuf],
) -> Result<Vec<(PathBuf, Manifest)>, ShardError> {
    let mut found: Vec<(PathBuf, Manifest)> = Vec::new();
    for dir in shard_dirs.iter().chain(std::iter::once(&out.to_path_buf())) {
        for (path, manifest) in read_manifests(dir, dir == out)? {
            if let Some((first_dir, first)) = found.first()
                && (manifest.plan.as_str(), manifest.count, manifest.profile)
                    != (first.plan.as_str(), first.count, first.profile)
            {
                return Err(ShardError::DifferentPlans(Box::new(PlanMismatch {
                    path,
                    plan: manifest.plan,
                    count: manifest.count,
                    profile: manifest.profile.name(),
                    first_dir: first_dir.clone(),
                    first_plan: first.plan.clone(),
                    first_count: first.count,
                    first_profile: first.profile.name(),
                })));
            }
            found.push((dir.clone(), manifest));
        }
    }
    Ok(found)
}

/// The shard count of the `found` manifests, when there is at least one and every shard
/// `0..count` has one; `shard_dirs` are the folders searched, named in the error.
fn shard_count_if_all_finished(
    found: &[(PathBuf, Manifest)],
    shard_dirs: &[PathBuf],
) -> Result<usize, ShardError> {
    let Some((_, first)) = found.first() else {
        return Err(ShardError::NoManifest {
            folders: shard_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let count = first.count;
    let missing: Vec<String> = (0..count)
        .filter(|&k| !found.iter().any(|(_, m)| m.index == k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(ShardError::Unfinished {
            missing: missing.join(", "),
        });
    }
    Ok(count)
}

/// Copies the record `entry` of `manifest` (a shard of `count`) from `dir` into `out`, after
/// checking that it is a complete record with the seed, fingerprint and profile its manifest
/// gives; a target that already holds the same bytes is not written again.
fn copy_record(
    out: &Path,
    dir: &Path,
    manifest: &Manifest,
    entry: &ManifestRecord,
    count: usize,
) -> Result<(), ShardError> {
    let source = dir.join(&entry.path);
    let bytes = std::fs::read(&source).map_err(|e| ShardError::RecordUnreadable {
        path: source.clone(),
        source: e,
        index: manifest.index,
        count,
    })?;
    let record = store::decode(&bytes).ok_or_else(|| ShardError::RecordIncomplete {
        path: source.clone(),
        index: manifest.index,
        count,
    })?;
    let agrees = record.seed == entry.seed
        && format!("{:016x}", record.fingerprint) == entry.fingerprint
        && record.profile == manifest.profile;
    if !agrees {
        return Err(ShardError::RecordMismatch {
            path: source,
            seed: record.seed,
            fingerprint: record.fingerprint,
            expected_seed: entry.seed,
            expected_fingerprint: entry.fingerprint.clone(),
            index: manifest.index,
            count,
        });
    }
    let target = out.join(&entry.path);
    if std::fs::read(&target).ok().as_deref() != Some(bytes.as_slice()) {
        store::write_atomic(&target, &bytes).map_err(|e| ShardError::Write {
            source: e,
            path: target.clone(),
        })?;
    }
    Ok(())
}

/// Every file of a results folder that a one-machine run and a merged run must have
/// byte-identical (all but `timing.json` and the shard manifests), sorted by relative path
/// (`/`-separated), with its bytes.
pub fn comparable_files(root: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            let name = relative(&path, root);
            if name == "shards" || name == "timing.json" {
                continue;
            }
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push((name, std::fs::read(&path)?));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The shard manifests in `dir/shards/` (none when the folder does not exist and `may_be_new`).
fn read_manifests(dir: &Path, may_be_new: bool) -> Result<Vec<(PathBuf, Manifest)>, ShardError> {
    let folder = dir.join("shards");
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(_) if may_be_new => return Ok(Vec::new()),
        Err(e) if dir.is_dir() => {
            return Err(ShardError::NoShardFolder {
                folder,
                source: e,
                dir: dir.to_path_buf(),
            });
        }
        Err(e) => {
            return Err(ShardError::Read {
                path: dir.to_path_buf(),
                source: e,
            });
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("shard-"))
                && p.extension().is_some_and(|x| x == "json")
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).map_err(|e| ShardError::Read {
                path: path.clone(),
                source: e,
            })?;
            let manifest: Manifest =
                serde_json::from_str(&text).map_err(|e| ShardError::NotAManifest {
                    path: path.clone(),
                    source: e,
                })?;
            Ok((path, manifest))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_parsed_and_checked() {
        assert_eq!(Shard::parse("2/5").unwrap(), Shard { index: 2, count: 5 });
        assert!(
            Shard::parse("5/5")
                .unwrap_err()
                .to_string()
                .contains("0 <= INDEX < COUNT")
        );
        assert!(Shard::parse("x").is_err());
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            Shard::from_slurm(env(&[
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "3")
            ]))
            .unwrap(),
            Shard { index: 2, count: 3 }
        );
        assert!(
            Shard::from_slurm(env(&[("SLURM_ARRAY_TASK_COUNT", "3")]))
                .unwrap_err()
                .to_string()
                .contains("SLURM_ARRAY_TASK_ID is not set")
        );
    }
}
