//! Budget of ACH (Algorithm 1, step 3): per-step budget and the horizon window.

use std::collections::VecDeque;

/// The record of past `M_keys` over the horizon window, and the per-step budget.
///
/// `m = min(M_max, M_H / H) * C`; if at least `H` steps have been recorded and the sum of the
/// last `H` recorded `M_keys` is `>= M_H - 1e-9`, then `m = 0`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    window: VecDeque<f64>,
    recorded: u64,
}

/// Slack of the horizon test, for floating-point rounding.
pub const HORIZON_SLACK: f64 = 1e-9;

impl Budget {
    /// The budget `m` of a step with intensity `c`.
    pub fn step_budget(&self, c: f64, cap: f64, m_horizon: f64, horizon: usize) -> f64 {
        if self.recorded >= horizon as u64 && self.window_sum(horizon) >= m_horizon - HORIZON_SLACK
        {
            return 0.0;
        }
        cap * c
    }

    /// Records the `M_keys` of a step (0 when nothing moved). Keeps the last `horizon` values.
    pub fn record(&mut self, m_keys: f64, horizon: usize) {
        self.window.push_back(m_keys);
        while self.window.len() > horizon {
            self.window.pop_front();
        }
        self.recorded += 1;
    }

    /// Sum of the last `horizon` recorded values, oldest first.
    pub fn window_sum(&self, horizon: usize) -> f64 {
        let skip = self.window.len().saturating_sub(horizon);
        self.window.iter().skip(skip).sum()
    }

    /// Number of steps recorded so far.
    pub fn recorded(&self) -> u64 {
        self.recorded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horizon_closes_the_budget_once_spent() {
        let mut b = Budget::default();
        assert_eq!(b.step_budget(0.5, 0.0025, 0.25, 3), 0.00125);
        b.record(0.1, 3);
        b.record(0.1, 3);
        // Fewer than H steps recorded: the window is not checked yet.
        b.record(0.0, 3);
        assert_eq!(b.recorded(), 3);
        assert!(b.step_budget(0.5, 0.0025, 0.25, 3) > 0.0);
        b.record(0.05, 3);
        // Last three: 0.1 + 0.0 + 0.05 = 0.15 < 0.25.
        assert!(b.step_budget(0.5, 0.0025, 0.25, 3) > 0.0);
        b.record(0.2, 3);
        assert_eq!(b.step_budget(0.5, 0.0025, 0.25, 3), 0.0);
    }
}
