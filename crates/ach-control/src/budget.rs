//! Budget of ACH (Algorithm 1, step 3): per-step budget and the horizon window.

use std::collections::VecDeque;

use crate::config::HorizonRule;

/// The record of past `M_keys` over the horizon window, and the per-step budget.
///
/// `m = min(M_max, M_H / H) * C`. Under [`HorizonRule::Paper`], if at least `H` steps have been
/// recorded and the sum of the last `H` recorded `M_keys` is `>= M_H - 1e-9`, then `m = 0`.
/// Under [`HorizonRule::Sliding`], `m` is further capped at `M_H` minus the sum of the last
/// `H - 1` steps, from the first step on.
///
/// Every step opens a slot holding 0 ([`Budget::record`]); confirmed moves are charged to the
/// latest slot ([`Budget::charge`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    window: VecDeque<f64>,
    recorded: u64,
}

/// Slack of the horizon test, for floating-point rounding.
pub const HORIZON_SLACK: f64 = 1e-9;

impl Budget {
    /// The budget `m` of a step with intensity `c`, under the paper's horizon rule.
    pub fn step_budget(&self, c: f64, cap: f64, m_horizon: f64, horizon: usize) -> f64 {
        if self.recorded >= horizon as u64 && self.window_sum(horizon) >= m_horizon - HORIZON_SLACK
        {
            return 0.0;
        }
        cap * c
    }

    /// The budget `m` of a step with intensity `c` under `rule`.
    pub fn step_budget_under(
        &self,
        rule: HorizonRule,
        c: f64,
        cap: f64,
        m_horizon: f64,
        horizon: usize,
    ) -> f64 {
        match rule {
            HorizonRule::Paper => self.step_budget(c, cap, m_horizon, horizon),
            HorizonRule::Sliding => {
                // This step and the H - 1 before it form a window: what they spent leaves the
                // rest of M_H.
                let left = m_horizon - self.window_sum(horizon - 1);
                (cap * c).min(left).max(0.0)
            }
        }
    }

    /// Adds confirmed `M_keys` to the latest step's slot.
    pub fn charge(&mut self, m_keys: f64) {
        if let Some(last) = self.window.back_mut() {
            *last += m_keys;
        }
    }

    /// The recorded values, oldest first (at most `H`).
    pub fn window(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        self.window.iter().copied()
    }

    /// A budget with the given window (oldest first) and number of recorded steps.
    pub fn restore(window: impl IntoIterator<Item = f64>, recorded: u64) -> Budget {
        Budget {
            window: window.into_iter().collect(),
            recorded,
        }
    }

    /// Records the `M_keys` of a step (0 when nothing moved). Keeps the last `horizon` values.
    pub fn record(&mut self, m_keys: f64, horizon: usize) {
        self.window.push_back(m_keys);
        while self.window.len() > horizon {
            self.window.pop_front();
        }
        self.recorded += 1;
    }

    /// Sum of the last `horizon` recorded values, oldest first (0 for `horizon = 0`).
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

    #[test]
    fn sliding_horizon_leaves_what_the_previous_steps_did_not_spend() {
        let mut b = Budget::default();
        let sliding = |b: &Budget| b.step_budget_under(HorizonRule::Sliding, 1.0, 0.2, 0.25, 3);
        assert_eq!(sliding(&b), 0.2);
        b.record(0.0, 3);
        b.charge(0.2);
        // 0.25 - 0.2 left for this step, although fewer than H steps were recorded.
        assert!((sliding(&b) - 0.05).abs() < 1e-15);
        b.record(0.05, 3);
        assert_eq!(sliding(&b), 0.0);
        b.record(0.0, 3);
        // The window of this step is the last two (0.05 + 0): 0.2 left, capped at 0.2.
        assert_eq!(sliding(&b), 0.2);
    }
}
