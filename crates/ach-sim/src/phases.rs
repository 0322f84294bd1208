//! Where a run's time goes: the phases of a run and the hook through which a caller times them.
//!
//! The model reads no clock. A caller that wants a profile by phase passes a [`PhaseProbe`] to
//! [`crate::run::simulate_probed`]; the run calls [`PhaseProbe::enter`] each time it moves
//! from one phase to the next, and the probe (in an edge crate, e.g. `ach_report::bench`)
//! reads its clock there. [`simulate`](crate::run::simulate) passes [`NoProbe`], whose calls
//! compile to nothing, so a run without a probe costs exactly what it did before the hook.
//! The probe only watches: it receives no data of the run and cannot change a result.

/// One phase of a run. A run enters them in this order at every step (`Events` to
/// `Invariants`, the per-arm phases once per algorithm), `Setup` before the first step and
/// `Records` after the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Building the rings, the workload's key popularity and every arm, before step 0.
    Setup,
    /// The scenario's events of the step (degradation, nodes leaving or joining).
    Events,
    /// Drawing the step's per-token read and write counts (the workload).
    Draw,
    /// Routing the counts to the owners of every arm (summing them per node), and CH-BL's own
    /// routing.
    Route,
    /// The telemetry: the step's shared noise draws, raw metrics, distortion, smoothing, the
    /// composite load, and the imbalance and CV that are recorded.
    Telemetry,
    /// The planning of the algorithm of arm `arm` (index into the series' `algorithms`).
    Plan {
        /// Index of the arm's algorithm in the series' `algorithms`.
        arm: usize,
    },
    /// Committing the plan to the ring, confirming it, recording its cost and budget check.
    Commit,
    /// The invariant checks of the ring.
    Invariants,
    /// Building the run's record (aggregates of the traces) after the last step.
    Records,
}

impl Phase {
    /// A short name for tables; `Plan` is named by the caller, who knows the algorithms.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Events => "events",
            Phase::Draw => "drawing the workload",
            Phase::Route => "routing to owners",
            Phase::Telemetry => "telemetry",
            Phase::Plan { .. } => "planning",
            Phase::Commit => "commit and cost",
            Phase::Invariants => "invariant checks",
            Phase::Records => "records",
        }
    }
}

/// Told by a run each time it enters a phase (the previous phase ends there). A run ends by
/// entering [`Phase::Records`]; the caller ends that one when `simulate_probed` returns.
pub trait PhaseProbe {
    /// The run enters `phase` now.
    fn enter(&mut self, phase: Phase);
}

/// The probe of an untimed run: does nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProbe;

impl PhaseProbe for NoProbe {
    #[inline(always)]
    fn enter(&mut self, _phase: Phase) {}
}

/// A probe that counts how often each phase is entered (for tests: a probe sees every phase).
#[derive(Clone, Debug, Default)]
pub struct PhaseCounter {
    /// Entries per phase, in the order first entered.
    pub entries: Vec<(Phase, u64)>,
}

impl PhaseProbe for PhaseCounter {
    fn enter(&mut self, phase: Phase) {
        match self.entries.iter_mut().find(|(p, _)| *p == phase) {
            Some((_, count)) => *count += 1,
            None => self.entries.push((phase, 1)),
        }
    }
}
