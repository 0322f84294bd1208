//! The workload of the `concurrent` benchmark: reader threads route 16-byte keys through a
//! shared token ring while a writer thread publishes a changed ring every millisecond, with the
//! ring shared three ways: `ach_ring::shared::SharedRing` snapshots taken per lookup, the same
//! through a per-thread `RingReader`, and a `std::sync::RwLock`.
//!
//! All ways do the same work. A reader hashes a key (XXH3-64), finds its token and the token's
//! owner. The writer copies the current ring, applies a random plan of 1 to 4 token moves to the
//! copy and publishes it: with `SharedRing::apply` (copy, apply, atomic store), or for the
//! `RwLock` by copying under the read lock, applying outside any lock and swapping the copy in
//! under the write lock (the old ring is dropped after the lock is released). Readers are never
//! blocked by the `SharedRing` writer; under the `RwLock` they wait while the writer holds (or,
//! with std's writer-preferring lock, waits for) the write lock.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, PoisonError, RwLock};
use std::time::{Duration, Instant};

use ach_ring::shared::{RingReader, SharedRing};
use ach_ring::{NodeId, TokenMove, TokenRing};

/// Tokens of the benchmark ring.
pub const TOKENS: usize = 1024;
/// Nodes of the benchmark ring.
pub const NODES: usize = 16;
/// Time between two commits of the writer.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(1);

/// The benchmark ring: `TOKENS` evenly spaced tokens, round-robin over `NODES` nodes.
pub fn benchmark_ring() -> TokenRing {
    TokenRing::evenly_spaced(TOKENS, NODES).expect("a valid ring")
}

/// A SplitMix64 generator: deterministic plans and keys without a random-number crate.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound as u64) as usize
    }
}

/// A random plan against `ring`: 1 to 4 distinct tokens, each moved to another node.
pub fn random_plan(ring: &TokenRing, rng: &mut SplitMix) -> Vec<TokenMove> {
    let mut moves: Vec<TokenMove> = Vec::with_capacity(4);
    for _ in 0..1 + rng.below(4) {
        let token = rng.below(ring.len());
        if moves.iter().any(|mv| mv.token == token) {
            continue;
        }
        let from = ring.owner(token);
        let to = NodeId(((from.index() + 1 + rng.below(NODES - 1)) % NODES) as u32);
        moves.push(TokenMove { token, from, to });
    }
    moves
}

/// The 16-byte key number `counter` of reader `reader`.
#[inline]
pub fn key(reader: usize, counter: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&counter.to_le_bytes());
    key[8..].copy_from_slice(&(reader as u64).to_le_bytes());
    key
}

/// A ring shared between reader threads and one writer.
pub trait RouterRing: Sync {
    /// What one reader thread reads through.
    type Reader<'a>
    where
        Self: 'a;
    /// A reader for one thread.
    fn reader(&self) -> Self::Reader<'_>;
    /// The owner of `key` in the current ring.
    fn route(reader: &mut Self::Reader<'_>, key: &[u8]) -> NodeId;
    /// Builds the next ring (the current one with a random plan applied) and publishes it.
    fn commit_random_plan(&self, rng: &mut SplitMix);
}

/// The ring behind a [`SharedRing`]: one snapshot per lookup.
#[derive(Debug)]
pub struct SnapshotRouter(pub SharedRing<TokenRing>);

impl SnapshotRouter {
    /// Shares the benchmark ring.
    pub fn new() -> Self {
        SnapshotRouter(SharedRing::new(benchmark_ring()))
    }
}

impl Default for SnapshotRouter {
    fn default() -> Self {
        SnapshotRouter::new()
    }
}

impl RouterRing for SnapshotRouter {
    type Reader<'a> = &'a SnapshotRouter;

    fn reader(&self) -> &SnapshotRouter {
        self
    }

    #[inline]
    fn route(reader: &mut &SnapshotRouter, key: &[u8]) -> NodeId {
        reader.0.load().route(key)
    }

    fn commit_random_plan(&self, rng: &mut SplitMix) {
        let moves = random_plan(&self.0.load(), rng);
        self.0.apply(&moves).expect("a plan of the current ring");
    }
}

/// The ring behind a [`SharedRing`] read through one [`RingReader`] per thread (one atomic
/// load per lookup while the version is unchanged).
#[derive(Debug, Default)]
pub struct CachedReaderRouter(pub SnapshotRouter);

impl RouterRing for CachedReaderRouter {
    type Reader<'a> = RingReader<'a, TokenRing>;

    fn reader(&self) -> RingReader<'_, TokenRing> {
        self.0.0.reader()
    }

    #[inline]
    fn route(reader: &mut RingReader<'_, TokenRing>, key: &[u8]) -> NodeId {
        reader.load().route(key)
    }

    fn commit_random_plan(&self, rng: &mut SplitMix) {
        self.0.commit_random_plan(rng);
    }
}

/// The ring behind a `std::sync::RwLock`: one read lock per lookup.
#[derive(Debug)]
pub struct RwLockRouter(pub RwLock<TokenRing>);

impl RwLockRouter {
    /// Shares the benchmark ring.
    pub fn new() -> Self {
        RwLockRouter(RwLock::new(benchmark_ring()))
    }
}

impl Default for RwLockRouter {
    fn default() -> Self {
        RwLockRouter::new()
    }
}

impl RouterRing for RwLockRouter {
    type Reader<'a> = &'a RwLockRouter;

    fn reader(&self) -> &RwLockRouter {
        self
    }

    #[inline]
    fn route(reader: &mut &RwLockRouter, key: &[u8]) -> NodeId {
        let ring = reader.0.read().unwrap_or_else(PoisonError::into_inner);
        ring.owner(ring.lookup_key(key))
    }

    fn commit_random_plan(&self, rng: &mut SplitMix) {
        let mut next = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let moves = random_plan(&next, rng);
        next.apply(&moves).expect("a plan of the current ring");
        let old = {
            let mut ring = self.0.write().unwrap_or_else(PoisonError::into_inner);
            std::mem::replace(&mut *ring, next)
        };
        drop(old);
    }
}

/// One run: how many readers, how many lookups each, with or without the writer.
#[derive(Clone, Copy, Debug)]
pub struct RunConfig {
    /// Reader threads.
    pub readers: usize,
    /// Lookups of each reader.
    pub lookups_per_reader: u64,
    /// Whether a writer publishes a changed ring every [`COMMIT_INTERVAL`] during the run.
    pub writer: bool,
    /// Whether each lookup is timed (two clock reads around it, included in its latency).
    pub record_latency: bool,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Wall time from the start of the readers until the last one finished.
    pub elapsed: Duration,
    /// Lookups done by all readers.
    pub lookups: u64,
    /// Rings the writer published.
    pub commits: u64,
    /// Latency of every lookup in nanoseconds (empty unless recorded).
    pub latencies_ns: Vec<u32>,
}

impl RunReport {
    /// Lookups per second over all readers.
    pub fn lookups_per_second(&self) -> f64 {
        self.lookups as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency percentile `p` (in `[0, 1]`) in nanoseconds, nearest rank; `None` if no
    /// latency was recorded. Sorts the latencies.
    pub fn latency_percentile_ns(&mut self, p: f64) -> Option<u32> {
        if self.latencies_ns.is_empty() {
            return None;
        }
        self.latencies_ns.sort_unstable();
        let rank = ((p * self.latencies_ns.len() as f64).ceil() as usize).max(1);
        self.latencies_ns
            .get(rank.min(self.latencies_ns.len()) - 1)
            .copied()
    }
}

/// Runs `config.readers` readers against `router`, and the writer if asked.
pub fn run<R: RouterRing>(router: &R, config: RunConfig) -> RunReport {
    let writers = usize::from(config.writer);
    let start = Barrier::new(config.readers + writers + 1);
    let readers_left = AtomicUsize::new(config.readers);
    std::thread::scope(|scope| {
        let writer = config.writer.then(|| {
            scope.spawn(|| {
                let mut rng = SplitMix(0xC0FFEE);
                let mut commits = 0u64;
                start.wait();
                let mut next_commit = Instant::now() + COMMIT_INTERVAL;
                while readers_left.load(Ordering::Acquire) > 0 {
                    let now = Instant::now();
                    if now < next_commit {
                        std::thread::sleep(next_commit - now);
                        continue;
                    }
                    router.commit_random_plan(&mut rng);
                    commits += 1;
                    // No burst of commits to catch up after the writer was descheduled.
                    next_commit = (next_commit + COMMIT_INTERVAL).max(Instant::now());
                }
                commits
            })
        });
        let readers: Vec<_> = (0..config.readers)
            .map(|reader| {
                let start = &start;
                let readers_left = &readers_left;
                scope.spawn(move || {
                    let capacity = if config.record_latency {
                        config.lookups_per_reader as usize
                    } else {
                        0
                    };
                    let mut latencies_ns: Vec<u32> = Vec::with_capacity(capacity);
                    let mut sink = 0u32;
                    let mut ring_reader = router.reader();
                    start.wait();
                    for counter in 0..config.lookups_per_reader {
                        let key = key(reader, counter);
                        if config.record_latency {
                            let before = Instant::now();
                            let owner = R::route(&mut ring_reader, black_box(&key));
                            let nanos = before.elapsed().as_nanos();
                            sink ^= owner.0;
                            latencies_ns.push(u32::try_from(nanos).unwrap_or(u32::MAX));
                        } else {
                            sink ^= R::route(&mut ring_reader, black_box(&key)).0;
                        }
                    }
                    readers_left.fetch_sub(1, Ordering::AcqRel);
                    black_box(sink);
                    latencies_ns
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        let mut latencies_ns = Vec::new();
        for reader in readers {
            latencies_ns.extend(reader.join().expect("reader"));
        }
        let elapsed = began.elapsed();
        let commits = writer.map_or(0, |writer| writer.join().expect("writer"));
        RunReport {
            elapsed,
            lookups: config.readers as u64 * config.lookups_per_reader,
            commits,
            latencies_ns,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_route_like_the_ring_and_the_writer_commits() {
        let ring = benchmark_ring();
        let snapshot = SnapshotRouter::new();
        let rwlock = RwLockRouter::new();
        for counter in 0..1000 {
            let key = key(3, counter);
            let owner = ring.owner(ring.lookup_key(&key));
            assert_eq!(SnapshotRouter::route(&mut snapshot.reader(), &key), owner);
            assert_eq!(RwLockRouter::route(&mut rwlock.reader(), &key), owner);
        }
        let mut rng = SplitMix(1);
        snapshot.commit_random_plan(&mut rng);
        let mut rng = SplitMix(1);
        rwlock.commit_random_plan(&mut rng);
        let published = rwlock.0.read().unwrap().clone();
        assert_ne!(published, ring);
        assert_eq!(snapshot.0.load().ring(), &published);
        assert_eq!(snapshot.0.version(), 1);
        let cached = CachedReaderRouter::default();
        let mut reader = cached.reader();
        let key = key(0, 0);
        assert_eq!(
            CachedReaderRouter::route(&mut reader, &key),
            ring.owner(ring.lookup_key(&key))
        );
    }

    #[test]
    fn a_run_counts_lookups_commits_and_latencies() {
        let config = RunConfig {
            readers: 2,
            lookups_per_reader: 20_000,
            writer: true,
            record_latency: true,
        };
        let mut report = run(&SnapshotRouter::new(), config);
        assert_eq!(report.lookups, 40_000);
        assert_eq!(report.latencies_ns.len(), 40_000);
        let p50 = report.latency_percentile_ns(0.5).unwrap();
        let max = report.latency_percentile_ns(1.0).unwrap();
        assert!(p50 <= max);
        let cached = run(&CachedReaderRouter::default(), config);
        assert_eq!(cached.latencies_ns.len(), 40_000);
        let idle = run(
            &RwLockRouter::new(),
            RunConfig {
                writer: false,
                record_latency: false,
                ..config
            },
        );
        assert_eq!(idle.commits, 0);
        assert!(idle.latencies_ns.is_empty());
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut report = RunReport {
            elapsed: Duration::from_secs(1),
            lookups: 4,
            commits: 0,
            latencies_ns: vec![40, 10, 30, 20],
        };
        assert_eq!(report.latency_percentile_ns(0.5), Some(20));
        assert_eq!(report.latency_percentile_ns(0.99), Some(40));
        assert_eq!(report.latency_percentile_ns(0.0), Some(10));
        assert_eq!(report.latency_percentile_ns(1.0), Some(40));
        report.latencies_ns.clear();
        assert_eq!(report.latency_percentile_ns(0.5), None);
    }
}
