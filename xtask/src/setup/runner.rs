//! The whole workspace's tests, as `cargo test --release --workspace --no-fail-fast` runs
//! them, in three lanes instead of one.
//!
//! cargo runs test binaries one after another. Most of this workspace's test time is spent in
//! binaries that start real servers and then mostly wait (ach-live's experiment on its request
//! schedule, ach-redis's clusters under clients), so even on a two-core machine [`LANES`]
//! binaries at a time share the wall time; that keeps `.ci/run` under its limit. Each binary runs
//! as cargo would run it (in its package's directory, with `CARGO_MANIFEST_DIR` and
//! `CARGO_PKG_NAME` set) and its output is printed whole when it ends, so nothing interleaves.
//! The binaries whose tests assert what the servers measure of their own load
//! ([`QUIET_BINARIES`]) run first, one at a time and with nothing beside them; then the lanes,
//! the binaries that start servers first, longest lanes first; then the doc tests (`cargo test
//! --release --workspace --doc`); then a summary with each binary's time.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How many test binaries run at once. Three on two cores: the binaries that start servers
/// spend most of their time waiting on them (measured: two lanes took 708 s of wall time for
/// about 1,400 s of binaries).
const LANES: usize = 3;

/// Packages whose integration tests start servers and take minutes: they run first.
const SERVER_PACKAGES: &[&str] = &["ach-live", "ach-redis"];

/// Binaries (package and label, as [`TestBinary::name`] gives them) whose tests assert figures
/// the servers measure of their own load: Valkey's per-slot `cpu-usec` of a hot node before and
/// after a rebalance. The servers and clients of other binaries on the same two cores are noise
/// in those figures, so these run alone, before the lanes: beside two other binaries, CI read
/// the hot node's share as 0.321 before a rebalance and 0.273 after (a fall of 0.048, under
/// the test's 0.05), where the same test alone read 0.41 and 0.27 to 0.29 in four runs.
const QUIET_BINARIES: &[&str] = &["ach-redis tests/valkey.rs"];

/// How many of the slowest binaries the summary names.
const SLOWEST_SHOWN: usize = 8;

/// One test executable that cargo built.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TestBinary {
    /// The package's name.
    package: String,
    /// What cargo's `Running` line names: `unittests src/lib.rs`, `tests/live.rs`.
    label: String,
    /// The executable.
    executable: PathBuf,
    /// The package's directory, where cargo runs its tests.
    manifest_dir: PathBuf,
    /// The target's kind: `lib`, `bin`, `test`, `bench` or `example`.
    kind: String,
}

impl TestBinary {
    /// True for the integration tests of a [`SERVER_PACKAGES`] package.
    fn starts_servers(&self) -> bool {
        self.kind == "test" && SERVER_PACKAGES.contains(&self.package.as_str())
    }

    /// True for a binary of [`QUIET_BINARIES`], which runs with no other binary beside it.
    fn runs_alone(&self) -> bool {
        QUIET_BINARIES.contains(&self.name().as_str())
    }

    fn name(&self) -> String {
        format!("{} {}", self.package, self.label)
    }
}

/// How one binary's run ended.
#[derive(Debug)]
struct Finished {
    name: String,
    passed: bool,
    wall: Duration,
}

/// Builds every test of the workspace, runs them, and returns the exit code: 0 when every test
/// passed, 101 (cargo's) when one failed or the build did.
pub fn run_workspace_tests(cargo: &OsStr, root: &Path) -> ExitCode {
    let binaries = match build(cargo, root) {
        Ok(binaries) => binaries,
        Err(message) => {
            eprintln!("cargo xtask test: {message}");
            return ExitCode::from(101);
        }
    };
    let started = Instant::now();
    let (alone, in_lanes): (Vec<TestBinary>, Vec<TestBinary>) = in_running_order(binaries)
        .into_iter()
        .partition(TestBinary::runs_alone);
    eprintln!(
        "cargo xtask test: {} test binaries, {} of them alone first, then {LANES} at a time; each \
         one's output follows when it ends",
        alone.len() + in_lanes.len(),
        alone.len()
    );
    let ran_alone: Vec<Finished> = alone
        .iter()
        .map(|binary| run_captured(binary, cargo))
        .collect();
    let queue = Mutex::new(VecDeque::from(in_lanes));
    let finished = Mutex::new(ran_alone);
    std::thread::scope(|scope| {
        for _ in 0..LANES {
            scope.spawn(|| {
                while let Some(binary) = next(&queue) {
                    let run = run_captured(&binary, cargo);
                    lock(&finished).push(run);
                }
            });
        }
    });
    let mut finished = finished
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    finished.push(run_doc_tests(cargo, root));
    print_summary(&finished, started.elapsed());
    if finished.iter().all(|f| f.passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The next binary to run, if any is left.
fn next(queue: &Mutex<VecDeque<TestBinary>>) -> Option<TestBinary> {
    lock(queue).pop_front()
}

/// The binaries in the order the lanes take them: the integration tests that start servers
/// (minutes each) first, so that the lanes end close together, then the others; each part in
/// cargo's order.
fn in_running_order(mut binaries: Vec<TestBinary>) -> Vec<TestBinary> {
    binaries.sort_by_key(|binary| !binary.starts_servers());
    binaries
}

/// `cargo test --release --workspace --no-run` (the release profile, as
/// [`super::cargo_test_arguments`] says why): builds every test binary and returns them in cargo's
/// order, or why the build failed.
fn build(cargo: &OsStr, root: &Path) -> Result<Vec<TestBinary>, String> {
    let mut child = Command::new(cargo)
        .args(["test", "--release", "--workspace", "--no-run"])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(cargo).display()))?;
    let stdout = child.stdout.take().expect("piped above");
    let binaries: Vec<TestBinary> = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| test_binary(&line))
        .collect();
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the tests failed ({status}); no test ran"));
    }
    Ok(binaries)
}

/// The test executable of one line of cargo's JSON messages, if it announces one.
fn test_binary(line: &str) -> Option<TestBinary> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(message["executable"].as_str()?);
    let manifest_dir = Path::new(message["manifest_path"].as_str()?)
        .parent()?
        .to_path_buf();
    let target = &message["target"];
    let kind = target["kind"][0].as_str()?.to_string();
    let source = Path::new(target["src_path"].as_str()?);
    let relative = source.strip_prefix(&manifest_dir).unwrap_or(source);
    let label = match kind.as_str() {
        "lib" | "bin" => format!("unittests {}", relative.display()),
        _ => relative.display().to_string(),
    };
    Some(TestBinary {
        package: package_name(message["package_id"].as_str()?, &manifest_dir),
        label,
        executable,
        manifest_dir,
        kind,
    })
}

/// The package's name in a package id: `path+file:///w/crates/ach-live#0.1.0` (the name is the
/// directory's) or `path+file:///w/benches#ach-benches@0.1.0`.
fn package_name(package_id: &str, manifest_dir: &Path) -> String {
    let fragment = package_id.rsplit('#').next().unwrap_or_default();
    match fragment.split_once('@') {
        Some((name, _version)) => name.to_string(),
        None => manifest_dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

/// The command that runs one test binary as cargo runs it.
fn command_for(binary: &TestBinary, cargo: &OsStr) -> Command {
    let mut command = Command::new(&binary.executable);
    command
        .current_dir(&binary.manifest_dir)
        .env("CARGO", cargo)
        .env("CARGO_MANIFEST_DIR", &binary.manifest_dir)
        .env("CARGO_PKG_NAME", &binary.package);
    command
}

/// Runs one binary with its output kept in a file, then prints that output whole.
fn run_captured(binary: &TestBinary, cargo: &OsStr) -> Finished {
    let started = Instant::now();
    let path = std::env::temp_dir().join(format!(
        "xtask-test-{}-{}.log",
        std::process::id(),
        binary
            .executable
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
    ));
    let status = File::create(&path).and_then(|file| {
        let errors = file.try_clone()?;
        command_for(binary, cargo)
            .stdout(file)
            .stderr(errors)
            .status()
    });
    let mut output = String::new();
    if let Ok(mut file) = File::open(&path) {
        let _ = file.read_to_string(&mut output);
    }
    let _ = std::fs::remove_file(&path);
    let wall = started.elapsed();
    // One write under the lock, so that the lanes' outputs never interleave.
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "     Ran {} in {:.1} s ({})",
        binary.label,
        wall.as_secs_f64(),
        binary.executable.display()
    );
    match &status {
        Ok(_) => {
            let _ = stdout.write_all(output.as_bytes());
        }
        Err(error) => {
            let _ = writeln!(
                stdout,
                "cargo xtask test: cannot run {}: {error}",
                binary.executable.display()
            );
        }
    }
    let _ = stdout.flush();
    Finished {
        name: binary.name(),
        passed: status.is_ok_and(|s| s.success()),
        wall,
    }
}

/// `cargo test --release --workspace --doc`.
fn run_doc_tests(cargo: &OsStr, root: &Path) -> Finished {
    let started = Instant::now();
    let status = Command::new(cargo)
        .args(["test", "--release", "--workspace", "--doc"])
        .current_dir(root)
        .status();
    Finished {
        name: "doc tests".to_string(),
        passed: status.is_ok_and(|s| s.success()),
        wall: started.elapsed(),
    }
}

fn print_summary(finished: &[Finished], wall: Duration) {
    let mut slowest: Vec<&Finished> = finished.iter().collect();
    slowest.sort_by_key(|run| std::cmp::Reverse(run.wall));
    println!(
        "\ncargo xtask test: {} test binaries and the doc tests in {:.1} s",
        finished.len() - 1,
        wall.as_secs_f64()
    );
    for run in slowest.iter().take(SLOWEST_SHOWN) {
        println!("  {:>7.1} s  {}", run.wall.as_secs_f64(), run.name);
    }
    let failed: Vec<&str> = finished
        .iter()
        .filter(|f| !f.passed)
        .map(|f| f.name.as_str())
        .collect();
    if failed.is_empty() {
        println!("every test passed");
    } else {
        println!("FAILED: {}", failed.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_artifact_becomes_a_binary_and_other_messages_nothing() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/ach-live#0.1.0","manifest_path":"/w/crates/ach-live/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"live","src_path":"/w/crates/ach-live/tests/live.rs"},"profile":{"test":true},"executable":"/w/target/debug/deps/live-ffa8"}"#;
        let binary = test_binary(line).expect("a test binary");
        assert_eq!(binary.package, "ach-live");
        assert_eq!(binary.label, "tests/live.rs");
        assert_eq!(binary.manifest_dir, PathBuf::from("/w/crates/ach-live"));
        assert!(binary.starts_servers());
        let library = line
            .replace(r#"["test"]"#, r#"["lib"]"#)
            .replace("tests/live.rs", "src/lib.rs");
        let library = test_binary(&library).expect("a unit-test binary");
        assert_eq!(library.label, "unittests src/lib.rs");
        assert!(!library.starts_servers(), "unit tests start no server");
        let not_a_test = line.replace(r#""test":true"#, r#""test":false"#);
        assert_eq!(test_binary(&not_a_test), None);
        assert_eq!(
            test_binary(r#"{"reason":"build-finished","success":true}"#),
            None
        );
    }

    #[test]
    fn the_binaries_that_start_servers_run_first_and_the_rest_keep_their_order() {
        let binary = |package: &str, kind: &str, label: &str| TestBinary {
            package: package.into(),
            label: label.into(),
            executable: PathBuf::from(label),
            manifest_dir: PathBuf::new(),
            kind: kind.into(),
        };
        let order = in_running_order(vec![
            binary("ach-control", "lib", "a"),
            binary("ach-live", "lib", "b"),
            binary("ach-live", "test", "c"),
            binary("ach-redis", "test", "d"),
            binary("ach-report", "test", "e"),
            binary("ach-redis", "test", "f"),
        ]);
        let labels: Vec<&str> = order.iter().map(|b| b.label.as_str()).collect();
        assert_eq!(labels, ["c", "d", "f", "a", "b", "e"]);
        assert!(binary("ach-redis", "test", "tests/valkey.rs").runs_alone());
        assert!(!binary("ach-redis", "test", "tests/rebalance.rs").runs_alone());
        assert!(!binary("ach-live", "test", "tests/valkey.rs").runs_alone());
    }

    #[test]
    fn every_binary_that_runs_alone_is_a_test_file_of_the_workspace() {
        // A renamed file would otherwise run in the lanes again, unnoticed.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for name in QUIET_BINARIES {
            let (package, label) = name.split_once(' ').expect("package and label");
            let file = root.join("crates").join(package).join(label);
            assert!(file.is_file(), "{name}: no file {}", file.display());
        }
    }

    #[test]
    fn a_package_name_comes_from_the_id_or_the_directory() {
        let dir = Path::new("/w/benches");
        assert_eq!(
            package_name("path+file:///w/benches#ach-benches@0.1.0", dir),
            "ach-benches"
        );
        assert_eq!(
            package_name(
                "path+file:///w/crates/ach-live#0.1.0",
                Path::new("/w/crates/ach-live")
            ),
            "ach-live"
        );
    }
}
