//! Why a step plans what it plans: ACH's sources, receivers, intensity and budget, followed step
//! by step beside the controller, and the one-line reason when nothing moves.
//!
//! ACH runs behind `dyn Balancer`, which tells only its plan. The explainer keeps the two
//! pieces of ACH's state that decide whether anything may move, with ACH's own public parts
//! ([`Hysteresis`], [`Budget`], [`intensity`]) fed exactly as ACH feeds them: the hysteresis
//! sees every step's loads, the window opens a slot per step and is charged with what was
//! confirmed. For the built-in ACH (`--algorithm ach`) its figures are ACH's; other algorithms
//! get no explainer.

use ach_control::AchConfig;
use ach_control::budget::Budget;
use ach_control::hysteresis::{Hysteresis, Thresholds};
use ach_control::intensity::{IntensityParams, intensity};
use ach_control::{HorizonRule, TargetRule};

/// ACH's state as far as it decides whether a step may move anything.
#[derive(Clone, Debug, Default)]
pub struct Explainer {
    hysteresis: Hysteresis,
    budget: Budget,
}

/// What ACH saw at one step.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Diagnosis {
    /// The target load `l*` (the live mean).
    pub target: f64,
    /// The unit the deviations are measured in (`max(l*, idle floor)` under the relative rule).
    pub scale: f64,
    /// `eps_on`, in that unit.
    pub eps_on: f64,
    /// `eps_off`, in that unit.
    pub eps_off: f64,
    /// Every node's deviation `(l - l*) / scale`, in the order of the masters.
    pub deviations: Vec<f64>,
    /// Indices of the overloaded nodes (hysteresis +1).
    pub sources: Vec<usize>,
    /// Indices of the underloaded nodes (hysteresis -1).
    pub receivers: Vec<usize>,
    /// The intensity `C`.
    pub intensity: f64,
    /// The intensity's load factor `gamma` (0 when the cluster's total load is at or above
    /// `tau`).
    pub gamma: f64,
    /// The step budget `m` (share of all keys).
    pub budget: f64,
    /// The step budget's cap (`M_max` under the sliding horizon rule).
    pub m_max: f64,
    /// `M_max * C`.
    pub budget_by_intensity: f64,
    /// What the last `H - 1` steps spent of the window budget.
    pub window_spent: f64,
    /// The window budget `M_H`.
    pub m_horizon: f64,
}

impl Explainer {
    /// Follows one step of ACH with `config` on `loads` (the same loads and total load ACH
    /// plans on) and opens the step's slot of the budget window.
    pub fn step(&mut self, config: &AchConfig, loads: &[f64], total_load: f64) -> Diagnosis {
        let live = vec![true; loads.len()];
        let target = match config.target {
            TargetRule::Fixed => config.ell_star,
            TargetRule::LiveMean => {
                let finite: Vec<f64> = loads.iter().copied().filter(|l| l.is_finite()).collect();
                if finite.is_empty() {
                    config.ell_star
                } else {
                    finite.iter().sum::<f64>() / finite.len() as f64
                }
            }
        };
        let scale = config.threshold_rule.scale(target);
        let scaled: Vec<f64> = loads.iter().map(|l| l / scale).collect();
        self.hysteresis.update(
            &scaled,
            &live,
            Thresholds {
                target: target / scale,
                eps_on: config.eps_on,
                eps_off: config.eps_off,
            },
        );
        let intensity = intensity(
            &scaled,
            &live,
            total_load,
            IntensityParams {
                target: target / scale,
                tau: config.tau,
                tau_min: config.tau_min,
                kappa: config.kappa,
            },
        );
        let budget = self.budget.step_budget_under(
            config.horizon_rule,
            intensity.c,
            config.step_budget_cap(),
            config.m_horizon,
            config.horizon,
        );
        let window_spent = match config.horizon_rule {
            HorizonRule::Sliding => self.budget.window_sum(config.horizon - 1),
            HorizonRule::Paper => self.budget.window_sum(config.horizon),
        } + 0.0; // An empty window sums to -0.0 (an f64 sum starts there), printed "-0.0000".
        self.budget.record(0.0, config.horizon);
        let states = self.hysteresis.states();
        Diagnosis {
            target,
            scale,
            eps_on: config.eps_on,
            eps_off: config.eps_off,
            deviations: scaled.iter().map(|l| l - target / scale).collect(),
            sources: (0..loads.len()).filter(|&i| states[i] == 1).collect(),
            receivers: (0..loads.len()).filter(|&i| states[i] == -1).collect(),
            intensity: intensity.c,
            gamma: intensity.gamma,
            budget,
            m_max: config.step_budget_cap(),
            budget_by_intensity: config.step_budget_cap() * intensity.c,
            window_spent,
            m_horizon: config.m_horizon,
        }
    }

    /// Charges the latest step with the confirmed `M_keys`, as ACH's confirm does.
    pub fn charge(&mut self, m_keys: f64) {
        if m_keys != 0.0 {
            self.budget.charge(m_keys);
        }
    }
}

impl Diagnosis {
    /// Which rule stopped the step, in one line (`names[i]` names node `i`), or `None` when
    /// none did (the sources had slots to give, but none fitted).
    pub fn stopping_rule(&self, names: &[String]) -> Option<String> {
        let name = |i: usize| names.get(i).cloned().unwrap_or_else(|| format!("node {i}"));
        let widest = |pick: &dyn Fn(f64) -> f64| {
            self.deviations
                .iter()
                .enumerate()
                .max_by(|a, b| pick(*a.1).total_cmp(&pick(*b.1)))
                .map(|(i, d)| (name(i), *d))
                .unwrap_or_default()
        };
        if self.sources.is_empty() {
            let (node, deviation) = widest(&|d| d);
            return Some(format!(
                "no source: no node is overloaded (the most loaded, {node}, is {deviation:+.3} \
                 from the target {:.3} in units of {:.3}; a node becomes a source at +{:.3} and \
                 stays one down to +{:.3})",
                self.target, self.scale, self.eps_on, self.eps_off
            ));
        }
        if self.receivers.is_empty() {
            let (node, deviation) = widest(&|d| -d);
            return Some(format!(
                "no receiver: every node is within eps_on of the target (the least loaded, \
                 {node}, is {deviation:+.3} from {:.3} in units of {:.3}; a receiver needs \
                 -{:.3})",
                self.target, self.scale, self.eps_on
            ));
        }
        if self.gamma <= 0.0 {
            return Some(
                "no intensity: the cluster's total load is at or above tau (C = 0), so ACH \
                 moves nothing while the cluster is saturated"
                    .to_string(),
            );
        }
        if self.budget <= 0.0 {
            return Some(format!(
                "budget spent: window {:.4} of {:.4} (M_H) spent by the last steps",
                self.window_spent, self.m_horizon
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["a".into(), "b".into(), "c".into()]
    }

    #[test]
    fn a_balanced_cluster_has_no_source() {
        let mut explainer = Explainer::default();
        let diagnosis = explainer.step(&AchConfig::live(), &[0.5, 0.52, 0.49], 0.5);
        let reason = diagnosis.stopping_rule(&names()).unwrap();
        assert!(reason.starts_with("no source"), "{reason}");
        assert!(reason.contains("the most loaded, b,"), "{reason}");
    }

    #[test]
    fn one_hot_node_among_equals_has_no_receiver() {
        // Mean 0.6; b and c are 0.05 below it (relative 0.083 < eps_on 0.10).
        let mut explainer = Explainer::default();
        let diagnosis = explainer.step(&AchConfig::live(), &[0.7, 0.55, 0.55], 0.6);
        assert_eq!(diagnosis.sources, vec![0]);
        let reason = diagnosis.stopping_rule(&names()).unwrap();
        assert!(reason.starts_with("no receiver"), "{reason}");
    }

    #[test]
    fn a_spent_window_stops_the_step_with_its_figures() {
        let config = AchConfig {
            m_horizon: 0.1,
            horizon: 3,
            ..AchConfig::live()
        };
        let mut explainer = Explainer::default();
        let loads = [0.9, 0.2, 0.2];
        let first = explainer.step(&config, &loads, 0.43);
        assert!(first.budget > 0.0 && first.stopping_rule(&names()).is_none());
        explainer.charge(0.1);
        let second = explainer.step(&config, &loads, 0.43);
        assert_eq!(second.budget, 0.0);
        let reason = second.stopping_rule(&names()).unwrap();
        assert_eq!(
            reason,
            "budget spent: window 0.1000 of 0.1000 (M_H) spent by the last steps"
        );
    }
}
