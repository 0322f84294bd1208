//! The workspace's layering, checked against the manifests (`cargo metadata --no-deps`):
//!
//! - (a) every dependency goes down docs/ARCHITECTURE.md's layers: model crates on no edge
//!   crate and on no I/O crate, nothing on `xtask`, no crate on one of its own layer or above;
//! - (b) every declared dependency is used (`name::`, `use name` or `extern crate name`) where
//!   its kind requires: a normal one in the crate's library or binary sources, a dev one in any
//!   of its targets (unit tests, tests, benches, examples), a build one in its build script;
//! - (c) docs/ARCHITECTURE.md's table "Crate dependencies" lists exactly the manifests'
//!   dependencies of every workspace crate.
//!
//! Every failure names the crate, the dependency and the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The layers, lowest first: a crate may depend only on crates of a lower layer.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "model crates with no ach-* dependency",
        &["ach-ring", "ach-telemetry", "ach-stats"],
    ),
    ("the controller", &["ach-control"]),
    ("the baselines", &["ach-baselines"]),
    ("the simulator", &["ach-sim"]),
    ("edge crates", &["ach-report", "ach-redis"]),
    ("the live experiment", &["ach-live"]),
    (
        "command lines, benchmarks and examples",
        &["xtask", "ach-benches", "custom-balancer"],
    ),
];

/// The model crates: no I/O, no clock, no edge crate.
const MODEL_CRATES: &[&str] = &[
    "ach-ring",
    "ach-telemetry",
    "ach-control",
    "ach-baselines",
    "ach-stats",
    "ach-sim",
];

/// The edge crates (files, network, clocks, rendering, servers).
const EDGE_CRATES: &[&str] = &["ach-report", "ach-redis", "ach-live"];

/// Crates whose job is I/O, a clock, a terminal, rendering or a command line: a model crate
/// may not depend on them (its tests may).
const IO_CRATES: &[&str] = &[
    "redis",
    "tempfile",
    "ctrlc",
    "flate2",
    "indicatif",
    "plotters",
    "clap",
    "bincode",
    "roxmltree",
    "reqwest",
    "ureq",
    "tokio",
    "chrono",
    "time",
    "prometheus-client",
];

/// One dependency of a workspace crate, as its manifest declares it.
#[derive(Clone, Debug)]
struct Dependency {
    /// The package name (`serde_json`).
    name: String,
    /// The name in code (`serde_json`, or the rename).
    crate_name: String,
    /// `normal`, `dev` or `build`.
    kind: String,
}

/// One workspace crate.
#[derive(Debug)]
struct Package {
    name: String,
    dependencies: Vec<Dependency>,
    /// `(kind, source folder)` of every target (`lib`, `bin`, `test`, `bench`, `example`,
    /// `custom-build`).
    targets: Vec<(String, PathBuf)>,
    /// The build script, when there is one.
    build_script: Option<PathBuf>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

fn packages() -> Vec<Package> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|package| {
            let dependencies = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|dependency| {
                    let name = dependency["name"].as_str().expect("name").to_string();
                    let crate_name = dependency["rename"]
                        .as_str()
                        .unwrap_or(&name)
                        .replace('-', "_");
                    let kind = dependency["kind"].as_str().unwrap_or("normal").to_string();
                    Dependency {
                        name,
                        crate_name,
                        kind,
                    }
                })
                .collect();
            let mut targets = Vec::new();
            let mut build_script = None;
            for target in package["targets"].as_array().expect("targets") {
                let kind = target["kind"][0].as_str().expect("kind").to_string();
                let source = PathBuf::from(target["src_path"].as_str().expect("src_path"));
                if kind == "custom-build" {
                    build_script = Some(source);
                } else {
                    let folder = source.parent().expect("a source folder").to_path_buf();
                    targets.push((kind, folder));
                }
            }
            Package {
                name: package["name"].as_str().expect("name").to_string(),
                dependencies,
                targets,
                build_script,
            }
        })
        .collect()
}

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, crates)| crates.contains(&name))
}

/// Rule (a): the direction of every dependency.
fn direction_problems(packages: &[Package]) -> Vec<String> {
    let workspace: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut problems = Vec::new();
    for package in packages {
        let name = package.name.as_str();
        let Some(layer) = layer_of(name) else {
            problems.push(format!(
                "{name}: a workspace crate in no layer: add it to LAYERS of xtask/tests/layering.rs \
                 and to docs/ARCHITECTURE.md (code map, invariants, table)"
            ));
            continue;
        };
        for dependency in &package.dependencies {
            let on = dependency.name.as_str();
            let kind = &dependency.kind;
            if on == "xtask" {
                problems.push(format!(
                    "{name} depends on xtask ({kind}): nothing may depend on the command line"
                ));
            }
            if MODEL_CRATES.contains(&name) && EDGE_CRATES.contains(&on) {
                problems.push(format!(
                    "{name} depends on {on} ({kind}): a model crate may not depend on an edge crate"
                ));
            }
            if MODEL_CRATES.contains(&name) && kind != "dev" && IO_CRATES.contains(&on) {
                problems.push(format!(
                    "{name} depends on {on}: a model crate does no I/O, reads no clock and renders \
                     nothing, so it may not depend on an I/O crate"
                ));
            }
            if workspace.contains(on) {
                match layer_of(on) {
                    Some(below) if below < layer => {}
                    Some(other) => problems.push(format!(
                        "{name} depends on {on} ({kind}): {name} is in layer {layer} ({}) and may \
                         depend only on lower layers, but {on} is in layer {other} ({})",
                        LAYERS[layer].0, LAYERS[other].0
                    )),
                    None => {}
                }
            }
        }
    }
    problems
}

/// The `.rs` files under `folder`, recursively.
fn rust_files(folder: &Path, files: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name == "target") {
                continue;
            }
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.insert(path);
        }
    }
}

/// Whether `source` names crate `name` in code: `name::`, `use name` or `extern crate name`,
/// not preceded by a letter, digit, `_` or `::` (another path's segment), outside `//`
/// comments.
fn mentions(source: &str, name: &str) -> bool {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    source
        .lines()
        .map(str::trim_start)
        .filter(|line| !line.starts_with("//"))
        .any(|line| {
            line.match_indices(name).any(|(at, _)| {
                let before = &line[..at];
                let after = &line[at + name.len()..];
                if before.ends_with(is_ident) || before.ends_with("::") {
                    return false;
                }
                let used_as_path = after.starts_with("::");
                let imported = (before.trim_end().ends_with("use")
                    || before.trim_end().ends_with("extern crate"))
                    && !after.starts_with(is_ident);
                used_as_path || imported
            })
        })
}

/// The concatenated sources of the targets of `package` whose kind is in `kinds` (all when
/// `kinds` is empty).
fn sources(package: &Package, kinds: &[&str]) -> String {
    let mut files = BTreeSet::new();
    for (kind, folder) in &package.targets {
        if kinds.is_empty() || kinds.contains(&kind.as_str()) {
            rust_files(folder, &mut files);
        }
    }
    files
        .iter()
        .map(|file| std::fs::read_to_string(file).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Rule (b): every declared dependency is used where its kind requires.
fn unused_problems(packages: &[Package]) -> Vec<String> {
    let mut problems = Vec::new();
    for package in packages {
        let library_and_binaries = sources(package, &["lib", "bin", "proc-macro"]);
        let every_target = sources(package, &[]);
        let build_script = package
            .build_script
            .as_ref()
            .map(|path| std::fs::read_to_string(path).unwrap_or_default())
            .unwrap_or_default();
        for dependency in &package.dependencies {
            let (name, on, kind) = (&package.name, &dependency.name, &dependency.kind);
            let crate_name = &dependency.crate_name;
            let problem = match kind.as_str() {
                "normal" if !mentions(&library_and_binaries, crate_name) => {
                    if mentions(&every_target, crate_name) {
                        format!(
                            "{name} depends on {on} but only its tests, benches or examples use \
                             it: make it a dev-dependency"
                        )
                    } else {
                        format!(
                            "{name} depends on {on} but never uses it (no `{crate_name}::` or \
                             `use {crate_name}` in its library or binary sources): remove it"
                        )
                    }
                }
                "dev" if !mentions(&every_target, crate_name) => format!(
                    "{name} dev-depends on {on} but no test, bench, example or unit test uses it: \
                     remove it"
                ),
                "build" if !mentions(&build_script, crate_name) => format!(
                    "{name} build-depends on {on} but its build script does not use it: remove it"
                ),
                _ => continue,
            };
            problems.push(problem);
        }
        let normal: BTreeSet<&str> = package
            .dependencies
            .iter()
            .filter(|d| d.kind == "normal")
            .map(|d| d.name.as_str())
            .collect();
        for dependency in package.dependencies.iter().filter(|d| d.kind == "dev") {
            if normal.contains(dependency.name.as_str()) {
                problems.push(format!(
                    "{} dev-depends on {} which is already a normal dependency: remove the \
                     dev-dependency",
                    package.name, dependency.name
                ));
            }
        }
    }
    problems
}

/// `crate -> (depends on, dev-depends on)` as the manifests declare it.
type Table = BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)>;

fn manifest_table(packages: &[Package]) -> Table {
    packages
        .iter()
        .map(|package| {
            let of_kind = |kind: &str| {
                package
                    .dependencies
                    .iter()
                    .filter(|d| d.kind == kind)
                    .map(|d| d.name.clone())
                    .collect::<BTreeSet<_>>()
            };
            (package.name.clone(), (of_kind("normal"), of_kind("dev")))
        })
        .collect()
}

const TABLE_HEADING: &str = "## Crate dependencies";

/// The table under [`TABLE_HEADING`] of docs/ARCHITECTURE.md: `| crate | depends on |
/// dev-depends on |`, names in backticks, separated by commas, `none` for none.
fn documented_table(text: &str) -> Result<Table, String> {
    let start = text
        .find(TABLE_HEADING)
        .ok_or_else(|| format!("docs/ARCHITECTURE.md has no section {TABLE_HEADING:?}"))?;
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|cell| cell.trim().to_string())
            .collect()
    };
    let names = |cell: &str| -> BTreeSet<String> {
        cell.split(',')
            .map(|name| name.trim().trim_matches('`').to_string())
            .filter(|name| !name.is_empty() && name != "none")
            .collect()
    };
    let mut table = Table::new();
    let rows = text[start..]
        .lines()
        .skip(1)
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2);
    for (number, line) in rows.enumerate() {
        let row = cells(line);
        if row.len() != 3 {
            return Err(format!(
                "docs/ARCHITECTURE.md, {TABLE_HEADING}, row {}: {} cells, expected 3 (crate, \
                 depends on, dev-depends on): {line}",
                number + 1,
                row.len()
            ));
        }
        let name = row[0].trim_matches('`').to_string();
        table.insert(name, (names(&row[1]), names(&row[2])));
    }
    Ok(table)
}

/// Rule (c): the documented table is the manifests'.
fn table_problems(manifests: &Table, documented: &Table) -> Vec<String> {
    let mut problems = Vec::new();
    let crates: BTreeSet<&String> = manifests.keys().chain(documented.keys()).collect();
    for name in crates {
        let (Some(manifest), Some(doc)) = (manifests.get(name), documented.get(name)) else {
            if manifests.contains_key(name) {
                problems.push(format!(
                    "{name}: a workspace crate missing from docs/ARCHITECTURE.md's table"
                ));
            } else {
                problems.push(format!(
                    "{name}: in docs/ARCHITECTURE.md's table but not a workspace crate"
                ));
            }
            continue;
        };
        for (column, declared, written) in [
            ("depends on", &manifest.0, &doc.0),
            ("dev-depends on", &manifest.1, &doc.1),
        ] {
            for missing in declared.difference(written) {
                problems.push(format!(
                    "{name} {column} {missing} (its manifest), but docs/ARCHITECTURE.md's table \
                     does not say so"
                ));
            }
            for extra in written.difference(declared) {
                problems.push(format!(
                    "docs/ARCHITECTURE.md's table says {name} {column} {extra}, but its manifest \
                     does not"
                ));
            }
        }
    }
    problems
}

fn assert_none(rule: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{rule}:\n  {}", problems.join("\n  "));
}

#[test]
fn dependencies_go_down_the_layers() {
    assert_none(
        "dependencies against docs/ARCHITECTURE.md's direction",
        &direction_problems(&packages()),
    );
}

#[test]
fn every_declared_dependency_is_used() {
    assert_none("unused dependencies", &unused_problems(&packages()));
}

#[test]
fn the_architecture_table_is_the_manifests() {
    let text = std::fs::read_to_string(workspace_root().join("docs/ARCHITECTURE.md"))
        .expect("docs/ARCHITECTURE.md");
    let documented = documented_table(&text).unwrap_or_else(|error| panic!("{error}"));
    assert_none(
        "docs/ARCHITECTURE.md's table of crate dependencies differs from the manifests",
        &table_problems(&manifest_table(&packages()), &documented),
    );
}

#[test]
fn the_rules_catch_what_they_name() {
    let package = |name: &str, dependencies: &[(&str, &str)]| Package {
        name: name.into(),
        dependencies: dependencies
            .iter()
            .map(|(on, kind)| Dependency {
                name: (*on).into(),
                crate_name: on.replace('-', "_"),
                kind: (*kind).into(),
            })
            .collect(),
        targets: Vec::new(),
        build_script: None,
    };
    let problems = direction_problems(&[
        package("ach-sim", &[("ach-report", "normal"), ("tempfile", "dev")]),
        package("ach-ring", &[("redis", "normal")]),
        package("ach-report", &[("xtask", "dev"), ("ach-redis", "normal")]),
        package("ach-redis", &[]),
        package("xtask", &[]),
        package("ach-new", &[]),
    ]);
    let expect = |fragment: &str| {
        assert!(
            problems.iter().any(|p| p.contains(fragment)),
            "{fragment:?} not in {problems:#?}"
        );
    };
    expect("ach-sim depends on ach-report (normal): a model crate may not depend on an edge crate");
    expect("ach-ring depends on redis: a model crate does no I/O");
    expect("ach-report depends on xtask (dev): nothing may depend on the command line");
    expect("ach-report depends on ach-redis (normal): ach-report is in layer 4");
    expect("ach-new: a workspace crate in no layer");
    assert!(
        !problems.iter().any(|p| p.contains("tempfile")),
        "a model crate's tests may use tempfile: {problems:#?}"
    );

    assert!(mentions("use serde::Serialize;", "serde"));
    assert!(mentions(
        "    let x = serde_json::to_string(&y);",
        "serde_json"
    ));
    assert!(mentions("use rand_distr;", "rand_distr"));
    assert!(!mentions("use serde_json::Value;", "serde"));
    assert!(!mentions("// serde::Serialize is derived", "serde"));
    assert!(!mentions("use ach_redis::local::tempfile_dir;", "tempfile"));
    assert!(!mentions("let clap = 1;", "clap"));

    let manifests = manifest_table(&[package(
        "ach-stats",
        &[("statrs", "normal"), ("proptest", "dev")],
    )]);
    let documented = documented_table(
        "## Crate dependencies\n\n| Crate | Depends on | Dev-depends on |\n|---|---|---|\n\
         | `ach-stats` | `statrs`, `libm` | none |\n",
    )
    .unwrap();
    let problems = table_problems(&manifests, &documented);
    assert_eq!(
        problems,
        vec![
            "docs/ARCHITECTURE.md's table says ach-stats depends on libm, but its manifest does not"
                .to_string(),
            "ach-stats dev-depends on proptest (its manifest), but docs/ARCHITECTURE.md's table \
             does not say so"
                .to_string(),
        ]
    );
}
