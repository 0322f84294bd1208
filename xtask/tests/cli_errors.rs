//! Malformed configuration files and command-line inputs given to `cargo xtask experiments`.
//!
//! Every case runs the real binary in a scratch folder of its own and checks that it:
//! exits with status 2; prints nothing on stdout; prints one `error: ...` message on stderr that
//! names the file or argument, the field, the value and the rule (an `insta` snapshot, with the
//! scratch folder replaced by `[CASE]`); never panics or prints a backtrace; and starts no work
//! (no `summary.json` and no `runs/` folder appear).
//!
//! The cases are grouped by the categories of the reliability issue: probabilities, rates and
//! capacities, counts (steps, runs, tokens), hysteresis thresholds, the load ceiling `tau`, the
//! token floor `v_min`, churn and degradation events, series names, unreadable or malformed
//! files, unwritable output folders, and plain command-line mistakes.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a rejected invocation may take. Validation takes milliseconds; the limit only
/// stops a case that wrongly starts the matrix from running for minutes.
const TIME_LIMIT: Duration = Duration::from_secs(60);

/// One malformed input: a scratch folder holding its files, used as the working directory.
struct Case {
    name: &'static str,
    folder: PathBuf,
    /// The files written, for the snapshot's description.
    files: Vec<(String, String)>,
}

impl Case {
    /// A case with an empty scratch folder `CARGO_TARGET_TMPDIR/cli_errors/<name>/work`.
    fn new(name: &'static str) -> Case {
        let root = case_root(name);
        if root.exists() {
            std::fs::remove_dir_all(&root).unwrap();
        }
        let folder = root.join("work");
        std::fs::create_dir_all(&folder).unwrap();
        Case {
            name,
            folder,
            files: Vec::new(),
        }
    }

    /// Writes a text file into the scratch folder.
    fn file(mut self, name: &str, text: &str) -> Case {
        std::fs::write(self.folder.join(name), text).unwrap();
        self.files.push((name.to_string(), text.to_string()));
        self
    }

    /// Writes a file of raw bytes into the scratch folder.
    fn bytes(mut self, name: &str, bytes: &[u8]) -> Case {
        std::fs::write(self.folder.join(name), bytes).unwrap();
        self.files
            .push((name.to_string(), format!("<{} raw bytes>", bytes.len())));
        self
    }

    /// Creates an empty folder in the scratch folder.
    fn folder(mut self, name: &str) -> Case {
        std::fs::create_dir_all(self.folder.join(name)).unwrap();
        self.files
            .push((name.to_string(), "<a folder>".to_string()));
        self
    }

    /// Runs `xtask experiments <arguments>` in the scratch folder, checks that it is rejected
    /// cleanly, and returns stderr with the scratch folder replaced by `[CASE]`. The message is
    /// also compared with its snapshot.
    fn rejects(self, arguments: &[&str]) -> String {
        let root = case_root(self.name);
        let stdout_path = root.join("stdout.txt");
        let stderr_path = root.join("stderr.txt");
        let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("experiments")
            .args(arguments)
            .current_dir(&self.folder)
            .env("NO_COLOR", "1")
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(File::create(&stdout_path).unwrap())
            .stderr(File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > TIME_LIMIT {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!(
                    "case {}: `experiments {}` was not rejected within {TIME_LIMIT:?}",
                    self.name,
                    arguments.join(" ")
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stdout = std::fs::read_to_string(&stdout_path).unwrap();
        let stderr = std::fs::read_to_string(&stderr_path).unwrap();
        let context = format!(
            "case {}: `experiments {}`\nstdout:\n{stdout}\nstderr:\n{stderr}",
            self.name,
            arguments.join(" ")
        );
        assert_eq!(status.code(), Some(2), "wrong exit status; {context}");
        assert!(stdout.is_empty(), "something on stdout; {context}");
        assert!(stderr.starts_with("error: "), "no `error:` line; {context}");
        let lowered = stderr.to_lowercase();
        assert!(
            !lowered.contains("panicked") && !lowered.contains("backtrace"),
            "a panic or a backtrace; {context}"
        );
        for output in ["results", "out"] {
            let output = self.folder.join(output);
            assert!(
                !output.join("summary.json").exists() && !output.join("runs").exists(),
                "work started before the input was checked; {context}"
            );
        }
        let normalised = stderr
            .replace(self.folder.to_str().unwrap(), "[CASE]")
            .replace(env!("CARGO_TARGET_TMPDIR"), "[TMP]");
        let mut description = format!("experiments {}", arguments.join(" "));
        for (name, text) in &self.files {
            description.push_str(&format!("\n--- {name}\n{}", text.trim_end()));
        }
        insta::with_settings!({ description => description, omit_expression => true }, {
            insta::assert_snapshot!(self.name, normalised);
        });
        normalised
    }
}

fn case_root(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_errors")
        .join(name)
}

/// A series file named `c7.toml` for series `C7` with `body` after its name; run alone.
fn series_c7(name: &'static str, body: &str) -> String {
    Case::new(name)
        .file("c7.toml", &format!("name = \"C7\"\n{body}"))
        .rejects(&["--series", "C7", "--config", "c7.toml"])
}

// ---------------------------------------------------------------------------------------------
// Probabilities outside [0, 1].

#[test]
fn write_fraction_above_one() {
    let message = series_c7("write_fraction_above_one", "write_fraction = 1.5\n");
    assert_eq!(
        message,
        "error: c7.toml: series C7: write_fraction = 1.5 must be a probability in [0, 1]\n"
    );
}

#[test]
fn ch_bl_eps_zero() {
    let message = series_c7(
        "ch_bl_eps_zero",
        "algorithms = [\"ACH\", \"CH-BL\"]\n[ch_bl]\neps = 0\n",
    );
    assert_eq!(
        message,
        "error: c7.toml: series C7: ch_bl.eps = 0 must be a finite number > 0 (each node serves up to (1 + eps) times its share)\n"
    );
}

#[test]
fn missing_sample_probability_below_zero() {
    series_c7(
        "missing_sample_probability_below_zero",
        "[noise]\np_miss = -0.1\n",
    );
}

#[test]
fn target_load_not_below_one() {
    series_c7("target_load_not_below_one", "[ach]\nell_star = 1.2\n");
}

#[test]
fn total_load_mix_above_one() {
    series_c7("total_load_mix_above_one", "[telemetry]\nalpha = 1.5\n");
}

#[test]
fn smoothing_weight_zero() {
    series_c7("smoothing_weight_zero", "[telemetry]\nbeta = 0.0\n");
}

#[test]
fn composite_weights_all_zero() {
    series_c7(
        "composite_weights_all_zero",
        "[telemetry]\nweights = [0.0, 0.0, 0.0]\n",
    );
}

// ---------------------------------------------------------------------------------------------
// Rates and capacities that are zero or negative.

#[test]
fn request_rate_zero() {
    series_c7(
        "request_rate_zero",
        "[load]\nkind = \"constant\"\nlambda = 0.0\n",
    );
}

#[test]
fn high_request_rate_negative() {
    series_c7(
        "high_request_rate_negative",
        "[load]\nkind = \"step-periodic\"\nlambda = 1000.0\nhigh = -5.0\nstep_at = 100\n\
         periodic_from = 150\namplitude = 0.2\nperiod = 50.0\n",
    );
}

#[test]
fn request_rate_that_would_overflow_the_counts() {
    series_c7(
        "request_rate_that_would_overflow_the_counts",
        "[load]\nkind = \"constant\"\nlambda = 1e13\n",
    );
}

#[test]
fn periodic_amplitude_of_one_stops_the_load() {
    series_c7(
        "periodic_amplitude_of_one_stops_the_load",
        "[load]\nkind = \"step-periodic\"\nlambda = 1000.0\nhigh = 2000.0\nstep_at = 100\n\
         periodic_from = 150\namplitude = 1.0\nperiod = 50.0\n",
    );
}

#[test]
fn service_rate_zero() {
    series_c7("service_rate_zero", "[cluster]\nmu_base = 0.0\n");
}

#[test]
fn cluster_without_nodes() {
    series_c7("cluster_without_nodes", "[cluster]\nclasses = []\n");
}

#[test]
fn unknown_capacity_class() {
    series_c7(
        "unknown_capacity_class",
        "[cluster]\nclasses = [\"strong\", \"huge\"]\n",
    );
}

#[test]
fn step_budget_negative() {
    series_c7("step_budget_negative", "[ach]\nM_max = -0.01\n");
}

#[test]
fn half_saturation_zero() {
    series_c7("half_saturation_zero", "[ach]\nkappa = 0.0\n");
}

#[test]
fn noise_deviation_negative() {
    series_c7("noise_deviation_negative", "[noise]\nsigma = -0.05\n");
}

// ---------------------------------------------------------------------------------------------
// Counts: steps, runs, tokens, keys, horizon.

#[test]
fn steps_zero() {
    series_c7("steps_zero", "steps = 0\n");
}

#[test]
fn steps_negative() {
    series_c7("steps_negative", "steps = -5\n");
}

#[test]
fn runs_zero_in_a_file() {
    series_c7("runs_zero_in_a_file", "runs = 0\n");
}

#[test]
fn seed_stride_zero_repeats_one_seed() {
    series_c7("seed_stride_zero_repeats_one_seed", "seed_stride = 0\n");
}

#[test]
fn warmup_not_below_steps() {
    series_c7("warmup_not_below_steps", "steps = 100\nwarmup = 100\n");
}

#[test]
fn tokens_zero() {
    series_c7("tokens_zero", "tokens = 0\n");
}

#[test]
fn fewer_keys_than_tokens_in_the_paper_profile() {
    series_c7(
        "fewer_keys_than_tokens_in_the_paper_profile",
        "keys = 500\n",
    );
}

#[test]
fn horizon_zero() {
    series_c7("horizon_zero", "[ach]\nH = 0\n");
}

#[test]
fn lag_too_long() {
    series_c7("lag_too_long", "[noise]\nlag = 100000\n");
}

#[test]
fn zipf_exponent_not_a_number() {
    series_c7("zipf_exponent_not_a_number", "zipf_s = nan\n");
}

// ---------------------------------------------------------------------------------------------
// Hysteresis, the load ceiling and the token floor.

#[test]
fn eps_off_above_eps_on() {
    let message = series_c7("eps_off_above_eps_on", "[ach]\neps_off = 0.2\n");
    assert_eq!(
        message,
        "error: c7.toml: series C7: ach.eps_off = 0.2 must be < eps_on = 0.1\n"
    );
}

#[test]
fn eps_off_equal_to_eps_on() {
    series_c7(
        "eps_off_equal_to_eps_on",
        "[ach]\neps_on = 0.05\neps_off = 0.05\n",
    );
}

#[test]
fn tau_below_tau_min() {
    series_c7("tau_below_tau_min", "[ach]\ntau = 0.3\n");
}

#[test]
fn tau_equal_to_tau_min() {
    series_c7("tau_equal_to_tau_min", "[ach]\ntau = 0.5\n");
}

#[test]
fn sweep_point_puts_tau_below_tau_min() {
    series_c7(
        "sweep_point_puts_tau_below_tau_min",
        "[sweep]\ntau = [0.9, 0.4]\n",
    );
}

#[test]
fn sweep_ratio_above_one() {
    series_c7(
        "sweep_ratio_above_one",
        "[sweep]\neps_on = [0.1]\neps_off_ratio = 1.5\n",
    );
}

#[test]
fn v_max_below_v_min() {
    series_c7("v_max_below_v_min", "[ach]\nv_max = 2\n");
}

#[test]
fn v_min_times_nodes_above_tokens() {
    series_c7(
        "v_min_times_nodes_above_tokens",
        "tokens = 20\nkeys = 1000\n",
    );
}

#[test]
fn v_min_counts_the_nodes_that_join() {
    // Ten initial nodes and three joins need 13 * 3 = 39 tokens; 36 are not enough.
    series_c7(
        "v_min_counts_the_nodes_that_join",
        "tokens = 36\n[[churn]]\nt = 100\nadd = [\"weak\", \"weak\", \"weak\"]\n",
    );
}

// ---------------------------------------------------------------------------------------------
// Churn and degradation events.

#[test]
fn churn_removes_a_missing_node() {
    series_c7(
        "churn_removes_a_missing_node",
        "[[churn]]\nt = 10\nremove = [12]\n",
    );
}

#[test]
fn churn_removes_a_node_twice() {
    series_c7(
        "churn_removes_a_node_twice",
        "[[churn]]\nt = 10\nremove = [9]\n\n[[churn]]\nt = 20\nremove = [9]\n",
    );
}

#[test]
fn churn_removes_the_last_node() {
    Case::new("churn_removes_the_last_node")
        .file(
            "c7.toml",
            "name = \"C7\"\ntokens = 100\n[cluster]\nclasses = [\"strong\", \"weak\"]\n\n\
             [[churn]]\nt = 10\nremove = [0, 1]\n",
        )
        .rejects(&[
            "--series",
            "C7",
            "--config",
            "c7.toml",
            "--profile",
            "corrected",
        ]);
}

#[test]
fn churn_removes_node_zero_in_the_paper_profile() {
    series_c7(
        "churn_removes_node_zero_in_the_paper_profile",
        "[[churn]]\nt = 10\nremove = [0]\n",
    );
}

#[test]
fn churn_after_the_last_step() {
    series_c7(
        "churn_after_the_last_step",
        "steps = 500\n[[churn]]\nt = 500\nadd = [\"strong\"]\n",
    );
}

#[test]
fn degradation_factor_zero() {
    series_c7(
        "degradation_factor_zero",
        "[[degradation]]\nt = 10\nnodes = [1]\nfactor = 0.0\n",
    );
}

#[test]
fn degradation_factor_negative() {
    series_c7(
        "degradation_factor_negative",
        "[[degradation]]\nt = 10\nnodes = [1]\nfactor = -0.5\n",
    );
}

#[test]
fn degradation_of_a_removed_node() {
    series_c7(
        "degradation_of_a_removed_node",
        "[[churn]]\nt = 10\nremove = [9]\n\n[[degradation]]\nt = 20\nnodes = [9]\nfactor = 0.5\n",
    );
}

// ---------------------------------------------------------------------------------------------
// Series names and algorithms.

#[test]
fn unknown_series_name() {
    Case::new("unknown_series_name").rejects(&["--series", "C9"]);
}

#[test]
fn empty_series_name() {
    Case::new("empty_series_name").rejects(&["--series", "C1,"]);
}

#[test]
fn series_named_twice() {
    Case::new("series_named_twice").rejects(&["--series", "C1,C3,C1"]);
}

#[test]
fn series_name_that_leaves_the_output_folder() {
    Case::new("series_name_that_leaves_the_output_folder")
        .file("escape.toml", "name = \"../escape\"\nsteps = 200\n")
        .rejects(&["--series", "../escape", "--config", "escape.toml"]);
}

#[test]
fn unknown_algorithm() {
    series_c7("unknown_algorithm", "algorithms = [\"ACH\", \"Magic\"]\n");
}

#[test]
fn series_given_by_two_files() {
    Case::new("series_given_by_two_files")
        .file("first.toml", "name = \"C7\"\nsteps = 200\n")
        .file("second.toml", "name = \"C7\"\nsteps = 300\n")
        .rejects(&[
            "--series",
            "C7",
            "--config",
            "first.toml",
            "--config",
            "second.toml",
        ]);
}

#[test]
fn invalid_file_not_selected_by_series() {
    // Every file given is checked, even one whose series `--series` does not select.
    Case::new("invalid_file_not_selected_by_series")
        .file("c7.toml", "name = \"C7\"\n[ach]\neps_off = 0.2\n")
        .rejects(&["--series", "C1", "--config", "c7.toml", "--runs", "1"]);
}

// ---------------------------------------------------------------------------------------------
// Unreadable or malformed files.

#[test]
fn unknown_top_level_field() {
    series_c7("unknown_top_level_field", "stepz = 200\n");
}

#[test]
fn unknown_nested_field() {
    series_c7("unknown_nested_field", "[ach]\nepsilon_on = 0.1\n");
}

#[test]
fn unknown_field_in_an_event() {
    series_c7(
        "unknown_field_in_an_event",
        "[[degradation]]\nt = 10\nnode = [1]\nfactor = 0.5\n",
    );
}

#[test]
fn unknown_load_kind() {
    series_c7(
        "unknown_load_kind",
        "[load]\nkind = \"sawtooth\"\nlambda = 1000.0\n",
    );
}

#[test]
fn wrong_value_type() {
    series_c7("wrong_value_type", "steps = \"many\"\n");
}

#[test]
fn malformed_toml() {
    series_c7("malformed_toml", "[ach\neps_on = 0.1\n");
}

#[test]
fn file_without_a_name() {
    Case::new("file_without_a_name")
        .file("unnamed.toml", "steps = 200\n")
        .rejects(&["--config", "unnamed.toml"]);
}

#[test]
fn config_file_missing() {
    Case::new("config_file_missing").rejects(&["--series", "C1", "--config", "missing.toml"]);
}

#[test]
fn config_file_is_a_folder() {
    Case::new("config_file_is_a_folder")
        .folder("series")
        .rejects(&["--series", "C1", "--config", "series"]);
}

#[test]
fn config_file_not_utf8() {
    Case::new("config_file_not_utf8")
        .bytes("c7.toml", b"name = \"C7\"\nsteps = \xff\xfe200\n")
        .rejects(&["--series", "C7", "--config", "c7.toml"]);
}

// ---------------------------------------------------------------------------------------------
// Output folders that cannot be written.

#[test]
fn output_folder_is_a_file() {
    Case::new("output_folder_is_a_file")
        .file("taken", "a file, not a folder\n")
        .rejects(&["--series", "C1", "--runs", "1", "--out", "taken"]);
}

#[test]
fn output_folder_below_a_file() {
    Case::new("output_folder_below_a_file")
        .file("taken", "a file, not a folder\n")
        .rejects(&["--series", "C1", "--runs", "1", "--out", "taken/results"]);
}

#[test]
fn output_folder_empty() {
    Case::new("output_folder_empty").rejects(&["--series", "C1", "--runs", "1", "--out", ""]);
}

// ---------------------------------------------------------------------------------------------
// Command-line arguments.

#[test]
fn runs_zero() {
    let message = Case::new("runs_zero").rejects(&["--series", "C1", "--runs", "0"]);
    assert_eq!(message, "error: --runs = 0 must be >= 1\n");
}

#[test]
fn runs_negative() {
    Case::new("runs_negative").rejects(&["--series", "C1", "--runs", "-3"]);
}

#[test]
fn runs_not_a_number() {
    Case::new("runs_not_a_number").rejects(&["--series", "C1", "--runs", "many"]);
}

#[test]
fn threads_zero() {
    Case::new("threads_zero").rejects(&["--series", "C1", "--threads", "0"]);
}

#[test]
fn unknown_profile() {
    Case::new("unknown_profile").rejects(&["--series", "C1", "--profile", "fast"]);
}

#[test]
fn unknown_argument() {
    Case::new("unknown_argument").rejects(&["--serie", "C1"]);
}

#[test]
fn config_without_a_value() {
    Case::new("config_without_a_value").rejects(&["--series", "C1", "--config"]);
}
