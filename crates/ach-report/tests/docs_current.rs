//! The docs' generated tables, numbers and figures are current: they are what the saved datasets
//! in `docs/data` give, and the saved datasets are what the code computes today.

use std::path::{Path, PathBuf};

use ach_report::experiments;
use ach_report::report::docs::{self, SavedRun};

fn docs_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

#[test]
fn every_generated_part_of_the_docs_is_current() {
    let stale = docs::check(&docs_folder()).expect("the docs and their data read");
    assert!(
        stale.is_empty(),
        "generated parts differ from the saved data: {stale:?}; run `cargo xtask docs`"
    );
}

#[test]
fn the_saved_datasets_are_what_the_code_computes_today() {
    let docs = docs_folder();
    let manifest = docs::read_manifest(&docs).expect("docs/data/datasets.toml reads");
    assert!(
        manifest.dataset.len() >= 4,
        "the datasets of the docs are listed"
    );
    let scratch = std::env::temp_dir().join(format!("ach-docs-test-{}", std::process::id()));
    for spec in &manifest.dataset {
        let dataset = docs::read_dataset(&docs, spec).expect("the dataset reads");
        let rerun = spec.command();
        // The command's configurations today are the saved ones.
        let plan = experiments::plan(&spec.args(&scratch)).expect("the dataset's command plans");
        let names: Vec<&str> = plan.series.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, dataset.runs.series, "{}: series; {rerun}", spec.name);
        for (config, saved) in plan.series.iter().zip(&dataset.config_texts) {
            let today = toml::to_string(config).unwrap();
            assert!(
                &today == saved,
                "{}: the configuration of {} changed; {rerun}",
                spec.name,
                config.name
            );
        }
        // Every run is saved, with today's fingerprint.
        let stale = dataset.stale_runs();
        assert!(stale.is_empty(), "{}: {stale:?}; {rerun}", spec.name);
        // The first run of every series, rerun now, gives the saved aggregates bit for bit.
        for job in dataset.sample_jobs() {
            let record = job.run(dataset.runs.profile).expect("the run runs");
            let saved = dataset.saved(&job).expect("the run is saved");
            assert_eq!(
                &SavedRun::of(&record),
                saved,
                "{}: {} differs from the saved run; {rerun}",
                spec.name,
                job.id()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
