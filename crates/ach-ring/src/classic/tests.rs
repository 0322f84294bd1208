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
    // Every entry of the bucket index is either the single owner of its bucket or the first
    // position of the bucket.
    let index = &ring.bucket_index;
    if ring.positions.is_empty() {
        assert!(index.entries.is_empty());
    } else {
        let buckets = 1usize << (64 - index.shift);
        assert_eq!(index.entries.len(), buckets);
        assert!(buckets >= ring.positions.len().min(1 << MAX_BUCKET_BITS));
        for (bucket, &entry) in index.entries.iter().enumerate() {
            let bucket_start = (bucket as u64) << index.shift;
            let bucket_last = bucket_start | (u64::MAX >> (64 - index.shift));
            if entry & SINGLE_OWNER_FLAG != 0 {
                let slot = entry & !SINGLE_OWNER_FLAG;
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
}

/// Hashes on and around every boundary of the ring.
fn edge_hashes(ring: &ClassicRing) -> Vec<u64> {
    let mut hashes = vec![0, 1, u64::MAX - 1, u64::MAX, 1 << 63];
    for &p in &ring.positions {
        hashes.extend([p.wrapping_sub(1), p, p.wrapping_add(1)]);
    }
    hashes
}

fn assert_fast_equals_binary_search(ring: &ClassicRing, extra: &[u64]) {
    for &hash in edge_hashes(ring).iter().chain(extra) {
        assert_eq!(
            ring.lookup_hash(hash),
            ring.lookup_hash_binary_search(hash),
            "hash {hash:#x}"
        );
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
        assert_eq!(sorted, vec!["alpha", "bravo", "charlie"]);
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
