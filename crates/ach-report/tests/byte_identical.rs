//! The library gives, byte for byte, the outputs that `cargo xtask experiments` gave before the
//! runner and the report moved out of `xtask` (commit 62e1fa0).
//!
//! `tests/data/runs2_reference_json.manifest` lists every file (but `timing.json`) of
//! `xtask experiments --runs 2 --reference-json` as built at commit 62e1fa0, with its length and
//! XXH3-64: run records, `summary.json`, the configurations, the published simulation's JSON,
//! REPORT.md, every table and every figure, and what it printed on stdout (`stdout.txt`). This
//! test runs the same matrix through
//! [`ach_report::experiments`] and compares.
//!
//! One deliberate change since: a missing value in a LaTeX table is `--`, no longer `$-$-`.
//! The lines of `tables/table2_ach_vs_a0.tex` and `tables/text_values.tex` are those of the
//! 62e1fa0 files with `$-$-` replaced by `--` (checked with `sed 's/\$-\$-/--/g' | cmp`);
//! every other line is 62e1fa0's. Since issue 26 the `.tex` files of `tables/` are the
//! paper-ready LaTeX (a `tabular` and a `_float` file per table or part, and `preamble.tex`):
//! their lines are today's, every other line is still 62e1fa0's. The figures' PDFs are left out
//! of the manifest: their bytes depend on the installed version of the font they embed; they
//! are checked by the report's own tests. To list another folder the same way (for example
//! the output of an older binary), run
//! `ACH_MANIFEST_OF=DIR cargo test -p ach-report --test byte_identical -- --ignored --nocapture`.

use std::path::{Path, PathBuf};

use ach_report::experiments::{Args, execute, plan};

const PINNED: &str = include_str!("data/runs2_reference_json.manifest");

/// Every file under `root` but `timing.json`, sorted: `<relative path> <length> <xxh3-64 hex>`.
fn manifest(root: &Path) -> String {
    let mut files = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(path);
            }
        }
    }
    let mut lines: Vec<String> = files
        .iter()
        .map(|path| {
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(path).unwrap();
            format!(
                "{relative} {} {:016x}",
                bytes.len(),
                xxhash_rust::xxh3::xxh3_64(&bytes)
            )
        })
        .filter(|line| !line.starts_with("timing.json "))
        .filter(|line| !(line.starts_with("figures/") && line.contains(".pdf ")))
        .collect();
    lines.sort();
    lines.join("\n") + "\n"
}

fn scratch(name: &str) -> PathBuf {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    if folder.exists() {
        std::fs::remove_dir_all(&folder).unwrap();
    }
    folder
}

#[test]
fn the_library_writes_what_xtask_wrote_before_the_move() {
    let out = scratch("byte_identical_runs2");
    let args = Args {
        runs: Some(2),
        threads: Some(2),
        reference_json: true,
        ..Args::new(&out)
    };
    let checked = plan(&args).expect("the default matrix is valid");
    let summary = execute(&checked, &args).expect("the matrix runs");
    assert_eq!(summary.total_violations, 0);
    // What `experiments` prints on stdout, as a file of the manifest.
    let printed = ach_report::outputs::render_summary_text(&summary);
    std::fs::write(out.join("stdout.txt"), printed).unwrap();
    let now = manifest(&out);
    if now != PINNED {
        let pinned: Vec<&str> = PINNED.lines().collect();
        let differing: Vec<&str> = now.lines().filter(|l| !pinned.contains(l)).collect();
        panic!(
            "{} of {} files differ from the pinned outputs, first: {:?}",
            differing.len(),
            pinned.len(),
            &differing[..differing.len().min(5)]
        );
    }
}

#[test]
#[ignore = "a tool: lists the folder named by ACH_MANIFEST_OF"]
fn print_manifest() {
    let root = std::env::var("ACH_MANIFEST_OF").expect("set ACH_MANIFEST_OF to a results folder");
    print!("{}", manifest(Path::new(&root)));
}
