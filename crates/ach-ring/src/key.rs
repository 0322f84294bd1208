//! The stable key hash and the map from a key to a position on the unit circle.
//!
//! Every machine that routes keys must agree on where a key lies, so positions come from a
//! documented, platform-stable hash and never from a randomly seeded hasher:
//!
//! * [`key_hash`]: XXH3-64 with seed 0 of the key's bytes;
//! * [`hash_position`]: the top 53 bits of the hash divided by `2^53`, a number in `[0, 1)` that
//!   an `f64` holds exactly;
//! * [`key_position`]: the two together.
//!
//! A key with hash `h` lies at `(h >> 11) * 2^-53`. The hashes of the keys that lie in a token's
//! arc therefore form whole runs of 2048 consecutive hash values, which is what lets
//! [`crate::Migration`] name the moved keys as exact ranges of hashes.

use xxhash_rust::xxh3::xxh3_64;

/// Number of low hash bits that [`hash_position`] drops (64 - 53).
pub(crate) const DROPPED_BITS: u32 = 11;

/// `2^53` as an `f64`: positions are multiples of `1 / 2^53`.
pub(crate) const POSITION_SCALE: f64 = (1u64 << 53) as f64;

/// The stable 64-bit hash of a key: XXH3-64 with seed 0 of its bytes.
///
/// The value is the same on every platform, in every process and in every release.
///
/// ```
/// // XXH3-64 of the empty input with seed 0, as published with the algorithm.
/// assert_eq!(ach_ring::key_hash(b""), 0x2D06_8005_38D3_94C2);
/// ```
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// The position of a hash on the unit circle: its top 53 bits over `2^53`, in `[0, 1)`.
///
/// Exact: every 53-bit integer is an `f64`, and dividing by a power of two rounds nothing.
#[inline]
pub fn hash_position(hash: u64) -> f64 {
    (hash >> DROPPED_BITS) as f64 / POSITION_SCALE
}

/// The position of a key on the unit circle: [`hash_position`] of [`key_hash`].
///
/// ```
/// let p = ach_ring::key_position(b"user:42");
/// assert!((0.0..1.0).contains(&p));
/// assert_eq!(p, ach_ring::hash_position(ach_ring::key_hash(b"user:42")));
/// ```
#[inline]
pub fn key_position(key: &[u8]) -> f64 {
    hash_position(key_hash(key))
}

/// The largest 53-bit position index `k` with `k / 2^53 <= position`, for a position in
/// `[0, 1)`; `None` for a negative position.
pub(crate) fn last_index_at_or_below(position: f64) -> Option<u64> {
    if position < 0.0 {
        return None;
    }
    // Exact: scaling by a power of two; `floor` of a value below 2^53 fits a u64.
    Some((position * POSITION_SCALE).floor() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_exact_and_in_range() {
        assert_eq!(hash_position(0), 0.0);
        assert_eq!(hash_position(u64::MAX), 1.0 - 1.0 / POSITION_SCALE);
        assert!(hash_position(u64::MAX) < 1.0);
        // The low 11 bits do not change the position.
        assert_eq!(hash_position(0x7FF), 0.0);
        assert_eq!(hash_position(0x800), 1.0 / POSITION_SCALE);
        for h in [1u64 << 63, 0x1234_5678_9ABC_DEF0, 0xFFFF_0000_0000_0000] {
            let k = last_index_at_or_below(hash_position(h)).unwrap();
            assert_eq!(k, h >> DROPPED_BITS);
        }
    }

    #[test]
    fn key_positions_are_pinned() {
        // Value-stability: these must never change, or every deployed ring reshuffles.
        assert_eq!(key_hash(b""), 0x2D06_8005_38D3_94C2);
        assert_eq!(
            key_position(b""),
            (0x2D06_8005_38D3_94C2u64 >> 11) as f64 / POSITION_SCALE
        );
    }
}
