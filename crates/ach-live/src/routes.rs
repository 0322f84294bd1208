//! How a client's requests find their masters: one slot map per client, shared by the threads
//! that send its requests, and a connection per master in each thread.
//!
//! A client starts with the cluster's slot map (what one `CLUSTER SLOTS` at connect would tell
//! it) and learns each change from the `MOVED` that answers a request sent to a slot's former
//! owner: the slot's new owner is in the reply, so the map is mended for that slot and the
//! request sent again, without asking any server for the whole map. A thread of a cluster
//! client of `redis-rs` asks for the whole map (`CLUSTER SLOTS`, and pings every master) at
//! every `MOVED`; with the slot map of a rebalanced cluster in thousands of ranges that took
//! about 1 ms of a master's cpu a call, and with every sending thread its own client, the
//! weak masters answered over a hundred of them per minute of ACH's migrations
//! (docs/live.md). An `ASK` (the key-by-key protocol's redirection while a slot migrates) sends
//! `ASKING` and the request to the node it names, once, and leaves the map as it is.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::{Cmd, Connection, ErrorKind, FromRedisValue, RedisError, RedisResult, RetryMethod};

/// How many times a request is sent again after a redirection or a transient error.
pub const RETRIES: u32 = 16;

/// How long connecting to a master may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client's slot map, shared by its sending threads.
#[derive(Debug)]
pub struct ClientRoutes {
    /// Every master's `host:port` the client knows, in the order it learned them.
    addresses: RwLock<Vec<String>>,
    /// The index in `addresses` of every slot's owner.
    owners: Vec<AtomicU16>,
}

impl ClientRoutes {
    /// The slot map of a cluster whose masters are `addresses` and whose slot `s` is owned by
    /// `owners[s]` (an index into `addresses`; a slot without an owner is sent to the first).
    pub fn new(addresses: Vec<String>, owners: &[Option<usize>]) -> ClientRoutes {
        ClientRoutes {
            owners: owners
                .iter()
                .map(|owner| AtomicU16::new(owner.unwrap_or(0) as u16))
                .collect(),
            addresses: RwLock::new(addresses),
        }
    }

    /// The master the client sends `slot`'s requests to.
    pub fn owner(&self, slot: u16) -> String {
        let index = self.owners[usize::from(slot)].load(Ordering::Relaxed);
        let addresses = self.addresses.read().unwrap_or_else(|e| e.into_inner());
        addresses[usize::from(index)].clone()
    }

    /// Records that `address` owns `slot` (a `MOVED` said so).
    pub fn learn(&self, slot: u16, address: &str) {
        let known = {
            let addresses = self.addresses.read().unwrap_or_else(|e| e.into_inner());
            addresses.iter().position(|a| a == address)
        };
        let index = known.unwrap_or_else(|| {
            let mut addresses = self.addresses.write().unwrap_or_else(|e| e.into_inner());
            // Another thread may have added it in between.
            addresses
                .iter()
                .position(|a| a == address)
                .unwrap_or_else(|| {
                    addresses.push(address.to_string());
                    addresses.len() - 1
                })
        });
        if let Some(owner) = self.owners.get(usize::from(slot)) {
            owner.store(index as u16, Ordering::Relaxed);
        }
    }
}

/// One sending thread's connections, routed by its client's slot map.
pub struct SlotConnections {
    routes: Arc<ClientRoutes>,
    connections: HashMap<String, Connection>,
}

impl SlotConnections {
    /// No connection yet: each master is connected to when first needed.
    pub fn new(routes: Arc<ClientRoutes>) -> SlotConnections {
        SlotConnections {
            routes,
            connections: HashMap::new(),
        }
    }

    /// Sends `command`, whose keys are in `slot`, to the slot's owner, following redirections
    /// and retrying transient errors up to [`RETRIES`] times.
    pub fn query<T: FromRedisValue>(&mut self, slot: u16, command: &Cmd) -> RedisResult<T> {
        let mut address = self.routes.owner(slot);
        let mut asking = false;
        let mut attempt = 0;
        loop {
            let result = self.send(&address, command, asking);
            asking = false;
            let error = match result {
                Ok(value) => return Ok(value),
                Err(error) if attempt >= RETRIES => return Err(error),
                Err(error) => error,
            };
            attempt += 1;
            match error.retry_method() {
                RetryMethod::MovedRedirect => {
                    let (node, moved_slot) = redirection(&error)?;
                    self.routes.learn(moved_slot, &node);
                    address = node;
                }
                RetryMethod::AskRedirect => {
                    address = redirection(&error)?.0;
                    asking = true;
                }
                RetryMethod::WaitAndRetry => {
                    std::thread::sleep(Duration::from_millis(10 << attempt.min(4)));
                }
                RetryMethod::RetryImmediately => {}
                RetryMethod::Reconnect | RetryMethod::ReconnectFromInitialConnections => {
                    self.connections.remove(&address);
                    address = self.routes.owner(slot);
                }
                // `NoRetry`, and any way to retry a later redis-rs may add.
                _ => return Err(error),
            }
        }
    }

    /// One attempt at `address` (after `ASKING` when `asking`).
    fn send<T: FromRedisValue>(
        &mut self,
        address: &str,
        command: &Cmd,
        asking: bool,
    ) -> RedisResult<T> {
        if !self.connections.contains_key(address) {
            let client = redis::Client::open(format!("redis://{address}/"))?;
            let connection = client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
            self.connections.insert(address.to_string(), connection);
        }
        let connection = self
            .connections
            .get_mut(address)
            .expect("connected just above");
        let result = if asking {
            redis::cmd("ASKING")
                .query::<()>(connection)
                .and_then(|()| command.query(connection))
        } else {
            command.query(connection)
        };
        if result
            .as_ref()
            .is_err_and(|e| e.is_io_error() || e.is_connection_dropped() || e.is_timeout())
        {
            self.connections.remove(address);
        }
        result
    }
}

/// The node (`host:port`) and slot of a `MOVED` or `ASK` reply.
fn redirection(error: &RedisError) -> RedisResult<(String, u16)> {
    error
        .redirect_node()
        .map(|(node, slot)| (node.to_string(), slot))
        .ok_or_else(|| {
            RedisError::from((
                ErrorKind::Client,
                "a redirection without its node",
                error.to_string(),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_slot_is_sent_to_its_new_owner_by_every_thread_of_the_client() {
        let routes = ClientRoutes::new(
            vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            &[Some(0), Some(1), None],
        );
        assert_eq!(routes.owner(0), "127.0.0.1:1");
        assert_eq!(routes.owner(1), "127.0.0.1:2");
        assert_eq!(
            routes.owner(2),
            "127.0.0.1:1",
            "an unowned slot goes to the first"
        );
        routes.learn(0, "127.0.0.1:2");
        assert_eq!(routes.owner(0), "127.0.0.1:2");
        // A master the client did not know is added once.
        routes.learn(1, "127.0.0.1:3");
        routes.learn(2, "127.0.0.1:3");
        assert_eq!(
            (routes.owner(1), routes.owner(2)),
            ("127.0.0.1:3".into(), "127.0.0.1:3".into())
        );
        assert_eq!(routes.addresses.read().unwrap().len(), 3);
        // A slot past the map is ignored rather than a panic.
        routes.learn(9, "127.0.0.1:1");
    }

    #[test]
    fn a_redirection_names_its_node_and_slot() {
        let reply = |text: &[u8]| {
            redis::parse_redis_value(text)
                .unwrap()
                .extract_error()
                .unwrap_err()
        };
        let moved = reply(b"-MOVED 3999 127.0.0.1:6381\r\n");
        assert!(matches!(moved.retry_method(), RetryMethod::MovedRedirect));
        assert_eq!(
            redirection(&moved).unwrap(),
            ("127.0.0.1:6381".into(), 3999)
        );
        let ask = reply(b"-ASK 12 127.0.0.1:6382\r\n");
        assert!(matches!(ask.retry_method(), RetryMethod::AskRedirect));
        assert_eq!(redirection(&ask).unwrap(), ("127.0.0.1:6382".into(), 12));
        assert!(redirection(&RedisError::from((ErrorKind::Client, "other"))).is_err());
    }
}
