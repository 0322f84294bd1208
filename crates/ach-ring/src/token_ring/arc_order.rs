//! The ring's two orders of its tokens by arc length, and where each token stands in them:
//! computed once per ring, from its arcs alone.

/// The tokens by arc length, shortest first and longest first, ties by lower index in both: the
/// orders of stable sorts of the indices by `f64::total_cmp` of their arcs. Computed by one
/// stable radix sort of the indices by an integer key that orders as `total_cmp`
/// ([`sorted_by_key`]), and the longest-first order from it (reversed, ties put back in index
/// order). Building the ring of 16384 slots at every control step of `ach-redis` was
/// dominated by this sort.
pub(super) fn arc_orders(arcs: &[f64]) -> (Vec<usize>, Vec<usize>) {
    // `f64::total_cmp`'s order as a signed integer order (its documented bit transform), then
    // as an unsigned one (the sign bit flipped).
    let key = |arc: f64| {
        let bits = arc.to_bits() as i64;
        let signed = bits ^ ((((bits >> 63) as u64) >> 1) as i64);
        (signed as u64) ^ (1 << 63)
    };
    let sorted = sorted_by_key(arcs.iter().map(|&arc| key(arc)).zip(0..).collect());
    let shortest_first = sorted.iter().map(|&(_, token)| token).collect();
    let mut longest_first = Vec::with_capacity(sorted.len());
    let mut end = sorted.len();
    while end > 0 {
        // The run of equal arcs ending at `end`, written in increasing index order (token by
        // token: most runs are of one token, and a copy call per run measured slower).
        let last_key = sorted[end - 1].0;
        let start = sorted[..end]
            .iter()
            .rposition(|&(key, _)| key != last_key)
            .map_or(0, |before| before + 1);
        for &(_, token) in &sorted[start..end] {
            longest_first.push(token);
        }
        end = start;
    }
    (shortest_first, longest_first)
}

/// Pairs of a key and its index (in increasing index order), sorted by the key, equal keys
/// staying in index order: [`sort_by_key_into_buckets`] of them all.
fn sorted_by_key(mut pairs: Vec<(u64, usize)>) -> Vec<(u64, usize)> {
    let mut scratch = vec![(0, 0); pairs.len()];
    sort_by_key_into_buckets(&mut pairs, &mut scratch);
    pairs
}

/// Sorts `pairs` by key, stably, with `scratch` (as long) to spare: a most-significant-digit
/// radix sort.
///
/// One stable counting pass sorts the pairs into about as many buckets as there are pairs by
/// the highest bits in which their keys differ (the bits above, which every key shares, left
/// out); each bucket of more than [`INSERTION_SORT_LIMIT`] pairs is sorted the same way by
/// the bits its keys still differ in, the smaller ones by insertion. Keys spread like the
/// arcs of a ring leave a pair or a few in a bucket, so the cost is two passes and a few
/// comparisons a key; keys that crowd together (the arcs of slots with equal key counts,
/// which differ in their last bits only) are parted by the next pass, and every pass takes
/// the bits it sorts by off the keys still to be parted.
fn sort_by_key_into_buckets(pairs: &mut [(u64, usize)], scratch: &mut [(u64, usize)]) {
    if pairs.len() <= INSERTION_SORT_LIMIT {
        insertion_sort_by_key(pairs);
        return;
    }
    let (low, high) = pairs.iter().fold((u64::MAX, 0), |(low, high), &(key, _)| {
        (low.min(key), high.max(key))
    });
    if low == high {
        // All keys are equal, and the pairs are in index order already.
        return;
    }
    // Every key agrees with every other above `varying_bits`.
    let varying_bits = u64::BITS - (low ^ high).leading_zeros();
    let shift = varying_bits.saturating_sub(pairs.len().ilog2().min(16));
    let bucket_mask = (1usize << (varying_bits - shift)) - 1;
    let bucket = |key: u64| (key >> shift) as usize & bucket_mask;
    // `next[b]`: the pairs of bucket `b`, then where its next pair goes; after the pairs are
    // placed, where the bucket ends.
    let mut next = vec![0usize; bucket_mask + 1];
    for &(key, _) in pairs.iter() {
        next[bucket(key)] += 1;
    }
    let mut total = 0;
    for slot in next.iter_mut() {
        let count = *slot;
        *slot = total;
        total += count;
    }
    let scratch = &mut scratch[..pairs.len()];
    for &pair in pairs.iter() {
        let slot = &mut next[bucket(pair.0)];
        scratch[*slot] = pair;
        *slot += 1;
    }
    pairs.copy_from_slice(scratch);
    let mut start = 0;
    for &end in &next {
        if end - start > 1 {
            sort_by_key_into_buckets(&mut pairs[start..end], &mut scratch[start..end]);
        }
        start = end;
    }
}

/// The largest bucket [`sort_by_key_into_buckets`] sorts by insertion.
const INSERTION_SORT_LIMIT: usize = 32;

/// Sorts a few pairs by their key, stably: cheaper than another counting pass for the two or
/// three pairs a bucket of [`sort_by_key_into_buckets`] mostly has.
fn insertion_sort_by_key(pairs: &mut [(u64, usize)]) {
    for i in 1..pairs.len() {
        let pair = pairs[i];
        let mut j = i;
        while j > 0 && pairs[j - 1].0 > pair.0 {
            pairs[j] = pairs[j - 1];
            j -= 1;
        }
        pairs[j] = pair;
    }
}

/// `rank[token]`: where each token stands in `order` (a permutation of the tokens).
pub(super) fn ranks(order: &[usize]) -> Vec<usize> {
    let mut rank_of = vec![0; order.len()];
    for (rank, &token) in order.iter().enumerate() {
        rank_of[token] = rank;
    }
    rank_of
}
