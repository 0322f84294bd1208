//! The published simulation (a checkout of Kronv3rk/ach-experiment, run by Python with numpy
//! and pyyaml), timed on C1 beside ours for the ratio `cargo xtask bench-run` gives. It is run
//! by hand, never in CI: the project does not depend on it.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// The Python program that loads C1's configuration of the published simulation at `argv[1]`
/// and, when `argv[2]` is `run`, times one C1 run (seed 42, run 0) in CPU seconds of its
/// process (`time.process_time`), configuration loading excluded; with `check` it prints
/// `ready` instead, having imported everything a run needs.
const SCRIPT: &str = r#"
import sys, os, time
root, mode = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
sys.path.insert(0, os.path.join(root, "scripts"))
from run_series import _load_config
from src.experiment import run_experiment
cfg = _load_config("C1", os.path.join(root, "configs"))
if mode == "check":
    print("ready")
else:
    start = time.process_time()
    run_experiment(cfg, seed=42)
    print(time.process_time() - start)
"#;

/// Why the published simulation cannot be run or timed.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// The folder is not a checkout of the published simulation.
    #[error(
        "{dir}: no src/experiment.py there (a checkout of Kronv3rk/ach-experiment is expected)"
    )]
    NotACheckout {
        /// The folder given.
        dir: PathBuf,
    },
    /// Python could not be started.
    #[error("cannot start {python}: {source}")]
    CannotStart {
        /// The Python named.
        python: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// Python ran and failed (a module missing, the checkout broken).
    #[error("the published simulation at {dir} failed ({status}): {stderr}")]
    Failed {
        /// The checkout.
        dir: PathBuf,
        /// How Python ended.
        status: ExitStatus,
        /// What it wrote to its standard error, trimmed.
        stderr: String,
    },
    /// Python ran and printed something else than expected.
    #[error("unexpected output of the published simulation at {dir}: {output:?}")]
    UnexpectedOutput {
        /// The checkout.
        dir: PathBuf,
        /// What it printed.
        output: String,
    },
}

/// A checkout of the published simulation that Python can run (see [`open`]).
///
/// [`open`]: PublishedSimulation::open
#[derive(Clone, Debug)]
pub struct PublishedSimulation {
    dir: PathBuf,
    python: String,
}

impl PublishedSimulation {
    /// The checkout at `dir`, run by `python` (`python3` where the user names none). Checks,
    /// before anything is measured, that `dir` is a checkout and that `python` imports it and
    /// loads C1's configuration: a missing numpy or pyyaml is reported here, not after a long
    /// profile.
    pub fn open(dir: &Path, python: &str) -> Result<PublishedSimulation, ReferenceError> {
        if !dir.join("src").join("experiment.py").is_file() {
            return Err(ReferenceError::NotACheckout {
                dir: dir.to_path_buf(),
            });
        }
        let simulation = PublishedSimulation {
            dir: dir.to_path_buf(),
            python: python.to_string(),
        };
        let output = simulation.last_line("check")?;
        if output != "ready" {
            return Err(simulation.unexpected(output));
        }
        Ok(simulation)
    }

    /// CPU seconds of one C1 run (seed 42), configuration loading excluded.
    pub fn c1_cpu_seconds(&self) -> Result<f64, ReferenceError> {
        let output = self.last_line("run")?;
        output
            .parse::<f64>()
            .map_err(|_| self.unexpected(output.clone()))
    }

    /// Runs [`SCRIPT`] in `mode` and returns the last line it printed.
    fn last_line(&self, mode: &str) -> Result<String, ReferenceError> {
        let output = Command::new(&self.python)
            .arg("-c")
            .arg(SCRIPT)
            .arg(&self.dir)
            .arg(mode)
            .output()
            .map_err(|source| ReferenceError::CannotStart {
                python: self.python.clone(),
                source,
            })?;
        if !output.status.success() {
            return Err(ReferenceError::Failed {
                dir: self.dir.clone(),
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        let text = String::from_utf8_lossy(&output.stdout);
        Ok(text.trim().lines().last().unwrap_or("").trim().to_string())
    }

    fn unexpected(&self, output: String) -> ReferenceError {
        ReferenceError::UnexpectedOutput {
            dir: self.dir.clone(),
            output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_without_the_simulation_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("ach-reference-none-{}", std::process::id()));
        let error = PublishedSimulation::open(&dir, "python3").unwrap_err();
        assert!(matches!(&error, ReferenceError::NotACheckout { dir: d } if *d == dir));
        assert!(error.to_string().contains("no src/experiment.py"));
    }

    #[test]
    fn a_python_that_cannot_start_is_named() {
        let dir = std::env::temp_dir().join(format!("ach-reference-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src").join("experiment.py"), "").unwrap();
        let error = PublishedSimulation::open(&dir, "/nonexistent/python3").unwrap_err();
        let broken = PublishedSimulation::open(&dir, "python3");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            matches!(&error, ReferenceError::CannotStart { python, .. } if python == "/nonexistent/python3"),
            "{error}"
        );
        // A checkout without its modules fails in Python (or, without a `python3`, to start).
        let error = broken.unwrap_err();
        assert!(
            matches!(
                error,
                ReferenceError::Failed { .. } | ReferenceError::CannotStart { .. }
            ),
            "{error}"
        );
    }
}
