//! Per-node hysteresis of ACH (Algorithm 1, step 1).

/// State of one node: overloaded (`+1`), neutral (`0`) or underloaded (`-1`).
pub type HysteresisState = i8;

/// The hysteresis of every node. With `xi = l_i - l*`: from 0, `xi >= eps_on` switches to +1
/// and `xi <= -eps_on` to -1; from +1, `xi <= eps_off` returns to 0; from -1, `xi >= -eps_off`
/// returns to 0. There is no direct jump between +1 and -1. The state starts at 0 and is reset to
/// 0 for every node whenever the number of nodes changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hysteresis {
    states: Vec<HysteresisState>,
}

/// Thresholds of the hysteresis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// Target load `l*`.
    pub target: f64,
    /// Switch-on distance `eps_on`.
    pub eps_on: f64,
    /// Switch-off distance `eps_off`.
    pub eps_off: f64,
}

impl Hysteresis {
    /// A hysteresis with the given states (from a saved state).
    pub fn restore(states: Vec<HysteresisState>) -> Hysteresis {
        Hysteresis { states }
    }

    /// The states, one per node.
    pub fn states(&self) -> &[HysteresisState] {
        &self.states
    }

    /// Updates every node with its load. Nodes that are not live are held at 0. Resets all
    /// states first if the number of nodes changed.
    pub fn update(&mut self, loads: &[f64], live: &[bool], thresholds: Thresholds) {
        if self.states.len() != loads.len() {
            self.states.clear();
            self.states.resize(loads.len(), 0);
        }
        for (i, (state, &load)) in self.states.iter_mut().zip(loads).enumerate() {
            if !live.get(i).copied().unwrap_or(true) {
                *state = 0;
                continue;
            }
            *state = next_state(*state, load - thresholds.target, thresholds);
        }
    }
}

/// One transition of the hysteresis for deviation `xi = l - l*`.
pub fn next_state(state: HysteresisState, xi: f64, t: Thresholds) -> HysteresisState {
    match state {
        0 if xi >= t.eps_on => 1,
        0 if xi <= -t.eps_on => -1,
        1 if xi <= t.eps_off => 0,
        -1 if xi >= -t.eps_off => 0,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Thresholds = Thresholds {
        target: 0.65,
        eps_on: 0.10,
        eps_off: 0.04,
    };

    #[test]
    fn thresholds_are_inclusive() {
        assert_eq!(next_state(0, 0.10, T), 1);
        assert_eq!(next_state(0, 0.0999, T), 0);
        assert_eq!(next_state(0, -0.10, T), -1);
        assert_eq!(next_state(1, 0.04, T), 0);
        assert_eq!(next_state(1, 0.0401, T), 1);
        assert_eq!(next_state(-1, -0.04, T), 0);
        assert_eq!(next_state(-1, -0.0401, T), -1);
    }

    #[test]
    fn no_direct_jump_between_overloaded_and_underloaded() {
        assert_eq!(next_state(1, -0.5, T), 0);
        assert_eq!(next_state(-1, 0.5, T), 0);
    }

    #[test]
    fn resets_when_the_number_of_nodes_changes_and_holds_dead_nodes_at_zero() {
        let mut h = Hysteresis::default();
        h.update(&[0.9, 0.1], &[true, true], T);
        assert_eq!(h.states(), &[1, -1]);
        h.update(&[0.9, 0.1], &[true, false], T);
        assert_eq!(h.states(), &[1, 0]);
        h.update(&[0.65, 0.65, 0.65], &[true, true, true], T);
        assert_eq!(h.states(), &[0, 0, 0]);
    }
}
