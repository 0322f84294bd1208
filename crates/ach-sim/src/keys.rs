//! Where the keys of a run live and how popular each one is.
//!
//! By default (the paper) key `k` has a seeded hash position on the ring, so it lives on the
//! token whose arc holds that position, and Zipf rank `k + 1`. An opt-in [`KeyTable`] gives
//! both one key at a time instead: the token each key lives on and its relative popularity,
//! for a workload whose keys are known, such as the live experiment's (its keys' Redis Cluster
//! slots and its clients' own Zipf ranks). Either way the model is the same: a request picks a
//! key with probability in proportion to its weight and is served by the key's token.

use ach_ring::{NodeId, TokenRing};
use serde::{Deserialize, Serialize};

use crate::config::{HotKeys, SeriesConfig};
use crate::workload::{Workload, hot_phase_weights, zipf_weights};

/// Keys given one by one (`[key_table]`, optional): key `k` lives on token `tokens[k]` (tokens
/// are numbered in ring order, 0 at the smallest position) and is requested in proportion to
/// `weights[k]`. With a table the series' `zipf_s` is not used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyTable {
    /// The token of every key.
    pub tokens: Vec<u32>,
    /// The relative popularity of every key (any scale; not all zero).
    pub weights: Vec<f64>,
    /// The relative popularity of every key during the hot-key phase (optional). When given,
    /// `hot_keys` sets only the phase's steps: its `share`, `keys` and `node` are the table's
    /// to say. Without it the phase is built from `hot_keys` over the table's keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_weights: Option<Vec<f64>>,
}

impl KeyTable {
    /// Checks the table against a series of `keys` keys and `tokens` tokens; returns the field,
    /// the value and the rule broken.
    pub(crate) fn check(&self, keys: usize, tokens: usize) -> Result<(), (String, String, String)> {
        let length = |field: &str, len: usize| {
            (len != keys).then(|| {
                (
                    format!("key_table.{field}"),
                    format!("{len} entries"),
                    format!("must have one entry per key ({keys})"),
                )
            })
        };
        if let Some(broken) = length("tokens", self.tokens.len()) {
            return Err(broken);
        }
        if let Some((k, &token)) = self
            .tokens
            .iter()
            .enumerate()
            .find(|&(_, &token)| token as usize >= tokens)
        {
            return Err((
                format!("key_table.tokens[{k}]"),
                token.to_string(),
                format!("must name a token (< tokens = {tokens})"),
            ));
        }
        check_weights("weights", &self.weights, keys)?;
        if let Some(hot) = &self.hot_weights {
            check_weights("hot_weights", hot, keys)?;
        }
        Ok(())
    }
}

/// Checks one weight list: one entry per key, each finite and non-negative, not all zero.
fn check_weights(
    field: &str,
    weights: &[f64],
    keys: usize,
) -> Result<(), (String, String, String)> {
    if weights.len() != keys {
        return Err((
            format!("key_table.{field}"),
            format!("{} entries", weights.len()),
            format!("must have one entry per key ({keys})"),
        ));
    }
    if let Some((k, w)) = weights
        .iter()
        .enumerate()
        .find(|&(_, w)| !(w.is_finite() && *w >= 0.0))
    {
        return Err((
            format!("key_table.{field}[{k}]"),
            w.to_string(),
            "must be finite and >= 0".into(),
        ));
    }
    if !weights.iter().any(|&w| w > 0.0) {
        return Err((
            format!("key_table.{field}"),
            "all 0".into(),
            "must give some key a weight > 0".into(),
        ));
    }
    Ok(())
}

/// The keys of one run: each key's token and weight.
pub(crate) struct RunKeys {
    tokens: Vec<usize>,
    weights: Vec<f64>,
}

impl RunKeys {
    /// The keys of a run of `config` on tokens at `positions` (validated by the caller: the
    /// run builds its ring from them first), with the seeded key `hashes` (unused when the
    /// configuration has a key table).
    pub(crate) fn new(config: &SeriesConfig, positions: &[f64], hashes: &[f64]) -> RunKeys {
        match &config.key_table {
            Some(table) => RunKeys {
                tokens: table.tokens.iter().map(|&t| t as usize).collect(),
                weights: table.weights.clone(),
            },
            None => RunKeys {
                tokens: tokens_of_hashes(positions, hashes),
                weights: zipf_weights(hashes.len(), config.zipf_s),
            },
        }
    }

    /// The workload outside the hot-key phase.
    pub(crate) fn workload(&self, config: &SeriesConfig, token_count: usize) -> Workload {
        Workload::from_key_tokens(
            token_count,
            &self.tokens,
            &self.weights,
            config.write_fraction,
        )
    }

    /// The workload of the hot-key phase `hot`: the table's hot weights when it has them;
    /// otherwise the hot keys are the `hot.keys` lowest-numbered keys on tokens of node
    /// `hot.node` in the initial ring `initial`, sharing `hot.share` of the requests evenly.
    pub(crate) fn hot_phase_workload(
        &self,
        config: &SeriesConfig,
        hot: &HotKeys,
        initial: &TokenRing,
    ) -> Workload {
        let token_count = initial.positions().len();
        let given = config
            .key_table
            .as_ref()
            .and_then(|table| table.hot_weights.as_ref());
        let weights = match given {
            Some(weights) => weights.clone(),
            None => {
                let hot_node = NodeId(hot.node as u32);
                let hot_keys: Vec<usize> = self
                    .tokens
                    .iter()
                    .enumerate()
                    .filter(|&(_, &token)| initial.owner(token) == hot_node)
                    .map(|(key, _)| key)
                    .take(hot.keys)
                    .collect();
                hot_phase_weights(&self.weights, &hot_keys, hot.share)
            }
        };
        Workload::from_key_tokens(token_count, &self.tokens, &weights, config.write_fraction)
    }
}

/// Buckets per token of [`tokens_of_hashes`]' index: a bucket then holds a position about one
/// time in sixteen, and a hash is found without comparing the rest of the time.
const BUCKETS_PER_TOKEN: usize = 16;

/// Buckets per hash at most of [`tokens_of_hashes`]' index (for rings of many more tokens
/// than keys, whose index would cost more than the hashes it serves).
const BUCKETS_PER_HASH: usize = 4;

/// The token of each of `hashes` on a ring of tokens at `positions` (sorted, strictly
/// increasing, in `[0, 1)`; the caller validates them): exactly [`TokenRing::lookup`] of each
/// hash, for many hashes at once. The index of bucket `b` of `B` (a power of two) holds the
/// number of positions below `b / B`; a hash `h` in bucket `floor(h B)` (exact) has those
/// below it, plus the bucket's own positions below it, which are compared one by one (none
/// most of the time, so the branch on them is well predicted).
pub(crate) fn tokens_of_hashes(positions: &[f64], hashes: &[f64]) -> Vec<usize> {
    let Ok(token_count) = u32::try_from(positions.len()) else {
        let ring = TokenRing::round_robin(positions.to_vec(), 1)
            .expect("positions were validated by the caller");
        return hashes.iter().map(|&h| ring.lookup(h)).collect();
    };
    let buckets = (positions.len() * BUCKETS_PER_TOKEN)
        .min(hashes.len() * BUCKETS_PER_HASH)
        .max(1)
        .next_power_of_two();
    let scale = buckets as f64;
    // `below[b]`: the positions below `b / B`, for `b` from 0 to `B`.
    let mut below = Vec::with_capacity(buckets + 1);
    let mut count = 0;
    for bucket in 0..=buckets {
        let edge = bucket as f64 / scale;
        while count < positions.len() && positions[count] < edge {
            count += 1;
        }
        below.push(count as u32);
    }
    debug_assert_eq!(below[buckets], token_count);
    hashes
        .iter()
        .map(|&h| {
            // Outside (0, 1), NaN included, `lookup` gives token 0, as for a hash above every
            // position.
            if !(h > 0.0 && h < 1.0) {
                return 0;
            }
            let bucket = (h * scale) as usize;
            let mut token = below[bucket] as usize;
            let bucket_end = below[bucket + 1] as usize;
            while token < bucket_end && positions[token] < h {
                token += 1;
            }
            if token == positions.len() { 0 } else { token }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Profile;
    use crate::record::RunRecord;
    use crate::run::positions_and_hashes;
    use proptest::prelude::*;

    /// The run tests' small C1 with a hot-key phase.
    fn small() -> SeriesConfig {
        let mut c = crate::run::tests::small("C1");
        c.hot_keys = Some(HotKeys {
            from: 5,
            to: 20,
            share: 0.5,
            keys: 5,
            node: 1,
        });
        c
    }

    fn run(config: &SeriesConfig, profile: Profile) -> RunRecord {
        crate::run::tests::run(config, profile, 0)
    }

    /// The table of the keys a run draws: their tokens from their hashes, their Zipf weights.
    fn drawn_keys(config: &SeriesConfig, profile: Profile) -> KeyTable {
        let (positions, hashes) = positions_and_hashes(config, config.seed(0), profile);
        KeyTable {
            tokens: Workload::token_of_keys(&positions, &hashes)
                .into_iter()
                .map(|t| t as u32)
                .collect(),
            weights: zipf_weights(config.keys, config.zipf_s),
            hot_weights: None,
        }
    }

    #[test]
    fn a_table_of_the_drawn_keys_runs_exactly_as_the_drawn_keys() {
        for profile in [Profile::Paper, Profile::Corrected] {
            let mut config = small();
            let drawn = run(&config, profile);
            config.key_table = Some(drawn_keys(&config, profile));
            let given = run(&config, profile);
            assert_eq!(drawn.algorithms, given.algorithms, "{profile:?}");
        }
    }

    #[test]
    fn the_table_decides_where_the_load_is() {
        let mut config = small();
        config.algorithms = vec!["Static-W".into()];
        config.hot_keys = None;
        // Every request on token 0 (node 0's) against every token with the same share of keys
        // and requests: the same seed, far more imbalance.
        let mut table = drawn_keys(&config, Profile::Paper);
        table.tokens.fill(0);
        config.key_table = Some(table.clone());
        let piled = run(&config, Profile::Paper);
        table.tokens = (0..config.keys as u32).map(|k| k % 60).collect();
        table.weights.fill(1.0);
        config.key_table = Some(table);
        let spread = run(&config, Profile::Paper);
        let d_bar = |record: &RunRecord| record.algorithms[0].aggregates.d_true_mean;
        assert!(
            d_bar(&piled) > 2.0 * d_bar(&spread),
            "{} against {}",
            d_bar(&piled),
            d_bar(&spread)
        );
    }

    #[test]
    fn hot_weights_replace_the_weights_in_the_phase_only() {
        let mut config = small();
        config.algorithms = vec!["Static-W".into()];
        let mut table = drawn_keys(&config, Profile::Paper);
        let plain = {
            config.key_table = Some(table.clone());
            run(&config, Profile::Paper)
        };
        let mut hot = vec![0.0; config.keys];
        hot[7] = 1.0;
        table.hot_weights = Some(hot);
        config.key_table = Some(table);
        let piled = run(&config, Profile::Paper);
        let (plain, piled) = (&plain.algorithms[0].d_trace, &piled.algorithms[0].d_trace);
        assert_eq!(plain[..5], piled[..5]);
        let mean = |trace: &[f64]| trace.iter().sum::<f64>() / trace.len() as f64;
        assert!(mean(&piled[5..20]) > 1.5 * mean(&plain[5..20]));
    }

    #[test]
    fn a_broken_table_is_refused_with_its_field_value_and_rule() {
        let config = small();
        let table = drawn_keys(&config, Profile::Paper);
        let refused = |edit: &dyn Fn(&mut KeyTable)| {
            let mut config = config.clone();
            let mut table = table.clone();
            edit(&mut table);
            config.key_table = Some(table);
            config.validate(Profile::Paper).unwrap_err().to_string()
        };
        let short = refused(&|t| {
            t.tokens.pop();
        });
        assert!(
            short.contains("key_table.tokens") && short.contains("599 entries"),
            "{short}"
        );
        let outside = refused(&|t| t.tokens[3] = 60);
        assert!(
            outside.contains("key_table.tokens[3]") && outside.contains("< tokens = 60"),
            "{outside}"
        );
        let negative = refused(&|t| t.weights[2] = -1.0);
        assert!(negative.contains("key_table.weights[2]"), "{negative}");
        let zero = refused(&|t| t.hot_weights = Some(vec![0.0; 600]));
        assert!(zero.contains("key_table.hot_weights"), "{zero}");
        let nan = refused(&|t| t.weights[0] = f64::NAN);
        assert!(nan.contains("NaN"), "{nan}");
    }

    proptest! {
        /// The bulk lookup gives the ring's token for hashes anywhere, on the positions and
        /// next to them, and outside `[0, 1)`.
        #[test]
        fn tokens_of_hashes_are_the_ring_s(
            raw_positions in proptest::collection::btree_set(0_u64..1 << 53, 1..200),
            uniforms in proptest::collection::vec(0.0..1.0_f64, 0..300),
            keys in 0_usize..400,
        ) {
            let positions: Vec<f64> =
                raw_positions.iter().map(|&p| p as f64 / (1_u64 << 53) as f64).collect();
            let mut hashes = uniforms;
            for &p in &positions {
                hashes.extend([p, p.next_down(), p.next_up()]);
            }
            hashes.extend([0.0, -0.0, 1.0, -1.0, f64::NAN, f64::INFINITY, 1.0_f64.next_down()]);
            // The index depends on the number of hashes: from a few to many per token.
            hashes.truncate(hashes.len().min(keys.max(1) * 8));
            let ring = TokenRing::round_robin(positions.clone(), 1).unwrap();
            let expected: Vec<usize> =
                hashes.iter().map(|&h| ring.lookup_binary_search(h)).collect();
            prop_assert_eq!(tokens_of_hashes(&positions, &hashes), expected);
        }
    }
}
