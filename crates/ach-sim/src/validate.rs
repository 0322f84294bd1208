//! The rules of a series configuration: [`SeriesConfig::validate`] checks every one before any
//! work starts and names the series, the field, the value and the rule broken.

use ach_baselines::catalogue::Catalogue;
use ach_telemetry::{DistortionConfigError, TelemetryConfigError};

use crate::algorithms::{Registry, series_parameters};
use crate::config::{A0, Churn, ConfigError, Degradation, LoadProfile, Profile, SeriesConfig};
use crate::sweep::{Sweep, SweepMode, resolve_path};

impl SeriesConfig {
    /// Checks every rule, with the built-in algorithms; returns the first one broken.
    pub fn validate(&self, profile: Profile) -> Result<(), ConfigError> {
        self.validate_with(profile, &Registry::built_in())
    }

    /// Checks every rule; `algorithms` may name any algorithm of `registry`.
    pub fn validate_with(&self, profile: Profile, registry: &Registry) -> Result<(), ConfigError> {
        self.validate_shape(profile)?;
        self.validate_algorithms(registry)?;
        self.validate_cluster_and_telemetry()?;
        self.validate_ach()?;
        self.validate_events(profile)
            .map_err(|broken| self.broken_rule(broken))?;
        if self.against_a0 && !self.algorithms.iter().any(|a| a == A0) {
            return Err(self.broken(
                "against_a0",
                &true,
                &format!("needs {A0:?} in algorithms, the arm every other one is paired against"),
            ));
        }
        self.validate_parameters(registry)?;
        self.validate_pacing()
            .map_err(|broken| self.broken_rule(broken))?;
        for (k, reading) in self.readings.iter().enumerate() {
            reading
                .check(k, &self.readings[..k], self.cluster.classes.len())
                .map_err(|broken| self.broken_rule(broken))?;
        }
        if let Some(sweep) = &self.sweep {
            self.validate_sweep(sweep, profile)?;
        }
        Ok(())
    }

    /// The error of a `(field, value, rule)` that a check of a part of this series returned.
    fn broken_rule(&self, (field, value, rule): (String, String, String)) -> ConfigError {
        self.broken(&field, &value, &rule)
    }

    /// The error of this series' `field` whose `value` breaks `rule`.
    fn broken(&self, field: &str, value: &dyn std::fmt::Display, rule: &str) -> ConfigError {
        ConfigError {
            series: self.name.clone(),
            field: field.to_string(),
            value: value.to_string(),
            rule: rule.to_string(),
        }
    }

    /// The name, the runs and their seeds, the steps, the tokens and keys, and the popularity.
    fn validate_shape(&self, profile: Profile) -> Result<(), ConfigError> {
        if self.name.trim().is_empty() {
            return Err(self.broken("name", &"\"\"", "must not be empty"));
        }
        // The name becomes a folder and a file name of the results (`runs/<name>/`,
        // `config/<name>.toml`), so it must not be able to leave the output folder.
        let name_is_a_plain_file_name = self
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !self.name.starts_with('.');
        if !name_is_a_plain_file_name {
            return Err(self.broken(
                "name",
                &format!("{:?}", self.name),
                "must use only letters, digits, '_', '-' and '.', and not start with '.'",
            ));
        }
        if self.runs == 0 {
            return Err(self.broken("runs", &self.runs, "must be >= 1"));
        }
        if self.seed_stride == 0 {
            return Err(self.broken(
                "seed_stride",
                &self.seed_stride,
                "must be >= 1 (every run needs its own seed)",
            ));
        }
        if self.steps == 0 {
            return Err(self.broken("steps", &self.steps, "must be >= 1"));
        }
        if self.warmup >= self.steps {
            return Err(self.broken(
                "warmup",
                &self.warmup,
                &format!("must be < steps = {}", self.steps),
            ));
        }
        if self.tokens == 0 {
            return Err(self.broken("tokens", &self.tokens, "must be >= 1"));
        }
        if self.keys == 0 {
            return Err(self.broken("keys", &self.keys, "must be >= 1"));
        }
        if profile == Profile::Paper && self.keys < self.tokens {
            return Err(self.broken(
                "keys",
                &self.keys,
                &format!(
                    "must be >= tokens = {} in the paper profile (token positions are the first \
                     key hashes)",
                    self.tokens
                ),
            ));
        }
        if !(self.zipf_s.is_finite() && self.zipf_s >= 0.0) {
            return Err(self.broken("zipf_s", &self.zipf_s, "must be a finite number >= 0"));
        }
        check_probability(self.write_fraction)
            .map_err(|rule| self.broken("write_fraction", &self.write_fraction, rule))?;
        Ok(())
    }

    /// The algorithms: at least one, each registered and named once.
    fn validate_algorithms(&self, registry: &Registry) -> Result<(), ConfigError> {
        if self.algorithms.is_empty() {
            return Err(self.broken("algorithms", &"[]", "must name at least one algorithm"));
        }
        for (k, name) in self.algorithms.iter().enumerate() {
            if registry.get(name).is_none() {
                return Err(self.broken(
                    &format!("algorithms[{k}]"),
                    &format!("{name:?}"),
                    &format!("must be one of {}", registry.names()),
                ));
            }
            if self.algorithms[..k].contains(name) {
                return Err(self.broken(
                    &format!("algorithms[{k}]"),
                    &format!("{name:?}"),
                    "is named twice (each algorithm runs once per series)",
                ));
            }
        }
        Ok(())
    }

    /// The cluster, its load, the telemetry noise and smoothing.
    fn validate_cluster_and_telemetry(&self) -> Result<(), ConfigError> {
        let n0 = self.cluster.classes.len();
        if n0 == 0 {
            return Err(self.broken("cluster.classes", &"[]", "must have at least one node"));
        }
        if !(self.cluster.mu_base.is_finite() && self.cluster.mu_base > 0.0) {
            return Err(self.broken("cluster.mu_base", &self.cluster.mu_base, "must be > 0"));
        }
        self.validate_load()
            .map_err(|broken| self.broken_rule(broken))?;
        let noise = &self.noise;
        if !(noise.sigma.is_finite() && noise.sigma >= 0.0) {
            return Err(self.broken("noise.sigma", &noise.sigma, "must be a finite number >= 0"));
        }
        check_probability(noise.p_miss)
            .map_err(|rule| self.broken("noise.p_miss", &noise.p_miss, rule))?;
        noise
            .distortion()
            .validate()
            .map_err(|e| self.broken_rule(distortion_rule(&e)))?;
        self.telemetry
            .config()
            .validate()
            .map_err(|e| self.broken_rule(telemetry_rule(&e)))?;
        if let Some(beta) = self.telemetry.controller_beta
            && !(beta > 0.0 && beta <= 1.0)
        {
            return Err(self.broken("telemetry.controller_beta", &beta, "must be in (0, 1]"));
        }
        Ok(())
    }

    /// ACH's parameters, and `v_min` against the tokens of the largest cluster.
    fn validate_ach(&self) -> Result<(), ConfigError> {
        self.ach
            .validate()
            .map_err(|e| self.broken(&format!("ach.{}", e.field), &e.value, &e.rule))?;
        let v_min = self.ach.v_min;
        let max_nodes = self.max_nodes();
        if v_min.saturating_mul(max_nodes) > self.tokens {
            return Err(self.broken(
                "ach.v_min",
                &v_min,
                &format!(
                    "times the {max_nodes} nodes the cluster ever has must be <= tokens = {}",
                    self.tokens
                ),
            ));
        }
        Ok(())
    }

    /// The algorithms' own parameters (`[ach_f] window`, `[ch_bl] eps`), by the rules of the
    /// catalogue entries that take them.
    fn validate_parameters(&self, registry: &Registry) -> Result<(), ConfigError> {
        for (name, value) in series_parameters(self) {
            if let Some(rule) = registry
                .parameter(name)
                .or_else(|| Catalogue::built_in().parameter(name).cloned())
                .and_then(|parameter| parameter.broken_by(value))
            {
                return Err(self.broken(name, &value, &rule));
            }
        }
        Ok(())
    }

    /// The `[[pacing]]` entries: each by its own rules, no algorithm in two, and no churn
    /// (a paced plan's moves may still be running when a node joins or leaves).
    fn validate_pacing(&self) -> Result<(), (String, String, String)> {
        for (k, pacing) in self.pacing.iter().enumerate() {
            pacing.check(k, &self.algorithms)?;
            for (j, name) in pacing.algorithms.iter().enumerate() {
                let earlier = self.pacing[..k].iter().flat_map(|p| &p.algorithms);
                if earlier.chain(&pacing.algorithms[..j]).any(|n| n == name) {
                    return Err((
                        format!("pacing[{k}].algorithms[{j}]"),
                        format!("{name:?}"),
                        "is paced by an earlier entry already".into(),
                    ));
                }
            }
        }
        if !self.pacing.is_empty() && !self.churn.is_empty() {
            return Err((
                "pacing".into(),
                format!("{} entries", self.pacing.len()),
                "cannot be combined with churn".into(),
            ));
        }
        Ok(())
    }

    /// The `[sweep]` table: its values, its links, and the series at every point by every
    /// rule.
    fn validate_sweep(&self, sweep: &Sweep, profile: Profile) -> Result<(), ConfigError> {
        self.validate_sweep_values(sweep)
            .and_then(|()| self.validate_sweep_links(sweep))
            .map_err(|broken| self.broken_rule(broken))?;
        self.validate_sweep_points(sweep, profile)
    }

    /// The swept values: at least one per field in grid mode and at least one in all, none
    /// listed twice, and `eps_off_ratio` in (0, 1).
    fn validate_sweep_values(&self, sweep: &Sweep) -> Result<(), (String, String, String)> {
        for (name, values) in &sweep.fields {
            if values.is_empty() && sweep.mode == SweepMode::Grid {
                return Err((
                    format!("sweep.{name}"),
                    "[]".into(),
                    "must list at least one value in grid mode".into(),
                ));
            }
            for (k, value) in values.iter().enumerate() {
                if values[..k].contains(value) {
                    return Err((
                        format!("sweep.{name}"),
                        value.to_string(),
                        "is listed twice (every point needs its own folder)".into(),
                    ));
                }
            }
        }
        if self.sweep_points().is_empty() {
            return Err((
                "sweep".into(),
                "{}".into(),
                "must list at least one value".into(),
            ));
        }
        if let Some(ratio) = sweep.eps_off_ratio
            && !(ratio > 0.0 && ratio < 1.0)
        {
            return Err((
                "sweep.eps_off_ratio".into(),
                ratio.to_string(),
                "must be in (0, 1)".into(),
            ));
        }
        Ok(())
    }

    /// The `[sweep.linked]` fields: each follows a swept field, is not swept itself, and has a
    /// finite ratio.
    fn validate_sweep_links(&self, sweep: &Sweep) -> Result<(), (String, String, String)> {
        let swept: Vec<&str> = sweep
            .fields
            .iter()
            .map(|(name, _)| resolve_path(name))
            .collect();
        for (target, link) in &sweep.linked {
            let field = format!("sweep.linked.{target}");
            if !swept.contains(&resolve_path(&link.of)) {
                return Err((
                    field,
                    format!("{{ of = {:?} }}", link.of),
                    format!("must follow a swept field (one of {})", swept.join(", ")),
                ));
            }
            if swept.contains(&resolve_path(target)) {
                return Err((
                    field,
                    format!("{:?}", target),
                    "must not be a swept field itself".into(),
                ));
            }
            if !link.ratio.is_finite() {
                return Err((
                    format!("{field}.ratio"),
                    link.ratio.to_string(),
                    "must be a finite number".into(),
                ));
            }
        }
        Ok(())
    }

    /// The series at every sweep point, by every rule; a broken rule is reported against the
    /// point's swept field (or the point), naming the link that set the field, if any.
    fn validate_sweep_points(&self, sweep: &Sweep, profile: Profile) -> Result<(), ConfigError> {
        for point in self.sweep_points() {
            let mut at = self.at_point(&point)?;
            at.sweep = None;
            at.validate(profile).map_err(|e| {
                let linked = sweep
                    .links()
                    .into_iter()
                    .find(|(target, _, _)| *target == e.field)
                    .map(|(target, of, ratio)| format!(" (linked: {target} = {ratio} x {of})"))
                    .unwrap_or_default();
                let (field, value) = match point.only() {
                    Some(c) => (format!("sweep.{}", c.parameter), c.value.to_string()),
                    None => ("sweep point".to_string(), point.label()),
                };
                self.broken(
                    &field,
                    &value,
                    &format!("gives {} = {}{linked} which {}", e.field, e.value, e.rule),
                )
            })?;
        }
        Ok(())
    }

    fn validate_load(&self) -> Result<(), (String, String, String)> {
        // A node's requests and writes of one step are summed in the two 32-bit halves of one
        // `u64` (see `run.rs`). With this cap and an amplitude below 1, a step's mean is below
        // 2e9 requests, and a Poisson count reaching 2^32 ~ 4.3e9 is beyond any probability a
        // run could meet (tens of thousands of standard deviations).
        const MAX_RATE: f64 = 1e9;
        let positive = |field: &str, v: f64| {
            if !(v.is_finite() && v > 0.0) {
                Err((
                    format!("load.{field}"),
                    v.to_string(),
                    "must be > 0".to_string(),
                ))
            } else if field != "period" && v > MAX_RATE {
                Err((
                    format!("load.{field}"),
                    v.to_string(),
                    format!("must be <= {MAX_RATE:e} requests per step"),
                ))
            } else {
                Ok(())
            }
        };
        match self.load {
            LoadProfile::Constant { lambda } => positive("lambda", lambda),
            LoadProfile::StepPeriodic {
                lambda,
                high,
                amplitude,
                period,
                ..
            } => {
                positive("lambda", lambda)?;
                positive("high", high)?;
                positive("period", period)?;
                if !(0.0..1.0).contains(&amplitude) {
                    return Err((
                        "load.amplitude".into(),
                        amplitude.to_string(),
                        "must be in [0, 1) so that the rate stays positive".into(),
                    ));
                }
                Ok(())
            }
        }
    }

    fn validate_hot_keys(
        &self,
        hot: &crate::config::HotKeys,
    ) -> Result<(), (String, String, String)> {
        if !(hot.from < hot.to && hot.to <= self.steps) {
            return Err((
                "hot_keys.to".into(),
                hot.to.to_string(),
                format!(
                    "must be > hot_keys.from = {} and <= steps = {}",
                    hot.from, self.steps
                ),
            ));
        }
        if !(0.0..=1.0).contains(&hot.share) {
            return Err((
                "hot_keys.share".into(),
                hot.share.to_string(),
                "must be in [0, 1]".into(),
            ));
        }
        if hot.keys == 0 || hot.keys > self.keys {
            return Err((
                "hot_keys.keys".into(),
                hot.keys.to_string(),
                format!("must be in 1..={} (the keys of the series)", self.keys),
            ));
        }
        if hot.node >= self.cluster.classes.len() {
            return Err((
                "hot_keys.node".into(),
                hot.node.to_string(),
                format!(
                    "must name a node of the initial cluster (< {})",
                    self.cluster.classes.len()
                ),
            ));
        }
        Ok(())
    }

    /// The events of the run: the hot keys, the key table, the degradations' factors and
    /// times, and the membership every degradation and churn event names.
    fn validate_events(&self, profile: Profile) -> Result<(), (String, String, String)> {
        if let Some(hot) = &self.hot_keys {
            self.validate_hot_keys(hot)?;
        }
        if let Some(table) = &self.key_table {
            table.check(self.keys, self.tokens)?;
        }
        self.validate_degradation_values()?;
        self.validate_membership(profile)
    }

    /// Every degradation's factor (> 0) and time (before the last step).
    fn validate_degradation_values(&self) -> Result<(), (String, String, String)> {
        for (k, d) in self.degradation.iter().enumerate() {
            if !(d.factor.is_finite() && d.factor > 0.0) {
                return Err((
                    format!("degradation[{k}].factor"),
                    d.factor.to_string(),
                    "must be > 0".into(),
                ));
            }
            if d.t >= self.steps {
                return Err((
                    format!("degradation[{k}].t"),
                    d.t.to_string(),
                    format!("must be < steps = {}", self.steps),
                ));
            }
        }
        Ok(())
    }

    /// Replays membership in time order (at one time, degradations before churn) to check
    /// every node named exists and is live.
    fn validate_membership(&self, profile: Profile) -> Result<(), (String, String, String)> {
        let mut live: Vec<bool> = vec![true; self.cluster.classes.len()];
        for (_, k, event) in self.membership_events() {
            match event {
                Event::Degrade(d) => degraded_nodes_are_live(k, d, &live)?,
                Event::Churn(c) => self.apply_churn(k, c, &mut live, profile)?,
            }
        }
        Ok(())
    }

    /// The degradation and churn events with their time and index, in time order; at one
    /// time degradations come first, each kind by index.
    fn membership_events(&self) -> Vec<(u32, usize, Event<'_>)> {
        let mut events: Vec<(u32, usize, Event<'_>)> = Vec::new();
        for (k, d) in self.degradation.iter().enumerate() {
            events.push((d.t, k, Event::Degrade(d)));
        }
        for (k, c) in self.churn.iter().enumerate() {
            events.push((c.t, k, Event::Churn(c)));
        }
        events.sort_by_key(|&(t, k, ref e)| (t, matches!(e, Event::Churn(_)), k));
        events
    }

    /// Checks churn event `k` against the `live` nodes and applies it: its time is before
    /// the last step, and each node it removes is live, not the last one, and not node 0 in
    /// the paper profile. The nodes it adds are live after it.
    fn apply_churn(
        &self,
        k: usize,
        c: &Churn,
        live: &mut Vec<bool>,
        profile: Profile,
    ) -> Result<(), (String, String, String)> {
        if c.t >= self.steps {
            return Err((
                format!("churn[{k}].t"),
                c.t.to_string(),
                format!("must be < steps = {}", self.steps),
            ));
        }
        for (j, &node) in c.remove.iter().enumerate() {
            let field = format!("churn[{k}].remove[{j}]");
            if !live.get(node as usize).copied().unwrap_or(false) {
                return Err((
                    field,
                    node.to_string(),
                    format!("must name a live node at t = {}", c.t),
                ));
            }
            if live.iter().filter(|&&l| l).count() == 1 {
                return Err((
                    field,
                    node.to_string(),
                    "must not remove the last node".into(),
                ));
            }
            if profile == Profile::Paper && node == 0 {
                return Err((
                    field,
                    node.to_string(),
                    "must not be node 0 in the paper profile (its tokens go to node 0)".into(),
                ));
            }
            live[node as usize] = false;
        }
        live.extend(c.add.iter().map(|_| true));
        Ok(())
    }
}

/// Checks that every node degradation `k` names is `live` at its time.
fn degraded_nodes_are_live(
    k: usize,
    d: &Degradation,
    live: &[bool],
) -> Result<(), (String, String, String)> {
    for (j, &node) in d.nodes.iter().enumerate() {
        if !live.get(node as usize).copied().unwrap_or(false) {
            return Err((
                format!("degradation[{k}].nodes[{j}]"),
                node.to_string(),
                format!("must name a live node at t = {}", d.t),
            ));
        }
    }
    Ok(())
}

/// A membership event of a series, for the replay of `validate_membership`.
enum Event<'a> {
    Degrade(&'a Degradation),
    Churn(&'a Churn),
}

/// The field (as a path in the series file), the value and the rule of a distortion error.
fn distortion_rule(error: &DistortionConfigError) -> (String, String, String) {
    match *error {
        DistortionConfigError::Sigma { value } => (
            "noise.sigma".into(),
            value.to_string(),
            "must be a finite number >= 0".into(),
        ),
        DistortionConfigError::Lag { value, max } => (
            "noise.lag".into(),
            value.to_string(),
            format!("must be <= {max}"),
        ),
        DistortionConfigError::MissingProbability { value } => (
            "noise.p_miss".into(),
            value.to_string(),
            "must be a probability in [0, 1]".into(),
        ),
    }
}

/// The field (as a path in the series file), the value and the rule of a telemetry error.
fn telemetry_rule(error: &TelemetryConfigError) -> (String, String, String) {
    match *error {
        TelemetryConfigError::Beta { value } => (
            "telemetry.beta".into(),
            value.to_string(),
            "must be in (0, 1]".into(),
        ),
        TelemetryConfigError::Weights { value } => (
            "telemetry.weights".into(),
            format!("[{}, {}, {}]", value[0], value[1], value[2]),
            "must be finite numbers >= 0, not all 0".into(),
        ),
        TelemetryConfigError::Exponent { value } => (
            "telemetry.p".into(),
            value.to_string(),
            "must be a finite number >= 1".into(),
        ),
        TelemetryConfigError::Alpha { value } => (
            "telemetry.alpha".into(),
            value.to_string(),
            "must be in [0, 1]".into(),
        ),
    }
}

fn check_probability(p: f64) -> Result<(), &'static str> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err("must be a probability in [0, 1]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ChBlConfig, built_in_series, opt_in_series};
    use crate::sweep::SweepPoint;

    #[test]
    fn built_in_series_parse_and_validate() {
        let all = built_in_series();
        assert_eq!(all.len(), 8);
        for s in &all {
            s.validate(Profile::Paper).unwrap();
            s.validate(Profile::Corrected).unwrap();
        }
        for s in &opt_in_series() {
            s.validate(Profile::Paper).unwrap();
            s.validate(Profile::Corrected).unwrap();
        }
        let scale = &opt_in_series()[1];
        let largest = scale
            .at_point(scale.sweep_points().last().unwrap())
            .unwrap();
        assert_eq!(largest.cluster.classes.len(), 1000);
        assert_eq!(largest.tokens, 100_000);
        assert_eq!(largest.load.rate(0), 143_750.0);
        let c5 = &all[7];
        assert_eq!(c5.sweep_points().len(), 19);
        let p = c5.at_point(&SweepPoint::single("eps_on", 0.05)).unwrap();
        assert_eq!(p.ach.eps_on, 0.05);
        assert!((p.ach.eps_off - 0.02).abs() < 1e-15);
    }

    #[test]
    fn a_grid_sweep_sets_its_fields_and_their_links_at_every_point() {
        let c = SeriesConfig::from_toml(
            "name = \"G\"\n[sweep]\nmode = \"grid\"\n\"noise.sigma\" = [0.0, 0.05]\n\
             \"cluster.nodes\" = [10, 20]\n\
             [sweep.linked]\ntokens = { of = \"cluster.nodes\", ratio = 100 }\n",
        )
        .unwrap();
        c.validate(Profile::Paper).unwrap();
        let points = c.sweep_points();
        assert_eq!(points.len(), 4);
        let last = c.at_point(&points[3]).unwrap();
        assert_eq!(last.noise.sigma, 0.05);
        assert_eq!(last.cluster.classes.len(), 20);
        assert_eq!(last.tokens, 2000);
        assert_eq!(last.sweep, c.sweep);
    }

    #[test]
    fn sweep_errors_name_the_field_the_value_and_the_rule() {
        let error = |text: &str| {
            SeriesConfig::from_toml(&format!("name = \"G\"\n[sweep]\n{text}"))
                .unwrap()
                .validate(Profile::Paper)
                .unwrap_err()
                .to_string()
        };
        assert!(
            error("\"noise.sgima\" = [0.1]\n")
                .starts_with("series G: sweep.noise.sgima = 0.1 must name a numeric field")
        );
        assert_eq!(
            error("tokens = [1000, 1500.5]\n"),
            "series G: sweep.tokens = 1500.5 must be a whole number >= 0 for this field"
        );
        assert_eq!(
            error("\"noise.sigma\" = [0.1, -1.0]\n"),
            "series G: sweep.noise.sigma = -1 gives noise.sigma = -1 which must be a finite \
             number >= 0"
        );
        assert_eq!(
            error(
                "\"ach.eps_on\" = [0.1]\n[sweep.linked]\n\"ach.eps_off\" = { of = \"tau\", ratio = 0.4 }\n"
            ),
            "series G: sweep.linked.ach.eps_off = { of = \"tau\" } must follow a swept field \
             (one of ach.eps_on)"
        );
        assert_eq!(
            error("mode = \"grid\"\n\"noise.sigma\" = [0.1, -1]\n\"ach.eps_on\" = [0.1]\n"),
            "series G: sweep point = noise.sigma=-1,ach.eps_on=0.1 gives noise.sigma = -1 which \
             must be a finite number >= 0"
        );
        assert_eq!(
            error("mode = \"grid\"\n\"noise.sigma\" = [0.1]\n\"zipf_s\" = []\n"),
            "series G: sweep.zipf_s = [] must list at least one value in grid mode"
        );
    }

    #[test]
    fn errors_name_series_field_value_and_rule() {
        let mut c = SeriesConfig::from_toml("name = \"C7\"\n[ach]\neps_off = 0.2\n").unwrap();
        assert_eq!(
            c.validate(Profile::Paper).unwrap_err().to_string(),
            "series C7: ach.eps_off = 0.2 must be < eps_on = 0.1"
        );
        c.ach.eps_off = 0.04;
        c.churn.push(Churn {
            t: 5,
            remove: vec![12],
            add: vec![],
        });
        assert_eq!(
            c.validate(Profile::Paper).unwrap_err().to_string(),
            "series C7: churn[0].remove[0] = 12 must name a live node at t = 5"
        );
        assert!(SeriesConfig::from_toml("name = \"X\"\nbogus = 1\n").is_err());
    }

    #[test]
    fn ch_bl_eps_must_be_a_finite_positive_number() {
        let text = |eps: &str| format!("name = \"C7\"\n[ch_bl]\neps = {eps}\n");
        let ok = SeriesConfig::from_toml(&text("0.5")).unwrap();
        assert_eq!(ok.ch_bl, Some(ChBlConfig { eps: 0.5 }));
        assert!(ok.validate(Profile::Paper).is_ok());
        for (eps, shown) in [
            ("0.0", "0"),
            ("-0.1", "-0.1"),
            ("nan", "NaN"),
            ("inf", "inf"),
        ] {
            let c = SeriesConfig::from_toml(&text(eps)).unwrap();
            assert_eq!(
                c.validate(Profile::Paper).unwrap_err().to_string(),
                format!(
                    "series C7: ch_bl.eps = {shown} must be a finite number > 0 (each node serves up to (1 + eps) times its share)"
                )
            );
        }
        assert!(SeriesConfig::from_toml("name = \"X\"\n[ch_bl]\nc = 1.25\n").is_err());
        // Absent, it is not written, so other series keep their files and fingerprints.
        let plain = SeriesConfig::from_toml("name = \"C7\"\n").unwrap();
        assert!(!serde_json::to_string(&plain).unwrap().contains("ch_bl"));
    }
}
