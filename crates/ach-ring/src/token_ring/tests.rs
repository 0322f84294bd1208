#[test]
fn arc_orders_are_those_of_stable_sorts() {
    // Ties (equal arcs, and -0.0 against 0.0, which total_cmp orders) in both orders.
    let arcs: [f64; 10] = [0.25, 0.125, 0.25, -0.0, 0.0, 0.125, 0.5, 0.25, 1e-300, 0.0];
    assert_eq!(arc_orders(&arcs), stable_sort_orders(&arcs));
    let many: Vec<f64> = (0..5000_i32)
        .map(|i| f64::from((i * 7919) % 97) / 97.0)
        .collect();
    assert_eq!(arc_orders(&many), stable_sort_orders(&many));
}

/// The two arc orders as stable sorts by `f64::total_cmp` give them: what `arc_orders` and a
/// ring's token orders must equal.
fn stable_sort_orders(arcs: &[f64]) -> (Vec<usize>, Vec<usize>) {
    let mut shortest: Vec<usize> = (0..arcs.len()).collect();
    shortest.sort_by(|&a, &b| arcs[a].total_cmp(&arcs[b]));
    let mut longest: Vec<usize> = (0..arcs.len()).collect();
    longest.sort_by(|&a, &b| arcs[b].total_cmp(&arcs[a]));
    (shortest, longest)
}

use super::*;

fn ring() -> TokenRing {
    TokenRing::round_robin(vec![0.1, 0.4, 0.6, 0.9], 2).unwrap()
}

#[test]
fn arcs_sum_to_one_and_wrap() {
    let r = ring();
    let expected = [0.2, 0.3, 0.2, 0.3];
    for (a, e) in r.arcs().iter().zip(expected) {
        assert!((a - e).abs() < 1e-12);
    }
}

#[test]
fn lookup_is_first_token_at_or_after() {
    let r = ring();
    assert_eq!(r.lookup(0.0), 0);
    assert_eq!(r.lookup(0.1), 0);
    assert_eq!(r.lookup(0.100001), 1);
    assert_eq!(r.lookup(0.9), 3);
    assert_eq!(r.lookup(0.95), 0);
}

#[test]
fn counts_and_shares_equal_the_two_passes() {
    let ring = TokenRing::capacity_weighted(997, &[1.0, 0.55, 0.25, 0.55]).unwrap();
    for n in [0, 2, 4, 6] {
        assert_eq!(ring.counts_and_shares(n), (ring.counts(n), ring.shares(n)));
    }
}

#[test]
fn apply_counts_net_changes_and_rolls_back_on_error() {
    let mut r = ring();
    let there = TokenMove {
        token: 1,
        from: NodeId(1),
        to: NodeId(0),
    };
    let back = TokenMove {
        token: 1,
        from: NodeId(0),
        to: NodeId(1),
    };
    assert_eq!(r.apply(&[there, back]).unwrap(), 0.0);
    let bad = TokenMove {
        token: 2,
        from: NodeId(1),
        to: NodeId(0),
    };
    let before = r.clone();
    let _ = r.owners_longest_first();
    assert!(matches!(
        r.apply(&[there, bad]),
        Err(RingError::WrongSource { token: 2, .. })
    ));
    assert_eq!(r, before);
    // The rollback restores every copy of the owners the ring keeps, and the counts.
    assert_eq!(r.owners_longest_first(), before.owners_longest_first());
    assert_eq!(r.counts(2), before.counts(2));
}

#[test]
fn invariants_report_every_violation() {
    let r = TokenRing::new(vec![0.1, 0.4], vec![NodeId(0), NodeId(5)]).unwrap();
    let live = [true, true];
    let v = r.check_invariants(&InvariantCheck {
        n_nodes: 2,
        live: &live,
        v_min: 1,
    });
    assert_eq!(
        v,
        vec![
            InvariantViolation::TooFewTokens {
                node: NodeId(1),
                count: 0,
                v_min: 1
            },
            InvariantViolation::InvalidOwner {
                token: 1,
                owner: NodeId(5),
                n_nodes: 2
            },
        ]
    );
}

#[test]
fn owners_with_ids_far_beyond_the_tokens_are_counted_too() {
    // Ids of V + 1024 or more are not kept in the per-node counts; every query still
    // counts them.
    let far = NodeId(5000);
    let mut r = TokenRing::new(vec![0.1, 0.4], vec![NodeId(0), far]).unwrap();
    assert_eq!(r.count(far), 1);
    assert_eq!(r.counts(5001)[5000], 1);
    assert_eq!(r.counts(2), vec![1, 0]);
    let check = InvariantCheck {
        n_nodes: 2,
        live: &[true, true],
        v_min: 0,
    };
    assert_eq!(r.check_owner_invariants(&check).len(), 1);
    r.apply(&[TokenMove {
        token: 1,
        from: far,
        to: NodeId(1),
    }])
    .unwrap();
    assert_eq!(r.count(far), 0);
    assert_eq!(r.counts(2), vec![1, 1]);
    assert!(r.check_owner_invariants(&check).is_empty());
    assert_eq!(r, TokenRing::round_robin(vec![0.1, 0.4], 2).unwrap());
}

#[test]
fn construction_rejects_bad_positions() {
    assert!(matches!(
        TokenRing::round_robin(vec![0.2, 0.2], 1),
        Err(RingError::PositionsNotIncreasing { index: 1, .. })
    ));
    assert!(matches!(
        TokenRing::round_robin(vec![1.0], 1),
        Err(RingError::PositionOutOfRange { index: 0, .. })
    ));
    assert_eq!(TokenRing::round_robin(vec![], 1), Err(RingError::NoTokens));
}

/// The next `f64` above `x` (finite `x >= 0`), without `f64::next_up` (Rust 1.86).
fn next_up(x: f64) -> f64 {
    if x == 0.0 {
        f64::from_bits(1)
    } else {
        f64::from_bits(x.to_bits() + 1)
    }
}

/// The next `f64` below `x` (finite `x > 0`).
fn next_down(x: f64) -> f64 {
    f64::from_bits(x.to_bits() - 1)
}

/// Inputs on and around every boundary the lookup has: each position and its neighbours,
/// the ends of the circle, values outside `[0, 1)`, infinities and NaN.
fn edge_inputs(positions: &[f64]) -> Vec<f64> {
    let mut inputs = vec![
        0.0,
        -0.0,
        f64::from_bits(1),
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        -1.0,
        -0.5,
        next_down(1.0),
        1.0,
        next_up(1.0),
        1.5,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
    ];
    for &p in positions {
        inputs.push(p);
        inputs.push(next_up(p));
        if p > 0.0 {
            inputs.push(next_down(p));
        }
    }
    inputs
}

/// A deterministic, well spread point of `[0, 1)`: the top 53 bits of XXH3 of `k`.
fn sample_point(k: u64) -> f64 {
    (crate::classic::key_hash(&k.to_le_bytes()) >> 11) as f64 / (1u64 << 53) as f64
}

fn assert_fast_equals_binary_search(ring: &TokenRing, extra: &[f64]) {
    for h in edge_inputs(ring.positions())
        .into_iter()
        .chain(extra.iter().copied())
    {
        assert_eq!(
            ring.lookup(h),
            ring.lookup_binary_search(h),
            "h = {h:e} ({:#x})",
            h.to_bits()
        );
    }
}

#[test]
fn lookup_outside_the_circle_and_nan_is_token_zero() {
    let r = ring();
    for h in [
        -0.0,
        -1.0,
        1.0,
        7.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ] {
        assert_eq!(r.lookup(h), 0, "h = {h}");
        assert_eq!(r.lookup_binary_search(h), 0, "h = {h}");
    }
    assert_fast_equals_binary_search(&r, &[]);
}

#[test]
fn lookup_of_exact_positions_and_neighbours() {
    let r = ring();
    for (token, &p) in r.positions().iter().enumerate() {
        assert_eq!(r.lookup(p), token);
        assert_eq!(r.lookup(next_down(p)), token);
        assert_eq!(r.lookup(next_up(p)), (token + 1) % r.len());
    }
}

#[test]
fn lookup_with_clustered_positions_and_position_zero() {
    // All tokens in one bucket, plus one at exactly 0 and one just below 1.
    let mut positions = vec![0.0];
    positions.extend((0..500).map(|k| 0.25 + k as f64 * 1e-12));
    positions.push(next_down(1.0));
    let r = TokenRing::round_robin(positions, 3).unwrap();
    let extra: Vec<f64> = (0..10_000).map(sample_point).collect();
    assert_fast_equals_binary_search(&r, &extra);
    assert_eq!(r.lookup(0.0), 0);
    assert_eq!(r.lookup(next_up(0.0)), 1);
    assert_eq!(r.lookup(next_down(1.0)), 501);
}

#[test]
fn single_token_owns_everything() {
    let r = TokenRing::round_robin(vec![0.3], 1).unwrap();
    assert_eq!(r.arcs(), &[1.0]);
    assert_fast_equals_binary_search(&r, &[0.1, 0.3, 0.9]);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Number of sample keys for measuring the fraction of key space that moved.
    const SAMPLE_KEYS: u64 = 200_000;

    fn ring_strategy() -> impl Strategy<Value = TokenRing> {
        (proptest::collection::vec(0.0f64..1.0, 1..400), 1usize..8).prop_map(
            |(mut positions, n_nodes)| {
                positions.sort_by(f64::total_cmp);
                positions.dedup();
                TokenRing::round_robin(positions, n_nodes).unwrap()
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn arc_orders_equal_stable_sorts_for_any_values(
            any_values in proptest::collection::vec(proptest::num::f64::ANY, 0..300),
            few_values in proptest::collection::vec(0u8..6, 0..300),
            close_values in proptest::collection::vec(1.0f64..1.0 + 1e-9, 0..300),
            crowded_values in proptest::collection::vec((1u8..5, 0u8..40), 0..3000),
        ) {
            let few: Vec<f64> = few_values.iter().map(|&v| f64::from(v) / 8.0).collect();
            // A few values, each with copies a few ulps apart: the arcs of slots with equal
            // key counts, which the sort parts by their last bits.
            let crowded: Vec<f64> = crowded_values
                .iter()
                .map(|&(value, ulps)| f64::from(value) * (1.0 + f64::from(ulps) * f64::EPSILON))
                .collect();
            for arcs in [any_values, few, close_values, crowded] {
                prop_assert_eq!(arc_orders(&arcs), super::stable_sort_orders(&arcs));
            }
        }

        /// Moves of distinct tokens in increasing order are applied as the general case
        /// applies them: the same owners, `M_keys` to the bit, and the same first error with
        /// the ring left unchanged. The moves are made in increasing order (no case is
        /// rejected): about half of the cases name a wrong source at one of their moves, and
        /// some end in tokens past the ring's end, the only place such tokens can keep the
        /// order.
        #[test]
        fn distinct_moves_apply_as_moves_in_order(
            ring in ring_strategy(),
            picks in proptest::collection::vec((any::<bool>(), 0u32..8), 0..400),
            wrong_source in proptest::option::of(any::<proptest::sample::Index>()),
            past_the_end in 0usize..3,
        ) {
            let mut moves: Vec<TokenMove> = picks
                .iter()
                .take(ring.len())
                .enumerate()
                .filter(|(_, pick)| pick.0)
                .map(|(token, &(_, to))| TokenMove { token, from: ring.owner(token), to: NodeId(to) })
                .collect();
            if let (Some(index), false) = (wrong_source, moves.is_empty()) {
                let at = index.index(moves.len());
                moves[at].from = NodeId(9);
            }
            moves.extend((0..past_the_end).map(|k| TokenMove {
                token: ring.len() + 2 * k,
                from: NodeId(0),
                to: NodeId(1),
            }));
            let (mut distinct, mut in_order) = (ring.clone(), ring.clone());
            // Sorted moves of distinct tokens take the distinct path.
            let got = distinct.apply(&moves).map(f64::to_bits);
            let want = in_order.apply_in_order(&moves).map(f64::to_bits);
            prop_assert_eq!(got, want.clone());
            prop_assert_eq!(distinct.owners(), in_order.owners());
            prop_assert_eq!(distinct.counts(9), in_order.counts(9));
            prop_assert_eq!(&distinct, &in_order);
            // Unmeasured, they set the same owners or fail the same way.
            let mut unmeasured = ring.clone();
            prop_assert_eq!(unmeasured.apply_unmeasured(&moves), want.map(|_| ()));
            prop_assert_eq!(&unmeasured, &in_order);
        }

        #[test]
        fn fast_lookup_equals_binary_search(
            ring in ring_strategy(),
            hashes in proptest::collection::vec(proptest::num::f64::ANY, 0..500),
            unit_hashes in proptest::collection::vec(0.0f64..1.0, 0..2000),
        ) {
            let extra: Vec<f64> = hashes.into_iter().chain(unit_hashes).collect();
            assert_fast_equals_binary_search(&ring, &extra);
        }

        #[test]
        fn m_keys_is_the_arcs_of_changed_tokens_and_the_measured_fraction(
            mut ring in ring_strategy(),
            n_nodes in 1u32..8,
            raw_moves in proptest::collection::vec((any::<usize>(), 0u32..8), 0..60),
        ) {
            // A first change of owners (token 0 to its owner), after which the ring keeps
            // rank sets once asked for.
            let first_owner = ring.owner(0);
            ring.apply(&[TokenMove { token: 0, from: first_owner, to: first_owner }]).unwrap();
            let before = ring.clone();
            // Build the owners in arc order and the rank sets now, so that the moves below
            // must keep them.
            let _ = (ring.owners_longest_first(), ring.owners_shortest_first());
            let _ = (ring.rank_sets_longest_first(), ring.rank_sets_shortest_first());
            let moves: Vec<TokenMove> = {
                let mut owners = ring.owners().to_vec();
                raw_moves
                    .into_iter()
                    .map(|(token, to)| {
                        let token = token % owners.len();
                        let to = NodeId(to % n_nodes);
                        let mv = TokenMove { token, from: owners[token], to };
                        owners[token] = to;
                        mv
                    })
                    .collect()
            };
            let mut unmeasured = ring.clone();
            let m_keys = ring.apply(&moves).unwrap();
            unmeasured.apply_unmeasured(&moves).unwrap();
            prop_assert_eq!(&unmeasured, &ring);

            // Exact: the arcs of the tokens whose owner differs, summed in token order.
            let changed_arcs: f64 = (0..ring.len())
                .filter(|&s| before.owner(s) != ring.owner(s))
                .map(|s| ring.arcs()[s])
                .sum();
            prop_assert_eq!(m_keys, changed_arcs);
            prop_assert_eq!(m_keys, before.m_keys_to(ring.owners()));
            // The owners in arc order follow every change.
            let in_order = |order: &[usize]| -> Vec<NodeId> {
                order.iter().map(|&s| ring.owner(s)).collect()
            };
            prop_assert_eq!(ring.owners_longest_first(), in_order(ring.tokens_longest_first()));
            prop_assert_eq!(ring.owners_shortest_first(), in_order(ring.tokens_shortest_first()));
            // So do the rank sets: each node's are the ranks of its tokens, in increasing order.
            for (sets, order) in [
                (ring.rank_sets_longest_first(), ring.tokens_longest_first()),
                (ring.rank_sets_shortest_first(), ring.tokens_shortest_first()),
            ] {
                let sets = sets.expect("a ring this small keeps rank sets");
                for node in (0..10).map(NodeId) {
                    let ranks: Vec<usize> = (0..order.len()).filter(|&r| ring.owner(order[r]) == node).collect();
                    prop_assert_eq!(sets.ranks_of(node).collect::<Vec<_>>(), ranks);
                }
            }
            let longest = ring.arcs().iter().copied().fold(0.0, f64::max);
            prop_assert_eq!(ring.max_arc().to_bits(), longest.to_bits());
            // So do the counts, and a ring built from the same owners is equal.
            for n in [0, 3, 8, 9] {
                prop_assert_eq!(ring.counts(n), ring.counts_by_scan(n));
            }
            let rebuilt = TokenRing::new(ring.positions().to_vec(), ring.owners().to_vec());
            prop_assert_eq!(&ring, &rebuilt.unwrap());
            // Every move counts as a change of owner, one that sets the same owner too.
            prop_assert_eq!(ring.owner_changes(), before.owner_changes() + moves.len() as u64);

            // Sampled: the fraction of deterministic pseudo-random keys whose owner changed,
            // within 5 binomial standard errors (plus one key of slack for tiny fractions).
            let moved = (0..SAMPLE_KEYS)
                .map(sample_point)
                .filter(|&h| before.owner(before.lookup(h)) != ring.owner(ring.lookup(h)))
                .count();
            let measured = moved as f64 / SAMPLE_KEYS as f64;
            let keys = SAMPLE_KEYS as f64;
            let tolerance = 5.0 * (m_keys * (1.0 - m_keys) / keys).sqrt() + 1.0 / keys;
            prop_assert!(
                (measured - m_keys).abs() <= tolerance,
                "measured {} vs M_keys {} (tolerance {})", measured, m_keys, tolerance
            );

            // The invariants other than v_min hold whatever the owners.
            let n = n_nodes.max(8) as usize;
            let live = vec![true; n];
            let violations = ring.check_invariants(&InvariantCheck { n_nodes: n, live: &live, v_min: 0 });
            prop_assert!(violations.is_empty(), "{:?}", violations);
            assert_fast_equals_binary_search(&ring, &[]);
        }
    }
}

#[test]
fn arc_orders_are_those_of_stable_sorts_for_a_ring_of_slots() {
    // A ring of 16384 slots weighted by key counts that repeat (as few keys per slot do):
    // equal counts give arcs that differ in their last bits only, which the sort must order
    // as total_cmp does.
    let keys: Vec<f64> = (0..16384_u32)
        .map(|s| f64::from(s * 7919 % 13 + 1))
        .collect();
    let ring = TokenRing::from_arc_weights(&keys, vec![NodeId(0); keys.len()]).unwrap();
    let arcs = ring.arcs();
    let (shortest, longest) = stable_sort_orders(arcs);
    assert_eq!(ring.tokens_shortest_first(), shortest.as_slice());
    assert_eq!(ring.tokens_longest_first(), longest.as_slice());
    let distinct_arcs = {
        let mut sorted = arcs.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted.dedup();
        sorted.len()
    };
    // The test is only worth its name if equal counts gave arcs that are not all equal.
    assert!(distinct_arcs > 13, "{distinct_arcs} distinct arcs");
}

/// Moves `token` from node `from` to node `to` (which must own it).
fn move_token(ring: &mut TokenRing, token: usize, from: u32, to: u32) {
    let mv = TokenMove {
        token,
        from: NodeId(from),
        to: NodeId(to),
    };
    ring.apply(&[mv]).unwrap();
}

#[test]
fn rank_sets_are_kept_from_the_first_change_of_owners_while_they_fit() {
    // 4096 tokens take 64 words a node: ids up to 1023 fit in 2^16 words, id 1024 does not.
    let mut ring = TokenRing::evenly_spaced(4096, 4).unwrap();
    // A ring whose owners never changed keeps none.
    assert!(ring.rank_sets_shortest_first().is_none());
    move_token(&mut ring, 5, 1, 1);
    let tokens_of = |ring: &TokenRing, node: u32| -> Vec<usize> {
        let sets = ring.rank_sets_shortest_first().expect("the sets fit");
        let order = ring.tokens_shortest_first();
        sets.ranks_of(NodeId(node)).map(|r| order[r]).collect()
    };
    assert_eq!(ring.rank_sets_shortest_first().unwrap().node_slots(), 4);
    assert_eq!(tokens_of(&ring, 1023), Vec::<usize>::new());
    // A node of id 1023 grows the kept sets, kept up to date.
    move_token(&mut ring, 5, 1, 1023);
    assert_eq!(ring.rank_sets_shortest_first().unwrap().node_slots(), 1024);
    assert_eq!(tokens_of(&ring, 1023), vec![5]);
    assert!(!tokens_of(&ring, 1).contains(&5));
    // Id 1024 would take more than 2^16 words: the ring drops its sets, and a ring of those
    // owners keeps none.
    move_token(&mut ring, 6, 2, 1024);
    assert!(ring.rank_sets_shortest_first().is_none());
    assert!(ring.rank_sets_longest_first().is_none());
    // Sets dropped that way are built again when asked for after the owners fit.
    let mut fits = TokenRing::evenly_spaced(4096, 4).unwrap();
    move_token(&mut fits, 6, 2, 2);
    assert!(fits.rank_sets_longest_first().is_some());
    move_token(&mut fits, 6, 2, 1024);
    move_token(&mut fits, 6, 1024, 2);
    let sets = fits
        .rank_sets_longest_first()
        .expect("the owners fit again");
    let order = fits.tokens_longest_first();
    let tokens_of_2: Vec<usize> = sets.ranks_of(NodeId(2)).map(|r| order[r]).collect();
    let mut expected = fits.tokens_of(NodeId(2));
    expected.sort_by_key(|&s| order.iter().position(|&t| t == s));
    assert_eq!(tokens_of_2, expected);
}
