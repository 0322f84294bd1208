//! How the rebalancer proves who it is to a secured cluster: the ACL user and its password
//! ([`Credentials`]) and TLS ([`TlsConfig`]), gathered in [`Security`], built once from the
//! command line and handed to [`crate::cluster::Cluster`], which opens every connection with it.
//!
//! The password never reaches a command line, a message or a log: it is read from the
//! environment variable `REDISCLI_AUTH` (the convention of `redis-cli`) or from a file that
//! only its owner can read, kept in a [`Password`] whose `Debug` is redacted, and only sent to
//! the servers (`AUTH` on every connection, `AUTH2` of `MIGRATE`).

use std::path::{Path, PathBuf};

use crate::error::Error;

/// The environment variable `redis-cli` reads its password from, and so does `ach-redis`.
pub const PASSWORD_VARIABLE: &str = "REDISCLI_AUTH";

/// The user `AUTH` logs in as when none is named (Redis's and Valkey's `default` user).
pub const DEFAULT_USER: &str = "default";

/// The ACL rules of the commands every backend runs: telemetry (`INFO`, `LATENCY
/// HISTOGRAM`), shape and health (`CLUSTER INFO`, `CLUSTER NODES`), keys per slot and the
/// standard migration protocol (`CLUSTER COUNTKEYSINSLOT`, `GETKEYSINSLOT`, `SETSLOT`,
/// `MIGRATE`, which needs `~*`: it reads and deletes the keys it moves; it logs in to the
/// target as the same user and runs `SELECT` and `RESTORE-ASKING` there).
pub const ACL_COMMANDS: &str = "+info +latency|histogram +cluster|info +cluster|nodes \
    +cluster|countkeysinslot +cluster|getkeysinslot +cluster|setslot +migrate +select \
    +restore-asking";

/// What the valkey backend (Valkey >= 9) adds: slot statistics and atomic migration.
/// `--enable-slot-stats` also needs `+config|set`.
pub const ACL_COMMANDS_VALKEY: &str = "+cluster|slot-stats +cluster|migrateslots \
    +cluster|getslotmigrations +cluster|cancelslotmigrations";

/// The least a Valkey 9 `masteruser` needs for atomic slot migration (after `on >PASSWORD`):
/// the source logs in to the target as that user and the target runs `CLUSTER SYNCSLOTS`,
/// `SELECT` and the snapshot's writes as it, ACL-checked (observed on valkey-server 9.1.2).
pub const ATOMIC_MIGRATION_RULE: &str =
    "resetkeys ~* resetchannels -@all +cluster|syncslots +select +@write";

/// The least-privilege ACL rule of the rebalancer's user (everything after `ACL SETUSER NAME`),
/// `password` in clear as `ACL SETUSER` takes it: key access for `MIGRATE` only, no channel,
/// only the commands `ach-redis` runs (with `valkey`, those of the valkey backend too).
pub fn least_privilege_rule(password: &str, valkey: bool) -> String {
    let extra = if valkey {
        format!(" {ACL_COMMANDS_VALKEY}")
    } else {
        String::new()
    };
    format!("on >{password} resetkeys ~* resetchannels -@all {ACL_COMMANDS}{extra}")
}

/// A password. Its `Debug` prints `<redacted>`; it has no `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// Wraps a password.
    pub fn new(text: impl Into<String>) -> Password {
        Password(text.into())
    }

    /// The password itself, for the one place that sends it to a server.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// The ACL user the rebalancer logs in as, and its password (`None`: an open cluster).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The ACL user (`default` unless named).
    pub user: String,
    /// The password; `None` sends no `AUTH`.
    pub password: Option<Password>,
}

impl Default for Credentials {
    /// The `default` user without a password: an open cluster.
    fn default() -> Credentials {
        Credentials {
            user: DEFAULT_USER.to_string(),
            password: None,
        }
    }
}

impl Credentials {
    /// `user` with `password`.
    pub fn new(user: impl Into<String>, password: Option<Password>) -> Credentials {
        Credentials {
            user: user.into(),
            password,
        }
    }

    /// The credentials of the command line: `user`, and the password from `password_file`
    /// when given, otherwise from `$REDISCLI_AUTH` when set and not empty, otherwise none
    /// (an error for a user other than `default`).
    pub fn from_sources(user: &str, password_file: Option<&Path>) -> Result<Credentials, Error> {
        if user.is_empty() || user.chars().any(char::is_whitespace) {
            return Err(Error::Input(format!(
                "--user {user:?}: an ACL user name is not empty and has no spaces"
            )));
        }
        let password = match password_file {
            Some(path) => Some(read_password_file(path)?),
            None => std::env::var(PASSWORD_VARIABLE)
                .ok()
                .filter(|text| !text.is_empty())
                .map(Password::new),
        };
        if password.is_none() && user != DEFAULT_USER {
            return Err(Error::Input(format!(
                "--user {user}: no password (set {PASSWORD_VARIABLE} or --password-file); \
                 without one ach-redis would not log in and run as the default user"
            )));
        }
        Ok(Credentials::new(user, password))
    }

    /// Where the password came from, for messages: never the password itself.
    pub fn describe(&self) -> String {
        match self.password {
            Some(_) => format!("user {:?} with a password", self.user),
            None => format!("user {:?} without a password", self.user),
        }
    }
}

/// Reads a password file: its first line, without the line end. Refuses a file that its group
/// or others may read or write (as `ssh` refuses a private key), naming the file and its mode.
pub fn read_password_file(path: &Path) -> Result<Password, Error> {
    use std::os::unix::fs::PermissionsExt;
    let file_error = |source: std::io::Error| {
        Error::Input(format!(
            "--password-file {}: cannot be read: {source}",
            path.display()
        ))
    };
    let mode = std::fs::metadata(path)
        .map_err(file_error)?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::Input(format!(
            "--password-file {}: mode {mode:04o} lets its group or others read it; make it \
             readable by its owner only (chmod 600 {})",
            path.display(),
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(file_error)?;
    let line = text.lines().next().unwrap_or_default();
    if line.is_empty() {
        return Err(Error::Input(format!(
            "--password-file {}: the first line is empty (the file holds the password on its \
             first line)",
            path.display()
        )));
    }
    Ok(Password::new(line))
}

/// TLS as `redis-cli --tls` takes it: the CA that signed the servers' certificates (the
/// system's trusted roots when `None`) and the client's certificate and key when the servers
/// ask for one (`tls-auth-clients`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// `--cacert`: PEM file of the CA certificates to trust.
    pub ca_cert: Option<PathBuf>,
    /// `--cert`: PEM file of the client certificate.
    pub cert: Option<PathBuf>,
    /// `--key`: PEM file of the client's private key.
    pub key: Option<PathBuf>,
}

/// The files of a [`TlsConfig`], read once.
#[derive(Clone)]
pub(crate) struct TlsFiles {
    certificates: redis::TlsCertificates,
}

impl TlsConfig {
    /// Reads the files: each must exist, and `--cert` and `--key` go together.
    pub(crate) fn load(&self) -> Result<TlsFiles, Error> {
        let read = |option: &str, path: &Path| {
            std::fs::read(path).map_err(|source| {
                Error::Input(format!(
                    "{option} {}: cannot be read: {source}",
                    path.display()
                ))
            })
        };
        let client_tls = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read("--cert", cert)?,
                client_key: read("--key", key)?,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::Input(
                    "--cert and --key go together: give both (the client certificate and its \
                     private key) or neither"
                        .into(),
                ));
            }
        };
        let root_cert = match &self.ca_cert {
            Some(path) => Some(read("--cacert", path)?),
            None => None,
        };
        Ok(TlsFiles {
            certificates: redis::TlsCertificates {
                client_tls,
                root_cert,
            },
        })
    }
}

/// Everything a connection needs to get in: credentials and, when set, TLS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Security {
    /// The user and password.
    pub credentials: Credentials,
    /// TLS; `None`: plain TCP.
    pub tls: Option<TlsConfig>,
}

impl Security {
    /// Gives a `redis-cli` child these credentials and TLS options: the password in
    /// `REDISCLI_AUTH` of its environment (never in its arguments), `--user`, and `--tls`,
    /// `--cacert`, `--cert`, `--key`.
    pub fn apply_to_redis_cli(&self, command: &mut std::process::Command) {
        let credentials = &self.credentials;
        if let Some(password) = &credentials.password {
            command.env(PASSWORD_VARIABLE, password.expose());
            if credentials.user != DEFAULT_USER {
                command.args(["--user", &credentials.user]);
            }
        }
        if let Some(tls) = &self.tls {
            command.arg("--tls");
            for (option, path) in [
                ("--cacert", &tls.ca_cert),
                ("--cert", &tls.cert),
                ("--key", &tls.key),
            ] {
                if let Some(path) = path {
                    command.arg(option).arg(path);
                }
            }
        }
    }

    /// A cluster client (the `redis` crate's, following ASK and MOVED) for the nodes at
    /// `addresses` that logs in and speaks TLS as configured; for the workload clients of the
    /// tests and measurements (the rebalancer itself never uses one).
    pub fn cluster_client_builder(
        &self,
        addresses: &[String],
    ) -> Result<redis::cluster::ClusterClientBuilder, Error> {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        let urls: Vec<String> = addresses
            .iter()
            .map(|address| format!("{scheme}://{address}/"))
            .collect();
        let mut builder = redis::cluster::ClusterClientBuilder::new(urls);
        if let Some(password) = &self.credentials.password {
            builder = builder
                .username(&self.credentials.user)
                .password(password.expose());
        }
        if let Some(tls) = &self.tls {
            builder = builder
                .tls(redis::TlsMode::Secure)
                .certs(tls.load()?.certificates);
        }
        Ok(builder)
    }
}

/// A [`Security`] whose TLS files were read: what opens connections.
#[derive(Clone)]
pub(crate) struct Connector {
    credentials: Credentials,
    tls: Option<TlsFiles>,
}

impl Security {
    /// Reads the TLS files (once, before any connection).
    pub(crate) fn connector(&self) -> Result<Connector, Error> {
        Ok(Connector {
            credentials: self.credentials.clone(),
            tls: self.tls.as_ref().map(TlsConfig::load).transpose()?,
        })
    }
}

impl Connector {
    /// The credentials.
    pub(crate) fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// True when connections use TLS.
    pub(crate) fn uses_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A client for `host:port` that authenticates (and speaks TLS) as configured.
    pub(crate) fn client(&self, address: &str) -> Result<redis::Client, ClientError> {
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host.to_string(), port.parse::<u16>().ok()?)))
            .ok_or_else(|| ClientError::NotHostPort {
                address: address.to_string(),
            })?;
        // No `CLIENT SETINFO` on connecting: the least-privilege user has no permission for
        // it, and Redis >= 7.2 and Valkey would log every refusal in `ACL LOG`.
        let mut settings = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
        if let Some(password) = &self.credentials.password {
            settings = settings
                .set_username(&self.credentials.user)
                .set_password(password.expose());
        }
        let tcp = redis::ConnectionAddr::Tcp(host.clone(), port);
        let tls = redis::ConnectionAddr::TcpTls {
            host,
            port,
            insecure: false,
            tls_params: None,
        };
        let info = |addr: redis::ConnectionAddr| {
            redis::IntoConnectionInfo::into_connection_info(addr)
                .map(|info| info.set_redis_settings(settings.clone()))
        };
        Ok(match &self.tls {
            None => redis::Client::open(info(tcp)?)?,
            Some(files) => redis::Client::build_with_tls(info(tls)?, files.certificates.clone())?,
        })
    }
}

/// Why a client for a node could not be set up (before any connection is tried).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The address is not `HOST:PORT`.
    #[error("{address:?} is not HOST:PORT")]
    NotHostPort {
        /// The address given.
        address: String,
    },
    /// The client refused the settings (a TLS file it cannot use, for example).
    #[error(transparent)]
    Settings(#[from] redis::RedisError),
}

/// The command line's options for a secured cluster, as `redis-cli` names them. No option takes
/// a password: it comes from `$REDISCLI_AUTH` or `--password-file`.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SecurityArgs {
    /// The ACL user to log in as. Its password comes from the environment variable
    /// REDISCLI_AUTH or from --password-file, never from the command line.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_USER)]
    pub user: String,
    /// Read the password from the first line of FILE, which only its owner may read
    /// (chmod 600); instead of REDISCLI_AUTH.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// Connect to every node over TLS.
    #[arg(long)]
    pub tls: bool,
    /// With --tls: the CA certificate (PEM) that signed the servers' certificates (default:
    /// the system's trusted roots).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// With --tls: the client certificate (PEM), for servers that check clients
    /// (tls-auth-clients).
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// With --tls: the client certificate's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
}

impl SecurityArgs {
    /// The [`Security`] these options describe; reads the password.
    pub fn security(&self) -> Result<Security, Error> {
        let credentials = Credentials::from_sources(&self.user, self.password_file.as_deref())?;
        let tls = TlsConfig {
            ca_cert: self.cacert.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
        };
        if !self.tls && tls != TlsConfig::default() {
            return Err(Error::Input(
                "--cacert, --cert and --key need --tls (as with redis-cli)".into(),
            ));
        }
        Ok(Security {
            credentials,
            tls: self.tls.then_some(tls),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_password_never_prints() {
        let credentials = Credentials::new("ach", Some(Password::new("s3cret-pass")));
        let shown = format!("{credentials:?} {}", credentials.describe());
        assert!(!shown.contains("s3cret-pass"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn a_password_file_readable_by_others_is_refused_with_its_mode() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("password");
        std::fs::write(&path, "s3cret-pass\nignored\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = read_password_file(&path).unwrap_err().to_string();
        assert!(error.contains("mode 0644"), "{error}");
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(!error.contains("s3cret"), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(read_password_file(&path).is_err());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_password_file(&path).unwrap().expose(), "s3cret-pass");
    }

    #[test]
    fn an_empty_or_missing_password_file_is_an_error() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("password");
        std::fs::write(&path, "\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(
            read_password_file(&path)
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        let missing = directory.path().join("none");
        assert!(read_password_file(&missing).is_err());
    }

    #[test]
    fn cert_without_key_is_refused() {
        let config = TlsConfig {
            ca_cert: None,
            cert: Some("/nonexistent/cert.pem".into()),
            key: None,
        };
        let error = config.load().err().unwrap().to_string();
        assert!(error.contains("--cert and --key go together"), "{error}");
    }
}
