//! ACH-A: ACH whose hysteresis thresholds and cool-down adapt online to the telemetry's
//! measured noise and lag.

use ach_control::{
    Ach, AchConfig, Balancer, ConfigError, ConfirmError, Observation, Plan, TokenLoadNeed,
};
use ach_ring::TokenRing;

/// Steps of per-step noise figures the noise estimate is the median of.
const NOISE_WINDOW: usize = 100;
/// Steps after a move over which its source's response is recorded, for the lag estimate.
const RESPONSE_STEPS: usize = 12;
/// Moves whose responses must be averaged before the lag estimate is used.
const MIN_RESPONSES: u32 = 5;
/// `MAD / 0.6745` estimates a normal standard deviation.
const MAD_TO_SD: f64 = 1.0 / 0.674_489_750_196_081_7;

/// The rules of [`Adaptive`]: how many noise standard deviations each threshold keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveRules {
    /// `eps_on >= z_on * sigma_l` (a node turns over- or underloaded only on a deviation that
    /// noise alone reaches rarely).
    pub z_on: f64,
    /// `eps_off >= z_off * sigma_l`.
    pub z_off: f64,
    /// The fraction of a move's effect the smoothed load must show before the node moves
    /// tokens again (sets the settle time of the hold).
    pub settle_fraction: f64,
}

impl AdaptiveRules {
    /// The defaults: 3 and 1.5 standard deviations, hold until half of a move's effect shows.
    pub const DEFAULT: AdaptiveRules = AdaptiveRules {
        z_on: 3.0,
        z_off: 1.5,
        settle_fraction: 0.5,
    };
}

/// ACH whose hysteresis thresholds `eps_on` / `eps_off` and cool-down are set every step from
/// what the telemetry shows of its own noise and lag, never below the base configuration's
/// values (the paper's, for ACH-A).
///
/// * **Noise.** Each step, the median over the live nodes of `|l_i(t) - l_i(t-1)|`; over the
///   last 100 steps the median of those, over 0.6745, estimates the standard deviation of a
///   smoothed load's step-to-step change, and divided by `sqrt(2 beta)` (`beta` the EWMA factor
///   of the telemetry) that of the smoothed load itself, `sigma_l` (for an EWMA of white noise,
///   `var(S) = var(dS) / (2 beta)`). Then `eps_off = max(base eps_off, z_off * sigma_l)` and
///   `eps_on = max(base eps_on, z_on * sigma_l)`; with `z_on > z_off` and the base's
///   `eps_on > eps_off`, `eps_on > eps_off` always holds. Medians make one spike or one move
///   count for nothing.
/// * **Lag.** After every confirmed move, the source's load changes over the next 12 steps are
///   averaged over all moves; the first step `k` whose average fall is at least half the
///   steepest is when a move's effect first shows, so the telemetry's lag is `d = k - 1`
///   (routing changes from the next step).
///   Until 5 moves have been seen, `d = 0` (the paper's model).
/// * **Hold.** A node that gave or received tokens is held (neither source nor receiver: the
///   controller sees it as not live) for `d + 1 + s` steps, `s` the steps an EWMA needs to show
///   `settle_fraction` of a step change (`ceil(ln(1 - f) / ln(1 - beta))`), so that it does not
///   go on moving before its last move can be seen: under lag this is what makes ACH overshoot
///   and move tokens back and forth. The cool-down of moved tokens is the same length (at least
///   the base's).
///
/// Why it is safe: only `eps_on`, `eps_off`, `cooldown` and the live mask change, through
/// [`Ach::set_config`], which rejects a configuration that breaks a rule (then the last good
/// one stays). The budget, its window and every rule of the planner are ACH's own, so every
/// budget invariant of ACH holds; a held node neither gives nor receives, so `v_min` and
/// `v_max` hold as they do for ACH.
#[derive(Clone, Debug)]
pub struct Adaptive {
    ach: Ach,
    base: AchConfig,
    beta: f64,
    rules: AdaptiveRules,
    previous: Vec<f64>,
    noise_window: Vec<f64>,
    /// Average change of a source's load `k + 1` steps after a move, summed over moves.
    response_sum: [f64; RESPONSE_STEPS],
    responses: u32,
    /// Moves being followed: `(source, loads seen so far since the move)`.
    following: Vec<(usize, Vec<f64>)>,
    /// Step until which each node is held (exclusive).
    held_until: Vec<u64>,
    live: Vec<bool>,
    step: u64,
}

impl Adaptive {
    /// ACH with `base` as the floor of every adapted parameter, over telemetry smoothed with
    /// EWMA factor `beta` (in (0, 1]).
    pub fn new(base: AchConfig, beta: f64, rules: AdaptiveRules) -> Result<Adaptive, ConfigError> {
        let ach = Ach::new(base.clone())?;
        Ok(Adaptive {
            ach,
            base,
            beta: beta.clamp(1e-6, 1.0),
            rules,
            previous: Vec::new(),
            noise_window: Vec::new(),
            response_sum: [0.0; RESPONSE_STEPS],
            responses: 0,
            following: Vec::new(),
            held_until: Vec::new(),
            live: Vec::new(),
            step: 0,
        })
    }

    /// The controller inside, with its current parameters.
    pub fn ach(&self) -> &Ach {
        &self.ach
    }

    /// The current estimate of a smoothed load's noise, `sigma_l` (0 before any estimate).
    pub fn noise(&self) -> f64 {
        if self.noise_window.is_empty() {
            return 0.0;
        }
        crate::median(&self.noise_window) * MAD_TO_SD / (2.0 * self.beta).sqrt()
    }

    /// The current estimate of the telemetry's lag in steps (0 until enough moves were seen).
    pub fn lag(&self) -> u64 {
        if self.responses < MIN_RESPONSES {
            return 0;
        }
        // The first step whose average fall is at least half the steepest: a source that moves
        // again after its hold adds later falls of the same size, which must not count as lag.
        let steepest = self.response_sum.iter().copied().fold(0.0, f64::min);
        if steepest >= 0.0 {
            return 0;
        }
        let first = self
            .response_sum
            .iter()
            .position(|&change| change <= 0.5 * steepest)
            .unwrap_or(0);
        first as u64
    }

    /// The hold after a move, in steps: `lag + 1 + settle`.
    pub fn hold(&self) -> u64 {
        let f = self.rules.settle_fraction.clamp(0.0, 0.999);
        let settle = if self.beta >= 1.0 || f <= 0.0 {
            0.0
        } else {
            ((1.0 - f).ln() / (1.0 - self.beta).ln()).ceil()
        };
        self.lag() + 1 + settle as u64
    }

    fn observe_noise(&mut self, loads: &[f64], live: &[bool]) {
        let mut changes: Vec<f64> = loads
            .iter()
            .zip(&self.previous)
            .enumerate()
            .filter(|&(i, (l, p))| {
                live.get(i).copied().unwrap_or(true) && l.is_finite() && p.is_finite()
            })
            .map(|(_, (l, p))| (l - p).abs())
            .collect();
        if !changes.is_empty() {
            if self.noise_window.len() == NOISE_WINDOW {
                self.noise_window.remove(0);
            }
            self.noise_window
                .push(crate::filtered::median_in_place(&mut changes));
        }
        self.previous.clear();
        self.previous.extend_from_slice(loads);
    }

    fn observe_responses(&mut self, loads: &[f64]) {
        let mut finished = Vec::new();
        for (k, (source, seen)) in self.following.iter_mut().enumerate() {
            seen.push(loads.get(*source).copied().unwrap_or(f64::NAN));
            if seen.len() > RESPONSE_STEPS {
                finished.push(k);
            }
        }
        for k in finished.into_iter().rev() {
            let (_, seen) = self.following.remove(k);
            if seen.iter().all(|l| l.is_finite()) {
                for (step, pair) in seen.windows(2).enumerate() {
                    self.response_sum[step] += pair[1] - pair[0];
                }
                self.responses += 1;
            }
        }
    }

    fn adapt(&mut self) {
        let sigma = self.noise();
        let eps_off = self.base.eps_off.max(self.rules.z_off * sigma);
        let eps_on = self.base.eps_on.max(self.rules.z_on * sigma);
        let cooldown = self.base.cooldown.max(self.hold());
        let adapted = AchConfig {
            eps_on,
            eps_off,
            cooldown,
            ..self.ach.config().clone()
        };
        if adapted != *self.ach.config() {
            // A rejected configuration keeps the last good one.
            let _ = self.ach.set_config(adapted);
        }
    }
}

impl Balancer for Adaptive {
    fn name(&self) -> &'static str {
        "ACH-A"
    }

    fn token_load_need(&self) -> TokenLoadNeed {
        self.ach.token_load_need()
    }

    fn plan(&mut self, ring: &TokenRing, observation: &Observation<'_>) -> Plan {
        let n = observation.n_nodes();
        self.step = observation.step;
        self.observe_noise(observation.loads, observation.live);
        self.observe_responses(observation.loads);
        self.adapt();
        self.held_until.resize(n, 0);
        self.live.clear();
        self.live.extend((0..n).map(|i| {
            observation.live.get(i).copied().unwrap_or(true) && self.held_until[i] <= self.step
        }));
        let held = Observation {
            live: &self.live,
            ..*observation
        };
        self.ach.plan(ring, &held)
    }

    /// Confirms with ACH (which charges its budget), then holds the nodes that moved and
    /// starts following the sources' loads for the lag estimate.
    fn confirm(&mut self, plan: &Plan) -> Result<f64, ConfirmError> {
        let charged = self.ach.confirm(plan)?;
        if plan.moves.iter().any(|mv| mv.from != mv.to) {
            let until = self.step + 1 + self.hold();
            for mv in plan.moves.iter().filter(|mv| mv.from != mv.to) {
                for node in [mv.from.index(), mv.to.index()] {
                    if node >= self.held_until.len() {
                        self.held_until.resize(node + 1, 0);
                    }
                    self.held_until[node] = self.held_until[node].max(until);
                }
            }
            let mut sources: Vec<usize> = plan.moves.iter().map(|mv| mv.from.index()).collect();
            sources.sort_unstable();
            sources.dedup();
            for source in sources {
                let now = self.previous.get(source).copied().unwrap_or(f64::NAN);
                self.following.push((source, vec![now]));
            }
        }
        Ok(charged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::even_ring;

    #[test]
    fn thresholds_follow_the_noise_and_never_fall_below_the_base() {
        let mut ach_a = Adaptive::new(AchConfig::paper(), 0.3, AdaptiveRules::DEFAULT).unwrap();
        let ring = even_ring(60, 3);
        let live = [true; 3];
        // Quiet loads: the paper's thresholds.
        for t in 0..50 {
            let loads = [0.6, 0.6, 0.6];
            let obs = Observation {
                step: t,
                loads: &loads,
                total_load: 0.6,
                live: &live,
                token_loads: None,
            };
            let plan = ach_a.plan(&ring, &obs);
            ach_a.confirm(&plan).unwrap();
        }
        assert_eq!(ach_a.ach().config().eps_on, 0.10);
        assert_eq!(ach_a.ach().config().eps_off, 0.04);
        // Loads that jump by 0.1 every step: sigma_l = 0.1 / 0.6745 / sqrt(0.6) = 0.191.
        for t in 50..200 {
            let x = if t % 2 == 0 { 0.55 } else { 0.65 };
            let loads = [x, x, x];
            let obs = Observation {
                step: t,
                loads: &loads,
                total_load: x,
                live: &live,
                token_loads: None,
            };
            let plan = ach_a.plan(&ring, &obs);
            ach_a.confirm(&plan).unwrap();
        }
        let sigma = ach_a.noise();
        assert!(
            (sigma - 0.1 / 0.674_489_75 / 0.6f64.sqrt()).abs() < 1e-6,
            "{sigma}"
        );
        let config = ach_a.ach().config();
        assert!((config.eps_on - 3.0 * sigma).abs() < 1e-12);
        assert!(config.eps_on > config.eps_off);
    }

    #[test]
    fn a_node_that_moved_is_held_and_the_budget_is_ach_s() {
        let mut ach_a = Adaptive::new(AchConfig::paper(), 0.3, AdaptiveRules::DEFAULT).unwrap();
        let mut ring = even_ring(60, 2);
        let live = [true; 2];
        let loads = [0.95, 0.30];
        let mut moved_at = Vec::new();
        for t in 0..12 {
            let obs = Observation {
                step: t,
                loads: &loads,
                total_load: 0.6,
                live: &live,
                token_loads: None,
            };
            let plan = ach_a.plan(&ring, &obs);
            assert!(plan.within_budget());
            if !plan.moves.is_empty() {
                moved_at.push(t);
            }
            ring.apply(&plan.moves).unwrap();
            ach_a.confirm(&plan).unwrap();
        }
        // Without a lag estimate the hold is 1 + ceil(ln 0.5 / ln 0.7) = 3 steps.
        assert_eq!(ach_a.hold(), 3);
        assert_eq!(moved_at, vec![0, 4, 8]);
    }
}
