//! The workload of a run: key popularity folded onto the tokens, and each step's per-token
//! request counts (spec section 2).
//!
//! # Model
//!
//! Requests arrive as `N(t) ~ Poisson(Lambda(t))`, each picks a key with probability `P(k)`
//! and is a write with probability `write_fraction`. By Poisson thinning, the reads and the
//! writes of token `s` are then independent Poisson variables with means
//! `Lambda(t) * p_s * (1 - write_fraction)` and `Lambda(t) * p_s * write_fraction`, where `p_s`
//! sums `P(k)` over the keys token `s` owns. Drawing them per token is exact in distribution
//! and costs `O(V)` per step whatever the request rate.
//!
//! # Sampling method
//!
//! Each Poisson variable is drawn by inversion of a precomputed table (module
//! `poisson_tables`), with one 32-bit half of a 64-bit random word in the common case (the
//! reads of a token use the high half of the word, its writes the low half). For a mean `mu`,
//! the table holds the probabilities `p_k = exp(k ln(mu) - mu - ln Gamma(k + 1))` of the values
//! `k_lo <= k <= k_hi`. They are computed from the mode `floor(mu)` with `ln Gamma` (from
//! `libm`) and then outwards with the exact recurrences `p_(k-1) = p_k * k / mu` and
//! `p_(k+1) = p_k * mu / (k + 1)`. The walk stops on each side once a geometric bound on the
//! mass left beyond it, `p_k * r / (1 - r)` with `r` the ratio of the next step, is below
//! `2^-64`; the probabilities are then divided by their sum, so the truncated mass (at most
//! `2^-63` in total) is spread over the table.
//!
//! The cumulative probabilities are stored as 64-bit fixed-point thresholds
//! `T_i = w_0 + ... + w_i` with widths `w_j = floor(2^64 * p_(k_lo + j))`. The widths are summed
//! in integers from both ends towards the most likely value, which takes the few units lost to
//! the floors (so `T_(k_hi) = 2^64` and no value's width carries another value's rounding).
//! The value drawn for a uniform 64-bit integer `x` is `k_lo + min { i : x < T_i }`,
//! so every value has probability `(T_i - T_(i-1)) / 2^64`. This differs from the Poisson
//! probability only by the rounding of double-precision arithmetic (a relative error of about
//! `1e-15`, from `ln Gamma` and the recurrences), the fixed point (`2^-64` per value) and the
//! truncated tails (at most `2^-63` in total). In words: the sampler is exact up to
//! floating-point rounding, like any sampler that works with double-precision numbers.
//!
//! To find `min { i : x < T_i }` quickly, a guide table splits `[0, 2^64)` into `2^b` equal
//! slots (`2^b` is at least twice the table length). A slot whose whole range falls between
//! two consecutive thresholds is *pure*: its value is known from the slot alone, i.e. from the
//! top `b` bits of `x`. For an *impure* slot (one that contains a threshold, about one slot in
//! ten) the thresholds are searched from the slot's first candidate, comparing the top 32 bits
//! of `x` with the top 32 bits of each threshold; only when they are equal (probability about
//! `2^-32`) are the lower 32 bits of `x` drawn, from a fresh random word. Because the lower
//! bits are drawn only when they matter, the top 32 bits of each draw can come from one half of
//! a shared random word: each token's reads and writes use disjoint bits and stay independent.
//!
//! The cost of a draw is one table read in the common case, whatever the mean, so the cost of
//! a step does not grow with the rate. At the paper's rates a token's mean is about one
//! request, and a guide slot that holds a threshold comes up often enough that the branch on
//! it is mispredicted once every few tokens; for such rates a token's two draws are first
//! tried in a *window* (module `window`): the top 16 bits of the first eight thresholds of
//! both tables (32 bytes), compared with the top bits of the word's halves by vector
//! instructions, with no branch on the value drawn. The window gives the guide's value or
//! hands the draw to the guide, so the values do not depend on whether a rate has windows.
//! Before the window, a rate that stays (drawn at two steps in a row) and has few enough
//! table pairs tries a *fine guide* (module `fine_guide`): 512 one-byte slots per table, whose
//! pure slots give the value with one read; a slot that holds a threshold hands the draw to
//! the window. It too gives the guide's values.
//!
//! Tables are built for a rate when it is first met, and kept for up to 64 rates; tokens with
//! the same probability `p_s` (all tokens owning the same number of keys under uniform
//! popularity) share one pair of tables. When the rate changes at two consecutive steps to a
//! rate not met before, tables would likely serve a single step and cost more than they save:
//! such a step draws with `rand_distr::Poisson` (Knuth's product method below a mean of 12,
//! transformed rejection above), which is exact as well, and the rate is remembered; met again,
//! it gets tables. A periodic load (series C2 from `t = 350`, whose rate repeats exactly every
//! 50 steps) is therefore served from tables after its first period.
//! The choices depend only on the sequence of rates, so the draws stay a deterministic function
//! of the rates and the generator's state. Means above [`MAX_TABLE_MEAN`], whose tables would be
//! large, are drawn with `rand_distr::Poisson` instead.

use ach_ring::TokenRing;
use rand::RngCore;
use rand_distr::{Distribution, Poisson};
use rand_pcg::Pcg64Mcg;

mod fine_guide;
mod poisson_tables;
mod window;

use fine_guide::FineGuidePair;
use poisson_tables::{FIXED_POINT_SCALE, IMPURE_SLOT, PoissonTables, TableHeader};
use window::WindowPair;

/// Means above this are drawn with `rand_distr::Poisson` instead of a table (a table for a
/// mean `mu` has about `20 sqrt(mu)` entries).
pub const MAX_TABLE_MEAN: f64 = 1.0e6;

/// Packs a token's requests (reads plus writes) and writes of one step into one `u64`: the
/// requests in the high 32 bits, the writes in the low 32 bits (see [`Workload::draw_packed`]).
#[inline(always)]
pub fn pack(requests: u64, writes: u64) -> u64 {
    debug_assert!(requests < 1 << 32 && writes <= requests);
    (requests << 32) | writes
}

/// The requests (reads plus writes) of a word made by [`pack`].
#[inline(always)]
pub fn packed_requests(packed: u64) -> u64 {
    packed >> 32
}

/// The writes of a word made by [`pack`].
#[inline(always)]
pub fn packed_writes(packed: u64) -> u64 {
    packed & 0xFFFF_FFFF
}

/// Fills each token's packed counts ([`pack`]) from `draw(table)`, which returns the token's
/// (reads, writes) for its table index, token by token in order.
#[inline(always)]
fn fill_packed(token_table: &[u32], packed: &mut [u64], mut draw: impl FnMut(usize) -> (u64, u64)) {
    for (&table, word) in token_table.iter().zip(packed.iter_mut()) {
        let (reads, writes) = draw(table as usize);
        *word = pack(reads + writes, writes);
    }
}

/// Most rates whose tables a workload keeps (series C2's periodic load has 50 plus two).
const MAX_CACHED_RATES: usize = 64;

/// Most rates a workload remembers having drawn directly.
const MAX_REMEMBERED_RATES: usize = 256;

/// The read and write tables of one rate.
#[derive(Clone, Debug)]
struct RateTables {
    rate_bits: u64,
    /// The tables of distinct probability `i`: its reads at index `2 i`, its writes at
    /// `2 i + 1` (one set of buffers, so that a draw reads fewer base addresses).
    tables: PoissonTables,
    /// Where the guide slots of each table pair start, when every table of the rate is a
    /// guide table whose smallest value fits 32 bits (see [`GuidePair`]); empty otherwise.
    pairs: Vec<GuidePair>,
    /// The windows of the table pairs, when there are guide pairs and the draws at this rate
    /// fall in the windows often enough ([`WindowPair::of`]); empty otherwise.
    windows: Vec<WindowPair>,
    /// The fine guides of the table pairs, built when the rate is drawn at two steps in a row
    /// (`None` before): one per pair when there are windows, few enough pairs and the draws at
    /// this rate fall in the fine guides often enough (see [`Workload::fine_guides`]); empty
    /// otherwise.
    fine_guides: Option<Vec<FineGuidePair>>,
}

/// The guide of the read table and of the write table of one probability, in one entry: what
/// the common case of a draw (a pure slot) needs, read with one load instead of two headers.
#[derive(Clone, Copy, Debug)]
struct GuidePair {
    reads_guide_offset: u32,
    writes_guide_offset: u32,
    /// `32 - b` for the read table's `2^b` slots: the slot is `high_bits >> reads_shift`.
    reads_shift: u32,
    writes_shift: u32,
    reads_smallest_value: u32,
    writes_smallest_value: u32,
}

impl GuidePair {
    /// The pairs of `reads` and `writes` (tables in the same order), or `None` when a table is
    /// a fallback sampler or starts at a value of 2^32 or more.
    fn of(tables: &PoissonTables) -> Option<Vec<GuidePair>> {
        let guide = |h: &TableHeader| -> Option<(u32, u32, u32)> {
            (h.guide_bits > 0).then_some(())?;
            let smallest = u32::try_from(h.smallest_value).ok()?;
            Some((h.guide_offset, 32 - h.guide_bits, smallest))
        };
        tables
            .headers
            .chunks_exact(2)
            .map(|pair| {
                let (r, w) = (&pair[0], &pair[1]);
                let (reads_guide_offset, reads_shift, reads_smallest_value) = guide(r)?;
                let (writes_guide_offset, writes_shift, writes_smallest_value) = guide(w)?;
                Some(GuidePair {
                    reads_guide_offset,
                    writes_guide_offset,
                    reads_shift,
                    writes_shift,
                    reads_smallest_value,
                    writes_smallest_value,
                })
            })
            .collect()
    }
}

/// One token's reads and writes from the tables of `tables`, table pair `table`, with the
/// 64-bit uniform `word` (reads from its high half, writes from its low half): exactly
/// [`PoissonTables::sample`] of the reads, then of the writes.
#[inline]
fn sample_pair(tables: &RateTables, table: usize, word: u64, rng: &mut Pcg64Mcg) -> (u64, u64) {
    let reads = tables.tables.sample(2 * table, (word >> 32) as u32, rng);
    let writes = tables.tables.sample(2 * table + 1, word as u32, rng);
    (reads, writes)
}

/// [`sample_pair`] without ties: the token's (reads, writes), or `None` when a tie of either
/// draw needs a fresh random word (probability about 2^-31).
#[inline(always)]
fn sample_pair_without_tie(tables: &RateTables, table: usize, word: u64) -> Option<(u64, u64)> {
    let pair = tables.pairs[table];
    let (high, low) = ((word >> 32) as u32, word as u32);
    let all = &tables.tables;
    let entry = all.guide[(pair.reads_guide_offset + (high >> pair.reads_shift)) as usize];
    let reads = u64::from(pair.reads_smallest_value)
        + if entry & IMPURE_SLOT == 0 {
            u64::from(entry)
        } else {
            all.impure_offset_without_tie(2 * table, entry, high)?
        };
    let entry = all.guide[(pair.writes_guide_offset + (low >> pair.writes_shift)) as usize];
    let writes = u64::from(pair.writes_smallest_value)
        + if entry & IMPURE_SLOT == 0 {
            u64::from(entry)
        } else {
            all.impure_offset_without_tie(2 * table + 1, entry, low)?
        };
    Some((reads, writes))
}

/// [`fill_packed`] with [`sample_pair`] for tables with guide pairs, fast: the tokens are drawn
/// by a loop that calls nothing and works on a copy of the generator (kept in registers). With
/// windows, that loop stops at a token that neither its fine guide (if the rate has them) nor
/// its window can draw ([`fill_until_fast_misses`]), which is drawn from the guide; without,
/// at a token whose draw ties ([`fill_until_tie`]), which is drawn by [`sample_pair`] from the
/// generator in the same state. Either way the loop goes on after it, and the random words and
/// values are those of drawing every token with [`sample_pair`].
fn fill_packed_guided(
    token_table: &[u32],
    tables: &RateTables,
    rng: &mut Pcg64Mcg,
    packed: &mut [u64],
) {
    let count = token_table.len().min(packed.len());
    let mut start = 0;
    while start < count {
        if !tables.windows.is_empty() {
            let (rest, out) = (&token_table[start..count], &mut packed[start..count]);
            let (generator, miss) = match tables.fine_guides.as_deref() {
                Some(fine_guides) if !fine_guides.is_empty() => {
                    let fast = FineGuidesThenWindows {
                        fine_guides,
                        windows: &tables.windows,
                    };
                    fill_until_fast_misses(rest, &fast, rng.clone(), out)
                }
                _ => fill_until_fast_misses(rest, &tables.windows[..], rng.clone(), out),
            };
            *rng = generator;
            let Some((offset, word)) = miss else { return };
            // The generator is past the token's word, where `sample_pair` draws a tie's lower
            // bits from.
            let token = start + offset;
            let table = token_table[token] as usize;
            let (reads, writes) = sample_pair_without_tie(tables, table, word)
                .unwrap_or_else(|| sample_pair(tables, table, word, rng));
            packed[token] = pack(reads + writes, writes);
            start = token + 1;
            continue;
        }
        let (generator, tie) = fill_until_tie(
            &token_table[start..count],
            tables,
            rng.clone(),
            &mut packed[start..count],
        );
        *rng = generator;
        let Some(offset) = tie else { return };
        // The tie's word was drawn; `sample_pair` draws the lower bits from the next one.
        let token = start + offset;
        let word = rng.next_u64();
        let (reads, writes) = sample_pair(tables, token_table[token] as usize, word, rng);
        packed[token] = pack(reads + writes, writes);
        start = token + 1;
    }
}

/// A fast way of drawing a token's reads and writes from its table pair and random word: the
/// packed counts, or `None` to hand the draw to the guide. Each way gives the guide's values.
trait FastDraw {
    fn sample_packed(&self, pair: usize, word: u64) -> Option<u64>;
}

/// The windows alone.
impl FastDraw for [WindowPair] {
    #[inline(always)]
    fn sample_packed(&self, pair: usize, word: u64) -> Option<u64> {
        self[pair].sample_packed(word)
    }
}

/// The fine guides, then for a miss the windows (one entry per pair in each).
struct FineGuidesThenWindows<'a> {
    fine_guides: &'a [FineGuidePair],
    windows: &'a [WindowPair],
}

impl FastDraw for FineGuidesThenWindows<'_> {
    #[inline(always)]
    fn sample_packed(&self, pair: usize, word: u64) -> Option<u64> {
        self.fine_guides[pair]
            .sample_packed(word)
            .or_else(|| self.windows[pair].sample_packed(word))
    }
}

/// Draws the tokens of `token_table` into `packed` with `generator` and `fast` until it hands
/// a draw on; returns the generator (after the words drawn, that token's included) and that
/// token's index and random word. The loop holds nothing but the fast draw, so that its
/// pointers and constants stay in registers (a function of its own, for the same reason).
#[inline(never)]
fn fill_until_fast_misses<F: FastDraw + ?Sized>(
    token_table: &[u32],
    fast: &F,
    mut generator: Pcg64Mcg,
    packed: &mut [u64],
) -> (Pcg64Mcg, Option<(usize, u64)>) {
    for (index, (&table, word)) in token_table.iter().zip(packed.iter_mut()).enumerate() {
        let uniform = generator.next_u64();
        match fast.sample_packed(table as usize, uniform) {
            Some(packed) => *word = packed,
            None => return (generator, Some((index, uniform))),
        }
    }
    (generator, None)
}

/// Draws the tokens of `token_table` into `packed` with `generator` until a draw ties;
/// returns the generator (after the words drawn, the tied token's word not included) and the
/// tied token's index.
#[inline(always)]
fn fill_until_tie(
    token_table: &[u32],
    tables: &RateTables,
    mut generator: Pcg64Mcg,
    packed: &mut [u64],
) -> (Pcg64Mcg, Option<usize>) {
    for (index, (&table, word)) in token_table.iter().zip(packed.iter_mut()).enumerate() {
        let before = generator.clone();
        let uniform = generator.next_u64();
        match sample_pair_without_tie(tables, table as usize, uniform) {
            Some((reads, writes)) => *word = pack(reads + writes, writes),
            None => return (before, Some(index)),
        }
    }
    (generator, None)
}

/// Zipf weights of `keys` keys: P(key of rank r) is proportional to `r^-s`, key `k` has rank
/// `k + 1`; all 1 for `s = 0` (uniform).
pub(crate) fn zipf_weights(keys: usize, zipf_s: f64) -> Vec<f64> {
    (0..keys)
        .map(|k| {
            if zipf_s == 0.0 {
                1.0
            } else {
                ((k + 1) as f64).powf(-zipf_s)
            }
        })
        .collect()
}

/// The key weights of a hot-key phase: `share` of the requests spread evenly over the keys
/// `hot`, the rest in proportion to `weights`.
pub(crate) fn hot_phase_weights(weights: &[f64], hot: &[usize], share: f64) -> Vec<f64> {
    let total: f64 = weights.iter().sum();
    let mut phase: Vec<f64> = weights
        .iter()
        .map(|w| w * ((1.0 - share) / total))
        .collect();
    for &key in hot {
        phase[key] += share / hot.len() as f64;
    }
    phase
}

/// The shared workload of a run: key popularity folded onto the tokens.
pub struct Workload {
    /// `p[s]`: probability that a request's key belongs to token `s`.
    token_probability: Vec<f64>,
    /// The distinct values of `token_probability`, in increasing order.
    distinct_probability: Vec<f64>,
    /// For each token, the index of its probability in `distinct_probability` (and of its
    /// tables in each entry of `cached`).
    token_table: Vec<u32>,
    /// How many tokens have each distinct probability.
    tokens_per_table: Vec<u32>,
    /// Tables for the rates met so far (at most [`MAX_CACHED_RATES`], oldest evicted first):
    /// one table per distinct probability for the reads and one for the writes.
    cached: Vec<RateTables>,
    /// Index in `cached` of the tables of `rate`, if they are built.
    current: Option<usize>,
    /// Rates drawn directly so far (the last [`MAX_REMEMBERED_RATES`]): a rate met a second
    /// time gets tables, so that a periodic rate is served from tables after one period.
    drawn_directly: Vec<u64>,
    /// The rate of the previous draw (NaN before the first draw).
    rate: f64,
    /// Whether the rate of the previous draw differed from the one before it.
    rate_changed_last_step: bool,
    /// Direct samplers of reads and writes per distinct probability, for rates that change
    /// every step (`None` for a mean of zero).
    direct_reads: Vec<Option<Poisson<f64>>>,
    direct_writes: Vec<Option<Poisson<f64>>>,
    write_fraction: f64,
    /// The packed counts of [`Workload::draw`] (reused between calls).
    packed_scratch: Vec<u64>,
}

impl Workload {
    /// Folds key popularity (Zipf exponent `zipf_s`, 0 for uniform) onto the tokens at
    /// `positions` (sorted, strictly increasing): key `k` with hash `hashes[k]` has rank `k + 1`.
    ///
    /// # Panics
    ///
    /// If `positions` is empty, unsorted or outside `[0, 1)`; the run validates them first.
    pub fn new(positions: &[f64], hashes: &[f64], zipf_s: f64, write_fraction: f64) -> Workload {
        let weights = zipf_weights(hashes.len(), zipf_s);
        Workload::from_key_weights(positions, hashes, &weights, write_fraction)
    }

    /// The workload of a hot-key phase: with probability `share` a request goes to one of
    /// `hot` (key indices, uniformly), otherwise it follows Zipf(`zipf_s`) as in
    /// [`Workload::new`].
    pub fn with_hot_keys(
        positions: &[f64],
        hashes: &[f64],
        zipf_s: f64,
        write_fraction: f64,
        hot: &[usize],
        share: f64,
    ) -> Workload {
        let weights = hot_phase_weights(&zipf_weights(hashes.len(), zipf_s), hot, share);
        Workload::from_key_weights(positions, hashes, &weights, write_fraction)
    }

    /// The token of each key: the token whose arc holds the key's hash.
    pub fn token_of_keys(positions: &[f64], hashes: &[f64]) -> Vec<usize> {
        // The ring checks the positions.
        TokenRing::round_robin(positions.to_vec(), 1)
            .expect("positions were validated by the caller");
        crate::keys::tokens_of_hashes(positions, hashes)
    }

    /// Folds key weights (in proportion to each key's probability) onto the tokens at
    /// `positions`, key `k` on the token whose arc holds `hashes[k]`.
    fn from_key_weights(
        positions: &[f64],
        hashes: &[f64],
        weights: &[f64],
        write_fraction: f64,
    ) -> Workload {
        let key_tokens = Workload::token_of_keys(positions, hashes);
        Workload::from_key_tokens(positions.len(), &key_tokens, weights, write_fraction)
    }

    /// Folds key weights (in proportion to each key's probability) onto `token_count` tokens,
    /// key `k` on token `key_tokens[k]`.
    ///
    /// # Panics
    ///
    /// If a key's token is not below `token_count`; the run validates them first.
    pub fn from_key_tokens(
        token_count: usize,
        key_tokens: &[usize],
        weights: &[f64],
        write_fraction: f64,
    ) -> Workload {
        let total: f64 = weights.iter().sum();
        let mut token_probability = vec![0.0; token_count];
        for (&token, w) in key_tokens.iter().zip(weights) {
            token_probability[token] += w / total;
        }

        let mut distinct_probability = token_probability.clone();
        distinct_probability.sort_by(f64::total_cmp);
        distinct_probability.dedup_by(|a, b| a.to_bits() == b.to_bits());
        let token_table: Vec<u32> = token_probability
            .iter()
            .map(|p| {
                distinct_probability
                    .binary_search_by(|q| q.total_cmp(p))
                    .expect("every probability is in the distinct list") as u32
            })
            .collect();
        let mut tokens_per_table = vec![0; distinct_probability.len()];
        for &table in &token_table {
            tokens_per_table[table as usize] += 1;
        }

        Workload {
            token_probability,
            distinct_probability,
            token_table,
            tokens_per_table,
            cached: Vec::new(),
            current: None,
            drawn_directly: Vec::new(),
            rate: f64::NAN,
            rate_changed_last_step: false,
            direct_reads: Vec::new(),
            direct_writes: Vec::new(),
            write_fraction,
            packed_scratch: Vec::new(),
        }
    }

    /// Probability that a request's key belongs to each token.
    pub fn token_probability(&self) -> &[f64] {
        &self.token_probability
    }

    /// Number of distinct token probabilities, i.e. of table pairs built per rate.
    pub fn distinct_probability_count(&self) -> usize {
        self.distinct_probability.len()
    }

    /// Draws this step's read and write counts of every token at rate `rate`:
    /// `requests[s]` receives reads plus writes of token `s`, `writes[s]` its writes.
    ///
    /// The result is a deterministic function of the rates of this and the previous calls and
    /// of the state of `rng`. Tables are built for a rate the first time it is met, unless the
    /// rate also changed at the previous call and this rate was not met before: that call draws
    /// with `rand_distr::Poisson` instead, exact too and cheaper than tables that may serve one
    /// step only (see the module documentation).
    ///
    /// Preconditions: `rate` is finite and non-negative (a NaN or non-positive rate draws no
    /// requests) and both slices have one entry per token (only the first `min(len)` tokens are
    /// drawn otherwise).
    pub fn draw(
        &mut self,
        rate: f64,
        rng: &mut Pcg64Mcg,
        requests: &mut [u64],
        writes: &mut [u64],
    ) {
        let mut packed = std::mem::take(&mut self.packed_scratch);
        packed.resize(
            requests.len().min(writes.len()).min(self.token_table.len()),
            0,
        );
        self.draw_packed(rate, rng, &mut packed);
        for ((&word, request_count), write_count) in packed
            .iter()
            .zip(requests.iter_mut())
            .zip(writes.iter_mut())
        {
            *request_count = packed_requests(word);
            *write_count = packed_writes(word);
        }
        self.packed_scratch = packed;
    }

    /// [`Workload::draw`] into one word per token, the requests (reads plus writes) and the
    /// writes of token `s` packed into `packed[s]` ([`pack`]): the same draws from the same
    /// random numbers, in the form the run sums per node with one addition per token. A token's
    /// count of a step stays below 2^32 (the configuration caps the request rate far below).
    ///
    /// Preconditions: those of [`Workload::draw`], with `packed` one entry per token.
    pub fn draw_packed(&mut self, rate: f64, rng: &mut Pcg64Mcg, packed: &mut [u64]) {
        let rate_changed = rate.to_bits() != self.rate.to_bits();
        if rate_changed {
            self.rate = rate;
            self.current = self
                .cached
                .iter()
                .position(|t| t.rate_bits == rate.to_bits());
        }
        let volatile = rate_changed && self.rate_changed_last_step;
        self.rate_changed_last_step = rate_changed;
        debug_assert_eq!(packed.len(), self.token_table.len());
        if self.current.is_none() {
            let met_before = self.drawn_directly.contains(&rate.to_bits());
            if volatile && !met_before {
                if self.drawn_directly.len() == MAX_REMEMBERED_RATES {
                    self.drawn_directly.remove(0);
                }
                self.drawn_directly.push(rate.to_bits());
                self.draw_direct(rng, packed);
                return;
            }
            self.current = Some(self.build_tables());
        }
        let current = self.current.expect("tables were just found or built");
        if !rate_changed && self.cached[current].fine_guides.is_none() {
            // A rate drawn at two steps in a row gets its fine guides. Under a rate that changes
            // at every step (a periodic load) each step would read another rate's, out of the
            // cache, and be slower than with the windows alone.
            self.cached[current].fine_guides = Some(self.fine_guides(current));
        }
        let tables = &self.cached[current];
        if !tables.pairs.is_empty() {
            fill_packed_guided(&self.token_table, tables, rng, packed);
            return;
        }
        fill_packed(&self.token_table, packed, |table| {
            let word = rng.next_u64();
            sample_pair(tables, table, word, rng)
        });
    }

    /// Draws with `rand_distr::Poisson` directly, for a rate that changed at this step and at
    /// the previous one: building the tables would then cost more than it saves.
    fn draw_direct(&mut self, rng: &mut Pcg64Mcg, packed: &mut [u64]) {
        let sampler = |mean: f64| {
            (mean > 0.0)
                .then(|| Poisson::new(mean.min(Poisson::<f64>::MAX_LAMBDA)).ok())
                .flatten()
        };
        let read_share = self.rate * (1.0 - self.write_fraction);
        let write_share = self.rate * self.write_fraction;
        self.direct_reads.clear();
        self.direct_writes.clear();
        for &probability in &self.distinct_probability {
            self.direct_reads.push(sampler(read_share * probability));
            self.direct_writes.push(sampler(write_share * probability));
        }
        let (direct_reads, direct_writes) = (&self.direct_reads, &self.direct_writes);
        fill_packed(&self.token_table, packed, |table| {
            let reads = direct_reads[table].map_or(0, |d| d.sample(rng) as u64);
            let writes = direct_writes[table].map_or(0, |d| d.sample(rng) as u64);
            (reads, writes)
        });
    }

    /// Builds the read and write tables of every distinct probability for the current rate,
    /// evicting the oldest rate's tables when the cache is full; returns their index.
    fn build_tables(&mut self) -> usize {
        let rate = self.rate;
        let read_share = rate * (1.0 - self.write_fraction);
        let write_share = rate * self.write_fraction;
        let mut entry = if self.cached.len() == MAX_CACHED_RATES {
            self.cached.remove(0)
        } else {
            RateTables {
                rate_bits: 0,
                tables: PoissonTables::default(),
                pairs: Vec::new(),
                windows: Vec::new(),
                fine_guides: None,
            }
        };
        entry.rate_bits = rate.to_bits();
        entry.tables.clear();
        for &probability in &self.distinct_probability {
            entry.tables.push(read_share * probability);
            entry.tables.push(write_share * probability);
        }
        debug_assert_eq!(entry.tables.len(), 2 * self.distinct_probability.len());
        entry.pairs = GuidePair::of(&entry.tables).unwrap_or_default();
        entry.windows = if entry.pairs.is_empty() {
            Vec::new()
        } else {
            WindowPair::of(&entry.tables, &self.tokens_per_table)
        };
        entry.fine_guides = None;
        self.cached.push(entry);
        self.cached.len() - 1
    }

    /// The fine guides of the cached rate `index`, or none when it has no windows, when it
    /// has more than [`fine_guide::MAX_PAIRS`] pairs, when they would take the cache of rates
    /// past [`fine_guide::MAX_CACHED_PAIRS`] or when they would miss too often.
    fn fine_guides(&self, index: usize) -> Vec<FineGuidePair> {
        let pairs = self.tokens_per_table.len();
        let cached_pairs: usize = self
            .cached
            .iter()
            .filter_map(|t| t.fine_guides.as_ref())
            .map(Vec::len)
            .sum();
        let tables = &self.cached[index];
        if tables.windows.is_empty()
            || pairs > fine_guide::MAX_PAIRS
            || cached_pairs + pairs > fine_guide::MAX_CACHED_PAIRS
        {
            return Vec::new();
        }
        let guides = FineGuidePair::of(&tables.tables);
        if served_often_enough(&self.tokens_per_table, |pair| {
            guides[pair].miss_probability()
        }) {
            guides
        } else {
            Vec::new()
        }
    }
}

/// Most of the tokens' draws that a fast way of drawing (the windows, the fine guides) may
/// hand on to the next: a draw handed on costs a mispredicted branch on top of the next way's
/// work, so a rate whose draws would be handed on more often does without it. The guide alone
/// mispredicts too at the rates where the windows miss, which sets the bound high: C1's tokens
/// drawn at 3 200, 6 000 and 12 000 requests a step (one thread, an external crate) took 5.7,
/// 6.2 and 6.6 ns a token with the guide alone and 2.2, 2.7 and 3.6 ns with the windows first,
/// although these hand on more than 1/32 of the draws (the bound before); at 60 000, where they
/// hand on every draw, 11.3 ns against 7.4.
const MAX_SHARE_HANDED_ON: f64 = 1.0 / 2.0;

/// Whether a fast way of drawing that hands on a draw of table pair `i` with probability
/// `hand_on_probability(i)` keeps to [`MAX_SHARE_HANDED_ON`] when `tokens_per_pair[i]` tokens
/// draw from pair `i`.
fn served_often_enough(
    tokens_per_pair: &[u32],
    mut hand_on_probability: impl FnMut(usize) -> f64,
) -> bool {
    let expected: f64 = tokens_per_pair
        .iter()
        .enumerate()
        .map(|(pair, &tokens)| f64::from(tokens) * hand_on_probability(pair))
        .sum();
    let total_tokens: f64 = tokens_per_pair.iter().map(|&t| f64::from(t)).sum();
    expected <= MAX_SHARE_HANDED_ON * total_tokens
}

#[cfg(test)]
mod tests;
