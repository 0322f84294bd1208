//! A matrix run as shards (in separate folders and in one shared folder), one shard killed and
//! rerun, merged, then finished without `--shard`: the outputs are byte-identical to a
//! one-machine run. The same flow under a real Slurm is in `xtask/tests/slurm.rs`.

use std::path::{Path, PathBuf};

use ach_report::experiments::{Args, execute, execute_shard, plan};
use ach_report::shard::{Shard, merge};

fn scratch(name: &str) -> PathBuf {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    if folder.exists() {
        std::fs::remove_dir_all(&folder).unwrap();
    }
    folder
}

fn args(out: &Path, shard: Option<Shard>) -> Args {
    Args {
        series: vec!["C1".into(), "C4c".into(), "C5".into()],
        runs: Some(2),
        threads: Some(1),
        reference_json: true,
        shard,
        ..Args::new(out)
    }
}

fn run_shard(out: &Path, index: usize, count: usize) {
    let shard = Shard { index, count };
    let a = args(out, Some(shard));
    let violations = execute_shard(&plan(&a).unwrap(), shard).unwrap();
    assert_eq!(violations, 0);
}

/// The run without `--shard`; returns how many runs it executed.
fn finish(out: &Path) -> u64 {
    let a = args(out, None);
    execute(&plan(&a).unwrap(), &a).unwrap();
    let timing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("timing.json")).unwrap()).unwrap();
    timing["runs_executed"].as_u64().unwrap()
}

fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    ach_report::shard::comparable_files(root).expect("a results folder")
}

fn assert_same_files(expected: &Path, actual: &Path) {
    let (want, got) = (files(expected), files(actual));
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&want), names(&got));
    for ((name, a), (_, b)) in want.iter().zip(&got) {
        assert!(a == b, "{name} differs from the one-machine run");
    }
}

#[test]
fn separate_shard_folders_with_a_killed_shard_merge_to_the_one_machine_outputs() {
    let one = scratch("shards_one_machine");
    finish(&one);
    let dirs: Vec<PathBuf> = (0..3)
        .map(|k| scratch(&format!("shards_sep_{k}")))
        .collect();
    for (k, dir) in dirs.iter().enumerate() {
        run_shard(dir, k, 3);
    }
    // Shard 1 "killed": what a kill leaves is some records, a temporary file, no manifest.
    let killed = &dirs[1];
    std::fs::remove_file(killed.join("shards/shard-1-of-3.json")).unwrap();
    let mut record_files: Vec<PathBuf> = Vec::new();
    let mut folders = vec![killed.join("runs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                record_files.push(path);
            }
        }
    }
    record_files.sort();
    assert!(
        record_files.len() >= 2,
        "shard 1 got {} runs",
        record_files.len()
    );
    std::fs::remove_file(&record_files[0]).unwrap();
    let parent = record_files[0].parent().unwrap();
    std::fs::write(parent.join(".run_000.bin.tmp99999"), b"half a rec").unwrap();

    let merged = scratch("shards_merged");
    let error = merge(&merged, &dirs).unwrap_err();
    assert!(
        error.to_string().contains("shard 1/3 has no manifest"),
        "{error}"
    );

    run_shard(killed, 1, 3);
    merge(&merged, &dirs).unwrap();
    assert_eq!(finish(&merged), 0, "the merged folder holds every run");
    assert_same_files(&one, &merged);
}

#[test]
fn shards_sharing_one_folder_finish_in_place_and_mixtures_are_refused() {
    let one = scratch("shards_one_machine_b");
    finish(&one);
    let shared = scratch("shards_shared");
    for k in [2, 0, 1] {
        run_shard(&shared, k, 3);
    }
    merge(&shared, std::slice::from_ref(&shared)).unwrap();
    assert_eq!(finish(&shared), 0, "the shared folder holds every run");
    assert_same_files(&one, &shared);

    // A shard of another matrix (one run per series instead of two) is refused.
    let other = scratch("shards_other_matrix");
    let shard = Shard { index: 0, count: 3 };
    let mut a = args(&other, Some(shard));
    a.runs = Some(1);
    execute_shard(&plan(&a).unwrap(), shard).unwrap();
    let error = merge(&scratch("shards_mixed"), &[shared.clone(), other]).unwrap_err();
    assert!(
        error.to_string().contains("refusing to mix them"),
        "{error}"
    );
}
