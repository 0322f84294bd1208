//! The seeded request sequence and the client threads that send it.
//!
//! Client `c` owns the keys `i` with `i % clients == c` (so the last value written to a key is
//! known without coordination) and draws its requests from its own stream seeded by
//! `(seed, c)`: Zipf key popularity over its keys, a write with the paper's probability 0.3,
//! and during the hot-key phase a share of requests on a few hot keys that all live in one
//! node's initial slot range. Request `j` of a client is due at a fixed time (the base rate
//! until the load step, then the stepped rate), and its phase follows from that due time, so
//! every arm sends the same sequence; a client that falls behind sends as fast as it can.
//!
//! A client's requests are sent by several threads ([`SenderShare`]), each for a fixed part of
//! its keys: a request that waits on a slow master then holds up that part only, not the whole
//! client's schedule, and the requests of one key still go out in order (freshness holds).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use ach_sim::keys::KeyTable;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_pcg::Pcg64;

use crate::routes::{ClientRoutes, SlotConnections};

/// The shape of the workload.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WorkloadConfig {
    /// Keys `k:0` to `k:{keys-1}`.
    pub keys: usize,
    /// Client threads.
    pub clients: usize,
    /// Requests per second of all clients together before the load step.
    pub rate: f64,
    /// How long the clients send, in seconds.
    pub duration_s: f64,
    /// Seed of the request streams.
    pub seed: u64,
    /// Zipf exponent of key popularity (C3: 1.0).
    pub zipf_s: f64,
    /// Probability that a request is a write (the paper: 0.3).
    pub write_fraction: f64,
    /// The hot-key phase, as fractions of the duration `[from, to)`.
    pub hot_phase: (f64, f64),
    /// Share of requests that go to the hot keys during the hot phase.
    pub hot_share: f64,
    /// Number of hot keys.
    pub hot_keys: usize,
    /// The load step: from this fraction of the duration on, the rate is multiplied by
    /// `step_factor` (C2: 3200 / 1437.5).
    pub step_at: f64,
    /// Rate factor after the load step.
    pub step_factor: f64,
}

/// Name of key `i`.
pub fn key_name(i: usize) -> String {
    format!("k:{i}")
}

/// Value of key `i` written by its client as its `version`-th write (0: the initial load).
pub fn value(i: usize, version: u64) -> String {
    format!("{i}:{version}:{}", "x".repeat(64))
}

/// Keys loaded per pipeline: each pipeline of [`initial_load`] writes at most this many.
pub(crate) const LOAD_BATCH: usize = 1000;

/// A pipeline writing version 0 of `keys` (the initial load), its replies ignored; give it
/// at most [`LOAD_BATCH`] keys.
pub(crate) fn initial_load(keys: &[usize]) -> redis::Pipeline {
    let mut pipeline = redis::pipe();
    for &i in keys {
        pipeline
            .cmd("SET")
            .arg(key_name(i))
            .arg(value(i, 0))
            .ignore();
    }
    pipeline
}

/// One request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Key index.
    pub key: usize,
    /// True for a write.
    pub write: bool,
}

impl WorkloadConfig {
    /// The time request `j` of one client is due, in seconds from the start.
    pub fn due(&self, j: u64) -> f64 {
        let rate = self.rate / self.clients as f64;
        let step_time = self.step_at * self.duration_s;
        let before = rate * step_time;
        let j = j as f64;
        if j < before {
            j / rate
        } else {
            step_time + (j - before) / (rate * self.step_factor)
        }
    }

    /// The hot keys: the first `hot_keys` keys whose slot is in `range` (inclusive).
    pub fn hot_keys_in(&self, range: (u16, u16)) -> Vec<usize> {
        (0..self.keys)
            .filter(|&i| {
                let slot = ach_redis::slot::key_slot(key_name(i).as_bytes());
                slot >= range.0 && slot <= range.1
            })
            .take(self.hot_keys)
            .collect()
    }

    /// How many keys client `client` owns (the keys `i` with `i % clients == client`).
    fn own_keys(&self, client: usize) -> usize {
        (self.keys + self.clients - 1 - client) / self.clients
    }

    /// The workload as the simulator's key table, one token per slot: every key's slot, and
    /// its share of the requests outside and during the hot-key phase, `hot` being the hot
    /// keys. These are the shares the streams draw from: client `c` sends `1 / clients` of the
    /// requests, Zipf over its own keys by rank (key `c + r * clients` has rank `r + 1`), and
    /// in the phase `hot_share` of them to its own hot keys evenly (none if it owns none).
    pub fn key_table(&self, hot: &[usize]) -> KeyTable {
        let s = self.zipf_s.max(1e-9);
        let zipf_total: Vec<f64> = (0..self.clients)
            .map(|c| (1..=self.own_keys(c)).map(|r| (r as f64).powf(-s)).sum())
            .collect();
        let hot_of_client = |c: usize| hot.iter().filter(|&&k| k % self.clients == c).count();
        let hot_count: Vec<usize> = (0..self.clients).map(hot_of_client).collect();
        let client_share = 1.0 / self.clients as f64;
        let mut weights = Vec::with_capacity(self.keys);
        let mut hot_weights = Vec::with_capacity(self.keys);
        for key in 0..self.keys {
            let client = key % self.clients;
            let rank = (key / self.clients + 1) as f64;
            let zipf = client_share * rank.powf(-s) / zipf_total[client];
            weights.push(zipf);
            hot_weights.push(match hot_count[client] {
                0 => zipf,
                count => {
                    let on_hot = if hot.contains(&key) {
                        client_share * self.hot_share / count as f64
                    } else {
                        0.0
                    };
                    (1.0 - self.hot_share) * zipf + on_hot
                }
            });
        }
        KeyTable {
            tokens: (0..self.keys)
                .map(|i| u32::from(ach_redis::slot::key_slot(key_name(i).as_bytes())))
                .collect(),
            weights,
            hot_weights: Some(hot_weights),
        }
    }

    /// The request stream of client `client`.
    pub fn stream(&self, client: usize, hot: &[usize]) -> RequestStream {
        let own = self.own_keys(client);
        let mine_hot: Vec<usize> = hot
            .iter()
            .copied()
            .filter(|k| k % self.clients == client)
            .collect();
        RequestStream {
            rng: Pcg64::seed_from_u64(
                self.seed ^ (client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            zipf: Zipf::new(own.max(1) as f64, self.zipf_s.max(1e-9)).expect("n >= 1, s > 0"),
            client,
            clients: self.clients,
            own,
            hot: mine_hot,
            config: self.clone(),
            next: 0,
        }
    }
}

/// The requests of one client, in order.
pub struct RequestStream {
    rng: Pcg64,
    zipf: Zipf<f64>,
    client: usize,
    clients: usize,
    own: usize,
    hot: Vec<usize>,
    config: WorkloadConfig,
    next: u64,
}

impl Iterator for RequestStream {
    /// `(due time in seconds, request)`.
    type Item = (f64, Request);

    fn next(&mut self) -> Option<(f64, Request)> {
        let due = self.config.due(self.next);
        self.next += 1;
        if due >= self.config.duration_s || self.own == 0 {
            return None;
        }
        let phase = due / self.config.duration_s;
        let in_hot = phase >= self.config.hot_phase.0 && phase < self.config.hot_phase.1;
        // Every draw happens whatever the branch, so the stream does not depend on the phase
        // boundaries beyond the request's own choice.
        let hot_draw: f64 = self.rng.random();
        let hot_pick = self.rng.random_range(0..self.hot.len().max(1));
        let rank = (self.zipf.sample(&mut self.rng) as usize).clamp(1, self.own) - 1;
        let write = self.rng.random::<f64>() < self.config.write_fraction;
        let key = if in_hot && !self.hot.is_empty() && hot_draw < self.config.hot_share {
            self.hot[hot_pick]
        } else {
            self.client + rank * self.clients
        };
        Some((due, Request { key, write }))
    }
}

/// What one client saw.
#[derive(Debug, Default)]
pub struct ClientReport {
    /// Requests answered.
    pub requests: u64,
    /// Requests that failed, and a few messages.
    pub errors: u64,
    /// The first error messages.
    pub error_samples: Vec<String>,
    /// Reads that returned another value than the last one written.
    pub stale_reads: u64,
    /// Last version written per key this thread wrote, by key index (a write that failed
    /// counts when a read afterwards finds its value).
    pub versions: Vec<(usize, u64)>,
    /// `(step, node, latency in microseconds)` of every answered request.
    pub latencies: Vec<(u32, u8, f32)>,
    /// Errors per step.
    pub errors_per_step: Vec<u32>,
    /// Requests sent more than one step after their due time.
    pub late: u64,
}

/// Which of a client's requests one sending thread sends: those of the client's keys whose
/// index among them, `key / clients`, is `index` modulo `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderShare {
    /// This thread's part, `0..count`.
    pub index: usize,
    /// The threads that send one client's requests.
    pub count: usize,
}

impl SenderShare {
    /// Whether this thread sends the requests of `key` (a key of the thread's client).
    pub fn sends(&self, key: usize, clients: usize) -> bool {
        (key / clients) % self.count == self.index
    }
}

/// Shared state between the clients and the monitor.
pub struct Shared {
    /// Set to stop the clients.
    pub stop: AtomicBool,
    /// Owner (node index) of every slot, refreshed by the monitor each step.
    pub owners: Vec<AtomicU8>,
    /// When the workload started.
    pub started: Instant,
    /// Step length.
    pub interval: Duration,
}

/// Sends `share` of client `client`'s requests until its stream ends or `shared.stop` is set,
/// each to its slot's owner as the client's `routes` know it.
pub fn run_client(
    config: &WorkloadConfig,
    client: usize,
    share: SenderShare,
    hot: &[usize],
    routes: Arc<ClientRoutes>,
    shared: Arc<Shared>,
) -> ClientReport {
    let mut report = ClientReport::default();
    let mut sender = Sender {
        connection: SlotConnections::new(routes),
        versions: HashMap::new(),
    };
    let mine = config
        .stream(client, hot)
        .filter(|(_, request)| share.sends(request.key, config.clients));
    for (due, request) in mine {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let due = shared.started + Duration::from_secs_f64(due);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let name = key_name(request.key);
        let slot = ach_redis::slot::key_slot(name.as_bytes());
        let node = shared.owners[usize::from(slot)].load(Ordering::Relaxed);
        let sent = Instant::now();
        if sent > due + shared.interval {
            report.late += 1;
        }
        let step = (sent.duration_since(shared.started).as_secs_f64()
            / shared.interval.as_secs_f64()) as u32;
        let version = sender.version(request.key);
        let outcome = sender.send(request, version, &name, slot);
        let micros = sent.elapsed().as_secs_f64() * 1e6;
        match outcome {
            Ok(fresh) => report.answered(fresh, (step, node, micros as f32), || {
                format!("GET {name}: not version {version}")
            }),
            Err(error) => {
                let command = if request.write { "SET" } else { "GET" };
                report.failed(step, || format!("{command} {name}: {error}"));
                if request.write {
                    sender.learn_whether_written(request.key, &name, slot);
                }
            }
        }
    }
    report.versions = sender.versions.into_iter().collect();
    report
}

/// How many error messages a client's report keeps.
const ERROR_SAMPLES: usize = 5;

impl ClientReport {
    /// Counts an answered request and its `(step, node, latency in microseconds)`; a read that
    /// was not `fresh` is a stale read, and the first few are described by `sample`.
    fn answered(&mut self, fresh: bool, latency: (u32, u8, f32), sample: impl FnOnce() -> String) {
        self.requests += 1;
        if !fresh {
            self.stale_reads += 1;
            if self.error_samples.len() < ERROR_SAMPLES {
                self.error_samples.push(sample());
            }
        }
        self.latencies.push(latency);
    }

    /// Counts a request that failed in `step`; the first few failures are described by
    /// `sample`.
    fn failed(&mut self, step: u32, sample: impl FnOnce() -> String) {
        self.errors += 1;
        let step = step as usize;
        if self.errors_per_step.len() <= step {
            self.errors_per_step.resize(step + 1, 0);
        }
        self.errors_per_step[step] += 1;
        if self.error_samples.len() < ERROR_SAMPLES {
            self.error_samples.push(sample());
        }
    }
}

/// One sending thread's connections and the version it last wrote of each key.
struct Sender {
    connection: SlotConnections,
    versions: HashMap<usize, u64>,
}

impl Sender {
    /// The version of `key` this thread wrote last (0, the initial load's, before any).
    fn version(&self, key: usize) -> u64 {
        self.versions.get(&key).copied().unwrap_or(0)
    }

    /// Sends `request` for the key `name` of `slot`, whose version written last is `version`:
    /// a write of the next version, or a read that answers whether it returned `version`.
    fn send(
        &mut self,
        request: Request,
        version: u64,
        name: &str,
        slot: u16,
    ) -> Result<bool, redis::RedisError> {
        if request.write {
            let text = value(request.key, version + 1);
            self.connection
                .query::<()>(slot, redis::cmd("SET").arg(name).arg(&text))
                .map(|()| {
                    self.versions.insert(request.key, version + 1);
                    true
                })
        } else {
            self.connection
                .query::<Option<String>>(slot, redis::cmd("GET").arg(name))
                .map(|got| got.as_deref() == Some(value(request.key, version).as_str()))
        }
    }

    /// After a write of `key` failed, which may or may not have happened: reads the key, and
    /// counts the write when the value is the one it wrote.
    fn learn_whether_written(&mut self, key: usize, name: &str, slot: u16) {
        let version = self.version(key);
        let attempted = value(key, version + 1);
        if let Ok(Some(now)) = self
            .connection
            .query::<Option<String>>(slot, redis::cmd("GET").arg(name))
            && now == attempted
        {
            self.versions.insert(key, version + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> WorkloadConfig {
        WorkloadConfig {
            keys: 1000,
            clients: 3,
            rate: 300.0,
            duration_s: 10.0,
            seed: 7,
            zipf_s: 1.0,
            write_fraction: 0.3,
            hot_phase: (0.3, 0.6),
            hot_share: 0.3,
            hot_keys: 6,
            step_at: 0.5,
            step_factor: 2.0,
        }
    }

    #[test]
    fn the_sequence_is_a_function_of_the_seed() {
        let config = config();
        let hot = config.hot_keys_in((0, 5000));
        assert_eq!(hot.len(), 6);
        let a: Vec<_> = config.stream(1, &hot).collect();
        let b: Vec<_> = config.stream(1, &hot).collect();
        assert_eq!(a, b);
        let other = WorkloadConfig {
            seed: 8,
            ..config.clone()
        };
        let c: Vec<_> = other.stream(1, &hot).collect();
        assert_ne!(a, c);
        // Client 1 owns keys 1, 4, 7, ... only.
        assert!(a.iter().all(|(_, r)| r.key % 3 == 1));
    }

    #[test]
    fn the_senders_of_a_client_split_its_requests_by_key() {
        let config = config();
        let hot = config.hot_keys_in((0, 5000));
        let count = 4;
        for client in 0..config.clients {
            let stream: Vec<_> = config.stream(client, &hot).collect();
            let shares: Vec<SenderShare> = (0..count)
                .map(|index| SenderShare { index, count })
                .collect();
            let mut sent: Vec<&(f64, Request)> = Vec::new();
            for share in &shares {
                let part: Vec<_> = stream
                    .iter()
                    .filter(|(_, r)| share.sends(r.key, config.clients))
                    .collect();
                assert!(
                    !part.is_empty(),
                    "client {client}, sender {}: no request",
                    share.index
                );
                sent.extend(part);
            }
            // Every request is sent by exactly one thread, and a key's requests by one only.
            assert_eq!(sent.len(), stream.len());
            for (_, request) in &stream {
                let senders = shares
                    .iter()
                    .filter(|share| share.sends(request.key, config.clients))
                    .count();
                assert_eq!(senders, 1, "key {}", request.key);
            }
        }
    }

    #[test]
    fn the_load_step_doubles_the_rate_and_the_mix_is_the_papers() {
        let config = config();
        let requests: Vec<_> = config.stream(0, &[]).collect();
        let before = requests.iter().filter(|(t, _)| *t < 5.0).count();
        let after = requests.len() - before;
        assert_eq!(before, 500);
        assert_eq!(after, 1000);
        let writes = requests.iter().filter(|(_, r)| r.write).count() as f64;
        let share = writes / requests.len() as f64;
        assert!((share - 0.3).abs() < 0.05, "write share {share}");
    }

    #[test]
    fn hot_keys_take_their_share_only_in_the_hot_phase() {
        let config = config();
        let hot = config.hot_keys_in((0, 16383));
        let requests: Vec<_> = config.stream(0, &hot).collect();
        let hot_in = |from: f64, to: f64| {
            let window: Vec<_> = requests
                .iter()
                .filter(|(t, _)| *t >= from && *t < to)
                .collect();
            window.iter().filter(|(_, r)| hot.contains(&r.key)).count() as f64 / window.len() as f64
        };
        // The hot keys include client 0's most popular Zipf keys, so they get some share
        // outside the phase too; the phase adds about `hot_share` on top.
        assert!(hot_in(3.0, 6.0) > hot_in(6.0, 10.0) + 0.2);
    }

    #[test]
    fn the_key_table_gives_the_shares_the_streams_draw() {
        let config = WorkloadConfig {
            duration_s: 400.0,
            ..config()
        };
        let hot = config.hot_keys_in((0, 5000));
        let table = config.key_table(&hot);
        assert_eq!(table.tokens.len(), config.keys);
        assert_eq!(
            table.tokens[0],
            u32::from(ach_redis::slot::key_slot(b"k:0"))
        );
        let hot_weights = table.hot_weights.as_ref().unwrap();
        for weights in [&table.weights, hot_weights] {
            assert!((weights.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        // Every request of every client, counted per key inside and outside the hot phase.
        let (from, to) = (0.3 * 400.0, 0.6 * 400.0);
        let mut outside = vec![0u64; config.keys];
        let mut inside = vec![0u64; config.keys];
        for client in 0..config.clients {
            for (due, request) in config.stream(client, &hot) {
                let counts = if (from..to).contains(&due) {
                    &mut inside
                } else {
                    &mut outside
                };
                counts[request.key] += 1;
            }
        }
        // The ten most popular keys and the hot keys: each count within 4 standard deviations of
        // the table's expectation.
        for (counts, weights) in [(&outside, &table.weights), (&inside, hot_weights)] {
            let total: u64 = counts.iter().sum();
            let mut keys: Vec<usize> = (0..10).chain(hot.iter().copied()).collect();
            keys.dedup();
            for key in keys {
                let expected = weights[key] * total as f64;
                let sd = expected.sqrt().max(1.0);
                let seen = counts[key] as f64;
                assert!(
                    (seen - expected).abs() < 4.0 * sd,
                    "key {key}: {seen} requests, {expected:.1} expected"
                );
            }
        }
    }
}
