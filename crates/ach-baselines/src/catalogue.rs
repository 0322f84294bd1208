//! The catalogue of algorithms: one entry per algorithm (its name, short label, lookup
//! aliases, parameters by name, and the factories that build its balancer and, for an
//! algorithm that routes requests its own way, its router), from which the simulator's
//! registry, `ach-redis --algorithm`, `xtask live --algorithms` and `verify-trace` are derived.
//!
//! A factory builds from a small [`Context`] (the node capacities, the [`AchConfig`] to use and
//! the entry's parameters), never from a simulator's series file, so that one entry runs in
//! the simulator and on a live cluster alike. [`Catalogue::built_in`] holds the paper's five
//! (A0-A3 and ACH) and ACH-F and CH-BL; a user adds their own with [`Catalogue::add`].
//!
//! # Example
//!
//! ```
//! use ach_baselines::StaticW;
//! use ach_baselines::catalogue::{Catalogue, Context, Entry, Parameter, Rule, names};
//! use ach_control::AchConfig;
//!
//! let mut catalogue = Catalogue::built_in();
//! catalogue
//!     .add(
//!         Entry::new("Mine", "M1", |context| {
//!             let _gap = context.parameter("mine.gap")?;
//!             Ok(Box::new(StaticW))
//!         })
//!         .parameter(Parameter::new("mine.gap", 0.1, Rule::FinitePositive, "the load gap")),
//!     )
//!     .unwrap();
//! // Lookup is case-insensitive and knows labels and aliases.
//! assert_eq!(catalogue.find("m1").unwrap().name(), "Mine");
//! assert_eq!(catalogue.find("a0").unwrap().name(), names::STATIC_W);
//!
//! let capacities = [1.0, 0.55, 0.25];
//! let ach = AchConfig::paper();
//! let context = Context::new(&capacities, &ach).with_parameter("mine.gap", 0.2);
//! assert!(catalogue.find("Mine").unwrap().balancer(&context).is_ok());
//! // A parameter the algorithm does not take is an error naming it.
//! let error = catalogue.find("ACH").unwrap().balancer(&context).err().unwrap();
//! assert!(error.to_string().contains("mine.gap"));
//! ```

use std::fmt;
use std::sync::Arc;

use ach_control::{Ach, AchConfig, Balancer, Router};

use crate::{
    BoundedLoads, BoundedLoadsRouting, DynamicR, MedianFiltered, RoutingOnly, StaticW, StaticWt,
};

/// The names of the built-in algorithms: the one place they are spelled.
pub mod names {
    /// A0: round-robin owners, never changes.
    pub const STATIC_W: &str = "Static-W";
    /// A1: owners proportional to capacity on the first step, then never changes.
    pub const STATIC_WT: &str = "Static-Wt";
    /// A2: dynamic reweighting, unbudgeted.
    pub const DYNAMIC_R: &str = "Dynamic-R";
    /// A3: the published simulation's bounded-loads heuristic.
    pub const BOUNDED_LOADS: &str = "Bounded-Loads";
    /// Adaptive consistent hashing.
    pub const ACH: &str = "ACH";
    /// ACH behind a median filter of each node's load (not in the paper).
    pub const ACH_F: &str = "ACH-F";
    /// Consistent hashing with bounded loads as published (not in the paper).
    pub const CH_BL: &str = "CH-BL";
    /// The paper's algorithms, in the order of its tables.
    pub const PAPER: [&str; 5] = [STATIC_W, STATIC_WT, DYNAMIC_R, BOUNDED_LOADS, ACH];
    /// The baseline every other algorithm can be paired against (A0).
    pub const BASELINE: &str = STATIC_W;
}

/// The window of ACH-F's median filter when none is given (`ach_f.window`).
pub const DEFAULT_ACH_F_WINDOW: usize = 5;

/// The rule a parameter's value must follow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// A finite number.
    Finite,
    /// A finite number > 0.
    FinitePositive,
    /// A whole number >= the given minimum.
    WholeAtLeast(u64),
}

impl Rule {
    /// True when `value` follows the rule.
    pub fn holds(self, value: f64) -> bool {
        match self {
            Rule::Finite => value.is_finite(),
            Rule::FinitePositive => value.is_finite() && value > 0.0,
            Rule::WholeAtLeast(min) => {
                value.is_finite() && value.fract() == 0.0 && value >= min as f64 && value <= 1e15
            }
        }
    }

    /// The rule in words, as error messages end (`must be a finite number > 0`).
    pub fn describe(self) -> String {
        match self {
            Rule::Finite => "must be a finite number".to_string(),
            Rule::FinitePositive => "must be a finite number > 0".to_string(),
            Rule::WholeAtLeast(min) => format!("must be >= {min}"),
        }
    }
}

/// A parameter an algorithm takes by name (`ach_f.window`), with its default.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    /// The name, `<algorithm>.<field>` by convention (`ch_bl.eps`).
    pub name: String,
    /// The value used when none is given.
    pub default: f64,
    /// The rule a value must follow.
    pub rule: Rule,
    /// What the rule means for this parameter, appended to the rule in error messages
    /// (`1 is plain ACH`); may be empty.
    pub why: String,
}

impl Parameter {
    /// A parameter; `why` says what the rule means for it (empty for nothing).
    pub fn new(name: &str, default: f64, rule: Rule, why: &str) -> Parameter {
        Parameter {
            name: name.to_string(),
            default,
            rule,
            why: why.to_string(),
        }
    }

    /// The rule broken by `value`, in words (`must be >= 1 (1 is plain ACH)`), or `None` when
    /// `value` follows it.
    pub fn broken_by(&self, value: f64) -> Option<String> {
        if self.rule.holds(value) {
            return None;
        }
        let rule = self.rule.describe();
        Some(if self.why.is_empty() {
            rule
        } else {
            format!("{rule} ({})", self.why)
        })
    }
}

/// What a factory builds from: the nodes' capacities, ACH's configuration and the entry's
/// parameters by name.
#[derive(Clone, Debug)]
pub struct Context<'a> {
    /// Relative capacity of every node of the initial cluster, node 0 first (the capacity
    /// classes in the simulator, the `--weight`s on a live cluster).
    pub capacities: &'a [f64],
    /// ACH's configuration: the paper's (`AchConfig::paper()`), a series' own, or the live one
    /// (`AchConfig::live()`).
    pub ach: &'a AchConfig,
    /// Parameters by name, in the order given; for a factory, the entry's parameters with the
    /// defaults filled in.
    pub parameters: Vec<(String, f64)>,
}

impl<'a> Context<'a> {
    /// A context without parameters (every parameter at its default).
    pub fn new(capacities: &'a [f64], ach: &'a AchConfig) -> Context<'a> {
        Context {
            capacities,
            ach,
            parameters: Vec::new(),
        }
    }

    /// This context with the parameter `name` set to `value` (replacing an earlier value).
    pub fn with_parameter(mut self, name: &str, value: f64) -> Context<'a> {
        self.parameters.retain(|(n, _)| n != name);
        self.parameters.push((name.to_string(), value));
        self
    }

    /// The value of the parameter `name`; an error names it when the context has none.
    pub fn parameter(&self, name: &str) -> Result<f64, BuildError> {
        self.parameters
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, value)| value)
            .ok_or_else(|| BuildError::UnknownParameter {
                algorithm: String::new(),
                parameter: name.to_string(),
                known: self.known(),
            })
    }

    fn known(&self) -> String {
        let names: Vec<&str> = self.parameters.iter().map(|(n, _)| n.as_str()).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }
}

/// Why an algorithm could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// A parameter the algorithm does not take.
    #[error("algorithm {algorithm}: unknown parameter {parameter:?} (it takes: {known})")]
    UnknownParameter {
        /// The algorithm.
        algorithm: String,
        /// The parameter given.
        parameter: String,
        /// The parameters it takes, comma-separated (`none` for none).
        known: String,
    },
    /// A parameter value that breaks its rule.
    #[error("algorithm {algorithm}: {parameter} = {value} {rule}")]
    BadParameter {
        /// The algorithm.
        algorithm: String,
        /// The parameter.
        parameter: String,
        /// The value given.
        value: f64,
        /// The rule broken.
        rule: String,
    },
    /// ACH's configuration is invalid.
    #[error("algorithm {algorithm}: {source}")]
    Ach {
        /// The algorithm.
        algorithm: String,
        /// The rule broken.
        source: ach_control::ConfigError,
    },
    /// Anything else a user's factory refuses, in words.
    #[error("algorithm {algorithm}: {message}")]
    Refused {
        /// The algorithm.
        algorithm: String,
        /// Why.
        message: String,
    },
}

impl BuildError {
    /// A refusal of a user's factory (the catalogue fills in the algorithm's name).
    pub fn refused(message: impl Into<String>) -> BuildError {
        BuildError::Refused {
            algorithm: String::new(),
            message: message.into(),
        }
    }

    /// The error with the algorithm's name filled in where the factory left it empty.
    pub fn of(mut self, name: &str) -> BuildError {
        let (BuildError::UnknownParameter { algorithm, .. }
        | BuildError::BadParameter { algorithm, .. }
        | BuildError::Ach { algorithm, .. }
        | BuildError::Refused { algorithm, .. }) = &mut self;
        if algorithm.is_empty() {
            *algorithm = name.to_string();
        }
        self
    }
}

impl From<ach_control::ConfigError> for BuildError {
    fn from(source: ach_control::ConfigError) -> BuildError {
        BuildError::Ach {
            algorithm: String::new(),
            source,
        }
    }
}

/// Builds an algorithm's balancer from a [`Context`].
pub type BalancerFactory =
    Arc<dyn Fn(&Context<'_>) -> Result<Box<dyn Balancer + Send>, BuildError> + Send + Sync>;

/// Builds the request router of an algorithm that routes requests its own way (CH-BL).
pub type RouterFactory =
    Arc<dyn Fn(&Context<'_>) -> Result<Box<dyn Router + Send>, BuildError> + Send + Sync>;

/// One algorithm of the catalogue.
#[derive(Clone)]
pub struct Entry {
    name: String,
    label: String,
    aliases: Vec<String>,
    parameters: Vec<Parameter>,
    balancer: BalancerFactory,
    router: Option<RouterFactory>,
}

impl Entry {
    /// An entry whose balancer `balancer` builds; `label` is the short name narrow tables print
    /// (`A0`; the name itself when there is no short name).
    pub fn new<F>(name: &str, label: &str, balancer: F) -> Entry
    where
        F: Fn(&Context<'_>) -> Result<Box<dyn Balancer + Send>, BuildError> + Send + Sync + 'static,
    {
        Entry {
            name: name.to_string(),
            label: label.to_string(),
            aliases: Vec::new(),
            parameters: Vec::new(),
            balancer: Arc::new(balancer),
            router: None,
        }
    }

    /// This entry with one more name a command line may use (case-insensitive).
    pub fn alias(mut self, alias: &str) -> Entry {
        self.aliases.push(alias.to_string());
        self
    }

    /// This entry with one more parameter.
    pub fn parameter(mut self, parameter: Parameter) -> Entry {
        self.parameters.push(parameter);
        self
    }

    /// This entry with a router of its own, built by `router` for each run.
    pub fn router<G>(mut self, router: G) -> Entry
    where
        G: Fn(&Context<'_>) -> Result<Box<dyn Router + Send>, BuildError> + Send + Sync + 'static,
    {
        self.router = Some(Arc::new(router));
        self
    }

    /// The name series files, records, logs and `summary.json` use (`Static-W`, `ACH`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The short name (`A0`; the name when there is none).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The other names lookup accepts.
    pub fn aliases(&self) -> &[String] {
        &self.aliases
    }

    /// The parameters it takes.
    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    /// True when it routes requests its own way (it has a router).
    pub fn routes(&self) -> bool {
        self.router.is_some()
    }

    /// A fresh balancer. Fails on a parameter the entry does not take, on a value that breaks
    /// its parameter's rule, and on whatever the factory refuses.
    pub fn balancer(&self, context: &Context<'_>) -> Result<Box<dyn Balancer + Send>, BuildError> {
        let resolved = self.resolve(context)?;
        (self.balancer)(&resolved).map_err(|e| e.of(&self.name))
    }

    /// A fresh router, or `None` when the entry routes every request to its token's owner (the
    /// model's rule, `ach_control::OwnerRouting`).
    pub fn router_for(
        &self,
        context: &Context<'_>,
    ) -> Option<Result<Box<dyn Router + Send>, BuildError>> {
        let router = self.router.as_ref()?;
        Some(
            self.resolve(context)
                .and_then(|resolved| router(&resolved).map_err(|e| e.of(&self.name))),
        )
    }

    /// The context with exactly this entry's parameters: the given values checked, the
    /// defaults for the rest.
    fn resolve<'a>(&self, context: &Context<'a>) -> Result<Context<'a>, BuildError> {
        for (name, value) in &context.parameters {
            let Some(parameter) = self.parameters.iter().find(|p| p.name == *name) else {
                return Err(BuildError::UnknownParameter {
                    algorithm: self.name.clone(),
                    parameter: name.clone(),
                    known: self.parameter_names(),
                });
            };
            if let Some(rule) = parameter.broken_by(*value) {
                return Err(BuildError::BadParameter {
                    algorithm: self.name.clone(),
                    parameter: name.clone(),
                    value: *value,
                    rule,
                });
            }
        }
        let parameters = self
            .parameters
            .iter()
            .map(|p| {
                let given = context.parameters.iter().find(|(n, _)| *n == p.name);
                (p.name.clone(), given.map_or(p.default, |&(_, v)| v))
            })
            .collect();
        Ok(Context {
            capacities: context.capacities,
            ach: context.ach,
            parameters,
        })
    }

    fn parameter_names(&self) -> String {
        let names: Vec<&str> = self.parameters.iter().map(|p| p.name.as_str()).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }

    /// Every name lookup accepts: the name, the label and the aliases.
    fn keys(&self) -> impl Iterator<Item = &str> {
        [self.name.as_str(), self.label.as_str()]
            .into_iter()
            .chain(self.aliases.iter().map(String::as_str))
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("label", &self.label)
            .field("aliases", &self.aliases)
            .field("parameters", &self.parameters)
            .field("routes", &self.routes())
            .finish()
    }
}

/// Why an entry could not be added, or a name not found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CatalogueError {
    /// The name, label or an alias is taken (lookup ignores case).
    #[error("algorithm {0:?} is already registered: give each algorithm its own name")]
    Duplicate(String),
    /// The name is empty or cannot be a file or column name.
    #[error(
        "algorithm name {0:?} must be non-empty and use only letters, digits, '_', '-', '+' and '.'"
    )]
    BadName(String),
    /// No entry has this name, label or alias.
    #[error("unknown algorithm {name:?}; expected one of {known}")]
    Unknown {
        /// The name looked up.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
}

/// The algorithms, in registration order (the order of tables and legends).
#[derive(Clone, Debug, Default)]
pub struct Catalogue {
    entries: Vec<Entry>,
}

impl Catalogue {
    /// No algorithms at all.
    pub fn empty() -> Catalogue {
        Catalogue::default()
    }

    /// The paper's algorithms in the order of its tables (A0 Static-W, A1 Static-Wt,
    /// A2 Dynamic-R, A3 Bounded-Loads, ACH), then ACH-F (ACH behind a median filter of each
    /// node's load over `ach_f.window` steps, default 5) and CH-BL (consistent hashing with
    /// bounded loads, `c = 1 + ch_bl.eps`, default 0.25: it forwards requests past full nodes
    /// and never moves a token).
    pub fn built_in() -> Catalogue {
        let entries = [
            Entry::new(names::STATIC_W, "A0", |_| Ok(Box::new(StaticW))).alias("none"),
            Entry::new(names::STATIC_WT, "A1", |context| {
                Ok(Box::new(StaticWt::new(context.capacities.to_vec())))
            }),
            Entry::new(names::DYNAMIC_R, "A2", |_| Ok(Box::new(DynamicR::paper()))),
            Entry::new(names::BOUNDED_LOADS, "A3", |_| {
                Ok(Box::new(BoundedLoads::paper()))
            }),
            Entry::new(names::ACH, names::ACH, |context| {
                Ok(Box::new(Ach::new(context.ach.clone())?))
            }),
            Entry::new(names::ACH_F, names::ACH_F, |context| {
                let ach = Ach::new(context.ach.clone())?;
                let window = context.parameter("ach_f.window")? as usize;
                Ok(Box::new(MedianFiltered::new(ach, window)))
            })
            .parameter(Parameter::new(
                "ach_f.window",
                DEFAULT_ACH_F_WINDOW as f64,
                Rule::WholeAtLeast(1),
                "1 is plain ACH",
            )),
            Entry::new(names::CH_BL, names::CH_BL, |_| Ok(Box::new(RoutingOnly)))
                .router(|context| {
                    let eps = context.parameter("ch_bl.eps")?;
                    Ok(Box::new(BoundedLoadsRouting::new(eps)))
                })
                .parameter(Parameter::new(
                    "ch_bl.eps",
                    BoundedLoadsRouting::DEFAULT_EPS,
                    Rule::FinitePositive,
                    "each node serves up to (1 + eps) times its share",
                )),
        ];
        let mut catalogue = Catalogue::empty();
        for entry in entries {
            catalogue
                .add(entry)
                .expect("the built-in names are distinct and valid");
        }
        catalogue
    }

    /// Adds an entry. Fails when its name is not a plain file name, or its name, label or an
    /// alias is already a name, label or alias of another entry (ignoring case).
    pub fn add(&mut self, entry: Entry) -> Result<(), CatalogueError> {
        let valid = !entry.name.is_empty()
            && entry
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'));
        if !valid {
            return Err(CatalogueError::BadName(entry.name));
        }
        if self.get(&entry.name).is_some() {
            return Err(CatalogueError::Duplicate(entry.name));
        }
        if let Some(taken) = entry.keys().find(|key| self.lookup(key).is_some()) {
            return Err(CatalogueError::Duplicate(taken.to_string()));
        }
        self.entries.push(entry);
        Ok(())
    }

    /// The entry called exactly `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The entry whose name, label or alias is `text`, ignoring case and surrounding blanks
    /// (`ach`, `a0`, `static-wt`); an error lists the names.
    pub fn find(&self, text: &str) -> Result<&Entry, CatalogueError> {
        self.lookup(text.trim())
            .ok_or_else(|| CatalogueError::Unknown {
                name: text.trim().to_string(),
                known: self.names(),
            })
    }

    fn lookup(&self, text: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .find(|e| e.keys().any(|key| key.eq_ignore_ascii_case(text)))
    }

    /// Every entry, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// The names, comma-separated, for error messages.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
        names.join(", ")
    }

    /// The parameter `name` of the first entry that takes it.
    pub fn parameter(&self, name: &str) -> Option<&Parameter> {
        self.entries
            .iter()
            .flat_map(|e| e.parameters.iter())
            .find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context<'a>(capacities: &'a [f64], ach: &'a AchConfig) -> Context<'a> {
        Context::new(capacities, ach)
    }

    #[test]
    fn the_built_ins_are_the_papers_five_then_ach_f_and_ch_bl() {
        let catalogue = Catalogue::built_in();
        let names: Vec<&str> = catalogue.iter().map(Entry::name).collect();
        assert_eq!(names[..5], names::PAPER);
        assert_eq!(names[5..], [names::ACH_F, names::CH_BL]);
        let labels: Vec<&str> = catalogue.iter().map(Entry::label).collect();
        assert_eq!(labels[..4], ["A0", "A1", "A2", "A3"]);
        let capacities = [1.0, 0.55, 0.25];
        for ach in [AchConfig::paper(), AchConfig::live()] {
            for entry in catalogue.iter() {
                let balancer = entry.balancer(&context(&capacities, &ach)).unwrap();
                if !entry.routes() {
                    assert_eq!(balancer.name(), entry.name());
                }
                let routes = entry
                    .router_for(&context(&capacities, &ach))
                    .map(|r| r.is_ok());
                assert_eq!(routes, (entry.name() == names::CH_BL).then_some(true));
            }
        }
    }

    #[test]
    fn lookup_ignores_case_and_knows_labels_and_aliases() {
        let catalogue = Catalogue::built_in();
        for (text, name) in [
            ("ach", names::ACH),
            ("static-w", names::STATIC_W),
            ("STATIC-WT", names::STATIC_WT),
            (" dynamic-r ", names::DYNAMIC_R),
            ("bounded-loads", names::BOUNDED_LOADS),
            ("a3", names::BOUNDED_LOADS),
            ("none", names::STATIC_W),
            ("ach-f", names::ACH_F),
            ("ch-bl", names::CH_BL),
        ] {
            assert_eq!(catalogue.find(text).unwrap().name(), name, "{text}");
        }
        let error = catalogue.find("magic").unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown algorithm \"magic\"; expected one of Static-W, Static-Wt, Dynamic-R, \
             Bounded-Loads, ACH, ACH-F, CH-BL"
        );
    }

    #[test]
    fn parameters_are_checked_by_name_and_rule() {
        let catalogue = Catalogue::built_in();
        let capacities = [1.0, 1.0];
        let ach = AchConfig::paper();
        let ch_bl = catalogue.get(names::CH_BL).unwrap();
        let at = |eps: f64| context(&capacities, &ach).with_parameter("ch_bl.eps", eps);
        assert!(ch_bl.router_for(&at(0.5)).unwrap().is_ok());
        assert_eq!(
            ch_bl
                .router_for(&at(0.0))
                .unwrap()
                .err()
                .unwrap()
                .to_string(),
            "algorithm CH-BL: ch_bl.eps = 0 must be a finite number > 0 (each node serves up \
             to (1 + eps) times its share)"
        );
        let ach_f = catalogue.get(names::ACH_F).unwrap();
        let window = |w: f64| context(&capacities, &ach).with_parameter("ach_f.window", w);
        assert!(ach_f.balancer(&window(3.0)).is_ok());
        assert!(matches!(
            ach_f.balancer(&window(2.5)),
            Err(BuildError::BadParameter { .. })
        ));
        assert_eq!(
            ach_f.balancer(&at(0.5)).err().unwrap(),
            BuildError::UnknownParameter {
                algorithm: names::ACH_F.into(),
                parameter: "ch_bl.eps".into(),
                known: "ach_f.window".into(),
            }
        );
        let mut bad = AchConfig::paper();
        bad.eps_off = 0.5;
        let error = catalogue
            .get(names::ACH)
            .unwrap()
            .balancer(&context(&capacities, &bad))
            .err()
            .unwrap();
        assert!(error.to_string().starts_with("algorithm ACH: "), "{error}");
        let window = catalogue.parameter("ach_f.window").unwrap();
        assert_eq!(
            window.broken_by(0.0).unwrap(),
            "must be >= 1 (1 is plain ACH)"
        );
        assert_eq!(window.broken_by(1.0), None);
        assert!(catalogue.parameter("nope").is_none());
    }

    #[test]
    fn bad_and_colliding_names_are_refused() {
        let mut catalogue = Catalogue::built_in();
        let entry = |name: &str, label: &str| Entry::new(name, label, |_| Ok(Box::new(StaticW)));
        assert_eq!(
            catalogue.add(entry("ACH", "x")),
            Err(CatalogueError::Duplicate("ACH".into()))
        );
        assert_eq!(
            catalogue.add(entry("ach", "x")),
            Err(CatalogueError::Duplicate("ach".into()))
        );
        assert_eq!(
            catalogue.add(entry("Mine", "a0")),
            Err(CatalogueError::Duplicate("a0".into()))
        );
        assert_eq!(
            catalogue.add(entry("a/b", "x")),
            Err(CatalogueError::BadName("a/b".into()))
        );
        assert_eq!(
            catalogue.add(entry("", "x")),
            Err(CatalogueError::BadName("".into()))
        );
        assert!(catalogue.add(entry("Mine", "M1")).is_ok());
        assert_eq!(catalogue.find("m1").unwrap().name(), "Mine");
    }

    #[test]
    fn a_refusal_names_the_algorithm() {
        let entry = Entry::new("Picky", "P", |context| {
            if context.capacities.len() < 2 {
                return Err(BuildError::refused("needs two nodes"));
            }
            Ok(Box::new(StaticW))
        });
        let ach = AchConfig::paper();
        let error = entry.balancer(&context(&[1.0], &ach)).err().unwrap();
        assert_eq!(error.to_string(), "algorithm Picky: needs two nodes");
    }
}
