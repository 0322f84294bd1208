//! The algorithms a series can run, by name: one typed entry per algorithm (name, label,
//! colour, marker, and a factory that builds its balancer from the series configuration).
//!
//! [`Registry::built_in`] holds the paper's five (A0-A3 and ACH). A user adds their own with
//! [`Registry::register`]; the matrix, the summary and the report then treat it like a built-in.
//! An unknown name is an error wherever it appears, never a silent fallback.
//!
//! # Example
//!
//! ```
//! use ach_baselines::StaticW;
//! use ach_sim::algorithms::{AlgorithmInfo, Marker, Registry};
//!
//! let mut registry = Registry::built_in();
//! registry
//!     .register(
//!         AlgorithmInfo::new("Mine", "Mine", [0x56, 0xB4, 0xE9], Marker::Cross),
//!         |_config| Ok(Box::new(StaticW)),
//!     )
//!     .unwrap();
//! assert!(registry.get("Mine").is_some());
//! assert!(registry.register(AlgorithmInfo::new("ACH", "again", [0, 0, 0], Marker::Star), |_| {
//!     Ok(Box::new(StaticW))
//! }).is_err());
//! ```

use std::fmt;
use std::sync::Arc;

use ach_baselines::{
    Adaptive, AdaptiveRules, BoundedLoads, BoundedLoadsRouting, DynamicR, MedianFiltered, Oracle,
    RoutingOnly, StaticW, StaticWt,
};
use ach_control::{Ach, AchConfig, Balancer, Router, SelectRule};

use crate::config::{AchFilter, ChBlConfig, SeriesConfig};

/// A marker shape of the figures, so that colour is never the only cue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Marker {
    /// A circle.
    Circle,
    /// A square.
    Square,
    /// A triangle, point up.
    Triangle,
    /// A diamond.
    Diamond,
    /// A five-pointed star.
    Star,
    /// A cross (an x).
    Cross,
    /// A plus sign (an upright cross).
    Plus,
    /// A triangle, point down.
    TriangleDown,
    /// A regular pentagon, point up.
    Pentagon,
    /// A regular hexagon.
    Hexagon,
    /// A wide bar (a dash).
    Dash,
}

/// How an algorithm is named and drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlgorithmInfo {
    /// The name series files, records and `summary.json` use (`Static-W`, `ACH`).
    pub name: String,
    /// The short name narrow table columns and figure labels print (`A0`; the name itself when
    /// the algorithm has no short name).
    pub label: String,
    /// Colour of its marks in figures, RGB.
    pub color: [u8; 3],
    /// Marker shape in figures.
    pub marker: Marker,
}

impl AlgorithmInfo {
    /// The name wide table cells and legends print: `Static-W (A0)`, or the name alone when the
    /// label is the name.
    pub fn long_label(&self) -> String {
        if self.label == self.name {
            self.name.clone()
        } else {
            format!("{} ({})", self.name, self.label)
        }
    }

    /// An entry.
    pub fn new(name: &str, label: &str, color: [u8; 3], marker: Marker) -> AlgorithmInfo {
        AlgorithmInfo {
            name: name.to_string(),
            label: label.to_string(),
            color,
            marker,
        }
    }
}

/// Builds an algorithm's balancer for one run from the series configuration (already at its
/// sweep point). An `Err` is a configuration the algorithm cannot run, in words.
pub type BalancerFactory =
    Arc<dyn Fn(&SeriesConfig) -> Result<Box<dyn Balancer + Send>, String> + Send + Sync>;

/// Builds an algorithm's request router for one run from the series configuration, for an
/// algorithm that routes requests its own way (CH-BL). An `Err` is a configuration the
/// algorithm cannot run, in words.
pub type RouterFactory =
    Arc<dyn Fn(&SeriesConfig) -> Result<Box<dyn Router + Send>, String> + Send + Sync>;

/// One registered algorithm.
#[derive(Clone)]
pub struct Algorithm {
    /// Its name, label, colour and marker.
    pub info: AlgorithmInfo,
    factory: BalancerFactory,
    router: Option<RouterFactory>,
}

impl Algorithm {
    /// A fresh balancer for a run of `config`.
    pub fn balancer(&self, config: &SeriesConfig) -> Result<Box<dyn Balancer + Send>, String> {
        (self.factory)(config)
    }

    /// A fresh request router for a run of `config`, or `None` when the algorithm routes every
    /// request to its token's owner (the model's rule, `ach_control::OwnerRouting`; every
    /// algorithm but CH-BL among the built-ins).
    pub fn router(&self, config: &SeriesConfig) -> Option<Result<Box<dyn Router + Send>, String>> {
        self.router.as_ref().map(|factory| factory(config))
    }
}

impl fmt::Debug for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Algorithm")
            .field("info", &self.info)
            .finish()
    }
}

/// Why an algorithm could not be registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The name is taken.
    #[error("algorithm {0:?} is already registered: give each algorithm its own name")]
    Duplicate(String),
    /// The name is empty or cannot be a file or column name.
    #[error(
        "algorithm name {0:?} must be non-empty and use only letters, digits, '_', '-', '+' and '.'"
    )]
    BadName(String),
}

/// The paper's future work (issue 20, docs/future-work.md), opt-in like ACH-F: ACH-H (ACH
/// whose planner sees per-token loads), ACH-A (hysteresis that adapts online), ACH-HA (both)
/// and the Oracle (the best balance with full knowledge and no budget; the limit, not a
/// contender).
fn add_future_work(add: &mut impl FnMut(AlgorithmInfo, BalancerFactory)) {
    add(
        AlgorithmInfo::new("ACH-H", "ACH-H", [0x99, 0x00, 0x99], Marker::TriangleDown),
        Arc::new(|config| Ok(Box::new(ach_h(config)?))),
    );
    add(
        AlgorithmInfo::new("ACH-A", "ACH-A", [0x66, 0x99, 0x00], Marker::Pentagon),
        Arc::new(|config| Ok(Box::new(ach_a(config, config.ach.clone())?))),
    );
    add(
        AlgorithmInfo::new("ACH-HA", "ACH-HA", [0x33, 0x66, 0xCC], Marker::Hexagon),
        Arc::new(|config| Ok(Box::new(ach_a(config, per_token(config))?))),
    );
    add(
        AlgorithmInfo::new("Oracle", "Oracle", [0x80, 0x80, 0x80], Marker::Dash),
        Arc::new(|config| {
            let schedule = crate::token_loads::service_rate_schedule(config);
            Ok(Box::new(Oracle::new(schedule, config.ach.v_min)))
        }),
    );
}

/// The series' ACH parameters with the per-token planner.
fn per_token(config: &SeriesConfig) -> AchConfig {
    AchConfig {
        select_rule: SelectRule::ByTokenLoad,
        ..config.ach.clone()
    }
}

/// ACH-H: ACH with the per-token planner ([`SelectRule::ByTokenLoad`]).
pub fn ach_h(config: &SeriesConfig) -> Result<Ach, String> {
    Ach::new(per_token(config)).map_err(|e| e.to_string())
}

/// ACH-A over `base` (the floor of its adapted parameters), with the series' smoothing factor.
pub fn ach_a(config: &SeriesConfig, base: AchConfig) -> Result<Adaptive, String> {
    let beta = config.telemetry.config().beta;
    Adaptive::new(base, beta, AdaptiveRules::DEFAULT).map_err(|e| e.to_string())
}

/// The algorithms series may name, in registration order (the order of tables and legends).
#[derive(Clone, Debug)]
pub struct Registry {
    algorithms: Vec<Algorithm>,
}

impl Registry {
    /// No algorithms at all.
    pub fn empty() -> Registry {
        Registry {
            algorithms: Vec::new(),
        }
    }

    /// The paper's algorithms, in the order of its tables: A0 Static-W, A1 Static-Wt,
    /// A2 Dynamic-R, A3 Bounded-Loads, ACH (colours Okabe-Ito); then the algorithms beyond the
    /// paper, which a series runs only when it names them: ACH-F (ACH behind a median filter of
    /// each node's load over `[ach_f] window` steps, see `ach_baselines::MedianFiltered`) and
    /// CH-BL (consistent hashing with bounded loads as published, `c = 1 + [ch_bl] eps`: it
    /// forwards requests past full nodes and never moves a token, see
    /// `ach_baselines::BoundedLoadsRouting`).
    pub fn built_in() -> Registry {
        let mut registry = Registry::empty();
        let mut add = |info: AlgorithmInfo, factory: BalancerFactory| {
            registry
                .register_factory(info, factory)
                .expect("the built-in names are distinct and valid");
        };
        add(
            AlgorithmInfo::new("Static-W", "A0", [0x00, 0x72, 0xB2], Marker::Circle),
            Arc::new(|_| Ok(Box::new(StaticW))),
        );
        add(
            AlgorithmInfo::new("Static-Wt", "A1", [0xE6, 0x9F, 0x00], Marker::Square),
            Arc::new(|config| {
                let capacities = config.cluster.classes.iter().map(|c| c.capacity());
                Ok(Box::new(StaticWt::new(capacities.collect())))
            }),
        );
        add(
            AlgorithmInfo::new("Dynamic-R", "A2", [0x00, 0x9E, 0x73], Marker::Triangle),
            Arc::new(|_| Ok(Box::new(DynamicR::paper()))),
        );
        add(
            AlgorithmInfo::new("Bounded-Loads", "A3", [0xCC, 0x79, 0xA7], Marker::Diamond),
            Arc::new(|_| Ok(Box::new(BoundedLoads::paper()))),
        );
        add(
            AlgorithmInfo::new("ACH", "ACH", [0xD5, 0x5E, 0x00], Marker::Star),
            Arc::new(|config| {
                let ach = Ach::new(config.ach.clone()).map_err(|e| e.to_string())?;
                Ok(Box::new(ach))
            }),
        );
        add(
            AlgorithmInfo::new("ACH-F", "ACH-F", [0x00, 0x00, 0x00], Marker::Cross),
            Arc::new(|config| {
                let ach = Ach::new(config.ach.clone()).map_err(|e| e.to_string())?;
                let window = config
                    .ach_f
                    .as_ref()
                    .map_or(AchFilter::DEFAULT_WINDOW, |f| f.window);
                Ok(Box::new(MedianFiltered::new(ach, window)))
            }),
        );
        registry
            .register_routed(
                AlgorithmInfo::new("CH-BL", "CH-BL", [0x8C, 0x56, 0x4B], Marker::Plus),
                |_| Ok(Box::new(RoutingOnly)),
                |config| {
                    let eps = config
                        .ch_bl
                        .as_ref()
                        .map_or(ChBlConfig::DEFAULT_EPS, |c| c.eps);
                    Ok(Box::new(BoundedLoadsRouting::new(eps)))
                },
            )
            .expect("the built-in names are distinct and valid");
        add_future_work(&mut |info, factory| {
            registry
                .register_factory(info, factory)
                .expect("the built-in names are distinct and valid");
        });
        registry
    }

    /// Adds an algorithm whose balancer `factory` builds from the series configuration.
    pub fn register<F>(&mut self, info: AlgorithmInfo, factory: F) -> Result<(), RegistryError>
    where
        F: Fn(&SeriesConfig) -> Result<Box<dyn Balancer + Send>, String> + Send + Sync + 'static,
    {
        self.register_factory(info, Arc::new(factory))
    }

    /// [`Registry::register`] for an algorithm that also routes requests its own way: `router`
    /// builds its [`Router`] for each run (see [`Algorithm::router`]).
    pub fn register_routed<F, G>(
        &mut self,
        info: AlgorithmInfo,
        balancer: F,
        router: G,
    ) -> Result<(), RegistryError>
    where
        F: Fn(&SeriesConfig) -> Result<Box<dyn Balancer + Send>, String> + Send + Sync + 'static,
        G: Fn(&SeriesConfig) -> Result<Box<dyn Router + Send>, String> + Send + Sync + 'static,
    {
        self.register_algorithm(info, Arc::new(balancer), Some(Arc::new(router)))
    }

    /// [`Registry::register`] with a shared factory.
    pub fn register_factory(
        &mut self,
        info: AlgorithmInfo,
        factory: BalancerFactory,
    ) -> Result<(), RegistryError> {
        self.register_algorithm(info, factory, None)
    }

    fn register_algorithm(
        &mut self,
        info: AlgorithmInfo,
        factory: BalancerFactory,
        router: Option<RouterFactory>,
    ) -> Result<(), RegistryError> {
        let valid = !info.name.is_empty()
            && info
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'));
        if !valid {
            return Err(RegistryError::BadName(info.name));
        }
        if self.get(&info.name).is_some() {
            return Err(RegistryError::Duplicate(info.name));
        }
        self.algorithms.push(Algorithm {
            info,
            factory,
            router,
        });
        Ok(())
    }

    /// The algorithm called `name`.
    pub fn get(&self, name: &str) -> Option<&Algorithm> {
        self.algorithms.iter().find(|a| a.info.name == name)
    }

    /// The entry of `name`, or an error message that lists the registered names.
    pub fn info(&self, name: &str) -> Result<&AlgorithmInfo, String> {
        self.get(name)
            .map(|a| &a.info)
            .ok_or_else(|| format!("{name:?} is not a registered algorithm ({})", self.names()))
    }

    /// Every registered algorithm, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Algorithm> {
        self.algorithms.iter()
    }

    /// The registered names, comma-separated, for error messages.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self
            .algorithms
            .iter()
            .map(|a| a.info.name.as_str())
            .collect();
        names.join(", ")
    }
}

impl Default for Registry {
    fn default() -> Registry {
        Registry::built_in()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ALGORITHMS, built_in_series};

    #[test]
    fn the_built_ins_are_the_papers_algorithms_in_table_order() {
        let registry = Registry::built_in();
        let names: Vec<&str> = registry.iter().map(|a| a.info.name.as_str()).collect();
        assert_eq!(names[..5], ALGORITHMS);
        assert_eq!(
            names[5..],
            ["ACH-F", "CH-BL", "ACH-H", "ACH-A", "ACH-HA", "Oracle"]
        );
        let config = &built_in_series()[0];
        for algorithm in registry.iter() {
            assert!(algorithm.balancer(config).is_ok(), "{:?}", algorithm.info);
            // Only CH-BL routes its own way.
            let routes = algorithm.router(config).map(|r| r.is_ok());
            let expected = (algorithm.info.name == "CH-BL").then_some(true);
            assert_eq!(routes, expected, "{:?}", algorithm.info);
        }
        let mut colors: Vec<[u8; 3]> = registry.iter().map(|a| a.info.color).collect();
        colors.sort();
        colors.dedup();
        assert_eq!(colors.len(), registry.iter().count());
        let mut markers: Vec<String> = registry
            .iter()
            .map(|a| format!("{:?}", a.info.marker))
            .collect();
        markers.sort();
        markers.dedup();
        assert_eq!(markers.len(), registry.iter().count());
    }

    #[test]
    fn bad_and_duplicate_names_are_refused() {
        let mut registry = Registry::built_in();
        let info = |name: &str| AlgorithmInfo::new(name, name, [0, 0, 0], Marker::Cross);
        let factory = |_: &SeriesConfig| -> Result<Box<dyn Balancer + Send>, String> {
            Ok(Box::new(StaticW))
        };
        assert_eq!(
            registry.register(info("ACH"), factory),
            Err(RegistryError::Duplicate("ACH".into()))
        );
        assert_eq!(
            registry.register(info("a/b"), factory),
            Err(RegistryError::BadName("a/b".into()))
        );
        assert_eq!(
            registry.register(info(""), factory),
            Err(RegistryError::BadName("".into()))
        );
        assert!(registry.register(info("CH-BL2"), factory).is_ok());
        assert!(registry.info("nope").unwrap_err().contains("CH-BL2"));
    }
}
