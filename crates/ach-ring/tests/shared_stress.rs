//! Stress tests of `ach_ring::shared::SharedRing`: reader threads look keys up in snapshots while
//! a writer commits thousands of random changes.
//!
//! What is checked, for every lookup: the answer equals the answer of the published version the
//! snapshot names (never a torn or half-applied ring), the versions one reader sees never go
//! backwards, every thread finishes (a watchdog fails the test instead of hanging on a
//! deadlock), and no snapshot leaks (the live-snapshot counter and weak references of sampled
//! snapshots show that every old version was freed).
//!
//! The writer publishes version `v` only after writing the expected routing of `v` into a
//! history that readers consult, so a reader that sees version `v` always finds its expected
//! answers. The writer waits for every reader to make progress between two commits, so the
//! readers see the versions interleaved with their lookups whatever the machine's load; a
//! reader that has done four commits' worth of lookups in one version waits for the next one,
//! so the run's length does not depend on how the threads are scheduled.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, OnceLock, Weak};
use std::time::Duration;

use ach_ring::classic::{ClassicRing, NodeState, key_hash};
use ach_ring::shared::{RouteKey, SharedRing, Snapshot};
use ach_ring::{NamedRing, NodeId, NodeSpec, TokenMove, TokenRing};

/// How long the whole test may take before it is declared deadlocked (generous: the machine
/// may be slow and busy; a healthy run takes seconds).
const WATCHDOG: Duration = Duration::from_secs(300);

/// A SplitMix64 generator: deterministic random plans without a dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
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

/// The 16-byte key number `counter` of reader `reader`.
fn key(reader: usize, counter: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&(reader as u64).to_le_bytes());
    key[8..].copy_from_slice(&counter.to_le_bytes());
    key
}

/// Sizes of one stress run.
#[derive(Clone, Copy)]
struct StressSize {
    readers: usize,
    /// Each reader looks up at least this many keys, and goes on until the writer is done.
    min_lookups_per_reader: u64,
    /// The writer waits until every reader has looked up this many keys since its last commit.
    lookups_between_commits: u64,
    /// Keys looked up in one snapshot.
    keys_per_snapshot: u64,
}

/// The size of the smaller stress runs (classic and named rings, whose copies are dearer).
const TWO_READERS: StressSize = StressSize {
    readers: 2,
    min_lookups_per_reader: 100_000,
    lookups_between_commits: 64,
    keys_per_snapshot: 4,
};

/// What a reader saw.
struct ReaderReport {
    lookups: u64,
    distinct_versions: u64,
    last_version: u64,
    sampled: Vec<Weak<Snapshot<RingUnderTest>>>,
}

/// The rings the stress runs share, behind one type so that the harness is written once.
#[derive(Clone, Debug)]
enum RingUnderTest {
    Token(TokenRing),
    Classic(ClassicRing),
    Named(NamedRing),
}

/// The expected routing of one published version.
enum Expected {
    /// Owners of the tokens of a token ring whose positions are `positions`.
    TokenOwners(Vec<NodeId>),
    /// A deep copy of a classic ring.
    Classic(ClassicRing),
    /// A deep copy of a named ring.
    Named(Box<NamedRing>),
}

/// The token of `key` among sorted `positions`, found without the ring under test: a plain
/// binary search over the key's position (top 53 bits of the stable key hash / 2^53).
fn reference_token(positions: &[f64], key: &[u8]) -> usize {
    let position = (key_hash(key) >> 11) as f64 / (1_u64 << 53) as f64;
    let token = positions.partition_point(|&p| p < position);
    if token == positions.len() { 0 } else { token }
}

/// Whether the snapshot's answer for `key` is the answer of the expected version, found
/// without the ring under test (a binary search over the fixed positions for the token ring,
/// a separately kept copy's reference binary search for the classic ring).
fn route_matches(
    snapshot: &RingUnderTest,
    expected: &Expected,
    positions: &[f64],
    key: &[u8],
) -> bool {
    match (snapshot, expected) {
        (RingUnderTest::Token(ring), Expected::TokenOwners(owners)) => {
            ring.route(key) == owners[reference_token(positions, key)]
        }
        (RingUnderTest::Classic(ring), Expected::Classic(copy)) => {
            ring.route(key) == copy.lookup_hash_binary_search(key_hash(key))
        }
        (RingUnderTest::Named(ring), Expected::Named(copy)) => {
            let token = reference_token(copy.ring().positions(), key);
            let expected = copy.node(copy.ring().owner(token));
            let node = ring.route(key);
            Some(node) == expected && node.address == expected.and_then(|n| n.address.clone())
        }
        _ => false,
    }
}

/// Tells the test's main thread that a thread finished, and whether it panicked (then the
/// other threads stop instead of waiting for it).
struct FinishSignal {
    sender: mpsc::Sender<()>,
    aborted: Arc<AtomicBool>,
}

impl Drop for FinishSignal {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.aborted.store(true, Ordering::Release);
        }
        let _ = self.sender.send(());
    }
}

/// Waits until `condition` holds: a few yields, then short sleeps, so that waiting threads
/// leave the (possibly few and busy) cores to the threads they wait for.
fn wait_until(condition: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !condition() {
        if spins < 16 {
            std::thread::yield_now();
            spins += 1;
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

/// What the readers and the writer of one stress run share.
#[derive(Clone)]
struct Stage {
    shared: Arc<SharedRing<RingUnderTest>>,
    /// The expected routing of every version, written before the version is published.
    history: Arc<Vec<OnceLock<Expected>>>,
    writer_done: Arc<AtomicBool>,
    /// Each reader's lookups so far.
    progress: Arc<Vec<AtomicU64>>,
    /// Every thread starts at once.
    start: Arc<Barrier>,
}

/// Runs readers against `shared` while `write_one` commits (it returns false once it is done),
/// and checks every answer against `history`.
fn stress(
    shared: SharedRing<RingUnderTest>,
    history: Arc<Vec<OnceLock<Expected>>>,
    positions: Arc<Vec<f64>>,
    size: StressSize,
    write_one: impl FnMut(&SharedRing<RingUnderTest>, &[OnceLock<Expected>]) -> bool + Send + 'static,
) {
    let counter = shared.snapshot_counter();
    let stage = Stage {
        shared: Arc::new(shared),
        history,
        writer_done: Arc::new(AtomicBool::new(false)),
        progress: Arc::new((0..size.readers).map(|_| AtomicU64::new(0)).collect()),
        start: Arc::new(Barrier::new(size.readers + 1)),
    };
    let aborted = Arc::new(AtomicBool::new(false));
    let (finished_sender, finished) = mpsc::channel::<()>();
    let signal = || FinishSignal {
        sender: finished_sender.clone(),
        aborted: Arc::clone(&aborted),
    };
    let readers: Vec<_> = (0..size.readers)
        .map(|reader| {
            let (stage, positions, signal) = (stage.clone(), Arc::clone(&positions), signal());
            std::thread::spawn(move || read(&stage, &positions, reader, size, signal))
        })
        .collect();
    let writer = {
        let (stage, signal) = (stage.clone(), signal());
        std::thread::spawn(move || write(&stage, size.lookups_between_commits, signal, write_one))
    };
    drop(finished_sender);
    wait_for_threads(&finished, size.readers + 1);
    // A thread that panicked (a failed check) fails the test with its own message.
    if let Err(panic) = writer.join() {
        std::panic::resume_unwind(panic);
    }
    let reports: Vec<ReaderReport> = readers
        .into_iter()
        .map(|handle| {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
        .collect();
    let sampled = check_reports(reports, stage.shared.version(), size);

    // No leak: with every reader gone only the current snapshot is alive, and dropping the
    // handle frees it too.
    assert_eq!(counter.live(), 1, "only the current version is alive");
    let shared = Arc::into_inner(stage.shared).expect("every thread dropped its handle");
    drop(shared);
    assert_eq!(counter.live(), 0, "every snapshot was freed");
    assert!(!sampled.is_empty());
    assert!(sampled.iter().all(|weak| weak.upgrade().is_none()));
}

/// One reader: looks keys up in snapshots until the writer is done (and at least
/// `size.min_lookups_per_reader` of them), checking every answer against the history.
fn read(
    stage: &Stage,
    positions: &[f64],
    reader: usize,
    size: StressSize,
    signal: FinishSignal,
) -> ReaderReport {
    let lookups_per_version = 4 * size.lookups_between_commits;
    stage.start.wait();
    let mut lookups = 0u64;
    let mut last_version = 0u64;
    let mut distinct_versions = 1u64;
    let mut lookups_at_version = 0u64;
    let mut sampled = Vec::new();
    let mut snapshots = 0u64;
    // Odd readers keep a per-thread reader, even ones take a snapshot guard each time.
    let mut cached = stage.shared.reader();
    loop {
        // Read the flag before the snapshot: a reader that saw the writer done and then
        // takes a snapshot sees the final version.
        let done = stage.writer_done.load(Ordering::Acquire);
        let guard;
        let snapshot: &Snapshot<RingUnderTest> = if reader % 2 == 1 {
            cached.load()
        } else {
            guard = stage.shared.load();
            &guard
        };
        let version = snapshot.version();
        assert!(
            version >= last_version,
            "reader {reader}: version went back from {last_version} to {version}"
        );
        if version != last_version {
            distinct_versions += 1;
            last_version = version;
            lookups_at_version = lookups;
        }
        let expected = stage.history[version as usize]
            .get()
            .unwrap_or_else(|| panic!("version {version} was published before its history"));
        for _ in 0..size.keys_per_snapshot {
            let key = key(reader, lookups);
            assert!(
                route_matches(snapshot, expected, positions, &key),
                "reader {reader}: key {key:?} answered differently from version {version}"
            );
            lookups += 1;
        }
        snapshots += 1;
        if snapshots % 4096 == 0 {
            sampled.push(Arc::downgrade(&stage.shared.snapshot()));
        }
        stage.progress[reader].store(lookups, Ordering::Release);
        if (done && lookups >= size.min_lookups_per_reader)
            || signal.aborted.load(Ordering::Acquire)
        {
            break;
        }
        // Do not run far ahead of the writer (it waits for every reader): after a few
        // commits' worth of lookups in one version, wait for the next one.
        if !done && lookups - lookups_at_version >= lookups_per_version {
            wait_until(|| {
                stage.shared.version() != version
                    || stage.writer_done.load(Ordering::Acquire)
                    || signal.aborted.load(Ordering::Acquire)
            });
        }
    }
    drop(cached);
    drop(signal);
    ReaderReport {
        lookups,
        distinct_versions,
        last_version,
        sampled,
    }
}

/// The writer: commits with `write_one` until it returns false, and after each commit waits
/// until every reader has looked up `between` more keys.
fn write(
    stage: &Stage,
    between: u64,
    signal: FinishSignal,
    mut write_one: impl FnMut(&SharedRing<RingUnderTest>, &[OnceLock<Expected>]) -> bool,
) {
    stage.start.wait();
    loop {
        let marks: Vec<u64> = stage
            .progress
            .iter()
            .map(|p| p.load(Ordering::Acquire))
            .collect();
        let version = stage.shared.version();
        if !write_one(&stage.shared, &stage.history) {
            break;
        }
        if stage.shared.version() == version {
            // A rejected change: nothing new for the readers to see.
            continue;
        }
        // Let every reader look keys up in the new version before the next commit.
        wait_until(|| {
            signal.aborted.load(Ordering::Acquire)
                || stage
                    .progress
                    .iter()
                    .zip(&marks)
                    .all(|(p, mark)| p.load(Ordering::Acquire) >= mark + between)
        });
    }
    stage.writer_done.store(true, Ordering::Release);
    drop(signal);
}

/// Waits for `count` threads to signal that they finished, failing the test when one does not
/// within the watchdog's time.
fn wait_for_threads(finished: &mpsc::Receiver<()>, count: usize) {
    for _ in 0..count {
        match finished.recv_timeout(WATCHDOG) {
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("a thread did not finish within {WATCHDOG:?}: deadlock or livelock")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => unreachable!("every thread signals"),
        }
    }
}

/// Checks what each reader saw (enough lookups, the final version last, many versions on the
/// way), prints it, and returns their sampled snapshots.
fn check_reports(
    reports: Vec<ReaderReport>,
    final_version: u64,
    size: StressSize,
) -> Vec<Weak<Snapshot<RingUnderTest>>> {
    let mut sampled = Vec::new();
    for (reader, report) in reports.into_iter().enumerate() {
        assert!(report.lookups >= size.min_lookups_per_reader);
        assert_eq!(
            report.last_version, final_version,
            "reader {reader} ended on the final version"
        );
        // The writer waited for every reader between commits, so each saw many versions.
        assert!(
            report.distinct_versions > final_version / 4,
            "reader {reader} saw only {} of {} versions",
            report.distinct_versions,
            final_version + 1
        );
        eprintln!(
            "reader {reader}: {} lookups, {} of {} versions seen",
            report.lookups,
            report.distinct_versions,
            final_version + 1
        );
        sampled.extend(report.sampled);
    }
    sampled
}

#[test]
fn four_readers_and_thousands_of_random_plans_on_a_token_ring() {
    const TOKENS: usize = 512;
    const NODES: u32 = 16;
    const PLANS: usize = 3000;
    let positions: Vec<f64> = (0..TOKENS)
        .map(|s| (s as f64 + 0.5) / TOKENS as f64)
        .collect();
    let ring = TokenRing::round_robin(positions.clone(), NODES as usize).unwrap();
    let mut model: Vec<NodeId> = ring.owners().to_vec();
    let history: Vec<OnceLock<Expected>> = (0..=PLANS).map(|_| OnceLock::new()).collect();
    history[0]
        .set(Expected::TokenOwners(model.clone()))
        .ok()
        .unwrap();
    let shared = SharedRing::new(RingUnderTest::Token(ring));

    let mut rng = SplitMix(15);
    let mut plans = 0;
    let mut rejected = 0;
    let write_one = move |shared: &SharedRing<RingUnderTest>, history: &[OnceLock<Expected>]| {
        if plans == PLANS {
            assert!(rejected > 0);
            return false;
        }
        // A random plan: 1 to 8 moves, a token possibly moved twice.
        let mut next = model.clone();
        let mut moves = Vec::new();
        for _ in 0..1 + rng.below(8) {
            let token = rng.below(TOKENS);
            let to = NodeId(rng.below(NODES as usize) as u32);
            moves.push(TokenMove {
                token,
                from: next[token],
                to,
            });
            next[token] = to;
        }
        let version = shared.version();
        // One plan in 7 carries a stale source at its end: it must be rejected whole.
        if rng.below(7) == 0 {
            let token = rng.below(TOKENS);
            let stale = NodeId((next[token].0 + 1) % NODES);
            moves.push(TokenMove {
                token,
                from: stale,
                to: stale,
            });
            let result = shared.commit(|ring| match ring {
                RingUnderTest::Token(ring) => ring.apply(&moves),
                _ => unreachable!(),
            });
            assert!(result.is_err(), "a stale plan was accepted");
            assert_eq!(
                shared.version(),
                version,
                "a rejected plan published a version"
            );
            rejected += 1;
            return true;
        }
        history[version as usize + 1]
            .set(Expected::TokenOwners(next.clone()))
            .ok()
            .unwrap();
        let commit = shared
            .commit(|ring| match ring {
                RingUnderTest::Token(ring) => ring.apply(&moves),
                _ => unreachable!(),
            })
            .expect("a plan built from the current owners applies");
        assert_eq!(commit.version, version + 1);
        model = next;
        plans += 1;
        true
    };
    stress(
        shared,
        Arc::new(history),
        Arc::new(positions),
        StressSize {
            readers: 4,
            min_lookups_per_reader: 1_000_000,
            lookups_between_commits: 256,
            keys_per_snapshot: 4,
        },
        write_one,
    );
}

#[test]
fn readers_and_joins_and_leaves_on_a_classic_ring() {
    const CHANGES: usize = 300;
    let names: Vec<String> = (0..12).map(|n| format!("node-{n}")).collect();
    let ring = ClassicRing::with_nodes(&[
        NodeState {
            name: names[0].clone(),
            weight: 50,
        },
        NodeState {
            name: names[1].clone(),
            weight: 50,
        },
    ])
    .unwrap();
    let history: Vec<OnceLock<Expected>> = (0..=CHANGES).map(|_| OnceLock::new()).collect();
    history[0]
        .set(Expected::Classic(ring.clone()))
        .ok()
        .unwrap();
    let mut model = ring.clone();
    let shared = SharedRing::new(RingUnderTest::Classic(ring));
    let mut rng = SplitMix(150);
    let mut changes = 0;
    let write_one = move |shared: &SharedRing<RingUnderTest>, history: &[OnceLock<Expected>]| {
        if changes == CHANGES {
            return false;
        }
        // Join a missing node or remove a present one (never the last).
        let name = &names[rng.below(names.len())];
        let joining = !model.contains_node(name);
        if !joining && model.node_count() == 1 {
            return true;
        }
        let mut next = model.clone();
        if joining {
            next.add_node(name, 20 + rng.below(60) as u32).unwrap();
        } else {
            next.remove_node(name).unwrap();
        }
        let version = shared.version();
        history[version as usize + 1]
            .set(Expected::Classic(next.clone()))
            .ok()
            .unwrap();
        let weight = next.weight(name);
        let commit = shared
            .commit(|ring| match (ring, weight) {
                (RingUnderTest::Classic(ring), Some(weight)) => ring.add_node(name, weight),
                (RingUnderTest::Classic(ring), None) => ring.remove_node(name),
                _ => unreachable!(),
            })
            .expect("the change applies");
        assert_eq!(commit.version, version + 1);
        model = next;
        changes += 1;
        true
    };
    stress(
        shared,
        Arc::new(history),
        Arc::new(Vec::new()),
        TWO_READERS,
        write_one,
    );
}

#[test]
fn readers_and_named_joins_and_leaves_with_their_switches() {
    const CHANGES: usize = 300;
    let ring = NamedRing::new(
        256,
        (0..4)
            .map(|n| {
                NodeSpec::new(format!("node-{n}"), 1.0)
                    .with_address(format!("127.0.0.1:{}", 7000 + n))
            })
            .collect(),
    )
    .unwrap();
    let history: Vec<OnceLock<Expected>> = (0..=CHANGES).map(|_| OnceLock::new()).collect();
    history[0]
        .set(Expected::Named(Box::new(ring.clone())))
        .ok()
        .unwrap();
    let mut model = ring.clone();
    let shared = SharedRing::new(RingUnderTest::Named(ring));
    let mut rng = SplitMix(1500);
    let mut joined = 4;
    // The moves of the last planned join or leave, committed by the next change.
    let mut pending: Option<Vec<TokenMove>> = None;
    let write_one = move |shared: &SharedRing<RingUnderTest>, history: &[OnceLock<Expected>]| {
        let version = shared.version();
        if version as usize == CHANGES {
            return false;
        }
        let mut next = model.clone();
        // Either commit the pending switch (after its data "was copied"), or plan a join or a
        // leave of a random live node (keeping at least two).
        let planned = match pending.take() {
            Some(moves) => {
                next.apply(&moves).unwrap();
                history[version as usize + 1]
                    .set(Expected::Named(Box::new(next.clone())))
                    .ok()
                    .unwrap();
                shared.commit(|ring| match ring {
                    RingUnderTest::Named(ring) => ring.apply(&moves).map(|_| None),
                    _ => unreachable!(),
                })
            }
            None => {
                let live: Vec<String> = next
                    .nodes()
                    .iter()
                    .filter(|n| n.live)
                    .map(|n| n.name.clone())
                    .collect();
                let spec = NodeSpec::new(format!("node-{joined}"), 1.0)
                    .with_address(format!("127.0.0.1:{}", 7000 + joined));
                let leaving = (live.len() > 2 && rng.below(2) == 0)
                    .then(|| live[rng.below(live.len())].clone());
                let change = match &leaving {
                    Some(name) => next.leave(name).unwrap(),
                    None => next.join(spec.clone()).unwrap(),
                };
                history[version as usize + 1]
                    .set(Expected::Named(Box::new(next.clone())))
                    .ok()
                    .unwrap();
                if leaving.is_none() {
                    joined += 1;
                }
                shared
                    .commit(|ring| match ring {
                        RingUnderTest::Named(ring) => match &leaving {
                            Some(name) => ring.leave(name),
                            None => ring.join(spec),
                        }
                        .map(|change| Some(change.moves)),
                        _ => unreachable!(),
                    })
                    .inspect(|commit| {
                        assert_eq!(commit.outcome.as_ref(), Some(&change.moves));
                    })
            }
        }
        .expect("the change applies");
        assert_eq!(planned.version, version + 1);
        pending = planned.outcome.filter(|moves| !moves.is_empty());
        model = next;
        true
    };
    stress(
        shared,
        Arc::new(history),
        Arc::new(Vec::new()),
        TWO_READERS,
        write_one,
    );
}
