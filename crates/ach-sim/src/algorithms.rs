//! The algorithms a series can run, by name: one typed entry per algorithm (name, label, and
//! a factory that builds its balancer for a run of a series).
//!
//! [`Registry::built_in`] is derived from the catalogue of `ach-baselines`
//! ([`ach_baselines::catalogue::Catalogue::built_in`]): the paper's five (A0-A3 and ACH), and
//! ACH-F and CH-BL, which a series runs only when it names them. A user adds a catalogue entry
//! with [`Registry::register_entry`] (the same entry then runs on a live cluster through
//! `ach-redis`), or a factory from the series configuration with [`Registry::register`]; the
//! matrix, the summary and the report then treat it like a built-in. An unknown name is an
//! error wherever it appears, never a silent fallback. How an algorithm is drawn (colour,
//! marker) is the report's business, not the registry's.
//!
//! # Example
//!
//! ```
//! use ach_baselines::StaticW;
//! use ach_sim::algorithms::{AlgorithmInfo, Registry};
//!
//! let mut registry = Registry::built_in();
//! registry
//!     .register(AlgorithmInfo::new("Mine", "Mine"), |_config| Ok(Box::new(StaticW)))
//!     .unwrap();
//! assert!(registry.get("Mine").is_some());
//! assert!(registry.register(AlgorithmInfo::new("ACH", "again"), |_| {
//!     Ok(Box::new(StaticW))
//! }).is_err());
//! ```

use std::fmt;
use std::sync::Arc;

use ach_baselines::catalogue::{BuildError, CatalogueError, Context, Parameter};
use ach_baselines::{Adaptive, AdaptiveRules, Oracle};
use ach_control::{Ach, AchConfig, Balancer, Router, SelectRule};

use crate::config::SeriesConfig;

/// The catalogue the registry is derived from, and the built-in algorithms' names, for code
/// that must name one.
pub use ach_baselines::catalogue::{Catalogue, Entry, names};

/// How an algorithm is named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlgorithmInfo {
    /// The name series files, records and `summary.json` use (`Static-W`, `ACH`).
    pub name: String,
    /// The short name narrow table columns and figure labels print (`A0`; the name itself when
    /// the algorithm has no short name).
    pub label: String,
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
    pub fn new(name: &str, label: &str) -> AlgorithmInfo {
        AlgorithmInfo {
            name: name.to_string(),
            label: label.to_string(),
        }
    }
}

/// Builds an algorithm's balancer for one run from the series configuration (already at its
/// sweep point). An `Err` is a configuration the algorithm cannot run.
pub type BalancerFactory =
    Arc<dyn Fn(&SeriesConfig) -> Result<Box<dyn Balancer + Send>, BuildError> + Send + Sync>;

/// Builds an algorithm's request router for one run from the series configuration, for an
/// algorithm that routes requests its own way (CH-BL). An `Err` is a configuration the
/// algorithm cannot run.
pub type RouterFactory =
    Arc<dyn Fn(&SeriesConfig) -> Result<Box<dyn Router + Send>, BuildError> + Send + Sync>;

/// How a registered algorithm is built.
#[derive(Clone)]
enum Source {
    /// A catalogue entry, built from the series' capacities, ACH configuration and parameters.
    Entry(Entry),
    /// Factories from the series configuration.
    Series {
        balancer: BalancerFactory,
        router: Option<RouterFactory>,
    },
}

/// One registered algorithm.
#[derive(Clone)]
pub struct Algorithm {
    /// Its name and label.
    pub info: AlgorithmInfo,
    source: Source,
}

impl Algorithm {
    /// A fresh balancer for a run of `config`.
    pub fn balancer(&self, config: &SeriesConfig) -> Result<Box<dyn Balancer + Send>, BuildError> {
        match &self.source {
            Source::Entry(entry) => {
                let capacities = capacities(config);
                entry.balancer(&context(entry, config, &capacities))
            }
            Source::Series { balancer, .. } => balancer(config).map_err(|e| e.of(&self.info.name)),
        }
    }

    /// A fresh request router for a run of `config`, or `None` when the algorithm routes every
    /// request to its token's owner (the model's rule, `ach_control::OwnerRouting`; every
    /// algorithm but CH-BL among the built-ins).
    pub fn router(
        &self,
        config: &SeriesConfig,
    ) -> Option<Result<Box<dyn Router + Send>, BuildError>> {
        match &self.source {
            Source::Entry(entry) => {
                let capacities = capacities(config);
                entry.router_for(&context(entry, config, &capacities))
            }
            Source::Series { router, .. } => router
                .as_ref()
                .map(|router| router(config).map_err(|e| e.of(&self.info.name))),
        }
    }

    /// The catalogue entry it was registered from, if any (an entry runs live too).
    pub fn entry(&self) -> Option<&Entry> {
        match &self.source {
            Source::Entry(entry) => Some(entry),
            Source::Series { .. } => None,
        }
    }
}

/// The relative capacity of every node of the series' initial cluster.
fn capacities(config: &SeriesConfig) -> Vec<f64> {
    config
        .cluster
        .classes
        .iter()
        .map(|c| c.capacity())
        .collect()
}

/// The parameters a series sets, by the catalogue's names.
pub fn series_parameters(config: &SeriesConfig) -> Vec<(&'static str, f64)> {
    let mut parameters = Vec::new();
    if let Some(filter) = &config.ach_f {
        parameters.push(("ach_f.window", filter.window as f64));
    }
    if let Some(ch_bl) = &config.ch_bl {
        parameters.push(("ch_bl.eps", ch_bl.eps));
    }
    parameters
}

/// The context `entry` builds from for a run of `config`: the series' capacities and ACH
/// configuration, and those of the series' parameters the entry takes.
fn context<'a>(entry: &Entry, config: &'a SeriesConfig, capacities: &'a [f64]) -> Context<'a> {
    let mut context = Context::new(capacities, &config.ach);
    for (name, value) in series_parameters(config) {
        if entry.parameters().iter().any(|p| p.name == name) {
            context = context.with_parameter(name, value);
        }
    }
    context
}

impl fmt::Debug for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Algorithm")
            .field("info", &self.info)
            .finish()
    }
}

/// Why an algorithm could not be registered.
pub type RegistryError = CatalogueError;

/// A name the registry does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a registered algorithm ({known})")]
pub struct UnknownAlgorithm {
    /// The name looked up.
    pub name: String,
    /// The registered names, comma-separated.
    pub known: String,
}

/// The paper's future work (issue 20, docs/future-work.md), opt-in like ACH-F: ACH-H (ACH
/// whose planner sees per-token loads), ACH-A (hysteresis that adapts online), ACH-HA (both)
/// and the Oracle (the best balance with full knowledge and no budget; the limit, not a
/// contender).
fn add_future_work(add: &mut impl FnMut(AlgorithmInfo, BalancerFactory)) {
    add(
        AlgorithmInfo::new("ACH-H", "ACH-H"),
        Arc::new(|config| Ok(Box::new(ach_h(config)?))),
    );
    add(
        AlgorithmInfo::new("ACH-A", "ACH-A"),
        Arc::new(|config| Ok(Box::new(ach_a(config, config.ach.clone())?))),
    );
    add(
        AlgorithmInfo::new("ACH-HA", "ACH-HA"),
        Arc::new(|config| Ok(Box::new(ach_a(config, per_token(config))?))),
    );
    add(
        AlgorithmInfo::new("Oracle", "Oracle"),
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
pub fn ach_h(config: &SeriesConfig) -> Result<Ach, BuildError> {
    Ach::new(per_token(config)).map_err(|e| BuildError::refused(e.to_string()))
}

/// ACH-A over `base` (the floor of its adapted parameters), with the smoothing factor of what
/// the algorithms read.
pub fn ach_a(config: &SeriesConfig, base: AchConfig) -> Result<Adaptive, BuildError> {
    let beta = config.telemetry.controllers().beta;
    Adaptive::new(base, beta, AdaptiveRules::DEFAULT)
        .map_err(|e| BuildError::refused(e.to_string()))
}

/// The algorithms series may name, in registration order (the order of tables and legends).
#[derive(Clone, Debug)]
pub struct Registry {
    algorithms: Vec<Algorithm>,
    /// The entries, and a placeholder for every algorithm registered by series factories, so
    /// that names are checked by one rule (the catalogue's).
    names: Catalogue,
}

impl Registry {
    /// No algorithms at all.
    pub fn empty() -> Registry {
        Registry {
            algorithms: Vec::new(),
            names: Catalogue::empty(),
        }
    }

    /// The algorithms of [`Catalogue::built_in`], in its order: A0 Static-W, A1 Static-Wt,
    /// A2 Dynamic-R, A3 Bounded-Loads, ACH (the paper's, in the order of its tables); then the
    /// algorithms beyond the paper, which a series runs only when it names them: ACH-F (ACH
    /// behind a median filter of each node's load over `[ach_f] window` steps, see
    /// `ach_baselines::MedianFiltered`) and CH-BL (consistent hashing with bounded loads as
    /// published, `c = 1 + [ch_bl] eps`: it forwards requests past full nodes and never moves a
    /// token, see `ach_baselines::BoundedLoadsRouting`).
    ///
    /// The simulator-only algorithms of the paper's future work follow, also opt-in: ACH-H
    /// (ACH's per-token planner over per-token telemetry), ACH-A (hysteresis adapted online),
    /// ACH-HA (both) and Oracle (the best assignment with full knowledge and no budget, the
    /// limit rather than a contender). They are not catalogue entries: ACH-A reads the series'
    /// smoothing factor and Oracle the scenario's service-rate schedule (docs/future-work.md).
    pub fn built_in() -> Registry {
        let mut registry = Registry::from_catalogue(&Catalogue::built_in());
        add_future_work(&mut |info, factory| {
            registry
                .register_factory(info, factory)
                .expect("the built-in names are distinct and valid");
        });
        registry
    }

    /// Every entry of `catalogue`, in its order.
    pub fn from_catalogue(catalogue: &Catalogue) -> Registry {
        let mut registry = Registry::empty();
        for entry in catalogue.iter() {
            registry
                .register_entry(entry.clone())
                .expect("a catalogue's names are distinct and valid");
        }
        registry
    }

    /// Adds a catalogue entry: the series' capacities, ACH configuration and parameters
    /// (`[ach_f] window`, `[ch_bl] eps`, those the entry takes) build it for each run.
    pub fn register_entry(&mut self, entry: Entry) -> Result<(), RegistryError> {
        let info = AlgorithmInfo::new(entry.name(), entry.label());
        self.names.add(entry.clone())?;
        self.algorithms.push(Algorithm {
            info,
            source: Source::Entry(entry),
        });
        Ok(())
    }

    /// Adds an algorithm whose balancer `factory` builds from the series configuration.
    pub fn register<F>(&mut self, info: AlgorithmInfo, factory: F) -> Result<(), RegistryError>
    where
        F: Fn(&SeriesConfig) -> Result<Box<dyn Balancer + Send>, BuildError>
            + Send
            + Sync
            + 'static,
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
        F: Fn(&SeriesConfig) -> Result<Box<dyn Balancer + Send>, BuildError>
            + Send
            + Sync
            + 'static,
        G: Fn(&SeriesConfig) -> Result<Box<dyn Router + Send>, BuildError> + Send + Sync + 'static,
    {
        self.register_series(info, Arc::new(balancer), Some(Arc::new(router)))
    }

    /// [`Registry::register`] with a shared factory.
    pub fn register_factory(
        &mut self,
        info: AlgorithmInfo,
        factory: BalancerFactory,
    ) -> Result<(), RegistryError> {
        self.register_series(info, factory, None)
    }

    fn register_series(
        &mut self,
        info: AlgorithmInfo,
        balancer: BalancerFactory,
        router: Option<RouterFactory>,
    ) -> Result<(), RegistryError> {
        // The placeholder entry only reserves the name and label; it is never built.
        let placeholder = Entry::new(&info.name, &info.label, |_| {
            Err(BuildError::refused("registered by a series factory"))
        });
        self.names.add(placeholder)?;
        self.algorithms.push(Algorithm {
            info,
            source: Source::Series { balancer, router },
        });
        Ok(())
    }

    /// The parameter `name` of a registered catalogue entry that takes it.
    pub fn parameter(&self, name: &str) -> Option<Parameter> {
        self.names.parameter(name).cloned()
    }

    /// The algorithm called `name`.
    pub fn get(&self, name: &str) -> Option<&Algorithm> {
        self.algorithms.iter().find(|a| a.info.name == name)
    }

    /// The entry of `name`, or an error that lists the registered names.
    pub fn info(&self, name: &str) -> Result<&AlgorithmInfo, UnknownAlgorithm> {
        self.get(name)
            .map(|a| &a.info)
            .ok_or_else(|| UnknownAlgorithm {
                name: name.to_string(),
                known: self.names(),
            })
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
    use ach_baselines::StaticW;
    use ach_baselines::catalogue::names;

    #[test]
    fn the_built_ins_are_the_papers_algorithms_in_table_order() {
        let registry = Registry::built_in();
        let names: Vec<&str> = registry.iter().map(|a| a.info.name.as_str()).collect();
        assert_eq!(names[..5], ALGORITHMS);
        assert_eq!(
            names[5..],
            [
                names::ACH_F,
                names::CH_BL,
                "ACH-H",
                "ACH-A",
                "ACH-HA",
                "Oracle"
            ]
        );
        let config = &built_in_series()[0];
        for algorithm in registry.iter() {
            assert!(algorithm.balancer(config).is_ok(), "{:?}", algorithm.info);
            // Only CH-BL routes its own way.
            let routes = algorithm.router(config).map(|r| r.is_ok());
            let expected = (algorithm.info.name == names::CH_BL).then_some(true);
            assert_eq!(routes, expected, "{:?}", algorithm.info);
        }
    }

    #[test]
    fn a_series_parameters_reach_the_entries_that_take_them() {
        let config = SeriesConfig::from_toml(
            "name = \"P\"\nalgorithms = [\"ACH\", \"ACH-F\", \"CH-BL\"]\n\
             [ach_f]\nwindow = 0\n[ch_bl]\neps = 0.5\n",
        )
        .unwrap();
        let registry = Registry::built_in();
        // ACH takes neither parameter and is built as usual.
        assert!(registry.get(names::ACH).unwrap().balancer(&config).is_ok());
        let error = registry
            .get(names::ACH_F)
            .unwrap()
            .balancer(&config)
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            "algorithm ACH-F: ach_f.window = 0 must be >= 1 (1 is plain ACH)"
        );
        let ch_bl = registry.get(names::CH_BL).unwrap();
        assert!(ch_bl.router(&config).unwrap().is_ok());
    }

    #[test]
    fn bad_and_duplicate_names_are_refused() {
        let mut registry = Registry::built_in();
        let info = |name: &str| AlgorithmInfo::new(name, name);
        let factory = |_: &SeriesConfig| -> Result<Box<dyn Balancer + Send>, BuildError> {
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
        assert!(
            registry
                .info("nope")
                .unwrap_err()
                .to_string()
                .contains("CH-BL2")
        );
        let refusing = |_: &SeriesConfig| -> Result<Box<dyn Balancer + Send>, BuildError> {
            Err(BuildError::refused("not today"))
        };
        registry.register(info("Refuser"), refusing).unwrap();
        let config = &built_in_series()[0];
        let error = registry
            .get("Refuser")
            .unwrap()
            .balancer(config)
            .err()
            .unwrap();
        assert_eq!(error.to_string(), "algorithm Refuser: not today");
    }
}
