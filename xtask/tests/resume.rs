//! Crash safety, resume and determinism of `cargo xtask experiments`, through the real binary.
//!
//! * A matrix killed at random moments (SIGKILL, and SIGINT as Ctrl-C sends it) and started
//!   again with the same arguments runs only the missing runs and ends with every output byte
//!   for byte equal to an uninterrupted run's (`timing.json` aside, which holds the timing).
//! * One worker thread and two give byte-identical outputs.
//! * A record whose configuration, profile or seed differs from the current one, or whose file
//!   is truncated, empty or has trailing bytes, is not reused; a valid one is.
//!
//! The kill moments come from a seeded generator. The seed is printed; set `ACH_RESUME_SEED`
//! to replay a failure with the same moments (the machine's timing still varies).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Series C1, shortened to keep the test fast.
const C1_MEDIUM: &str = "name = \"C1\"\ndescription = \"Stationary load\"\nsteps = 600\n";

/// Series C3 (Zipf keys, two nodes leave, three join), shortened.
const C3_MEDIUM: &str = "name = \"C3\"\ndescription = \"Hot keys and node churn\"\nzipf_s = 1.0\n\
    steps = 600\n\n[[churn]]\nt = 150\nremove = [9, 8]\n\n[[churn]]\nt = 300\n\
    add = [\"medium\", \"medium\", \"strong\"]\n";

/// Runs per series of the matrix that is killed.
const MEDIUM_RUNS: &str = "5";

/// The longest one invocation may take before the test gives up on it.
const TIME_LIMIT: Duration = Duration::from_secs(120);

/// A fresh, empty scratch folder `CARGO_TARGET_TMPDIR/resume/<name>`.
fn scratch(name: &str) -> PathBuf {
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("resume")
        .join(name);
    if folder.exists() {
        std::fs::remove_dir_all(&folder).unwrap();
    }
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

/// Starts `xtask experiments <arguments> --out <out>` with stdout and stderr in files next to
/// `out` (named after it), so that a full pipe can never stall it.
fn start(out: &Path, arguments: &[&str]) -> Child {
    let log = |suffix: &str| {
        let mut name = out.file_name().unwrap().to_os_string();
        name.push(suffix);
        File::create(out.with_file_name(name)).unwrap()
    };
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("experiments")
        .args(arguments)
        .arg("--out")
        .arg(out)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log(".stdout.txt"))
        .stderr(log(".stderr.txt"))
        .spawn()
        .unwrap()
}

/// Waits for the child, killing it and failing the test after [`TIME_LIMIT`].
fn wait(child: &mut Child) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > TIME_LIMIT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("an experiments run took longer than {TIME_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs to completion and checks that the run succeeded; returns `timing.json`.
fn run_to_completion(out: &Path, arguments: &[&str]) -> Timing {
    let mut child = start(out, arguments);
    let status = wait(&mut child);
    let mut name = out.file_name().unwrap().to_os_string();
    name.push(".stderr.txt");
    let stderr = std::fs::read_to_string(out.with_file_name(name)).unwrap();
    assert!(status.success(), "experiments failed ({status}):\n{stderr}");
    Timing::read(out)
}

/// The run counts of `timing.json`.
#[derive(Debug, PartialEq)]
struct Timing {
    executed: u64,
    reused: u64,
}

impl Timing {
    fn read(out: &Path) -> Timing {
        let text = std::fs::read_to_string(out.join("timing.json")).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        Timing {
            executed: value["runs_executed"].as_u64().unwrap(),
            reused: value["runs_reused"].as_u64().unwrap(),
        }
    }
}

/// True for the temporary files of atomic writes (`.<name>.tmp<pid>`), which a killed run
/// may leave behind and which no reader ever opens.
fn is_temporary(relative: &Path) -> bool {
    let name = relative.file_name().unwrap().to_string_lossy();
    name.starts_with('.') && name.contains(".tmp")
}

/// Every file under `root` (relative path -> bytes), except `timing.json` and the temporary
/// files of atomic writes.
fn outputs(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                folders.push(path);
            } else if relative != Path::new("timing.json") && !is_temporary(&relative) {
                files.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// The temporary files of atomic writes under `root`.
fn temporary_files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if is_temporary(path.strip_prefix(root).unwrap()) {
                found.push(path);
            }
        }
    }
    found
}

/// Number of run records (`runs/**/run_NNN.bin`) under `out`, reading names only (it is
/// polled while a run writes); 0 before the `runs` folder exists.
fn record_count(out: &Path) -> u64 {
    let mut count = 0;
    let mut folders = vec![out.join("runs")];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "bin")
                && !is_temporary(Path::new(path.file_name().unwrap()))
            {
                count += 1;
            }
        }
    }
    count
}

/// Fails unless both folders hold the same files with the same bytes; names every difference.
fn assert_same_outputs(expected: &Path, actual: &Path) {
    let expected_files = outputs(expected);
    let actual_files = outputs(actual);
    assert!(
        expected_files.contains_key(Path::new("summary.json")),
        "no summary.json in {}",
        expected.display()
    );
    let mut differences = Vec::new();
    for (path, bytes) in &expected_files {
        match actual_files.get(path) {
            None => differences.push(format!("{}: missing", path.display())),
            Some(other) if other != bytes => differences.push(format!(
                "{}: {} bytes, expected {} bytes with other contents",
                path.display(),
                other.len(),
                bytes.len()
            )),
            Some(_) => {}
        }
    }
    for path in actual_files.keys() {
        if !expected_files.contains_key(path) {
            differences.push(format!("{}: not expected", path.display()));
        }
    }
    assert!(
        differences.is_empty(),
        "{} differs from {}:\n{}",
        actual.display(),
        expected.display(),
        differences.join("\n")
    );
}

/// The uninterrupted medium matrix on two threads: its folder, its arguments and its wall time.
struct Baseline {
    out: PathBuf,
    arguments: Vec<String>,
    wall: Duration,
    runs: u64,
}

impl Baseline {
    fn arguments<'a>(&'a self, threads: &'a str) -> Vec<&'a str> {
        let mut arguments: Vec<&str> = self.arguments.iter().map(String::as_str).collect();
        arguments.extend(["--threads", threads]);
        arguments
    }
}

/// Computed once and shared by the tests that compare with it.
fn baseline() -> &'static Baseline {
    static BASELINE: OnceLock<Baseline> = OnceLock::new();
    BASELINE.get_or_init(|| {
        let folder = scratch("baseline");
        let c1 = folder.join("c1.toml");
        let c3 = folder.join("c3.toml");
        std::fs::write(&c1, C1_MEDIUM).unwrap();
        std::fs::write(&c3, C3_MEDIUM).unwrap();
        let arguments: Vec<String> = [
            "--series",
            "C1,C3",
            "--runs",
            MEDIUM_RUNS,
            "--config",
            c1.to_str().unwrap(),
            "--config",
            c3.to_str().unwrap(),
            "--reference-json",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let mut baseline = Baseline {
            out: folder.join("uninterrupted"),
            arguments,
            wall: Duration::ZERO,
            runs: 2 * MEDIUM_RUNS.parse::<u64>().unwrap(),
        };
        let started = Instant::now();
        let timing = run_to_completion(&baseline.out, &baseline.arguments("2"));
        baseline.wall = started.elapsed();
        assert_eq!(
            timing,
            Timing {
                executed: baseline.runs,
                reused: 0
            }
        );
        assert!(temporary_files(&baseline.out).is_empty());
        let files = outputs(&baseline.out);
        for expected in [
            "summary.json",
            "config/C1.toml",
            "config/C3.toml",
            "runs/C3/run_004.bin",
            "C3/run_004.json",
        ] {
            assert!(
                files.contains_key(Path::new(expected)),
                "the baseline has no {expected}"
            );
        }
        baseline
    })
}

/// SplitMix64: a small seeded generator for the kill moments.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform fraction in `[0, 1)`.
    fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How a run is stopped.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// SIGKILL once the first new record file exists.
    KillAfterFirstRecord,
    /// SIGINT (what Ctrl-C sends) after a random delay.
    InterruptAfter(Duration),
    /// SIGKILL after a random delay.
    KillAfter(Duration),
}

/// Sends SIGINT, as Ctrl-C does. The process may have ended just before: `kill` then fails,
/// which is fine, so its status is not checked.
fn send_interrupt(child: &Child) {
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
}

/// Starts the matrix into `out`, stops it as `stop` says, and returns whether it was still
/// running when stopped.
fn start_and_stop(out: &Path, arguments: &[&str], stop: Stop) -> bool {
    let records_before = record_count(out);
    let mut child = start(out, arguments);
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        let elapsed = started.elapsed();
        assert!(elapsed < TIME_LIMIT, "an experiments run did not stop");
        let due = match stop {
            Stop::KillAfterFirstRecord => record_count(out) > records_before,
            Stop::InterruptAfter(delay) | Stop::KillAfter(delay) => elapsed >= delay,
        };
        if due {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    match stop {
        Stop::InterruptAfter(_) => send_interrupt(&child),
        Stop::KillAfterFirstRecord | Stop::KillAfter(_) => {
            // `Child::kill` sends SIGKILL on Unix; an already finished child is not an error.
            let _ = child.kill();
        }
    }
    let status = wait(&mut child);
    !status.success()
}

#[test]
fn a_killed_matrix_resumes_to_the_same_bytes() {
    let baseline = baseline();
    let seed = std::env::var("ACH_RESUME_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!(
        "kill moments seeded with ACH_RESUME_SEED={seed}; uninterrupted run took {:?}",
        baseline.wall
    );
    let mut random = SplitMix64(seed);
    let out = scratch("killed").join("out");
    let arguments = baseline.arguments("2");
    // A random delay within the time the rest of the matrix should take: the missing runs,
    // plus a fifth of the whole for the start and the outputs written at the end.
    let mut random_delay = |out: &Path| {
        let missing = baseline.runs - record_count(out);
        let share = 0.2 + 0.8 * missing as f64 / baseline.runs as f64;
        baseline.wall.mul_f64(share * random.fraction())
    };
    let mut stopped = 0;
    let first = Stop::KillAfterFirstRecord;
    stopped += u32::from(start_and_stop(&out, &arguments, first));
    let second = Stop::InterruptAfter(random_delay(&out));
    stopped += u32::from(start_and_stop(&out, &arguments, second));
    let third = Stop::KillAfter(random_delay(&out));
    stopped += u32::from(start_and_stop(&out, &arguments, third));
    let saved = record_count(&out);
    eprintln!(
        "stops: {first:?}, {second:?}, {third:?}; {stopped} stopped a running matrix; \
         {saved} of {} records saved",
        baseline.runs
    );
    assert!(stopped >= 1, "no run was stopped while it ran");
    // Every record file left behind is complete: the rerun reuses all of them and runs the
    // rest. A half-written record would be run again and break this count.
    let timing = run_to_completion(&out, &arguments);
    assert_eq!(
        timing,
        Timing {
            executed: baseline.runs - saved,
            reused: saved
        }
    );
    assert_same_outputs(&baseline.out, &out);
    // Temporary files of interrupted atomic writes are never read; list them for the record.
    for path in temporary_files(&out) {
        eprintln!("left by a killed run: {}", path.display());
    }
    // A second rerun has nothing left to do and changes nothing.
    let timing = run_to_completion(&out, &arguments);
    assert_eq!(
        timing,
        Timing {
            executed: 0,
            reused: baseline.runs
        }
    );
    assert_same_outputs(&baseline.out, &out);
}

#[test]
fn one_thread_and_two_threads_give_the_same_bytes() {
    let baseline = baseline();
    let out = scratch("one_thread").join("out");
    let timing = run_to_completion(&out, &baseline.arguments("1"));
    assert_eq!(timing.executed, baseline.runs);
    assert_same_outputs(&baseline.out, &out);
}

/// The small matrix of the reuse test: C1 with 200 steps, four runs.
fn small_matrix(folder: &Path, series_file: &str, extra: &[&str]) -> (PathBuf, Timing) {
    let config = folder.join("c1.toml");
    std::fs::write(&config, series_file).unwrap();
    let out = folder.join("out");
    let mut arguments = vec![
        "--series",
        "C1",
        "--runs",
        "4",
        "--config",
        config.to_str().unwrap(),
        "--threads",
        "2",
    ];
    arguments.extend(extra);
    let timing = run_to_completion(&out, &arguments);
    (out, timing)
}

#[test]
fn records_of_another_configuration_or_damaged_files_are_not_reused() {
    let folder = scratch("reuse");
    let c1 = "name = \"C1\"\nsteps = 200\n";
    let (out, timing) = small_matrix(&folder, c1, &[]);
    assert_eq!(
        timing,
        Timing {
            executed: 4,
            reused: 0
        }
    );
    let first = outputs(&out);
    let record = |k: u32| out.join("runs").join("C1").join(format!("run_{k:03}.bin"));

    // The same command again reuses every record and writes the same bytes.
    let (_, timing) = small_matrix(&folder, c1, &[]);
    assert_eq!(
        timing,
        Timing {
            executed: 0,
            reused: 4
        }
    );
    assert_eq!(outputs(&out), first);

    // Damaged files: run 1 truncated, run 2 a valid record of run 0 (another seed), run 3
    // empty. Only run 0 is reused, and the result is the same bytes again.
    let run_0 = std::fs::read(record(0)).unwrap();
    let run_1 = std::fs::read(record(1)).unwrap();
    std::fs::write(record(1), &run_1[..run_1.len() / 2]).unwrap();
    std::fs::write(record(2), &run_0).unwrap();
    std::fs::write(record(3), b"").unwrap();
    let (_, timing) = small_matrix(&folder, c1, &[]);
    assert_eq!(
        timing,
        Timing {
            executed: 3,
            reused: 1
        }
    );
    assert_eq!(outputs(&out), first);

    // Trailing bytes after a complete record.
    let mut padded = run_0.clone();
    padded.push(0);
    std::fs::write(record(0), &padded).unwrap();
    let (_, timing) = small_matrix(&folder, c1, &[]);
    assert_eq!(
        timing,
        Timing {
            executed: 1,
            reused: 3
        }
    );
    assert_eq!(outputs(&out), first);

    // A changed configuration (300 steps) runs everything again and gives other results.
    let (_, timing) = small_matrix(&folder, "name = \"C1\"\nsteps = 300\n", &[]);
    assert_eq!(
        timing,
        Timing {
            executed: 4,
            reused: 0
        }
    );
    let longer = outputs(&out);
    assert_ne!(
        longer[Path::new("summary.json")],
        first[Path::new("summary.json")]
    );
    assert_ne!(longer[Path::new("runs/C1/run_000.bin")], run_0);

    // Another seed, and another profile, each run everything again.
    let (_, timing) = small_matrix(&folder, "name = \"C1\"\nsteps = 200\nseed_base = 7\n", &[]);
    assert_eq!(timing.executed, 4);
    let (_, timing) = small_matrix(&folder, c1, &["--profile", "corrected"]);
    assert_eq!(timing.executed, 4);

    // Back to the first configuration and profile: everything is run again (the records on
    // disk are the corrected profile's) and the first bytes come back.
    let (_, timing) = small_matrix(&folder, c1, &[]);
    assert_eq!(
        timing,
        Timing {
            executed: 4,
            reused: 0
        }
    );
    assert_eq!(outputs(&out), first);
}
