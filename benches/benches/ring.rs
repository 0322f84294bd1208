//! Lookup benchmarks of `ach-ring`.
//!
//! * `classic_lookup`: hash a 16-byte key and find its node, for 10 nodes x 150 virtual nodes and
//!   1000 nodes x 100 virtual nodes, with `ach_ring::classic::ClassicRing` (XXH3-64 + bucket
//!   index) and, in the same run, the `hashring` crate (SipHash + binary search) doing the same
//!   work on the same keys. Each iteration looks up a batch of pre-generated keys; the reported
//!   throughput is lookups per second, and time / batch size is the time per lookup.
//! * `token_ring_lookup`: `TokenRing::lookup` (bucket index) against
//!   `TokenRing::lookup_binary_search` at V = 1000.
//!
//! Run with `CARGO_TARGET_DIR=/work/target-bench cargo bench -p ach-benches --bench ring`.

#![allow(missing_docs)] // `criterion_group!` generates an undocumented public function.

use std::hint::black_box;
use std::time::Duration;

use ach_ring::TokenRing;
use ach_ring::classic::{ClassicRing, NodeState};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use hashring::HashRing;

/// Number of pre-generated keys; every iteration looks them all up.
const KEY_COUNT: usize = 1 << 20;

/// A xorshift64* generator: deterministic keys and hashes without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `KEY_COUNT` pseudo-random 16-byte keys.
fn random_keys() -> Vec<[u8; 16]> {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    (0..KEY_COUNT)
        .map(|_| {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
            key[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
            key
        })
        .collect()
}

/// A virtual node of the `hashring` ring: node number and virtual-node number, hashed with
/// `hashring`'s SipHash.
#[derive(Clone, Copy, Debug, Hash, PartialEq)]
struct HashringVnode {
    node: u32,
    vnode: u32,
}

fn classic_lookup(c: &mut Criterion) {
    let keys = random_keys();
    let mut group = c.benchmark_group("classic_lookup");
    group.throughput(Throughput::Elements(KEY_COUNT as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    for (node_count, weight) in [(10u32, 150u32), (1000, 100)] {
        let size = format!("{node_count}x{weight}");

        let nodes: Vec<NodeState> = (0..node_count)
            .map(|node| NodeState {
                name: format!("node-{node}"),
                weight,
            })
            .collect();
        let ours = ClassicRing::with_nodes(&nodes).expect("valid nodes");
        group.bench_with_input(BenchmarkId::new("ach_ring", &size), &keys, |b, keys| {
            b.iter(|| {
                for key in keys {
                    black_box(ours.lookup(black_box(key)));
                }
            });
        });
        group.bench_with_input(
            BenchmarkId::new("ach_ring_binary_search", &size),
            &keys,
            |b, keys| {
                b.iter(|| {
                    for key in keys {
                        let hash = ach_ring::classic::key_hash(black_box(key));
                        black_box(ours.lookup_hash_binary_search(hash));
                    }
                });
            },
        );

        let mut theirs: HashRing<HashringVnode> = HashRing::new();
        theirs.batch_add(
            (0..node_count)
                .flat_map(|node| (0..weight).map(move |vnode| HashringVnode { node, vnode }))
                .collect(),
        );
        group.bench_with_input(BenchmarkId::new("hashring", &size), &keys, |b, keys| {
            b.iter(|| {
                for key in keys {
                    black_box(theirs.get(black_box(key)));
                }
            });
        });
    }
    group.finish();
}

fn token_ring_lookup(c: &mut Criterion) {
    let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
    let unit = |rng: &mut XorShift| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let mut positions: Vec<f64> = (0..1000).map(|_| unit(&mut rng)).collect();
    positions.sort_by(f64::total_cmp);
    positions.dedup();
    let ring = TokenRing::round_robin(positions, 10).expect("valid positions");
    let hashes: Vec<f64> = (0..KEY_COUNT).map(|_| unit(&mut rng)).collect();

    let mut group = c.benchmark_group("token_ring_lookup");
    group.throughput(Throughput::Elements(KEY_COUNT as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(6));
    group.bench_with_input(BenchmarkId::new("fast", "V1000"), &hashes, |b, hashes| {
        b.iter(|| {
            for &h in hashes {
                black_box(ring.lookup(black_box(h)));
            }
        });
    });
    group.bench_with_input(
        BenchmarkId::new("binary_search", "V1000"),
        &hashes,
        |b, hashes| {
            b.iter(|| {
                for &h in hashes {
                    black_box(ring.lookup_binary_search(black_box(h)));
                }
            });
        },
    );
    group.finish();
}

criterion_group!(benches, classic_lookup, token_ring_lookup);
criterion_main!(benches);
