//! The matrix as a Slurm array job, on a real (throwaway, single-node) Slurm, through the
//! scripts a user copies (`scripts/slurm/`): three tasks of `array.sbatch` run
//! `experiments --shard slurm` into one shared folder, then `merge.sbatch` checks and merges
//! them and runs `experiments` without `--shard`, which runs nothing and writes outputs
//! byte-identical to a one-machine run. (Separate shard folders, and a shard killed and rerun,
//! are covered without Slurm in `crates/ach-report/tests/shards.rs`.)
//!
//! The test starts its own cluster from Debian's packages (slurmctld, slurmd, slurm-client,
//! munge; `.ci/run` installs them): a private munged with its own key and socket, a controller
//! and a node daemon on free loopback ports, every file in a temporary folder. The daemons are
//! child processes, stopped by PID when the test ends, also when it fails. A cluster that
//! cannot start fails the test with the daemons' logs; it never skips.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the daemons get to come up (they need well under a second on an idle machine).
const START_LIMIT: Duration = Duration::from_secs(60);

/// The throwaway cluster: its folder and its daemons, stopped by PID on drop.
struct Cluster {
    folder: PathBuf,
    config: PathBuf,
    daemons: Vec<(&'static str, Child)>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The node daemon first, then the controller, then munge; each by its own PID: SIGTERM
        // (the controller then stops and reaps its script helper), SIGKILL after 5 s.
        for (_, child) in self.daemons.iter_mut().rev() {
            let _ = Command::new("kill")
                .args(["-s", "TERM", &child.id().to_string()])
                .status();
            let start = Instant::now();
            while child.try_wait().ok().flatten().is_none() {
                if start.elapsed() > Duration::from_secs(5) {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

fn require(program: &str) -> PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let path = Path::new(dir).join(program);
        if path.exists() {
            return path;
        }
    }
    panic!(
        "{program} is not installed: this test needs Debian's slurmctld, slurmd, slurm-client \
         and munge (`.ci/run` installs them; by hand: apt-get install -y slurmctld slurmd \
         slurm-client munge)"
    );
}

/// Two distinct free loopback ports (both held open while they are read).
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().expect("an address").port();
    (port(&a), port(&b))
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The configuration of a one-node Slurm cluster on loopback, with its state and logs in
/// `folder`, authenticated by the munged at `socket`, on two free ports.
fn slurm_conf(folder: &Path, socket: &Path) -> String {
    let host = Command::new("hostname")
        .arg("-s")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|h| !h.is_empty())
        .expect("the host name (slurmctld runs only on the host its configuration names)");
    let dir = path_text(folder);
    let (ctld_port, d_port) = free_ports();
    format!(
        "ClusterName=achtest\n\
         SlurmctldHost={host}(127.0.0.1)\n\
         SlurmctldPort={ctld_port}\n\
         SlurmdPort={d_port}\n\
         AuthType=auth/munge\n\
         CredType=cred/munge\n\
         AuthInfo=socket={socket}\n\
         SlurmUser=root\n\
         SlurmdUser=root\n\
         StateSaveLocation={dir}/state\n\
         SlurmdSpoolDir={dir}/spool\n\
         SlurmctldPidFile={dir}/slurmctld.pid\n\
         SlurmdPidFile={dir}/slurmd.pid\n\
         SlurmctldLogFile={dir}/log/slurmctld.log\n\
         SlurmdLogFile={dir}/log/slurmd.log\n\
         ProctrackType=proctrack/linuxproc\n\
         TaskPlugin=task/none\n\
         JobAcctGatherType=jobacct_gather/none\n\
         AccountingStorageType=accounting_storage/none\n\
         JobCompType=jobcomp/none\n\
         MpiDefault=none\n\
         MailProg=/bin/true\n\
         SchedulerType=sched/builtin\n\
         SelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core\n\
         MinJobAge=2\n\
         ReturnToService=2\n\
         KillWait=2\n\
         NodeName=achnode NodeAddr=127.0.0.1 NodeHostname=achnode CPUs=2 State=UNKNOWN\n\
         PartitionName=achq Nodes=achnode Default=YES MaxTime=INFINITE State=UP\n",
        socket = path_text(socket),
    )
}

fn spawn(program: &Path, args: &[&str], log: &Path) -> Child {
    let file = std::fs::File::create(log).expect("a log file");
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log"))
        .stderr(file);
    command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()))
}

impl Cluster {
    /// Starts munged, slurmctld and slurmd; returns when the node is idle.
    fn start() -> Cluster {
        let munged = require("munged");
        let mungekey = require("mungekey");
        let slurmctld = require("slurmctld");
        let slurmd = require("slurmd");
        require("sbatch");
        require("sinfo");
        // Short: the munge socket path must fit in a Unix socket address (108 bytes).
        let folder = std::env::temp_dir().join(format!("ach-slurm-{}", std::process::id()));
        if folder.exists() {
            std::fs::remove_dir_all(&folder).expect("remove an old test folder");
        }
        for sub in ["munge", "state", "spool", "log"] {
            std::fs::create_dir_all(folder.join(sub)).expect("a test folder");
        }
        let mut cluster = Cluster {
            config: folder.join("slurm.conf"),
            folder,
            daemons: Vec::new(),
        };
        let socket = cluster.start_munge(&munged, &mungekey);
        std::fs::write(&cluster.config, slurm_conf(&cluster.folder, &socket)).expect("slurm.conf");
        cluster.start_slurm(&slurmctld, &slurmd);
        cluster
    }

    /// Creates a munge key in the test folder and starts munged on it; returns its socket once
    /// it is there.
    fn start_munge(&mut self, munged: &Path, mungekey: &Path) -> PathBuf {
        let munge = self.folder.join("munge");
        let key = munge.join("munge.key");
        let socket = munge.join("munge.socket");
        let status = Command::new(mungekey)
            .args(["--create", "--force", "--keyfile"])
            .arg(&key)
            .status()
            .expect("mungekey runs");
        assert!(status.success(), "mungekey could not create a key");
        let munged_args = [
            "--foreground".to_string(),
            "--force".to_string(),
            format!("--socket={}", path_text(&socket)),
            format!("--key-file={}", path_text(&key)),
            format!("--pid-file={}", path_text(&munge.join("munged.pid"))),
            format!("--log-file={}", path_text(&munge.join("munged.log"))),
            format!("--seed-file={}", path_text(&munge.join("munged.seed"))),
        ];
        let munged_args: Vec<&str> = munged_args.iter().map(String::as_str).collect();
        let log = self.folder.join("log/munged.out");
        self.daemons
            .push(("munged", spawn(munged, &munged_args, &log)));
        self.wait_for("munged's socket", || socket.exists());
        socket
    }

    /// Starts slurmctld and slurmd on the written configuration; returns when the node is idle.
    fn start_slurm(&mut self, slurmctld: &Path, slurmd: &Path) {
        let conf = path_text(&self.config);
        let log = |name: &str| self.folder.join(format!("log/{name}.out"));
        let (ctld_log, d_log) = (log("slurmctld"), log("slurmd"));
        self.daemons.push((
            "slurmctld",
            spawn(slurmctld, &["-D", "-i", "-f", &conf], &ctld_log),
        ));
        self.daemons.push((
            "slurmd",
            spawn(slurmd, &["-D", "-N", "achnode", "-f", &conf], &d_log),
        ));
        let sinfo_config = self.config.clone();
        self.wait_for("the node to be idle", move || {
            Command::new("sinfo")
                .args(["-h", "-o", "%T"])
                .env("SLURM_CONF", &sinfo_config)
                .stderr(Stdio::null())
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
    }

    /// Waits until `ready`; on timeout, or when a daemon died, fails with every log.
    fn wait_for(&mut self, what: &str, ready: impl Fn() -> bool) {
        let start = Instant::now();
        loop {
            if ready() {
                return;
            }
            let dead: Vec<String> = self
                .daemons
                .iter_mut()
                .filter_map(|(name, child)| {
                    child
                        .try_wait()
                        .ok()
                        .flatten()
                        .map(|s| format!("{name} exited ({s})"))
                })
                .collect();
            if !dead.is_empty() || start.elapsed() > START_LIMIT {
                panic!(
                    "the test's Slurm cluster did not start (waiting for {what}; {}):\n{}",
                    if dead.is_empty() {
                        format!("timed out after {START_LIMIT:?}")
                    } else {
                        dead.join(", ")
                    },
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn logs(&self) -> String {
        let mut text = String::new();
        for entry in std::fs::read_dir(self.folder.join("log"))
            .into_iter()
            .flatten()
        {
            let path = entry.expect("a log").path();
            let body = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = body.lines().rev().take(30).collect();
            text.push_str(&format!("--- {}\n", path.display()));
            for line in tail.into_iter().rev() {
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }
}

/// Runs the xtask binary; panics with its output on failure.
fn xtask(args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("xtask runs");
    assert!(
        output.status.success(),
        "xtask {args:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    ach_report::shard::comparable_files(root).expect("a results folder")
}

#[test]
fn a_slurm_array_of_three_shards_merges_to_the_one_machine_outputs() {
    let cluster = Cluster::start();
    let work = cluster.folder.join("work");
    std::fs::create_dir_all(&work).expect("work folder");
    // A small matrix: a plain series, a noisy one and a two-field grid sweep.
    let grid = work.join("grid.toml");
    std::fs::write(
        &grid,
        "name = \"G\"\nruns = 2\nsteps = 300\nalgorithms = [\"Static-W\", \"ACH\"]\n\
         [sweep]\nmode = \"grid\"\n\"noise.sigma\" = [0.0, 0.1]\n\"ach.eps_on\" = [0.08, 0.12]\n",
    )
    .expect("grid.toml");
    let grid_arg = grid.to_string_lossy().into_owned();
    let matrix = [
        "--series",
        "C1,C4c,G",
        "--runs",
        "2",
        "--config",
        grid_arg.as_str(),
    ];
    // The scripts a user copies: the array of shards into one shared folder, then the merge
    // step, each waited for.
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm");
    let shared = work.join("shared");
    let sbatch = |args: &[&str], script: &str| {
        let output = Command::new("sbatch")
            .arg("--wait")
            .args(args)
            .arg("--chdir")
            .arg(&work)
            .arg(scripts.join(script))
            .args(matrix)
            .env("SLURM_CONF", &cluster.config)
            .env("ACH_BIN", env!("CARGO_BIN_EXE_xtask"))
            .env("ACH_OUT", &shared)
            .output()
            .expect("sbatch runs");
        let logs: String = std::fs::read_dir(&work)
            .expect("work folder")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            output.status.success(),
            "sbatch {script} failed: {}\n{}\n{logs}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            cluster.logs()
        );
        logs
    };
    let task_logs = sbatch(
        &["--array=0-2", "--time=20", "--output=task_%a.log"],
        "array.sbatch",
    );
    for k in 0..3 {
        assert!(
            shared.join(format!("shards/shard-{k}-of-3.json")).exists(),
            "task {k} left no manifest:\n{task_logs}"
        );
    }
    assert!(
        !shared.join("summary.json").exists(),
        "a shard wrote the summary"
    );
    sbatch(&["--time=20", "--output=merge.log"], "merge.sbatch");
    let merged = shared;
    let timing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(merged.join("timing.json")).expect("timing"))
            .expect("timing.json");
    assert_eq!(timing["runs_executed"], 0, "the shards ran every run");

    let one = work.join("one_machine");
    let one_arg = one.to_string_lossy().into_owned();
    let mut single = vec!["experiments", "--threads", "1", "--out", one_arg.as_str()];
    single.extend(matrix);
    xtask(&single);

    let (want, got) = (files(&one), files(&merged));
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&want), names(&got));
    assert!(want.iter().any(|(n, _)| n == "summary.json"));
    assert!(want.iter().any(|(n, _)| n == "REPORT.md"));
    for ((name, a), (_, b)) in want.iter().zip(&got) {
        assert!(a == b, "{name} differs from the one-machine run");
    }
    drop(cluster);
}
