//! Replay of recorded telemetry traces. Not built yet.
