//! Parameters of the ACH controller and their validation.

use serde::{Deserialize, Serialize};

/// Parameters of ACH (paper Table 1a). Build with [`AchConfig::paper`] and check with
/// [`AchConfig::validate`] before use.
///
/// Serialised with the paper's names (`M_max`, `M_H`, `H` for the budget fields); fields left
/// out take the paper's values, unknown fields are rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AchConfig {
    /// Target load `l*`.
    pub ell_star: f64,
    /// Hysteresis threshold to switch a node on (`eps_on`).
    pub eps_on: f64,
    /// Hysteresis threshold to switch a node off (`eps_off`), `0 < eps_off < eps_on`.
    pub eps_off: f64,
    /// Total load above which ACH stops correcting (`tau`).
    pub tau: f64,
    /// Total load below which ACH corrects at full strength (`tau_min < tau`).
    pub tau_min: f64,
    /// Half-saturation constant of the imbalance term (`kappa > 0`).
    pub kappa: f64,
    /// Per-step budget cap `M_max` (fraction of key space).
    #[serde(rename = "M_max")]
    pub m_max: f64,
    /// Horizon budget `M_H` (fraction of key space per `horizon` steps).
    #[serde(rename = "M_H")]
    pub m_horizon: f64,
    /// Horizon length `H` in steps.
    #[serde(rename = "H")]
    pub horizon: usize,
    /// Minimum tokens per node (`v_min`).
    pub v_min: usize,
    /// Optional maximum tokens per node (`v_max`).
    pub v_max: Option<usize>,
}

impl AchConfig {
    /// The paper's parameters (Table 1a).
    pub fn paper() -> AchConfig {
        AchConfig {
            ell_star: 0.65,
            eps_on: 0.10,
            eps_off: 0.04,
            tau: 0.85,
            tau_min: 0.50,
            kappa: 0.10,
            m_max: 0.02,
            m_horizon: 0.25,
            horizon: 100,
            v_min: 3,
            v_max: None,
        }
    }

    /// Checks every rule of the spec; returns the first one broken.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let finite = [
            ("ell_star", self.ell_star),
            ("eps_on", self.eps_on),
            ("eps_off", self.eps_off),
            ("tau", self.tau),
            ("tau_min", self.tau_min),
            ("kappa", self.kappa),
            ("M_max", self.m_max),
            ("M_H", self.m_horizon),
        ];
        for (field, value) in finite {
            if !value.is_finite() {
                return Err(ConfigError::new(field, value, "must be a finite number"));
            }
        }
        if !(self.ell_star > 0.0 && self.ell_star < 1.0) {
            return Err(ConfigError::new(
                "ell_star",
                self.ell_star,
                "must be in (0, 1)",
            ));
        }
        if self.eps_off <= 0.0 {
            return Err(ConfigError::new("eps_off", self.eps_off, "must be > 0"));
        }
        if self.eps_on <= self.eps_off {
            return Err(ConfigError::new(
                "eps_off",
                self.eps_off,
                format!("must be < eps_on = {}", self.eps_on),
            ));
        }
        if self.tau <= self.tau_min {
            return Err(ConfigError::new(
                "tau",
                self.tau,
                format!("must be > tau_min = {}", self.tau_min),
            ));
        }
        if self.kappa <= 0.0 {
            return Err(ConfigError::new("kappa", self.kappa, "must be > 0"));
        }
        if self.m_max <= 0.0 {
            return Err(ConfigError::new("M_max", self.m_max, "must be > 0"));
        }
        if self.m_horizon <= 0.0 {
            return Err(ConfigError::new("M_H", self.m_horizon, "must be > 0"));
        }
        if self.horizon == 0 {
            return Err(ConfigError::new("H", 0.0, "must be >= 1"));
        }
        if let Some(v_max) = self.v_max
            && v_max < self.v_min
        {
            return Err(ConfigError::new(
                "v_max",
                v_max as f64,
                format!("must be >= v_min = {}", self.v_min),
            ));
        }
        Ok(())
    }

    /// The per-step budget scale `min(M_max, M_H / H)`.
    pub fn step_budget_cap(&self) -> f64 {
        self.m_max.min(self.m_horizon / self.horizon as f64)
    }
}

impl Default for AchConfig {
    fn default() -> Self {
        AchConfig::paper()
    }
}

/// A parameter that breaks a rule: names the field, the value and the rule.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field} = {value} {rule}")]
pub struct ConfigError {
    /// The parameter's name as in the paper (`eps_off`, `M_max`, ...).
    pub field: &'static str,
    /// The offending value.
    pub value: f64,
    /// The rule it breaks, e.g. `must be < eps_on = 0.1`.
    pub rule: String,
}

impl ConfigError {
    fn new(field: &'static str, value: f64, rule: impl Into<String>) -> ConfigError {
        ConfigError {
            field,
            value,
            rule: rule.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_config_is_valid() {
        assert_eq!(AchConfig::paper().validate(), Ok(()));
        assert_eq!(AchConfig::paper().step_budget_cap(), 0.0025);
    }

    #[test]
    fn rules_are_enforced_with_clear_messages() {
        let mut c = AchConfig::paper();
        c.eps_off = 0.2;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "eps_off = 0.2 must be < eps_on = 0.1"
        );
        let mut c = AchConfig::paper();
        c.tau = 0.5;
        assert_eq!(c.validate().unwrap_err().field, "tau");
        let mut c = AchConfig::paper();
        c.horizon = 0;
        assert_eq!(c.validate().unwrap_err().field, "H");
        let mut c = AchConfig::paper();
        c.kappa = f64::NAN;
        assert_eq!(c.validate().unwrap_err().rule, "must be a finite number");
    }
}
