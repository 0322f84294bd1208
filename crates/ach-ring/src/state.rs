//! Saved state of a [`TokenRing`]: versioned, serde, exact.

use serde::{Deserialize, Serialize};

use crate::token_ring::{NodeId, RingError, TokenRing};

/// The version of [`TokenRingState`] this release writes and reads.
pub const TOKEN_RING_STATE_VERSION: u32 = 1;

/// Everything needed to rebuild a [`TokenRing`] exactly: positions and owners.
///
/// Positions are stored as the bits of their `f64` (`f64::to_bits`), not as decimals, so that
/// any serde format, plain `serde_json` included, gives back a ring `==` to the original.
///
/// ```
/// use ach_ring::{TokenRing, TokenRingState};
/// let positions: Vec<f64> = (0..50).map(|i| ach_ring::key_position(&[i])).collect();
/// let mut positions = positions;
/// positions.sort_by(f64::total_cmp);
/// let ring = TokenRing::round_robin(positions, 3).unwrap();
/// let json = serde_json::to_string(&ring.state()).unwrap();
/// let state: TokenRingState = serde_json::from_str(&json).unwrap();
/// assert_eq!(TokenRing::from_state(&state).unwrap(), ring);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRingState {
    /// Format version ([`TOKEN_RING_STATE_VERSION`]).
    pub version: u32,
    /// `f64::to_bits` of each sorted position.
    pub position_bits: Vec<u64>,
    /// The owner of each token.
    pub owners: Vec<NodeId>,
}

impl TokenRing {
    /// The ring's saved state.
    pub fn state(&self) -> TokenRingState {
        TokenRingState {
            version: TOKEN_RING_STATE_VERSION,
            position_bits: self.positions().iter().map(|p| p.to_bits()).collect(),
            owners: self.owners().to_vec(),
        }
    }

    /// Rebuilds a ring from its saved state; fails on an unknown version or on positions and
    /// owners that [`TokenRing::new`] rejects.
    pub fn from_state(state: &TokenRingState) -> Result<TokenRing, RingError> {
        if state.version != TOKEN_RING_STATE_VERSION {
            return Err(RingError::UnsupportedStateVersion {
                found: state.version,
                supported: TOKEN_RING_STATE_VERSION,
            });
        }
        let positions = state
            .position_bits
            .iter()
            .map(|&b| f64::from_bits(b))
            .collect();
        TokenRing::new(positions, state.owners.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_versions_and_bad_positions_are_rejected() {
        let ring = TokenRing::evenly_spaced(4, 2).unwrap();
        let mut state = ring.state();
        state.version = 2;
        assert_eq!(
            TokenRing::from_state(&state).unwrap_err().to_string(),
            "saved ring state has version 2; this release reads version 1"
        );
        let mut state = ring.state();
        state.position_bits[1] = f64::NAN.to_bits();
        assert!(matches!(
            TokenRing::from_state(&state),
            Err(RingError::PositionOutOfRange { index: 1, .. })
        ));
    }
}
