//! The errors of the crate and the exit codes of the command.

/// Everything that can go wrong talking to a cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the user: the option, the value and the rule broken.
    #[error("{0}")]
    Input(String),
    /// A node that cannot be reached.
    #[error("cannot reach {address}: {detail}")]
    Unreachable {
        /// `host:port` of the node.
        address: String,
        /// What the connection attempt answered.
        detail: String,
    },
    /// A node that is not in cluster mode.
    #[error(
        "{address} is not in cluster mode (INFO cluster: cluster_enabled:0); \
         ach-redis needs a Redis Cluster node (redis-server --cluster-enabled yes)"
    )]
    NotCluster {
        /// `host:port` of the node.
        address: String,
    },
    /// A node refused the credentials, or wants some and got none (the message names the
    /// user, never the password).
    #[error("{address}: {detail}")]
    Auth {
        /// `host:port` of the node.
        address: String,
        /// What failed and what to do.
        detail: String,
    },
    /// The ACL user lacks the permission for a command the rebalancer needs (`NOPERM`).
    #[error(
        "{address}: user {user:?} may not run {command} (NOPERM: {detail}); give it the \
         rebalancer's ACL rule (docs/redis.md, \"Secured clusters\")"
    )]
    Permission {
        /// `host:port` of the node.
        address: String,
        /// The ACL user.
        user: String,
        /// The command refused.
        command: String,
        /// The server's message.
        detail: String,
    },
    /// The cluster cannot be worked on now: the reasons, one per problem.
    #[error("the cluster is degraded: {}", .0.join("; "))]
    Degraded(Vec<String>),
    /// A command that failed on a node.
    #[error("{address}: {command} failed: {source}")]
    Command {
        /// `host:port` of the node.
        address: String,
        /// The command, without its keys.
        command: String,
        /// The error of the client or the server.
        source: redis::RedisError,
    },
    /// A reply that does not have the documented shape.
    #[error("{address}: unexpected reply to {command}: {detail}")]
    Reply {
        /// `host:port` of the node.
        address: String,
        /// The command.
        command: String,
        /// What is wrong with the reply.
        detail: String,
    },
    /// A file that cannot be written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl Error {
    /// The exit code of the command for this error: 2 for bad input and for a cluster that
    /// cannot be worked on (unreachable, not a cluster, credentials refused, a permission
    /// missing, degraded), 1 for failures while working.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_)
            | Error::Unreachable { .. }
            | Error::NotCluster { .. }
            | Error::Auth { .. }
            | Error::Permission { .. }
            | Error::Degraded(_) => 2,
            Error::Command { .. } | Error::Reply { .. } | Error::File { .. } => 1,
        }
    }
}
