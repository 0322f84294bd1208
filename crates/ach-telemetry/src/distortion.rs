//! Distortion of raw telemetry: lag, Gaussian noise, missing entries and clipping.

use crate::cluster::clip_unit;
use crate::config::DistortionConfig;
use crate::error::{DistortionConfigError, TelemetryError};
use crate::metrics::{METRIC_COUNT, Metrics, MissingMask};

/// The random draws of one step, drawn once by the caller and applied identically to every
/// algorithm's pipeline (one entry per node).
///
/// A pipeline uses the Gaussian deltas only when its [`DistortionConfig::sigma`] is positive
/// and the mask only when its [`DistortionConfig::p_miss`] is positive; supplied draws that
/// are not needed are ignored, so the same draws can be passed to a noise-free pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepDraws<'a> {
    /// Additive noise per node and metric, already scaled: each entry is a sample of
    /// `N(0, sigma)`, not of `N(0, 1)`.
    pub gauss: Option<&'a [Metrics]>,
    /// Missing-data mask per node and metric: `true` means the entry is missing this step
    /// (each entry is missing with probability `p_miss`).
    pub missing: Option<&'a [MissingMask]>,
}

impl StepDraws<'_> {
    /// No draws, for pipelines whose distortion needs none (for example
    /// [`DistortionConfig::none`]).
    pub fn none() -> StepDraws<'static> {
        StepDraws {
            gauss: None,
            missing: None,
        }
    }
}

/// The distortion stage of one pipeline: a lag ring buffer and the memory of the previous
/// observation.
///
/// Per step, given the raw telemetry of every node:
/// 1. Lag: the raw telemetry is pushed into a buffer of the last `lag + 1` steps. Until
///    `lag + 1` steps have been pushed the observation is all zeros; afterwards it is the
///    oldest entry of the buffer (the raw telemetry of `lag` steps ago).
/// 2. Noise (if `sigma > 0`): the Gaussian delta of the step is added.
/// 3. Missing data (if `p_miss > 0`): every masked entry is replaced by the same entry of the
///    previous step's observation (0 if there is none). The observation is then remembered
///    for the next step *before* clipping, so the memory can lie outside `[0, 1]`; this
///    reproduces the reference simulation.
/// 4. Every entry is clipped to `[0, 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Distortion {
    config: DistortionConfig,
    node_count: usize,
    /// `lag + 1` slots of `node_count` observations each, slot after slot. Empty when the lag
    /// is 0, because the observation is then the raw telemetry itself.
    lag_slots: Vec<Metrics>,
    /// Slot that the next push overwrites; once the buffer is full it is also the oldest slot.
    next_slot: usize,
    /// Number of pushes so far, saturating at `lag + 1`.
    pushed: usize,
    /// Observation of the previous step after the missing-data step and before clipping.
    previous_observation: Vec<Metrics>,
    /// Whether `previous_observation` holds an observation yet.
    has_previous_observation: bool,
}

impl Distortion {
    /// Creates the distortion stage for `node_count` nodes, with empty buffers.
    pub fn new(
        node_count: usize,
        config: DistortionConfig,
    ) -> Result<Distortion, DistortionConfigError> {
        config.validate()?;
        let slot_count = if config.lag == 0 { 0 } else { config.lag + 1 };
        let memory_len = if config.uses_missing() { node_count } else { 0 };
        Ok(Distortion {
            config,
            node_count,
            lag_slots: vec![[0.0; METRIC_COUNT]; slot_count * node_count],
            next_slot: 0,
            pushed: 0,
            previous_observation: vec![[0.0; METRIC_COUNT]; memory_len],
            has_previous_observation: false,
        })
    }

    /// The configuration this stage applies.
    pub fn config(&self) -> &DistortionConfig {
        &self.config
    }

    /// Number of nodes this stage tracks.
    pub fn node_count(&self) -> usize {
        self.node_count
    }

    /// Changes the number of tracked nodes (for joins).
    ///
    /// Every stored vector (each lag-buffer slot and the previous observation) is extended
    /// with zeros for the new nodes, so a joining node is observed as zeros until its own
    /// raw telemetry reaches the front of the lag buffer, and a missing entry of a new node
    /// falls back to 0. Shrinking drops the state of the last nodes. This allocates.
    pub fn resize(&mut self, node_count: usize) {
        if node_count == self.node_count {
            return;
        }
        let slot_count = self.slot_count();
        if slot_count > 0 {
            let mut slots = vec![[0.0; METRIC_COUNT]; slot_count * node_count];
            let kept = node_count.min(self.node_count);
            for slot in 0..slot_count {
                let old = &self.lag_slots[slot * self.node_count..][..kept];
                slots[slot * node_count..][..kept].copy_from_slice(old);
            }
            self.lag_slots = slots;
        }
        if self.config.uses_missing() {
            self.previous_observation
                .resize(node_count, [0.0; METRIC_COUNT]);
        }
        self.node_count = node_count;
    }

    /// Distorts one step of raw telemetry into `observation` (one entry per node each).
    ///
    /// Fails without changing any state when a slice does not have one entry per node, or
    /// when the config needs draws that `draws` does not supply.
    pub fn apply(
        &mut self,
        raw: &[Metrics],
        draws: &StepDraws<'_>,
        observation: &mut [Metrics],
    ) -> Result<(), TelemetryError> {
        let gauss = self.checked_gauss(draws)?;
        let missing = self.checked_missing(draws)?;
        TelemetryError::check_length("raw", self.node_count, raw.len())?;
        TelemetryError::check_length("observation", self.node_count, observation.len())?;
        self.apply_lag(raw, observation);
        if let Some(gauss) = gauss {
            for (entry, delta) in observation.iter_mut().zip(gauss) {
                for metric in 0..METRIC_COUNT {
                    entry[metric] += delta[metric];
                }
            }
        }
        if let Some(missing) = missing {
            self.apply_missing(missing, observation);
        }
        for entry in observation.iter_mut() {
            for value in entry.iter_mut() {
                *value = clip_unit(*value);
            }
        }
        Ok(())
    }

    /// Number of lag-buffer slots (0 when the lag is 0).
    fn slot_count(&self) -> usize {
        if self.config.lag == 0 {
            0
        } else {
            self.config.lag + 1
        }
    }

    /// The Gaussian deltas if the config uses them, checked for length.
    fn checked_gauss<'a>(
        &self,
        draws: &StepDraws<'a>,
    ) -> Result<Option<&'a [Metrics]>, TelemetryError> {
        if !self.config.uses_gauss() {
            return Ok(None);
        }
        let gauss = draws
            .gauss
            .ok_or(TelemetryError::MissingDraws { what: "gauss" })?;
        TelemetryError::check_length("draws.gauss", self.node_count, gauss.len())?;
        Ok(Some(gauss))
    }

    /// The missing-data mask if the config uses it, checked for length.
    fn checked_missing<'a>(
        &self,
        draws: &StepDraws<'a>,
    ) -> Result<Option<&'a [MissingMask]>, TelemetryError> {
        if !self.config.uses_missing() {
            return Ok(None);
        }
        let missing = draws
            .missing
            .ok_or(TelemetryError::MissingDraws { what: "missing" })?;
        TelemetryError::check_length("draws.missing", self.node_count, missing.len())?;
        Ok(Some(missing))
    }

    /// Step 1: pushes `raw` into the lag buffer and writes the lagged observation.
    fn apply_lag(&mut self, raw: &[Metrics], observation: &mut [Metrics]) {
        let slot_count = self.slot_count();
        if slot_count == 0 {
            observation.copy_from_slice(raw);
            return;
        }
        let node_count = self.node_count;
        self.lag_slots[self.next_slot * node_count..][..node_count].copy_from_slice(raw);
        self.next_slot = (self.next_slot + 1) % slot_count;
        self.pushed = (self.pushed + 1).min(slot_count);
        if self.pushed < slot_count {
            observation.fill([0.0; METRIC_COUNT]);
        } else {
            // The buffer is full, so the slot the next push overwrites is the oldest one.
            let oldest = &self.lag_slots[self.next_slot * node_count..][..node_count];
            observation.copy_from_slice(oldest);
        }
    }

    /// Step 3: replaces masked entries by the previous observation and remembers this one.
    fn apply_missing(&mut self, missing: &[MissingMask], observation: &mut [Metrics]) {
        let has_previous = self.has_previous_observation;
        for ((entry, mask), previous) in observation
            .iter_mut()
            .zip(missing)
            .zip(self.previous_observation.iter_mut())
        {
            for metric in 0..METRIC_COUNT {
                if mask[metric] {
                    entry[metric] = if has_previous { previous[metric] } else { 0.0 };
                }
            }
            *previous = *entry;
        }
        self.has_previous_observation = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(sigma: f64, lag: usize, p_miss: f64) -> DistortionConfig {
        DistortionConfig { sigma, lag, p_miss }
    }

    #[test]
    fn lag_gives_zeros_then_the_oldest_observation() {
        let mut distortion = Distortion::new(1, config(0.0, 2, 0.0)).unwrap();
        let mut observation = [[9.0; 3]];
        let mut seen = Vec::new();
        for step in 1..=5 {
            let value = step as f64 / 10.0;
            distortion
                .apply(&[[value; 3]], &StepDraws::none(), &mut observation)
                .unwrap();
            seen.push(observation[0][0]);
        }
        assert_eq!(seen, vec![0.0, 0.0, 0.1, 0.2, 0.3]);
    }

    #[test]
    fn noise_is_added_and_clipped() {
        let mut distortion = Distortion::new(2, config(0.1, 0, 0.0)).unwrap();
        let gauss = [[0.2, -0.3, 0.05], [-0.5, 0.5, 0.0]];
        let draws = StepDraws {
            gauss: Some(&gauss),
            missing: None,
        };
        let mut observation = [[0.0; 3]; 2];
        distortion
            .apply(
                &[[0.9, 0.2, 0.5], [0.3, 0.7, 1.0]],
                &draws,
                &mut observation,
            )
            .unwrap();
        assert_eq!(observation[0], [1.0, 0.0, 0.55]);
        assert_eq!(observation[1], [0.0, 1.0, 1.0]);
    }

    #[test]
    fn missing_entries_use_the_unclipped_previous_observation() {
        let mut distortion = Distortion::new(1, config(0.5, 0, 0.5)).unwrap();
        let mut observation = [[0.0; 3]];
        let mut step = |raw: Metrics, gauss: Metrics, mask: MissingMask| {
            let gauss = [gauss];
            let mask = [mask];
            let draws = StepDraws {
                gauss: Some(&gauss),
                missing: Some(&mask),
            };
            distortion.apply(&[raw], &draws, &mut observation).unwrap();
            (observation[0], distortion.previous_observation[0])
        };
        // Step 1: the cpu entry is missing and nothing is remembered yet, so it becomes 0.
        // The noise pushes memory to 1.3: remembered as 1.3, observed as 1.
        let (observed, remembered) = step([0.4, 0.8, 0.2], [0.0, 0.5, 0.0], [true, false, false]);
        assert_eq!(observed, [0.0, 1.0, 0.2]);
        assert_eq!(remembered, [0.0, 1.3, 0.2]);
        // Step 2: memory is missing and takes the remembered, unclipped 1.3 (the noise of this
        // step is overwritten); it is remembered again as 1.3 and observed as 1.
        let (observed, remembered) = step([0.4, 0.1, 0.2], [0.0, -0.5, 0.0], [false, true, false]);
        assert_eq!(observed, [0.4, 1.0, 0.2]);
        assert_eq!(remembered, [0.4, 1.3, 0.2]);
    }

    #[test]
    fn missing_draws_and_wrong_lengths_are_errors_without_side_effects() {
        let mut distortion = Distortion::new(2, config(0.1, 1, 0.1)).unwrap();
        let mut observation = [[0.0; 3]; 2];
        let raw = [[0.5; 3]; 2];
        assert_eq!(
            distortion.apply(&raw, &StepDraws::none(), &mut observation),
            Err(TelemetryError::MissingDraws { what: "gauss" })
        );
        let gauss = [[0.0; 3]; 2];
        let draws = StepDraws {
            gauss: Some(&gauss),
            missing: None,
        };
        assert_eq!(
            distortion.apply(&raw, &draws, &mut observation),
            Err(TelemetryError::MissingDraws { what: "missing" })
        );
        let mask = [[false; 3]; 1];
        let draws = StepDraws {
            gauss: Some(&gauss),
            missing: Some(&mask),
        };
        assert_eq!(
            distortion.apply(&raw, &draws, &mut observation),
            Err(TelemetryError::LengthMismatch {
                what: "draws.missing",
                expected: 2,
                got: 1
            })
        );
        assert_eq!(distortion.pushed, 0);
    }

    #[test]
    fn resize_extends_stored_vectors_with_zeros() {
        let mut distortion = Distortion::new(1, config(0.0, 1, 0.0)).unwrap();
        let mut observation = vec![[0.0; 3]; 1];
        distortion
            .apply(&[[0.7; 3]], &StepDraws::none(), &mut observation)
            .unwrap();
        distortion.resize(2);
        observation.resize(2, [0.0; 3]);
        distortion
            .apply(&[[0.2; 3], [0.9; 3]], &StepDraws::none(), &mut observation)
            .unwrap();
        // Node 0 sees its raw value of one step ago; the new node sees the zero padding.
        assert_eq!(observation, vec![[0.7; 3], [0.0; 3]]);
        distortion
            .apply(&[[0.3; 3], [0.8; 3]], &StepDraws::none(), &mut observation)
            .unwrap();
        assert_eq!(observation, vec![[0.2; 3], [0.9; 3]]);
    }
}
