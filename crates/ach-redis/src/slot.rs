//! Key to slot, exactly as Redis Cluster routes: CRC16 (XMODEM) of the key, or of its hash tag,
//! modulo 16384.

/// Number of hash slots of a Redis Cluster.
pub const SLOT_COUNT: usize = 16_384;

/// CRC16-CCITT in its XMODEM variant (polynomial 0x1021, initial value 0, no reflection), the
/// checksum Redis Cluster hashes keys with.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: the bytes between the first `{` and the first `}` after
/// it when they are not empty (the hash tag), otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(length) = key[open + 1..].iter().position(|&b| b == b'}')
        && length > 0
    {
        return &key[open + 1..open + 1 + length];
    }
    key
}

/// The slot Redis Cluster routes `key` to.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOT_COUNT as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_cluster_spec_test_vector() {
        // The Redis Cluster specification: the output for "123456789" is 0x31C3.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn hash_tags_follow_the_spec_examples() {
        // The four examples of the Redis Cluster specification.
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{"), b"{");
        assert_eq!(hash_tag(b"}{"), b"}{");
    }

    #[test]
    fn key_slots_agree_with_redis() {
        // Values from `CLUSTER KEYSLOT` of redis-server 7.0.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"123456789"), 0x31C3);
    }
}
