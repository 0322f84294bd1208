//! CPU quotas per process with cgroups: v1 `cpu.cfs_quota_us` under `/sys/fs/cgroup/cpu`, or v2
//! `cpu.max` under `/sys/fs/cgroup`. Every cgroup is made by a [`CpuQuota`] guard that removes
//! it when dropped (after the process in it has been stopped, or moved out if it still runs).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::CgroupError;

/// The period of every quota, in microseconds: short, so that a quota shapes latency at the
/// scale of milliseconds rather than in 100 ms bursts, and long enough that the kernel's
/// smallest quota (1 ms) is a twentieth of a CPU.
pub const PERIOD_US: u64 = 20_000;

/// The smallest quota the kernel accepts (cgroup v1 and v2), in microseconds.
const MIN_QUOTA_US: u64 = 1_000;

/// How CPU quotas can be set on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuLimiter {
    /// cgroup v1: the cpu controller's hierarchy root.
    V1(PathBuf),
    /// cgroup v2: the unified hierarchy's root.
    V2(PathBuf),
    /// Neither works; the reason.
    Unavailable(String),
}

impl CpuLimiter {
    /// Finds the cpu controller: cgroup v1 at `/sys/fs/cgroup/cpu` (or `cpu,cpuacct`), else v2
    /// at `/sys/fs/cgroup` when its `cgroup.controllers` lists `cpu`; checks that a child
    /// cgroup can be made there (needs root).
    pub fn detect() -> CpuLimiter {
        let root = Path::new("/sys/fs/cgroup");
        for v1 in ["cpu", "cpu,cpuacct"] {
            let path = root.join(v1);
            if path.join("cpu.cfs_quota_us").is_file() {
                return probe(CpuLimiter::V1(path));
            }
        }
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers"));
        match controllers {
            Ok(text) if text.split_whitespace().any(|c| c == "cpu") => {
                probe(CpuLimiter::V2(root.to_path_buf()))
            }
            Ok(_) => CpuLimiter::Unavailable(
                "cgroup v2 is mounted at /sys/fs/cgroup but its cpu controller is not enabled"
                    .into(),
            ),
            Err(_) => CpuLimiter::Unavailable(
                "no cgroup cpu controller at /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2)".into(),
            ),
        }
    }

    /// A short name for outputs: `cgroup-v1`, `cgroup-v2` or `none`.
    pub fn name(&self) -> &'static str {
        match self {
            CpuLimiter::V1(_) => "cgroup-v1",
            CpuLimiter::V2(_) => "cgroup-v2",
            CpuLimiter::Unavailable(_) => "none",
        }
    }

    /// Puts process `pid` into a new cgroup `name` limited to `cpus` CPUs (0.25: a quarter of
    /// one core). The guard removes the cgroup when dropped.
    pub fn limit(&self, name: &str, pid: u32, cpus: f64) -> Result<CpuQuota, CgroupError> {
        let quota = ((cpus * PERIOD_US as f64).round() as u64).max(MIN_QUOTA_US);
        let (root, files): (&Path, Vec<(&str, String)>) = match self {
            CpuLimiter::V1(root) => (
                root,
                vec![
                    ("cpu.cfs_period_us", PERIOD_US.to_string()),
                    ("cpu.cfs_quota_us", quota.to_string()),
                ],
            ),
            CpuLimiter::V2(root) => (root, vec![("cpu.max", format!("{quota} {PERIOD_US}"))]),
            CpuLimiter::Unavailable(reason) => {
                return Err(CgroupError::Unavailable(reason.clone()));
            }
        };
        let path = root.join(name);
        std::fs::create_dir(&path).map_err(|source| CgroupError::Create {
            path: path.clone(),
            source,
        })?;
        let guard = CpuQuota {
            path: path.clone(),
            root: root.to_path_buf(),
            pid,
            quota_us: quota,
        };
        for (file, value) in files {
            write(&path.join(file), &value)?;
        }
        write(&path.join("cgroup.procs"), &pid.to_string())?;
        Ok(guard)
    }
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(|source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

/// Makes and removes a throwaway cgroup, to learn whether quotas can be set at all.
fn probe(limiter: CpuLimiter) -> CpuLimiter {
    let root = match &limiter {
        CpuLimiter::V1(root) | CpuLimiter::V2(root) => root.clone(),
        CpuLimiter::Unavailable(_) => return limiter,
    };
    let path = root.join(format!("ach-live-probe-{}", std::process::id()));
    match std::fs::create_dir(&path) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&path);
            limiter
        }
        Err(e) => CpuLimiter::Unavailable(format!(
            "cannot create a cgroup under {} ({e}); run as root",
            root.display()
        )),
    }
}

/// A cgroup holding one process with a CPU quota; removed when dropped.
#[derive(Debug)]
pub struct CpuQuota {
    path: PathBuf,
    root: PathBuf,
    pid: u32,
    quota_us: u64,
}

impl CpuQuota {
    /// The quota in microseconds per [`PERIOD_US`].
    pub fn quota_us(&self) -> u64 {
        self.quota_us
    }

    /// The process in the cgroup.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kernel's throttling counters of the cgroup (`cpu.stat`), `None` when unreadable.
    pub fn throttling(&self) -> Option<Throttling> {
        let text = std::fs::read_to_string(self.path.join("cpu.stat")).ok()?;
        Throttling::parse(&text)
    }
}

/// The CPU throttling counters of a cgroup: periods run, periods in which the quota was used
/// up, and the time spent throttled.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Throttling {
    /// Enforcement periods that elapsed with the process runnable (`nr_periods`).
    pub periods: u64,
    /// Periods in which the quota ran out (`nr_throttled`).
    pub throttled_periods: u64,
    /// Time spent throttled, in milliseconds (v1 `throttled_time` in ns, v2 `throttled_usec`).
    pub throttled_ms: f64,
}

impl Throttling {
    /// Parses `cpu.stat` of cgroup v1 or v2.
    pub fn parse(text: &str) -> Option<Throttling> {
        let field = |name: &str| {
            text.lines().find_map(|line| {
                let (key, value) = line.split_once(' ')?;
                (key == name).then(|| value.trim().parse::<u64>().ok())?
            })
        };
        let throttled_ms = match (field("throttled_time"), field("throttled_usec")) {
            (Some(ns), _) => ns as f64 / 1e6,
            (None, Some(us)) => us as f64 / 1e3,
            (None, None) => return None,
        };
        Some(Throttling {
            periods: field("nr_periods")?,
            throttled_periods: field("nr_throttled")?,
            throttled_ms,
        })
    }

    /// The share of periods throttled.
    pub fn share(&self) -> f64 {
        if self.periods == 0 {
            0.0
        } else {
            self.throttled_periods as f64 / self.periods as f64
        }
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // A process still inside (its server was not stopped first) goes back to the root.
        if let Ok(procs) = std::fs::read_to_string(self.path.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
            }
        }
        // An exiting process leaves its cgroup a moment after its parent reaped it.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        eprintln!(
            "warning: cannot remove cgroup {}; remove it with rmdir",
            self.path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_counters_parse_from_both_versions() {
        let v1 = "nr_periods 200\nnr_throttled 50\nthrottled_time 3000000\nnr_bursts 0\n";
        let t = Throttling::parse(v1).unwrap();
        assert_eq!((t.periods, t.throttled_periods), (200, 50));
        assert_eq!(t.throttled_ms, 3.0);
        assert_eq!(t.share(), 0.25);
        let v2 = "usage_usec 10\nnr_periods 4\nnr_throttled 1\nthrottled_usec 2500\n";
        assert_eq!(Throttling::parse(v2).unwrap().throttled_ms, 2.5);
        assert_eq!(Throttling::parse("usage_usec 1\n"), None);
    }

    #[test]
    fn an_unavailable_limiter_says_why() {
        let limiter = CpuLimiter::Unavailable("no controller".into());
        assert_eq!(limiter.name(), "none");
        let error = limiter.limit("x", 1, 0.5).unwrap_err();
        assert_eq!(error.to_string(), "no controller");
    }
}
