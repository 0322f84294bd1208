//! The Debian packages the tests start: which are missing (`dpkg -s`) and their installation
//! (`apt-get update` once, then `apt-get install -y`, with no daemon started by apt).

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Every Debian package a test starts (add a line to add one).
pub const PACKAGES: &[&str] = &[
    // ach-redis and ach-live: redis-server children and `redis-cli --cluster`.
    "redis-server",
    "redis-tools",
    // xtask's Slurm test: a throwaway controller and node, sbatch and squeue, munge's keys.
    "slurmctld",
    "slurmd",
    "slurm-client",
    "munge",
    // The Prometheus tests: a prometheus child scraping an exporter child.
    "prometheus",
    "prometheus-redis-exporter",
    // ach-redis's TLS test: its CA and certificates, made at run time.
    "openssl",
    // ach-report's LaTeX compile test: pdflatex with booktabs, siunitx and threeparttable,
    // pdftoppm to look at pages, and the font the PDF figures embed.
    "texlive-latex-base",
    "texlive-latex-recommended",
    "texlive-latex-extra",
    "texlive-science",
    "poppler-utils",
    "fonts-dejavu-core",
];

/// Why the packages could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum AptError {
    /// A command could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: &'static str,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// A command exited with an error.
    #[error("`{command}` failed ({status}): {output}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The end of its output.
        output: String,
    },
    /// `/usr/sbin/policy-rc.d` could not be written or removed.
    #[error("{POLICY_RC_D}: {0}")]
    Policy(std::io::Error),
}

/// The names of the packages of [`PACKAGES`] that `dpkg -s` does not report installed (all of
/// them when dpkg cannot run).
pub fn missing_packages() -> Vec<&'static str> {
    PACKAGES
        .iter()
        .copied()
        .filter(|name| !installed(name))
        .collect()
}

fn installed(name: &str) -> bool {
    Command::new("dpkg")
        .args(["-s", name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The file through which Debian's `invoke-rc.d` asks whether it may start a daemon; exit
/// code 101 means no.
const POLICY_RC_D: &str = "/usr/sbin/policy-rc.d";

/// A `policy-rc.d` that forbids starting daemons, created only when none exists and removed
/// when dropped (also when the installation fails).
struct NoDaemons {
    created: bool,
}

impl NoDaemons {
    fn forbid() -> Result<NoDaemons, AptError> {
        let path = Path::new(POLICY_RC_D);
        if path.exists() {
            return Ok(NoDaemons { created: false });
        }
        std::fs::write(path, "#!/bin/sh\nexit 101\n").map_err(AptError::Policy)?;
        let guard = NoDaemons { created: true };
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(AptError::Policy)?;
        Ok(guard)
    }
}

impl Drop for NoDaemons {
    fn drop(&mut self) {
        if self.created {
            let _ = std::fs::remove_file(POLICY_RC_D);
        }
    }
}

/// `apt-get update`, then `apt-get install -y PACKAGES` (non-interactive), with daemons
/// forbidden while apt runs: the tests start their own servers and stop them by PID.
pub fn install(packages: &[&str]) -> Result<(), AptError> {
    let _no_daemons = NoDaemons::forbid()?;
    run_apt(&["update"])?;
    let mut arguments = vec!["install", "-y"];
    arguments.extend_from_slice(packages);
    run_apt(&arguments)
}

fn run_apt(arguments: &[&str]) -> Result<(), AptError> {
    let output: Output = Command::new("apt-get")
        .args(arguments)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| AptError::Spawn {
            program: "apt-get",
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    Err(AptError::Failed {
        command: format!("apt-get {}", arguments.join(" ")),
        status: output.status,
        output: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
    })
}

/// The commands a user runs to install `packages` by hand (`sudo` unless `root`).
pub fn manual_commands(packages: &[&str], root: bool) -> Vec<String> {
    let sudo = if root { "" } else { "sudo " };
    vec![
        format!("{sudo}apt-get update"),
        format!(
            "{sudo}env DEBIAN_FRONTEND=noninteractive apt-get install -y {}",
            packages.join(" ")
        ),
    ]
}
