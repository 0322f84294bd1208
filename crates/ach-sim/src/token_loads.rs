//! Per-token figures for the algorithms that ask for them (`Balancer::token_load_need`): the
//! per-token telemetry of ACH-H and the full knowledge of the Oracle. Nothing here runs unless
//! some arm asks.

use ach_ring::TokenRing;
use ach_telemetry::MissingMask;

use crate::config::SeriesConfig;

/// Per-token loads as a live controller with per-slot statistics would see them: each token's
/// part of its owner's observed load.
///
/// A token's *work* in a step is its requests plus half its writes (a write costs 1.5 requests,
/// spec section 2), the per-token part of the owner's utilisation. It passes through the node
/// telemetry's distortions: the same lag `d` (the work of `d` steps ago; zeros until `d + 1`
/// steps were seen), the same missing samples (when the owner's cpu sample of the step is
/// missing, each of its tokens repeats its previous observation), then the same EWMA smoothing
/// (factor `beta`). Its load is then the owner's observed load times the token's part of the
/// owner's smoothed work: per-token loads sum to their owner's load, so they carry exactly the
/// node telemetry's Gaussian noise, no more and no less accurate than the node's figure, and
/// their split inside a node is lagged and smoothed like the node's.
#[derive(Clone, Debug)]
pub struct TokenTelemetry {
    beta: f64,
    /// The last `lag + 1` work vectors, a ring buffer.
    history: Vec<Vec<f64>>,
    pushed: usize,
    previous: Vec<f64>,
    smoothed: Vec<f64>,
    node_sums: Vec<f64>,
    loads: Vec<f64>,
}

impl TokenTelemetry {
    /// Telemetry for `tokens` tokens with the series' lag and smoothing.
    pub fn new(tokens: usize, config: &SeriesConfig) -> TokenTelemetry {
        let lag = config.noise.distortion().lag;
        TokenTelemetry {
            beta: config.telemetry.controllers().beta,
            history: vec![vec![0.0; tokens]; lag + 1],
            pushed: 0,
            previous: vec![0.0; tokens],
            smoothed: vec![0.0; tokens],
            node_sums: Vec::new(),
            loads: vec![0.0; tokens],
        }
    }

    /// One step: this step's per-token counts in, the per-token loads out, given the owners
    /// (`ring`), the step's missing-sample mask (one per node, if the series has one) and the
    /// node loads just observed.
    pub fn observe(
        &mut self,
        ring: &TokenRing,
        requests: &[u64],
        writes: &[u64],
        missing: Option<&[MissingMask]>,
        node_loads: &[f64],
    ) -> &[f64] {
        let slots = self.history.len();
        let slot = self.pushed % slots;
        for ((w, &r), &wr) in self.history[slot].iter_mut().zip(requests).zip(writes) {
            *w = r as f64 + 0.5 * wr as f64;
        }
        self.pushed += 1;
        let lagged = (self.pushed >= slots).then(|| self.pushed % slots);
        let owners = ring.owners();
        let tokens = self.smoothed.iter_mut().zip(&mut self.previous).zip(owners);
        for (s, ((smoothed, previous), owner)) in tokens.enumerate() {
            let mut observed = lagged.map_or(0.0, |oldest| self.history[oldest][s]);
            if missing.is_some_and(|m| m.get(owner.index()).is_some_and(|mask| mask[0])) {
                observed = *previous;
            }
            *previous = observed;
            *smoothed = (1.0 - self.beta) * *smoothed + self.beta * observed;
        }
        self.node_sums.clear();
        self.node_sums.resize(node_loads.len(), 0.0);
        for (s, owner) in owners.iter().enumerate() {
            if let Some(sum) = self.node_sums.get_mut(owner.index()) {
                *sum += self.smoothed[s];
            }
        }
        for (s, owner) in owners.iter().enumerate() {
            let i = owner.index();
            let sum = self.node_sums.get(i).copied().unwrap_or(0.0);
            let load = node_loads.get(i).copied().unwrap_or(0.0);
            self.loads[s] = if sum > 0.0 {
                load * self.smoothed[s] / sum
            } else {
                0.0
            };
        }
        &self.loads
    }
}

/// Every token's expected work in the step after `t` (requests plus half the writes, in
/// requests): the Oracle's full knowledge.
pub fn expected_work(
    config: &SeriesConfig,
    t: u32,
    token_probability: &[f64],
    into: &mut Vec<f64>,
) {
    let rate = config.load.rate(t + 1);
    let per_request = 1.0 + 0.5 * config.write_fraction;
    into.clear();
    into.extend(token_probability.iter().map(|p| rate * p * per_request));
}

/// The service rate of every node at every step of the scenario: `(step, rates)` from step 0,
/// one entry more at every step with an event (degradation, removal, join), as the run applies
/// them (spec sections 2 and 7).
pub fn service_rate_schedule(config: &SeriesConfig) -> Vec<(u64, Vec<f64>)> {
    let mu = config.cluster.mu_base;
    let mut rates: Vec<f64> = config
        .cluster
        .classes
        .iter()
        .map(|c| c.capacity() * mu)
        .collect();
    let mut schedule = vec![(0, rates.clone())];
    let mut times: Vec<u32> = config
        .degradation
        .iter()
        .map(|d| d.t)
        .chain(config.churn.iter().map(|c| c.t))
        .collect();
    times.sort_unstable();
    times.dedup();
    for t in times {
        for d in config.degradation.iter().filter(|d| d.t == t) {
            for &node in &d.nodes {
                if let Some(rate) = rates.get_mut(node as usize) {
                    *rate *= d.factor;
                }
            }
        }
        for churn in config.churn.iter().filter(|c| c.t == t) {
            for &node in &churn.remove {
                if let Some(rate) = rates.get_mut(node as usize) {
                    *rate = 0.0;
                }
            }
            rates.extend(churn.add.iter().map(|class| class.capacity() * mu));
        }
        match schedule.last_mut() {
            Some(last) if last.0 == u64::from(t) => last.1.clone_from(&rates),
            _ => schedule.push((u64::from(t), rates.clone())),
        }
    }
    schedule
}
