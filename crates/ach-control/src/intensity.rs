//! Correction intensity `C(t)` of ACH (Algorithm 1, step 2).

/// The intensity and its two factors.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Intensity {
    /// Headroom factor `gamma = clip((tau - total_load) / (tau - tau_min), 0, 1)`.
    pub gamma: f64,
    /// Largest overload `I = max_i max(l_i - l*, 0)` over live nodes.
    pub overload: f64,
    /// Imbalance factor `eta = I / (I + kappa)`, 0 when `I = 0`.
    pub eta: f64,
    /// `C = gamma * eta`, in `[0, 1)` (the paper's `C(t) / C_max`).
    pub c: f64,
}

/// Parameters of the intensity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntensityParams {
    /// Target load `l*`.
    pub target: f64,
    /// `tau`.
    pub tau: f64,
    /// `tau_min`.
    pub tau_min: f64,
    /// `kappa`.
    pub kappa: f64,
}

/// Computes the intensity for the given loads (only live nodes count for `I`).
pub fn intensity(loads: &[f64], live: &[bool], total_load: f64, p: IntensityParams) -> Intensity {
    let gamma = ((p.tau - total_load) / (p.tau - p.tau_min)).clamp(0.0, 1.0);
    let overload = loads
        .iter()
        .enumerate()
        .filter(|&(i, _)| live.get(i).copied().unwrap_or(true))
        .map(|(_, &l)| (l - p.target).max(0.0))
        .fold(0.0, f64::max);
    let eta = if overload > 0.0 {
        overload / (overload + p.kappa)
    } else {
        0.0
    };
    Intensity {
        gamma,
        overload,
        eta,
        c: gamma * eta,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: IntensityParams = IntensityParams {
        target: 0.65,
        tau: 0.85,
        tau_min: 0.50,
        kappa: 0.10,
    };

    #[test]
    fn gamma_is_clipped_and_eta_saturates() {
        let i = intensity(&[0.75, 0.5], &[true, true], 0.40, P);
        assert_eq!(i.gamma, 1.0);
        assert!((i.overload - 0.10).abs() < 1e-15);
        assert!((i.eta - 0.5).abs() < 1e-12);
        assert!((i.c - 0.5).abs() < 1e-12);
        assert_eq!(intensity(&[0.75], &[true], 0.90, P).c, 0.0);
        assert_eq!(intensity(&[0.5], &[true], 0.40, P).eta, 0.0);
    }

    #[test]
    fn dead_nodes_do_not_count() {
        assert_eq!(
            intensity(&[0.95, 0.5], &[false, true], 0.40, P).overload,
            0.0
        );
    }
}
