//! Tests of the workload: the tables against the Poisson distribution, the fast fills against
//! the reference draws, and pinned values.

use super::poisson_tables::push_guide;
use super::*;
use rand::SeedableRng;
use statrs::distribution::{ChiSquared, ContinuousCDF};

/// The exact Poisson probability of `k`, computed in log space.
fn poisson_pmf(mean: f64, k: u64) -> f64 {
    if mean == 0.0 {
        return if k == 0 { 1.0 } else { 0.0 };
    }
    let k = k as f64;
    (k * mean.ln() - mean - libm::lgamma(k + 1.0)).exp()
}

/// Pearson's chi-square test of `samples` against Poisson(`mean`); cells are merged from
/// both ends until every expected count is at least 5. Returns the p-value.
fn chi_square_p_value(samples: &[u64], mean: f64) -> f64 {
    let n = samples.len() as f64;
    let largest = *samples.iter().max().unwrap();
    let upper = largest.max((mean + 20.0 * mean.sqrt() + 20.0) as u64);
    let mut observed = vec![0.0; upper as usize + 1];
    for &s in samples {
        observed[s as usize] += 1.0;
    }
    let expected: Vec<f64> = (0..=upper).map(|k| n * poisson_pmf(mean, k)).collect();
    // Merge into cells with expected count >= 5, from the left.
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let (mut o, mut e) = (0.0, 0.0);
    for k in 0..=upper as usize {
        o += observed[k];
        e += expected[k];
        if e >= 5.0 {
            cells.push((o, e));
            o = 0.0;
            e = 0.0;
        }
    }
    // The right tail beyond `upper` has negligible expectation; fold the rest (and the
    // remaining expected mass) into the last cell.
    let remaining_expected = n - expected.iter().sum::<f64>();
    e += remaining_expected.max(0.0);
    if let Some(last) = cells.last_mut() {
        last.0 += o;
        last.1 += e;
    } else {
        cells.push((o, e));
    }
    let statistic: f64 = cells.iter().map(|&(o, e)| (o - e) * (o - e) / e).sum();
    let degrees = (cells.len() - 1).max(1) as f64;
    1.0 - ChiSquared::new(degrees).unwrap().cdf(statistic)
}

/// Samples `count` values of the single table built for `mean`.
fn sample_table(mean: f64, count: usize, seed: u64) -> Vec<u64> {
    let mut tables = PoissonTables::default();
    tables.push(mean);
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let word = rng.next_u64();
            tables.sample(0, (word >> 32) as u32, &mut rng)
        })
        .collect()
}

const SAMPLES: usize = 400_000;
/// The tests fail below this p-value; with a fixed seed they are deterministic.
const ALPHA: f64 = 1e-4;

#[test]
fn table_matches_poisson_for_small_medium_and_large_means() {
    for (i, &mean) in [0.05, 0.43, 1.0, 3.7, 12.0, 126.0, 1437.5, 12_600.0]
        .iter()
        .enumerate()
    {
        let samples = sample_table(mean, SAMPLES, 1000 + i as u64);
        let p = chi_square_p_value(&samples, mean);
        assert!(p > ALPHA, "mean {mean}: chi-square p-value {p}");
        let sample_mean = samples.iter().sum::<u64>() as f64 / SAMPLES as f64;
        let tolerance = 5.0 * (mean / SAMPLES as f64).sqrt();
        assert!(
            (sample_mean - mean).abs() < tolerance,
            "mean {mean}: sample mean {sample_mean}"
        );
    }
}

/// The test must be able to fail: a table for a slightly wrong mean, and rand_distr's
/// own sampler as a sanity check of the test itself.
#[test]
fn chi_square_test_detects_a_wrong_mean() {
    let samples = sample_table(1.03, SAMPLES, 7);
    assert!(chi_square_p_value(&samples, 1.0) < ALPHA);
    let samples = sample_table(130.0, SAMPLES, 8);
    assert!(chi_square_p_value(&samples, 126.0) < ALPHA);
    let mut rng = Pcg64Mcg::seed_from_u64(9);
    let reference = Poisson::new(3.7).unwrap();
    let samples: Vec<u64> = (0..SAMPLES)
        .map(|_| reference.sample(&mut rng) as u64)
        .collect();
    assert!(chi_square_p_value(&samples, 3.7) > ALPHA);
}

#[test]
fn table_probabilities_match_the_pmf() {
    for &mean in &[0.3, 1.0, 9.5, 126.0, 10_000.0] {
        let mut tables = PoissonTables::default();
        tables.push(mean);
        let header = tables.headers[0];
        let thresholds = &tables.thresholds[..header.value_count as usize];
        let mut previous = 0_u64;
        let mut covered = 0.0;
        for (i, &threshold) in thresholds.iter().enumerate() {
            let k = header.smallest_value + i as u64;
            // The width of the value's interval, in integers (the last one ends at 2^64).
            let width = if i + 1 == thresholds.len() {
                (u64::MAX - previous) as f64 + 1.0
            } else {
                (threshold - previous) as f64
            };
            let table_probability = width / FIXED_POINT_SCALE;
            let exact = poisson_pmf(mean, k);
            assert!(
                (table_probability - exact).abs() <= 1e-9 * exact + 1e-18,
                "mean {mean}, k {k}: table {table_probability}, exact {exact}"
            );
            covered += exact;
            previous = threshold;
        }
        assert!(1.0 - covered < 1e-13, "mean {mean}: table covers {covered}");
    }
}

#[test]
fn zero_and_invalid_means_give_zero() {
    let mut tables = PoissonTables::default();
    tables.push(0.0);
    tables.push(f64::NAN);
    tables.push(-3.0);
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    for table in 0..3 {
        for _ in 0..100 {
            let word = rng.next_u64();
            assert_eq!(tables.sample(table, word as u32, &mut rng), 0);
        }
    }
}

#[test]
fn large_means_use_the_rejection_sampler() {
    let mut tables = PoissonTables::default();
    tables.push(4.0e6);
    tables.push(f64::INFINITY);
    assert_eq!(tables.headers[0].guide_bits, 0);
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let samples: Vec<u64> = (0..20_000).map(|_| tables.sample(0, 0, &mut rng)).collect();
    let mean = samples.iter().sum::<u64>() as f64 / samples.len() as f64;
    assert!((mean - 4.0e6).abs() < 5.0 * (4.0e6_f64 / 20_000.0).sqrt());
    assert!(tables.sample(1, 0, &mut rng) > 0);
}

/// A workload with uniform keys over `tokens` tokens, from a fixed seed.
/// A draw that ties (the top 32 bits of its uniform equal those of a threshold, which the
/// generator makes about once in 2^31 draws) is forced by editing a table: the fast fill
/// then gives the values and leaves the generator where drawing every token with
/// `sample_pair` does, the tie's extra word included.
#[test]
fn a_tie_draws_as_sample_pair_does() {
    // At 20 000 requests a step the tokens' means are past the windows: the guide alone draws;
    // at 40 the fine guides draw first, then the windows.
    tie_draws_as_sample_pair_does(20_000.0, false);
    tie_draws_as_sample_pair_does(40.0, true);
}

fn tie_draws_as_sample_pair_does(rate: f64, fast: bool) {
    let mut workload = uniform_workload(64, 6400, 0.3);
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    let mut packed = vec![0; 64];
    // Drawn at two steps in a row, the rate has its fine guides built (or refused).
    workload.draw_packed(rate, &mut rng, &mut packed);
    workload.draw_packed(rate, &mut rng, &mut packed);
    let current = workload.current.expect("tables were built");
    let tied_token = 5;
    // The word token 5 will draw, and the guide slot of its reads.
    let mut ahead = rng.clone();
    let word = (0..=tied_token).map(|_| ahead.next_u64()).last().unwrap();
    let high = (word >> 32) as u32;
    let tables = &mut workload.cached[current];
    let table = workload.token_table[tied_token] as usize;
    let pair = tables.pairs[table];
    let slot = (pair.reads_guide_offset + (high >> pair.reads_shift)) as usize;
    let header = tables.tables.headers[2 * table];
    let entry = tables.tables.guide[slot];
    let candidate = if entry & IMPURE_SLOT == 0 {
        entry
    } else {
        let thresholds = &tables.tables.thresholds[header.threshold_offset as usize..]
            [..header.value_count as usize];
        PoissonTables::search_impure(thresholds, entry, u64::from(high)).unwrap() as u16
    };
    assert!(usize::from(candidate) + 1 < header.value_count as usize);
    tables.tables.guide[slot] = IMPURE_SLOT | candidate;
    tables.tables.thresholds[header.threshold_offset as usize + usize::from(candidate)] =
        (u64::from(high) << 32) | 0xFFFF_FFFF;
    // The windows and the fine guides are made again from the edited thresholds, as building
    // the tables would; the tied token's fine guide slot then holds the edited threshold.
    assert_eq!(!tables.windows.is_empty(), fast);
    assert_eq!(tables.fine_guides.as_ref().map(Vec::is_empty), Some(!fast));
    tables.windows = WindowPair::of(&tables.tables, &workload.tokens_per_table);
    if fast {
        let fine_guides = FineGuidePair::of(&tables.tables);
        assert_eq!(fine_guides[table].sample_packed(word), None);
        tables.fine_guides = Some(fine_guides);
    }

    let start = rng.clone();
    let mut reference_rng = rng.clone();
    let tables = &workload.cached[current];
    let reference: Vec<u64> = workload
        .token_table
        .iter()
        .map(|&table| {
            let word = reference_rng.next_u64();
            let (reads, writes) = sample_pair(tables, table as usize, word, &mut reference_rng);
            pack(reads + writes, writes)
        })
        .collect();
    fill_packed_guided(&workload.token_table, tables, &mut rng, &mut packed);
    assert_eq!(packed, reference);
    assert_eq!(rng.clone().next_u64(), reference_rng.clone().next_u64());
    // The tie drew one word more than the tokens: 65 words in all.
    let mut counted = start;
    (0..65).for_each(|_| {
        counted.next_u64();
    });
    assert_eq!(counted.next_u64(), reference_rng.next_u64());
}

/// The workload of `keys` seeded keys on `tokens` tokens at the first keys' hashes (as the
/// paper's profile places them), with Zipf exponent `zipf_s`.
fn seeded_workload(tokens: usize, keys: usize, zipf_s: f64, write_fraction: f64) -> Workload {
    use rand::Rng;
    let mut rng = Pcg64Mcg::seed_from_u64(11);
    let hashes: Vec<f64> = (0..keys).map(|_| rng.random()).collect();
    let mut positions = hashes[..tokens].to_vec();
    positions.sort_by(f64::total_cmp);
    Workload::new(&positions, &hashes, zipf_s, write_fraction)
}

fn uniform_workload(tokens: usize, keys: usize, write_fraction: f64) -> Workload {
    seeded_workload(tokens, keys, 0.0, write_fraction)
}

/// The reads and writes of one token, drawn through the workload, match their Poisson laws
/// at a constant rate, at rates that change every other step (the tables are rebuilt at
/// each change) and at rates that change every step (the direct path).
#[test]
fn workload_draws_match_poisson_including_rate_changes() {
    let mut workload = uniform_workload(20, 2000, 0.3);
    let token = 3;
    let p = workload.token_probability()[token];
    let mut rng = Pcg64Mcg::seed_from_u64(12);
    let mut requests = vec![0; 20];
    let mut writes = vec![0; 20];
    // Two rates and which of them each step uses.
    type Pattern = ([f64; 2], fn(usize) -> usize);
    let patterns: [Pattern; 3] = [
        ([300.0, 300.0], |step| step % 2),
        ([250.0, 350.0], |step| (step / 2) % 2),
        ([250.0, 350.0], |step| step % 2),
    ];
    for (rates, which_rate) in patterns {
        let mut reads_at = [Vec::new(), Vec::new()];
        let mut writes_at = [Vec::new(), Vec::new()];
        for step in 0..SAMPLES / 2 {
            let which = which_rate(step);
            workload.draw(rates[which], &mut rng, &mut requests, &mut writes);
            reads_at[which].push(requests[token] - writes[token]);
            writes_at[which].push(writes[token]);
        }
        for which in 0..2 {
            let rate = rates[which];
            let p_reads = chi_square_p_value(&reads_at[which], rate * p * 0.7);
            let p_writes = chi_square_p_value(&writes_at[which], rate * p * 0.3);
            assert!(p_reads > ALPHA, "rate {rate}: reads p-value {p_reads}");
            assert!(p_writes > ALPHA, "rate {rate}: writes p-value {p_writes}");
        }
    }
}

/// Reads and writes share a random word; they must stay independent. Their correlation
/// over many draws is close to zero.
#[test]
fn reads_and_writes_are_independent() {
    let mut workload = uniform_workload(5, 500, 0.5);
    let mut rng = Pcg64Mcg::seed_from_u64(13);
    let mut requests = vec![0; 5];
    let mut writes = vec![0; 5];
    let (mut sum_r, mut sum_w, mut sum_rw, mut sum_rr, mut sum_ww) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let n = SAMPLES as f64;
    for _ in 0..SAMPLES {
        workload.draw(40.0, &mut rng, &mut requests, &mut writes);
        let r = (requests[0] - writes[0]) as f64;
        let w = writes[0] as f64;
        sum_r += r;
        sum_w += w;
        sum_rw += r * w;
        sum_rr += r * r;
        sum_ww += w * w;
    }
    let covariance = sum_rw / n - sum_r / n * sum_w / n;
    let correlation = covariance
        / ((sum_rr / n - (sum_r / n).powi(2)) * (sum_ww / n - (sum_w / n).powi(2))).sqrt();
    assert!(
        correlation.abs() < 5.0 / n.sqrt(),
        "correlation {correlation}"
    );
}

fn zipf_workload(tokens: usize) -> Workload {
    seeded_workload(tokens, 50_000, 1.0, 0.3)
}

/// The fine guides of the current rate: `None` before they are built, then whether there are
/// any.
fn has_fine_guides(workload: &Workload) -> Option<bool> {
    let tables = &workload.cached[workload.current.unwrap()];
    assert!(!tables.windows.is_empty());
    tables.fine_guides.as_ref().map(|guides| !guides.is_empty())
}

/// A rate gets fine guides when it is drawn at two steps in a row, and not under a rate that
/// changes at every step; they do not change the values.
#[test]
fn fine_guides_come_with_a_rate_that_stays() {
    let mut workload = uniform_workload(1000, 50_000, 0.3);
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    let mut packed = vec![0; 1000];
    // Two rates in turn: each gets tables (the second when met again), never fine guides.
    for step in 0..6 {
        workload.draw_packed([40.0, 41.0][step % 2], &mut rng, &mut packed);
        if step >= 2 {
            assert_eq!(has_fine_guides(&workload), None, "step {step}");
        }
    }
    // The rate stays: its fine guides come at its second step.
    workload.draw_packed(40.0, &mut rng, &mut packed);
    assert_eq!(has_fine_guides(&workload), None);
    workload.draw_packed(40.0, &mut rng, &mut packed);
    assert_eq!(has_fine_guides(&workload), Some(true));
    // The same draws with and without them.
    let (mut with, mut without) = (rng.clone(), rng.clone());
    let (mut with_packed, mut without_packed) = (vec![0; 1000], vec![0; 1000]);
    workload.draw_packed(40.0, &mut with, &mut with_packed);
    let current = workload.current.unwrap();
    workload.cached[current].fine_guides = Some(Vec::new());
    workload.draw_packed(40.0, &mut without, &mut without_packed);
    assert_eq!(with_packed, without_packed);
    assert_eq!(with.next_u64(), without.next_u64());
}

/// A rate gets fine guides while its pairs and the cache's stay within their bounds; the
/// windows do not depend on them.
#[test]
fn fine_guides_keep_to_their_memory_bounds() {
    let mut packed = vec![0; 1100];
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    let mut many_pairs = zipf_workload(1100);
    assert!(many_pairs.distinct_probability_count() > fine_guide::MAX_PAIRS);
    many_pairs.draw_packed(40.0, &mut rng, &mut packed);
    many_pairs.draw_packed(40.0, &mut rng, &mut packed);
    assert_eq!(has_fine_guides(&many_pairs), Some(false));

    let mut workload = zipf_workload(1000);
    let pairs = workload.distinct_probability_count();
    let rates_with_fine_guides = fine_guide::MAX_CACHED_PAIRS / pairs;
    assert!(rates_with_fine_guides < MAX_CACHED_RATES);
    packed.truncate(1000);
    for step in 0..=rates_with_fine_guides {
        // A rate drawn twice gets tables when it is first met (see `Workload::draw`) and its
        // fine guides at the second draw.
        let rate = 40.0 + step as f64;
        workload.draw_packed(rate, &mut rng, &mut packed);
        workload.draw_packed(rate, &mut rng, &mut packed);
        let fits = step < rates_with_fine_guides;
        assert_eq!(has_fine_guides(&workload), Some(fits), "step {step}");
    }
}

#[test]
fn uniform_keys_share_tables() {
    let workload = uniform_workload(1000, 50_000, 0.3);
    assert!(workload.distinct_probability_count() < 400);
}

/// Value stability: these numbers must not change between releases, or recorded results
/// stop being reproducible. The four steps go through the table path (new rate, same rate,
/// new rate after a constant one) and the direct path (a rate that changed twice in a row).
#[test]
fn draws_are_pinned() {
    let mut workload = uniform_workload(8, 800, 0.3);
    let mut rng = Pcg64Mcg::seed_from_u64(42);
    let mut requests = vec![0; 8];
    let mut writes = vec![0; 8];
    let mut drawn = Vec::new();
    for rate in [100.0, 100.0, 5000.0, 6000.0] {
        workload.draw(rate, &mut rng, &mut requests, &mut writes);
        drawn.push((requests.clone(), writes.clone()));
    }
    let pinned: Vec<(Vec<u64>, Vec<u64>)> = PINNED
        .iter()
        .map(|(r, w)| (r.to_vec(), w.to_vec()))
        .collect();
    assert_eq!(drawn, pinned);
}

/// Requests and writes of the eight tokens at each step of [`draws_are_pinned`].
const PINNED: [([u64; 8], [u64; 8]); 4] = [
    ([2, 10, 7, 4, 19, 28, 15, 3], [0, 6, 2, 2, 5, 10, 6, 2]),
    ([3, 10, 11, 5, 30, 30, 14, 0], [1, 3, 9, 3, 7, 9, 2, 0]),
    (
        [149, 470, 407, 192, 1426, 1477, 872, 42],
        [44, 154, 131, 62, 419, 425, 256, 17],
    ),
    (
        [184, 551, 476, 243, 1710, 1727, 998, 55],
        [56, 168, 137, 72, 506, 509, 297, 17],
    ),
];

/// The guide as its definition builds it, slot by slot: the candidate of a slot is the value of
/// its first point, and the slot is pure when its last point has the same value.
fn guide_slot_by_slot(thresholds: &[u64], guide_bits: u32) -> Vec<u16> {
    let slot_shift = 64 - guide_bits;
    let last = thresholds.len() - 1;
    let mut candidate = 0;
    (0..1_u64 << guide_bits)
        .map(|slot| {
            let slot_start = slot << slot_shift;
            let slot_end = slot_start | ((1_u64 << slot_shift) - 1);
            while candidate < last && thresholds[candidate] <= slot_start {
                candidate += 1;
            }
            let pure = candidate == last || thresholds[candidate] > slot_end;
            if pure {
                candidate as u16
            } else {
                IMPURE_SLOT | candidate as u16
            }
        })
        .collect()
}

proptest::proptest! {
    /// The guide filled a range at a time is the guide of the definition, for the tables of
    /// random means and for thresholds that repeat, fall on slot edges or saturate.
    #[test]
    fn guides_are_filled_as_defined(
        mean in proptest::prop_oneof![0.0..3.0, 0.0..100.0, 100.0..5000.0],
        raw in proptest::collection::vec((0_u64..6, proptest::prelude::any::<u64>()), 1..40),
        guide_bits in 1_u32..12,
    ) {
        let mut tables = PoissonTables::default();
        tables.push(mean);
        let header = tables.headers[0];
        let offset = header.threshold_offset as usize;
        let thresholds = &tables.thresholds[offset..][..header.value_count as usize];
        let mut guide = vec![7];
        push_guide(&mut guide, thresholds, header.guide_bits);
        proptest::prop_assert_eq!(&guide[1..], guide_slot_by_slot(thresholds, header.guide_bits));

        // Increasing thresholds, some on slot edges, repeated or saturated; the last is 2^64.
        let width = 1_u64 << (64 - guide_bits);
        let mut crafted: Vec<u64> = raw
            .iter()
            .map(|&(kind, value)| match kind {
                0 => value / width * width,
                1 => u64::MAX,
                _ => value,
            })
            .collect();
        crafted.sort_unstable();
        crafted.push(u64::MAX);
        let mut guide = Vec::new();
        push_guide(&mut guide, &crafted, guide_bits);
        proptest::prop_assert_eq!(guide, guide_slot_by_slot(&crafted, guide_bits));
    }
}

/// Draws 20 000 random words with `sample`, a fast way of drawing from the first table pair of
/// `tables` (reads at table 0, writes at table 1), checks every value it gives against the
/// guide's, and returns how many words it answered.
pub(super) fn answered_as_the_guide(
    tables: &PoissonTables,
    sample: impl Fn(u64) -> Option<u64>,
) -> usize {
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    let mut answered = 0;
    for _ in 0..20_000 {
        let word = rng.next_u64();
        let Some(packed) = sample(word) else {
            continue;
        };
        let writes = packed_writes(packed);
        let reads = packed_requests(packed) - writes;
        answered += 1;
        let mut unused = Pcg64Mcg::seed_from_u64(0);
        assert_eq!(reads, tables.sample(0, (word >> 32) as u32, &mut unused));
        assert_eq!(writes, tables.sample(1, word as u32, &mut unused));
    }
    answered
}
