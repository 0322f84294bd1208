//! Property tests of the telemetry pipeline.

use ach_telemetry::{
    DistortionConfig, Metrics, MissingMask, Smoother, StepDraws, TelemetryConfig,
    TelemetryPipeline, composite_load, total_load,
};
use proptest::prelude::*;

const NODE_COUNT: usize = 4;

fn metrics_in_unit() -> impl Strategy<Value = Metrics> {
    prop::array::uniform3(0.0..=1.0f64)
}

fn step_input() -> impl Strategy<Value = (Vec<Metrics>, Vec<Metrics>, Vec<MissingMask>)> {
    (
        prop::collection::vec(metrics_in_unit(), NODE_COUNT),
        prop::collection::vec(prop::array::uniform3(-3.0..3.0f64), NODE_COUNT),
        prop::collection::vec(prop::array::uniform3(any::<bool>()), NODE_COUNT),
    )
}

proptest! {
    #[test]
    fn loads_stay_in_unit_interval(
        steps in prop::collection::vec(step_input(), 1..20),
        sigma in 0.0..1.0f64,
        lag in 0usize..4,
        p_miss in 0.0..=1.0f64,
    ) {
        let distortion = DistortionConfig { sigma, lag, p_miss };
        let config = TelemetryConfig::paper();
        let mut pipeline = TelemetryPipeline::new(NODE_COUNT, config, distortion).unwrap();
        for (raw, gauss, missing) in &steps {
            let draws = StepDraws { gauss: Some(gauss), missing: Some(missing) };
            let step = pipeline.observe(raw, &draws).unwrap();
            for load in step.loads {
                prop_assert!((0.0..=1.0 + 1e-15).contains(load), "load {load}");
            }
            prop_assert!((0.0..=1.0 + 1e-15).contains(&step.total_load));
            for observed in pipeline.last_observation() {
                for value in observed {
                    prop_assert!((0.0..=1.0).contains(value));
                }
            }
        }
    }

    #[test]
    fn noise_free_pipeline_is_smoothing_of_raw(
        steps in prop::collection::vec(step_input(), 1..20),
    ) {
        let config = TelemetryConfig::paper();
        let mut pipeline = TelemetryPipeline::noise_free(NODE_COUNT, config).unwrap();
        let mut smoother = Smoother::new(NODE_COUNT, config.beta).unwrap();
        for (raw, gauss, missing) in &steps {
            // Draws are ignored by a pipeline without distortion.
            let draws = StepDraws { gauss: Some(gauss), missing: Some(missing) };
            let step = pipeline.observe(raw, &draws).unwrap();
            let smoothed = smoother.update(raw).unwrap();
            let expected: Vec<f64> = smoothed
                .iter()
                .map(|metrics| composite_load(metrics, &config.weights, config.p))
                .collect();
            prop_assert_eq!(step.loads, &expected[..]);
            prop_assert_eq!(step.total_load, total_load(&expected, config.alpha));
            prop_assert_eq!(pipeline.last_observation(), &raw[..]);
        }
    }
}
