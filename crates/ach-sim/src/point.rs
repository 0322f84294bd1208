//! A sweep point's configuration: the series with the point's fields set by their dotted path
//! (and the fields linked to them).
//!
//! This module does no I/O; it only computes configurations.

use crate::config::{ConfigError, NodeClass, SeriesConfig};
use crate::sweep::{Sweep, SweepPoint, resolve_path};

/// Why a field of a sweep point could not be set: the rule broken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// The value is NaN or infinite.
    #[error("must be a finite number")]
    NotFinite,
    /// A count field given a fraction or a negative number.
    #[error("must be a whole number >= 0 for this field")]
    NotWhole,
    /// A cluster path that leaves no node.
    #[error("leaves the cluster without nodes")]
    NoNodes,
    /// The path names no field of the series.
    #[error(
        "must name a numeric field of the series (a dotted path such as noise.sigma, or \
         cluster.nodes, cluster.strong, cluster.medium, cluster.weak)"
    )]
    UnknownPath,
    /// The path names a table or a list.
    #[error("must name a numeric field of the series, not a table or list")]
    NotNumeric,
    /// The series does not accept the value there (the parser's words).
    #[error("is not accepted: {0}")]
    Rejected(String),
}

impl SeriesConfig {
    /// This series with the fields of a sweep point set (and the fields linked to them).
    /// The error names the sweep field, the value and the rule broken; [`Self::validate`]
    /// checks every point, so a validated series' points never fail.
    pub fn at_point(&self, point: &SweepPoint) -> Result<SeriesConfig, ConfigError> {
        let mut c = self.clone();
        let links = self.sweep.as_ref().map(Sweep::links).unwrap_or_default();
        for coordinate in &point.coordinates {
            let path = resolve_path(&coordinate.parameter);
            let fail = |rule: String| ConfigError {
                series: self.name.clone(),
                field: format!("sweep.{}", coordinate.parameter),
                value: coordinate.value.to_string(),
                rule,
            };
            set_field(&mut c, path, coordinate.value).map_err(|rule| fail(rule.to_string()))?;
            for (target, _, ratio) in links.iter().filter(|(_, of, _)| of == path) {
                let linked = ratio * coordinate.value;
                set_field(&mut c, target, linked).map_err(|rule| {
                    fail(format!(
                        "gives the linked field {target} = {linked} which {rule}"
                    ))
                })?;
            }
        }
        Ok(c)
    }
}

/// Sets the field at `path` (resolved, see [`resolve_path`]) of `config` to `value`. The error
/// is the rule broken.
pub fn set_field(config: &mut SeriesConfig, path: &str, value: f64) -> Result<(), FieldError> {
    if !value.is_finite() {
        return Err(FieldError::NotFinite);
    }
    if let Some(class) = path.strip_prefix("cluster.") {
        let counts = class_counts(&config.cluster.classes);
        let new_counts = match class {
            "nodes" => Some(proportional_counts(&counts, whole_count(value)?)),
            "strong" | "medium" | "weak" => {
                let k = ["strong", "medium", "weak"]
                    .iter()
                    .position(|c| *c == class)
                    .expect("one of the three");
                let mut c = counts;
                c[k] = whole_count(value)?;
                Some(c)
            }
            _ => None,
        };
        if let Some(counts) = new_counts {
            if counts.iter().sum::<usize>() == 0 {
                return Err(FieldError::NoNodes);
            }
            config.cluster.classes = grouped_classes(&counts);
            return Ok(());
        }
    }
    // The sweep itself is not a target and stays out of the round trip (whose maps would
    // reorder its fields).
    let sweep = config.sweep.take();
    let result = set_plain_field(config, path, value);
    config.sweep = sweep;
    result
}

/// [`set_field`] for a field of the series file, through its JSON form (exact for numbers).
fn set_plain_field(config: &mut SeriesConfig, path: &str, value: f64) -> Result<(), FieldError> {
    let mut tree =
        serde_json::to_value(&*config).map_err(|e| FieldError::Rejected(e.to_string()))?;
    let mut slot = &mut tree;
    for segment in path.split('.') {
        slot = slot
            .as_object_mut()
            .and_then(|object| object.get_mut(segment))
            .ok_or(FieldError::UnknownPath)?;
    }
    let serde_json::Value::Number(current) = slot else {
        return Err(FieldError::NotNumeric);
    };
    *slot = if current.is_f64() {
        serde_json::Value::from(value)
    } else {
        serde_json::Value::from(whole_count(value)? as u64)
    };
    *config = serde_json::from_value(tree).map_err(|e| FieldError::Rejected(e.to_string()))?;
    Ok(())
}

fn whole_count(value: f64) -> Result<usize, FieldError> {
    if value >= 0.0 && value.fract() == 0.0 && value <= 1e15 {
        Ok(value as usize)
    } else {
        Err(FieldError::NotWhole)
    }
}

const CLASSES: [NodeClass; 3] = [NodeClass::Strong, NodeClass::Medium, NodeClass::Weak];

fn class_counts(classes: &[NodeClass]) -> [usize; 3] {
    let mut counts = [0; 3];
    for class in classes {
        let k = CLASSES.iter().position(|c| c == class).expect("a class");
        counts[k] += 1;
    }
    counts
}

fn grouped_classes(counts: &[usize; 3]) -> Vec<NodeClass> {
    CLASSES
        .iter()
        .zip(counts)
        .flat_map(|(&class, &n)| std::iter::repeat_n(class, n))
        .collect()
}

/// `total` split in the proportions of `counts`: floors first, then one more to the largest
/// remainders (ties to the earlier class).
fn proportional_counts(counts: &[usize; 3], total: usize) -> [usize; 3] {
    let sum: usize = counts.iter().sum();
    let mut out = [0; 3];
    let mut remainders = [(0usize, 0usize); 3];
    for k in 0..3 {
        let exact = counts[k] * total;
        out[k] = exact / sum;
        remainders[k] = (exact % sum, k);
    }
    let mut left = total - out.iter().sum::<usize>();
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, k) in &remainders {
        if left == 0 {
            break;
        }
        out[k] += 1;
        left -= 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_paths_keep_the_class_proportions() {
        assert_eq!(proportional_counts(&[3, 4, 3], 100), [30, 40, 30]);
        assert_eq!(proportional_counts(&[3, 4, 3], 1000), [300, 400, 300]);
        assert_eq!(proportional_counts(&[3, 4, 3], 15), [5, 6, 4]);
        let mut c = SeriesConfig::default();
        set_field(&mut c, "cluster.nodes", 20.0).unwrap();
        assert_eq!(class_counts(&c.cluster.classes), [6, 8, 6]);
        set_field(&mut c, "cluster.weak", 1.0).unwrap();
        assert_eq!(class_counts(&c.cluster.classes), [6, 8, 1]);
        assert_eq!(c.cluster.classes.last(), Some(&NodeClass::Weak));
    }

    #[test]
    fn fields_are_set_by_path_with_their_type_checked() {
        let mut c = SeriesConfig::default();
        set_field(&mut c, "noise.sigma", 0.05).unwrap();
        set_field(&mut c, "tokens", 2000.0).unwrap();
        set_field(&mut c, "load.lambda", 100.5).unwrap();
        set_field(&mut c, "ach.M_max", 0.5).unwrap();
        assert_eq!(c.noise.sigma, 0.05);
        assert_eq!(c.tokens, 2000);
        assert_eq!(c.load.rate(0), 100.5);
        assert_eq!(c.ach.m_max, 0.5);
        assert_eq!(set_field(&mut c, "tokens", 2.5), Err(FieldError::NotWhole));
        assert!(set_field(&mut c, "noise.bogus", 1.0).is_err());
        assert!(set_field(&mut c, "noise", 1.0).is_err());
        assert!(set_field(&mut c, "cluster.classes", 1.0).is_err());
    }
}
