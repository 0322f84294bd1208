//! Tests of the classic ring.

use super::*;
use proptest::prelude::*;

/// Pinned values of [`key_hash`] (XXH3-64, seed 0). The empty input is XXH3's published value
/// (the xxHash reference test vector `XXH3_64bits("") = 0x2D06800538D394C2`); the others were
/// computed once with `xxhash-rust` 0.8.21 on x86_64 and written down here, so that any change of
/// hash function, seed or crate behaviour fails this test.
const KEY_HASH_VECTORS: [(&[u8], u64); 6] = [
    (b"", 0x2D06_8005_38D3_94C2),
    (b"a", 0xE6C6_32B6_1E96_4E1F),
    (b"abc", 0x78AF_5F94_892F_3950),
    (b"hello world", 0xD447_B1EA_40E6_988B),
    (b"0123456789abcdef", 0x6443_9946_D8FA_212D),
    (b"user:42", 0x9FC1_E605_FA71_74AA),
];

/// Pinned virtual-node positions, computed once like [`KEY_HASH_VECTORS`].
const VNODE_HASH_VECTORS: [(&str, u32, u64); 4] = [
    ("node-a", 0, 0x42D3_010A_C73D_0427),
    ("node-a", 1, 0xF05C_DC7A_B002_02CE),
    ("node-b", 149, 0x0161_2DEB_FF12_373B),
    ("", 0, 0xBAEC_9961_428A_77EB),
];

#[test]
fn key_hash_matches_pinned_vectors() {
    for (key, expected) in KEY_HASH_VECTORS {
        assert_eq!(key_hash(key), expected, "key {key:?}");
    }
}

#[test]
fn vnode_hash_matches_pinned_vectors_and_the_documented_label() {
    for (name, vnode, expected) in VNODE_HASH_VECTORS {
        assert_eq!(vnode_hash(name, vnode), expected, "{name}#{vnode}");
        assert_eq!(
            vnode_hash(name, vnode),
            key_hash(format!("{name}#{vnode}").as_bytes())
        );
    }
}

/// Checks every internal invariant of a ring.
fn assert_consistent(ring: &ClassicRing) {
    // Nodes sorted by name, unique, with positive weights.
    assert!(ring.nodes.windows(2).all(|w| w[0].name < w[1].name));
    assert!(ring.nodes.iter().all(|n| n.weight > 0));
    // One virtual node per unit of weight, at the documented position, in the documented order.
    let total: usize = ring.nodes.iter().map(|n| n.weight as usize).sum();
    assert_eq!(ring.positions.len(), total);
    assert_eq!(ring.owners.len(), total);
    assert_eq!(ring.vnode_indices.len(), total);
    let triples: Vec<_> = ring.vnode_triples().collect();
    assert!(triples.windows(2).all(|w| w[0] < w[1]));
    let mut per_node = vec![0u32; ring.nodes.len()];
    for &(position, owner, vnode) in &triples {
        let entry = &ring.nodes[owner as usize];
        assert!(vnode < entry.weight);
        assert_eq!(position, vnode_hash(&entry.name, vnode));
        per_node[owner as usize] += 1;
    }
    for (entry, count) in ring.nodes.iter().zip(per_node) {
        assert_eq!(entry.weight, count, "{}", entry.name);
    }
    match &ring.bucket_index {
        HashBucketIndex::Small(index) => {
            assert!(!ring.positions.is_empty());
            assert!(ring.positions.len() <= bucket_index::SINGLE_OWNER_MAX_VNODES);
            assert_single_owner_index_consistent(ring, index);
        }
        HashBucketIndex::Narrow(index) => {
            assert!(ring.nodes.len() <= 1 << 16);
            assert!(
                ring.positions.is_empty()
                    || ring.positions.len() > bucket_index::SINGLE_OWNER_MAX_VNODES
            );
            assert_index_consistent(ring, index);
        }
        HashBucketIndex::Wide(index) => {
            assert!(ring.nodes.len() > 1 << 16);
            assert_index_consistent(ring, index);
        }
    }
    // Whatever index the ring chose, the other kinds, built on the same virtual nodes, are
    // consistent too (small rings test the code of large ones).
    let (positions, owners) = (&ring.positions, &ring.owners);
    if !positions.is_empty() {
        assert_single_owner_index_consistent(ring, &SingleOwnerBuckets::new(positions, owners));
    }
    if let Some(index) = Buckets::<u16>::new(positions, owners) {
        assert_index_consistent(ring, &index);
    }
    assert_index_consistent(ring, &Buckets::<u32>::new(positions, owners).unwrap());
}

/// Checks every entry of a [`SingleOwnerBuckets`] index: either the single owner of its bucket
/// or the first position of the bucket.
fn assert_single_owner_index_consistent(ring: &ClassicRing, index: &SingleOwnerBuckets) {
    let buckets = 1usize << (64 - index.shift);
    assert_eq!(index.entries.len(), buckets);
    assert!(buckets >= ring.positions.len());
    for (bucket, &entry) in index.entries.iter().enumerate() {
        let bucket_start = (bucket as u64) << index.shift;
        let bucket_last = bucket_start | (u64::MAX >> (64 - index.shift));
        if entry & bucket_index::SINGLE_OWNER_FLAG != 0 {
            let slot = entry & !bucket_index::SINGLE_OWNER_FLAG;
            let name = Some(ring.nodes[slot as usize].name.as_str());
            for hash in [bucket_start, bucket_last] {
                assert_eq!(ring.lookup_hash_binary_search(hash), name);
            }
            let inside = ring.positions.partition_point(|&p| p < bucket_start)
                ..ring.positions.partition_point(|&p| p <= bucket_last);
            for position in &ring.positions[inside] {
                assert_eq!(ring.lookup_hash_binary_search(*position), name);
            }
        } else {
            let expected = ring.positions.partition_point(|&p| p < bucket_start);
            assert_eq!(entry as usize, expected, "bucket {bucket}");
        }
    }
}

/// Checks every entry of the bucket index against the binary search: a compact entry gives the
/// owner of every segment of its bucket, at both ends of each segment, and lists exactly the
/// owner changes of the bucket; an overflow entry has more than `MAX_BOUNDARIES` of them and
/// points to the first position of its bucket.
fn assert_index_consistent<O: bucket_index::OwnerSlot>(
    ring: &ClassicRing,
    index: &bucket_index::Buckets<O>,
) {
    if ring.positions.is_empty() {
        assert!(index.entries.is_empty());
        return;
    }
    let buckets = 1usize << (64 - index.shift);
    assert_eq!(index.entries.len(), buckets);
    assert!(buckets >= ring.positions.len().min(1 << MAX_BUCKET_BITS));
    let name_of = |slot: u32| Some(ring.nodes[slot as usize].name.as_str());
    for (bucket, entry) in index.entries.iter().enumerate() {
        let bucket_start = (bucket as u64) << index.shift;
        let bucket_last = bucket_start | (u64::MAX >> (64 - index.shift));
        let inside = ring.positions.partition_point(|&p| p < bucket_start)
            ..ring.positions.partition_point(|&p| p <= bucket_last);
        // The owner changes inside the bucket: positions `p` (not the last hash of the bucket)
        // owned by a different node than `p + 1`.
        let changes: Vec<u64> = ring.positions[inside.clone()]
            .iter()
            .copied()
            .filter(|&p| {
                p < bucket_last
                    && ring.lookup_hash_binary_search(p) != ring.lookup_hash_binary_search(p + 1)
            })
            .collect();
        let mut changes_dedup = changes.clone();
        changes_dedup.dedup();
        if entry.is_overflow() {
            assert!(
                changes_dedup.len() > bucket_index::MAX_BOUNDARIES,
                "bucket {bucket}"
            );
            assert_eq!(entry.first_position(), inside.start, "bucket {bucket}");
            continue;
        }
        assert!(
            changes_dedup.len() <= bucket_index::MAX_BOUNDARIES,
            "bucket {bucket}"
        );
        let used = changes_dedup.len();
        assert_eq!(entry.packed >> 48, 1, "bucket {bucket}");
        for rank in 0..bucket_index::MAX_BOUNDARIES {
            let expected = changes_dedup
                .get(rank)
                .map_or(bucket_index::UNUSED_FRACTION, |&change| {
                    bucket_index::fraction(change, index.shift)
                });
            assert_eq!(entry.fraction(rank), expected, "bucket {bucket}");
        }
        // Segment `rank` runs from `starts[rank]` to `ends[rank]`, both included.
        let starts = std::iter::once(bucket_start).chain(changes_dedup.iter().map(|&p| p + 1));
        let ends = changes_dedup
            .iter()
            .copied()
            .chain(std::iter::once(bucket_last));
        for (rank, (start, end)) in starts.zip(ends).enumerate() {
            let owner = name_of(entry.owners[rank].slot());
            assert_eq!(
                ring.lookup_hash_binary_search(start),
                owner,
                "bucket {bucket}"
            );
            assert_eq!(
                ring.lookup_hash_binary_search(end),
                owner,
                "bucket {bucket}"
            );
        }
        for &owner in &entry.owners[used..] {
            assert_eq!(owner, entry.owners[used], "bucket {bucket}");
        }
    }
}

/// Hashes on and around every boundary of the ring.
fn edge_hashes(ring: &ClassicRing) -> Vec<u64> {
    let mut hashes = vec![0, 1, u64::MAX - 1, u64::MAX, 1 << 63];
    for &p in &ring.positions {
        hashes.extend([p.wrapping_sub(1), p, p.wrapping_add(1)]);
        // Near the boundary but in another 16-bit fraction of the bucket, so that the index
        // decides without the exact path.
        for offset in [1u64 << 36, 1 << 40, 1 << 44] {
            hashes.extend([p.wrapping_sub(offset), p.wrapping_add(offset)]);
        }
    }
    hashes
}

fn assert_fast_equals_binary_search(ring: &ClassicRing, extra: &[u64]) {
    // Every kind of index on these virtual nodes, not only the one the ring chose.
    let (positions, owners) = (&ring.positions, &ring.owners);
    let small = (!positions.is_empty()).then(|| SingleOwnerBuckets::new(positions, owners));
    let narrow = Buckets::<u16>::new(positions, owners);
    let wide = Buckets::<u32>::new(positions, owners).unwrap();
    for &hash in edge_hashes(ring).iter().chain(extra) {
        let expected = ring.lookup_hash_binary_search(hash);
        assert_eq!(ring.lookup_hash(hash), expected, "hash {hash:#x}");
        let name_of = |slot: Option<u32>| slot.map(|slot| ring.nodes[slot as usize].name.as_str());
        if let Some(small) = &small {
            assert_eq!(name_of(small.owner_slot(hash, positions, owners)), expected);
        }
        if let Some(narrow) = &narrow {
            assert_eq!(
                name_of(narrow.owner_slot(hash, positions, owners)),
                expected
            );
        }
        assert_eq!(name_of(wide.owner_slot(hash, positions, owners)), expected);
    }
}

/// A deterministic sample of `count` well spread hashes.
fn sample_hashes(count: u64) -> impl Iterator<Item = u64> {
    (0..count).map(|k| key_hash(&k.to_le_bytes()))
}

fn three_nodes() -> ClassicRing {
    let mut ring = ClassicRing::new();
    for name in ["alpha", "bravo", "charlie"] {
        ring.add_node_with_default_weight(name).unwrap();
    }
    ring
}

#[test]
fn empty_ring_owns_nothing() {
    let ring = ClassicRing::new();
    assert!(ring.is_empty());
    assert_eq!(ring.lookup(b"key"), None);
    assert_eq!(ring.lookup_hash(0), None);
    assert_eq!(ring.lookup_hash(u64::MAX), None);
    assert_eq!(ring.lookup_hash_binary_search(7), None);
    assert!(ring.lookup_n(b"key", 3).is_empty());
    assert!(ring.shares().is_empty());
    assert_consistent(&ring);
}

#[test]
fn bad_input_gives_typed_errors_and_leaves_the_ring_unchanged() {
    let mut ring = three_nodes();
    let before = ring.clone();
    assert_eq!(
        ring.add_node("alpha", 10),
        Err(ClassicRingError::DuplicateNode {
            name: "alpha".into()
        })
    );
    assert_eq!(
        ring.add_node("delta", 0),
        Err(ClassicRingError::ZeroWeight {
            name: "delta".into()
        })
    );
    assert_eq!(
        ring.remove_node("delta"),
        Err(ClassicRingError::UnknownNode {
            name: "delta".into()
        })
    );
    assert_eq!(ring, before);
    assert_eq!(
        ClassicRing::with_nodes(&[
            NodeState {
                name: "x".into(),
                weight: 1
            },
            NodeState {
                name: "x".into(),
                weight: 2
            },
        ]),
        Err(ClassicRingError::DuplicateNode { name: "x".into() })
    );
    assert_eq!(
        ClassicRing::with_nodes(&[
            NodeState {
                name: "x".into(),
                weight: u32::MAX
            },
            NodeState {
                name: "y".into(),
                weight: u32::MAX
            },
        ]),
        Err(ClassicRingError::TooManyVirtualNodes {
            total: 2 * u64::from(u32::MAX)
        })
    );
}

#[test]
fn a_single_node_owns_everything_and_first_add_and_last_remove_move_everything() {
    let mut ring = ClassicRing::new();
    let change = ring.add_node("solo", 3).unwrap();
    assert_eq!(change.moved_hashes, HASH_SPACE_SIZE);
    assert_eq!(change.moved_fraction(), 1.0);
    assert_eq!(
        change.moved_ranges,
        vec![MovedRange {
            range: HashRange {
                start: 0,
                end: HASH_SPACE_SIZE
            },
            previous_owner: None,
            new_owner: Some("solo".into()),
        }]
    );
    for hash in [0, 1, u64::MAX] {
        assert_eq!(ring.lookup_hash(hash), Some("solo"));
    }
    assert_eq!(ring.shares(), vec![("solo", 1.0)]);
    let change = ring.remove_node("solo").unwrap();
    assert_eq!(change.moved_hashes, HASH_SPACE_SIZE);
    assert_eq!(change.moved_ranges[0].new_owner, None);
    assert!(ring.is_empty());
}

#[test]
fn lookup_takes_the_first_vnode_at_or_after_the_hash_and_wraps() {
    let ring = three_nodes();
    let vnodes: Vec<_> = ring.vnodes().collect();
    assert_eq!(vnodes.len(), 3 * DEFAULT_WEIGHT as usize);
    for window in vnodes.windows(2) {
        let (previous, _, _) = window[0];
        let (position, owner, _) = window[1];
        assert_eq!(ring.lookup_hash(position), Some(owner));
        assert_eq!(ring.lookup_hash(previous + 1), Some(owner));
    }
    let (first_position, first_owner, _) = vnodes[0];
    let (last_position, _, _) = vnodes[vnodes.len() - 1];
    assert_eq!(ring.lookup_hash(0), Some(first_owner));
    assert_eq!(ring.lookup_hash(first_position), Some(first_owner));
    assert!(last_position < u64::MAX);
    assert_eq!(ring.lookup_hash(last_position + 1), Some(first_owner));
    assert_eq!(ring.lookup_hash(u64::MAX), Some(first_owner));
    assert_eq!(
        ring.lookup(b"user:42"),
        ring.lookup_hash(key_hash(b"user:42"))
    );
    let sample: Vec<u64> = sample_hashes(20_000).collect();
    assert_fast_equals_binary_search(&ring, &sample);
}

#[test]
fn lookup_n_lists_distinct_nodes_owner_first() {
    let ring = three_nodes();
    for hash in sample_hashes(2_000) {
        let owners = ring.lookup_n_hash(hash, 2);
        assert_eq!(owners.len(), 2);
        assert_eq!(Some(owners[0]), ring.lookup_hash(hash));
        assert_ne!(owners[0], owners[1]);
        let all = ring.lookup_n_hash(hash, 10);
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted.as_slice(), ["alpha", "bravo", "charlie"]);
        assert_eq!(&all[..2], &owners[..]);
    }
    assert!(ring.lookup_n(b"k", 0).is_empty());
}

#[test]
fn shares_sum_to_one_and_are_roughly_even() {
    let ring = three_nodes();
    let shares = ring.shares();
    let total: f64 = shares.iter().map(|&(_, share)| share).sum();
    assert!((total - 1.0).abs() < 1e-12);
    for (name, share) in shares {
        assert!((0.2..0.47).contains(&share), "{name}: {share}");
    }
}

#[test]
fn ties_on_equal_positions_go_to_the_smaller_name_then_vnode_index() {
    // A genuine 64-bit collision cannot be found for a test, so build one by hand.
    let nodes = vec![
        NodeEntry {
            name: "a".into(),
            weight: 2,
        },
        NodeEntry {
            name: "b".into(),
            weight: 1,
        },
    ];
    let mut vnodes = vec![(100, 1, 0), (100, 0, 1), (50, 0, 0)];
    vnodes.sort_unstable();
    let ring = ClassicRing::from_parts(nodes, vnodes);
    assert_eq!(ring.lookup_hash(100), Some("a"));
    assert_eq!(ring.lookup_hash(99), Some("a"));
    assert_eq!(ring.lookup_hash(101), Some("a")); // Wraps to position 50.
    assert_eq!(ring.vnodes().nth(1), Some((100, "a", 1)));
    assert_fast_equals_binary_search(&ring, &[]);
}

#[test]
fn state_round_trips_through_serde_json() {
    let ring = three_nodes();
    let state = ring.state();
    assert_eq!(state.format_version, STATE_FORMAT_VERSION);
    let json = serde_json::to_string(&state).unwrap();
    let back: RingState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, state);
    assert_eq!(ClassicRing::from_state(&back).unwrap(), ring);

    // The ring itself serializes as its state.
    let ring_json = serde_json::to_string(&ring).unwrap();
    assert_eq!(ring_json, json);
    let ring_back: ClassicRing = serde_json::from_str(&ring_json).unwrap();
    assert_eq!(ring_back, ring);
    assert_eq!(
        json,
        r#"{"format_version":1,"nodes":[{"name":"alpha","weight":150},{"name":"bravo","weight":150},{"name":"charlie","weight":150}]}"#
    );
}

#[test]
fn unknown_state_versions_and_bad_states_are_rejected() {
    let mut state = three_nodes().state();
    state.format_version = 2;
    assert_eq!(
        ClassicRing::from_state(&state),
        Err(ClassicRingError::UnsupportedFormatVersion {
            found: 2,
            supported: STATE_FORMAT_VERSION
        })
    );
    let json = r#"{"format_version":2,"nodes":[]}"#;
    assert!(serde_json::from_str::<ClassicRing>(json).is_err());
    let json = r#"{"format_version":1,"nodes":[{"name":"a","weight":0}]}"#;
    assert!(serde_json::from_str::<ClassicRing>(json).is_err());
    // The order of the nodes in a state does not matter.
    let json = r#"{"format_version":1,"nodes":[{"name":"b","weight":5},{"name":"a","weight":7}]}"#;
    let ring: ClassicRing = serde_json::from_str(json).unwrap();
    assert_eq!(ring.nodes().collect::<Vec<_>>(), vec![("a", 7), ("b", 5)]);
}

#[test]
fn adding_then_removing_a_node_restores_the_ring_and_reverses_the_ranges() {
    let mut ring = three_nodes();
    let before = ring.clone();
    let added = ring.add_node("delta", 80).unwrap();
    let removed = ring.remove_node("delta").unwrap();
    assert_eq!(ring, before);
    assert_eq!(added.moved_hashes, removed.moved_hashes);
    for (a, r) in added.moved_ranges.iter().zip(&removed.moved_ranges) {
        assert_eq!(a.range, r.range);
        assert_eq!(a.previous_owner, r.new_owner);
        assert_eq!(a.new_owner, r.previous_owner);
    }
}

/// An operation of the property tests: add or remove one of 12 node names.
#[derive(Clone, Debug)]
enum Operation {
    Add { name: usize, weight: u32 },
    Remove { name: usize },
}

fn operation_strategy() -> impl Strategy<Value = Operation> {
    prop_oneof![
        (0usize..12, 1u32..40).prop_map(|(name, weight)| Operation::Add { name, weight }),
        (0usize..12).prop_map(|name| Operation::Remove { name }),
    ]
}

/// Number of sample keys for measuring the fraction of key space that moved.
const SAMPLE_KEYS: u64 = 200_000;

/// Checks a change against the two rings it connects: the ranges are sorted, disjoint, merged,
/// add up to `moved_hashes`, agree with `changes_between`, and tell exactly which sampled keys
/// and which range boundaries changed owner.
fn assert_change_is_exact(before: &ClassicRing, after: &ClassicRing, change: &RingChange) {
    assert_eq!(&ClassicRing::changes_between(before, after), change);
    let total: u128 = change.moved_ranges.iter().map(|m| m.range.len()).sum();
    assert_eq!(total, change.moved_hashes);
    for moved in &change.moved_ranges {
        assert!(!moved.range.is_empty());
        assert!(moved.range.end <= HASH_SPACE_SIZE);
        assert_ne!(moved.previous_owner, moved.new_owner);
    }
    for pair in change.moved_ranges.windows(2) {
        assert!(pair[0].range.end <= u128::from(pair[1].range.start));
        let mergeable = pair[0].range.end == u128::from(pair[1].range.start)
            && pair[0].previous_owner == pair[1].previous_owner
            && pair[0].new_owner == pair[1].new_owner;
        assert!(!mergeable, "unmerged ranges {pair:?}");
    }

    // Every range boundary and its neighbours, then the sample.
    let mut probes: Vec<u64> = Vec::new();
    for moved in &change.moved_ranges {
        let last = (moved.range.end - 1) as u64;
        probes.extend([moved.range.start, moved.range.start.wrapping_sub(1), last]);
        probes.push(last.wrapping_add(1));
    }
    let check = |hash: u64| -> bool {
        let old = before.lookup_hash(hash);
        let new = after.lookup_hash(hash);
        let reported = change.moved_owner_of(hash);
        if old == new {
            assert_eq!(reported, None, "hash {hash:#x} did not move");
            false
        } else {
            assert_eq!(reported, Some((old, new)), "hash {hash:#x} moved");
            true
        }
    };
    for hash in probes {
        check(hash);
    }
    let moved = sample_hashes(SAMPLE_KEYS)
        .filter(|&hash| check(hash))
        .count();
    let measured = moved as f64 / SAMPLE_KEYS as f64;
    let expected = change.moved_fraction();
    let keys = SAMPLE_KEYS as f64;
    let tolerance = 5.0 * (expected * (1.0 - expected) / keys).sqrt() + 1.0 / keys;
    assert!(
        (measured - expected).abs() <= tolerance,
        "measured {measured} vs {expected} (tolerance {tolerance})"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_add_and_remove_sequences_keep_the_ring_exact(
        operations in proptest::collection::vec(operation_strategy(), 1..10),
        lookups in proptest::collection::vec(any::<u64>(), 200),
    ) {
        let mut ring = ClassicRing::new();
        for operation in operations {
            let before = ring.clone();
            match operation {
                Operation::Add { name, weight } => {
                    let name = format!("node-{name}");
                    match ring.add_node(&name, weight) {
                        Ok(change) => {
                            prop_assert!(!before.contains_node(&name));
                            prop_assert_eq!(ring.weight(&name), Some(weight));
                            assert_change_is_exact(&before, &ring, &change);
                            // Adding moves keys to the new node only.
                            for moved in &change.moved_ranges {
                                prop_assert_eq!(moved.new_owner.as_deref(), Some(name.as_str()));
                            }
                        }
                        Err(error) => {
                            prop_assert_eq!(error, ClassicRingError::DuplicateNode { name });
                            prop_assert_eq!(&ring, &before);
                        }
                    }
                }
                Operation::Remove { name } => {
                    let name = format!("node-{name}");
                    match ring.remove_node(&name) {
                        Ok(change) => {
                            prop_assert!(!ring.contains_node(&name));
                            assert_change_is_exact(&before, &ring, &change);
                            // Removing moves that node's keys only.
                            for moved in &change.moved_ranges {
                                prop_assert_eq!(
                                    moved.previous_owner.as_deref(),
                                    Some(name.as_str())
                                );
                            }
                        }
                        Err(error) => {
                            prop_assert_eq!(error, ClassicRingError::UnknownNode { name });
                            prop_assert_eq!(&ring, &before);
                        }
                    }
                }
            }
            assert_consistent(&ring);
            assert_fast_equals_binary_search(&ring, &lookups);
            // Built one change at a time or all at once, and restored from its state: the same.
            prop_assert_eq!(&ClassicRing::with_nodes(&ring.state().nodes).unwrap(), &ring);
            let json = serde_json::to_string(&ring.state()).unwrap();
            let state: RingState = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&ClassicRing::from_state(&state).unwrap(), &ring);
        }
    }
}

/// Sorted positions crowded into a few buckets, with owners changing at most positions, and the
/// reference answer for them.
fn crowded_positions() -> (Vec<u64>, Vec<u32>) {
    let mut vnodes: Vec<(u64, u32)> = Vec::new();
    // 64 virtual nodes: buckets of 2^58 hashes. Bucket 3 holds 12 owner changes (overflow),
    // bucket 5 exactly 3, bucket 9 a tie and a virtual node on its last hash, bucket 11 two
    // positions one fraction apart, and the rest is spread out.
    let bucket = |b: u64| b << 58;
    for i in 0..12u64 {
        vnodes.push((bucket(3) + i * (1 << 50) + 7, (i % 3) as u32));
    }
    for i in 0..3u64 {
        vnodes.push((bucket(5) + (i + 1) * (1 << 54), 4 + i as u32));
    }
    vnodes.push((bucket(9) + 1000, 1));
    vnodes.push((bucket(9) + 1000, 2));
    vnodes.push((bucket(10) - 1, 3));
    vnodes.push((bucket(11) + (5 << 42), 5));
    vnodes.push((bucket(11) + (5 << 42) + 1, 6));
    vnodes.push((bucket(11) + (6 << 42), 7));
    let mut k = 0u64;
    while vnodes.len() < 64 {
        let position = key_hash(&k.to_le_bytes());
        vnodes.push((position, (k % 8) as u32));
        k += 1;
    }
    vnodes.sort_unstable();
    vnodes.into_iter().unzip()
}

fn reference_slot(positions: &[u64], owners: &[u32], hash: u64) -> u32 {
    let index = positions.partition_point(|&p| p < hash);
    owners[if index == positions.len() { 0 } else { index }]
}

fn assert_buckets_exact<O: bucket_index::OwnerSlot>(positions: &[u64], owners: &[u32]) {
    let index = bucket_index::Buckets::<O>::new(positions, owners).unwrap();
    assert_eq!(index.entries.len(), 64);
    assert!(index.entries.iter().any(|entry| entry.is_overflow()));
    let mut hashes = vec![0, 1, u64::MAX - 1, u64::MAX];
    for &p in positions {
        for offset in [0u64, 1, 2, 1 << 20, 1 << 41, 1 << 42, 1 << 43, 1 << 50] {
            hashes.extend([p.wrapping_sub(offset), p.wrapping_add(offset)]);
        }
    }
    for b in 0..64u64 {
        hashes.extend([b << 58, (b << 58) | ((1 << 58) - 1)]);
    }
    hashes.extend(sample_hashes(20_000));
    for hash in hashes {
        assert_eq!(
            index.owner_slot(hash, positions, owners),
            Some(reference_slot(positions, owners, hash)),
            "hash {hash:#x}"
        );
    }
}

#[test]
fn overflow_buckets_round_trip_large_first_positions() {
    for first in [0usize, 1, 0x7FFF, 0x8000, 0xFFFF, 0x1_2345, 0x7FFF_FFFF] {
        let entry = bucket_index::Bucket::<u16>::overflow(first);
        assert!(entry.is_overflow());
        assert_eq!(entry.first_position(), first);
        // No lane has its top bit set.
        assert_eq!(entry.packed & 0x8000_8000_8000_8000, 0);
    }
}

#[test]
fn narrow_and_wide_indexes_match_the_binary_search_on_crowded_buckets() {
    let (positions, owners) = crowded_positions();
    assert_buckets_exact::<u16>(&positions, &owners);
    assert_buckets_exact::<u32>(&positions, &owners);
    // Slots beyond u16 need the wide index.
    let wide_owners: Vec<u32> = owners.iter().map(|&o| o + 70_000).collect();
    assert!(bucket_index::Buckets::<u16>::new(&positions, &wide_owners).is_none());
    assert_buckets_exact::<u32>(&positions, &wide_owners);
}

#[test]
fn a_ring_of_more_than_65536_nodes_uses_the_wide_index() {
    let nodes: Vec<NodeState> = (0..65_600)
        .map(|node| NodeState {
            name: format!("n{node}"),
            weight: 1,
        })
        .collect();
    let ring = ClassicRing::with_nodes(&nodes).unwrap();
    assert!(matches!(ring.bucket_index, HashBucketIndex::Wide(_)));
    for hash in sample_hashes(20_000).chain(edge_hashes(&ring).into_iter().take(30_000)) {
        assert_eq!(ring.lookup_hash(hash), ring.lookup_hash_binary_search(hash));
    }
}
