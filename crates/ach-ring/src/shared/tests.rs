//! Unit tests of the shared ring; the many-thread stress test is `tests/shared_stress.rs`.

use super::*;
use crate::classic::NodeState;
use proptest::prelude::*;

fn four_token_ring() -> TokenRing {
    TokenRing::round_robin(vec![0.1, 0.4, 0.6, 0.9], 2).unwrap()
}

#[test]
fn a_new_handle_is_version_0_with_one_live_snapshot() {
    let shared = SharedRing::new(four_token_ring());
    assert_eq!(shared.version(), 0);
    assert_eq!(shared.load().version(), 0);
    assert_eq!(shared.live_snapshots(), 1);
    assert_eq!(shared.load().ring(), &four_token_ring());
}

#[test]
fn apply_publishes_the_next_version_and_returns_m_keys() {
    let shared = SharedRing::new(four_token_ring());
    let commit = shared
        .apply(&[TokenMove {
            token: 2,
            from: NodeId(0),
            to: NodeId(1),
        }])
        .unwrap();
    assert_eq!(commit.version, 1);
    assert!((commit.outcome - 0.2).abs() < 1e-12);
    assert_eq!(shared.version(), 1);
    assert_eq!(shared.load().owner(2), NodeId(1));
}

#[test]
fn a_rejected_plan_publishes_nothing() {
    let shared = SharedRing::new(four_token_ring());
    let before = shared.snapshot();
    let error = shared
        .apply(&[
            TokenMove {
                token: 0,
                from: NodeId(0),
                to: NodeId(1),
            },
            TokenMove {
                token: 1,
                from: NodeId(0), // Token 1 belongs to node 1.
                to: NodeId(1),
            },
        ])
        .unwrap_err();
    assert!(matches!(error, RingError::WrongSource { token: 1, .. }));
    assert_eq!(shared.version(), 0);
    assert!(Arc::ptr_eq(&before, &shared.snapshot()));
    assert_eq!(shared.live_snapshots(), 1);
}

#[test]
fn an_empty_plan_publishes_nothing() {
    let shared = SharedRing::new(four_token_ring());
    let commit = shared.apply(&[]).unwrap();
    assert_eq!(
        commit,
        Commit {
            version: 0,
            outcome: 0.0
        }
    );
    assert_eq!(shared.version(), 0);
}

#[test]
fn a_held_snapshot_keeps_its_version_and_is_freed_when_dropped() {
    let shared = SharedRing::new(four_token_ring());
    let counter = shared.snapshot_counter();
    let old = shared.snapshot();
    let guard = shared.load();
    let owner_before = old.route(b"some key");
    let token = old.lookup_key(b"some key");
    shared
        .apply(&[TokenMove {
            token,
            from: owner_before,
            to: NodeId(1 - owner_before.0),
        }])
        .unwrap();
    // The old version stays alive, unchanged, for its holders.
    assert_eq!(counter.live(), 2);
    assert_eq!(old.version(), 0);
    assert_eq!(guard.version(), 0);
    assert_eq!(old.route(b"some key"), owner_before);
    assert_eq!(guard.route(b"some key"), owner_before);
    assert_eq!(shared.load().route(b"some key"), NodeId(1 - owner_before.0));
    drop(old);
    assert_eq!(counter.live(), 2, "the guard still holds version 0");
    drop(guard);
    assert_eq!(counter.live(), 1, "only the current version is left");
    drop(shared);
    assert_eq!(counter.live(), 0, "every snapshot is freed with the handle");
}

#[test]
fn a_panicking_change_publishes_nothing_and_leaves_the_handle_usable() {
    let shared = SharedRing::new(four_token_ring());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = shared.commit(|_ring| -> Result<(), RingError> { panic!("change failed") });
    }));
    assert!(result.is_err());
    assert_eq!(shared.version(), 0);
    assert_eq!(shared.live_snapshots(), 1);
    let commit = shared.commit(|_ring| Ok::<_, RingError>(7)).unwrap();
    assert_eq!(
        commit,
        Commit {
            version: 1,
            outcome: 7
        }
    );
}

#[test]
fn publish_replaces_the_ring_with_the_next_version() {
    let shared = SharedRing::new(four_token_ring());
    let replacement = TokenRing::round_robin(vec![0.25, 0.75], 1).unwrap();
    assert_eq!(shared.publish(replacement.clone()), 1);
    assert_eq!(shared.load().ring(), &replacement);
    assert_eq!(shared.load().route(b"anything"), NodeId(0));
}

#[test]
fn token_ring_route_hashes_the_key_to_its_token() {
    let ring = four_token_ring();
    for key in [&b""[..], b"a", b"user:42", b"0123456789abcdef"] {
        let token = ring.lookup_binary_search(crate::key_position(key));
        assert_eq!(ring.route(key), ring.owner(token));
    }
}

#[test]
fn classic_ring_joins_and_leaves_through_the_handle() {
    let ring = ClassicRing::with_nodes(&[NodeState {
        name: "db-1".to_owned(),
        weight: 100,
    }])
    .unwrap();
    let shared = SharedRing::new(ring);
    assert_eq!(shared.load().route(b"order:1"), Some("db-1"));
    let joined = shared.add_node("db-2", 100).unwrap();
    assert_eq!(joined.version, 1);
    assert!(joined.outcome.moved_fraction() > 0.0);
    let left = shared.remove_node("db-1").unwrap();
    assert_eq!(left.version, 2);
    assert_eq!(shared.load().route(b"order:1"), Some("db-2"));
    // A bad change is the ring's own error, and publishes nothing.
    assert_eq!(
        shared.remove_node("db-1").unwrap_err(),
        ClassicRingError::UnknownNode {
            name: "db-1".to_owned()
        }
    );
    assert_eq!(shared.version(), 2);
    let empty = shared.remove_node("db-2").unwrap();
    assert_eq!(empty.version, 3);
    assert_eq!(shared.load().route(b"order:1"), None);
}

#[test]
fn the_handle_and_its_snapshots_cross_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SharedRing<TokenRing>>();
    assert_send_sync::<SharedRing<ClassicRing>>();
    assert_send_sync::<SharedRing<NamedRing>>();
    assert_send_sync::<Arc<Snapshot<TokenRing>>>();
}

proptest! {
    /// Commits through the handle give the same ring as applying the same plans to a plain
    /// ring; each accepted non-empty plan is one version, each rejected plan none.
    #[test]
    fn commits_match_a_plain_ring(
        plans in prop::collection::vec(
            prop::collection::vec((0usize..10, 0u32..3, 0u32..3), 0..4),
            0..20,
        )
    ) {
        let positions: Vec<f64> = (0..8).map(|s| (s as f64 + 0.5) / 8.0).collect();
        let mut plain = TokenRing::round_robin(positions, 3).unwrap();
        let shared = SharedRing::new(plain.clone());
        let mut versions = 0;
        for plan in &plans {
            let moves: Vec<TokenMove> = plan
                .iter()
                .map(|&(token, from, to)| TokenMove { token, from: NodeId(from), to: NodeId(to) })
                .collect();
            let expected = plain.apply(&moves);
            let got = shared.apply(&moves);
            match (&expected, &got) {
                (Ok(m_keys), Ok(commit)) => {
                    prop_assert_eq!(*m_keys, commit.outcome);
                    if !moves.is_empty() {
                        versions += 1;
                    }
                }
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                _ => prop_assert!(false, "plain {:?} vs shared {:?}", expected, got),
            }
            prop_assert_eq!(shared.version(), versions);
            let current = shared.snapshot();
            prop_assert_eq!(current.ring(), &plain);
        }
        prop_assert_eq!(shared.live_snapshots(), 1);
    }
}

#[test]
fn a_named_join_publishes_the_table_then_the_switch() {
    let ring = NamedRing::new(
        64,
        vec![
            NodeSpec::new("cache-a", 1.0).with_address("127.0.0.1:7000"),
            NodeSpec::new("cache-b", 1.0).with_address("127.0.0.1:7001"),
        ],
    )
    .unwrap();
    let shared = SharedRing::new(ring);
    let before = shared.snapshot();

    // Plan the join: the table gains the node, no key changes owner yet.
    let join = shared
        .join(NodeSpec::new("cache-c", 1.0).with_address("127.0.0.1:7002"))
        .unwrap();
    assert_eq!(join.version, 1);
    let planned = shared.snapshot();
    assert_eq!(planned.node_id("cache-c"), Some(join.outcome.node));
    assert_eq!(planned.ring(), &{
        let mut same = (*before).clone();
        same.join(NodeSpec::new("cache-c", 1.0).with_address("127.0.0.1:7002"))
            .unwrap();
        same
    });
    for key in (0..200u32).map(|k| k.to_le_bytes()) {
        assert_eq!(planned.route(&key), before.route(&key));
    }

    // Copy (not modelled here), then commit: the moved tokens' keys now answer cache-c.
    let switch = shared.apply(&join.outcome.moves).unwrap();
    assert_eq!(switch.version, 2);
    assert!((switch.outcome - join.outcome.moved_fraction).abs() < 1e-12);
    let after = shared.load();
    let mut moved = 0;
    for key in (0..2000u32).map(|k| k.to_le_bytes()) {
        let token = after.ring().ring().lookup_key(&key);
        let node = after.route(&key);
        if join.outcome.moves.iter().any(|mv| mv.token == token) {
            assert_eq!(node.name, "cache-c");
            assert_eq!(node.address.as_deref(), Some("127.0.0.1:7002"));
            moved += 1;
        } else {
            assert_eq!(node, before.route(&key));
        }
    }
    assert!(moved > 0);

    // Committing the same moves again is stale: rejected, nothing published.
    assert!(shared.apply(&join.outcome.moves).is_err());
    assert_eq!(shared.version(), 2);
}

#[test]
fn a_named_leave_keeps_answering_with_the_node_until_the_switch() {
    let ring = NamedRing::new(
        64,
        vec![
            NodeSpec::new("a", 1.0),
            NodeSpec::new("b", 1.0),
            NodeSpec::new("c", 1.0),
        ],
    )
    .unwrap();
    let shared = SharedRing::new(ring);
    let keys: Vec<[u8; 4]> = (0..500u32).map(|k| k.to_le_bytes()).collect();
    let held_by_b = keys
        .iter()
        .filter(|key| shared.load().route(&key[..]).name == "b")
        .count();
    assert!(held_by_b > 0);
    let leave = shared.leave("b").unwrap();
    assert_eq!(leave.version, 1);
    let planned = shared.load();
    assert!(!planned.node(planned.node_id("b").unwrap()).unwrap().live);
    assert_eq!(
        keys.iter()
            .filter(|key| planned.route(&key[..]).name == "b")
            .count(),
        held_by_b
    );
    drop(planned);
    shared.apply(&leave.outcome.moves).unwrap();
    assert!(
        keys.iter()
            .all(|key| shared.load().route(&key[..]).name != "b")
    );
    assert_eq!(
        shared.leave("b").unwrap_err(),
        NamedRingError::AlreadyLeft {
            name: "b".to_owned()
        }
    );
    assert_eq!(shared.version(), 2);
}

#[test]
fn a_ring_reader_follows_commits_and_releases_old_versions() {
    let shared = SharedRing::new(four_token_ring());
    let counter = shared.snapshot_counter();
    let mut reader = shared.reader();
    assert_eq!(reader.load().version(), 0);
    shared
        .apply(&[TokenMove {
            token: 0,
            from: NodeId(0),
            to: NodeId(1),
        }])
        .unwrap();
    // The reader still holds version 0 until it loads again.
    assert_eq!(counter.live(), 2);
    assert_eq!(reader.load().version(), 1);
    assert_eq!(reader.load().owner(0), NodeId(1));
    assert_eq!(counter.live(), 1);
    drop(reader);
    drop(shared);
    assert_eq!(counter.live(), 0);
}

#[test]
fn a_token_ring_commit_copies_only_the_owners() {
    let shared = SharedRing::new(TokenRing::evenly_spaced(1024, 16).unwrap());
    let before = shared.snapshot();
    let from = before.owner(5);
    shared
        .apply(&[TokenMove {
            token: 5,
            from,
            to: NodeId((from.0 + 1) % 16),
        }])
        .unwrap();
    let after = shared.snapshot();
    // The positions (and everything derived from them) are shared; the owners are not.
    assert!(std::ptr::eq(before.positions(), after.positions()));
    assert!(std::ptr::eq(before.arcs(), after.arcs()));
    assert!(!std::ptr::eq(before.owners(), after.owners()));
    assert_ne!(before.owner(5), after.owner(5));
}
