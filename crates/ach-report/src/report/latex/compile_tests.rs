//! Every generated table and figure compiled with Debian's pdflatex in a standard two-column
//! `article`: the tables of the default run (the docs' saved `matrix` dataset, 30 runs per
//! series) and of the saved datasets beyond it, and a page with every figure of a report. A
//! LaTeX error, an overfull `\hbox` wider than 1 pt, a float too large for the page, or a table
//! wider than the width it is meant for fails the test; pdflatex missing fails it too.
//!
//! Prints each table's measured width and height (`--nocapture`), and leaves the documents
//! and their PDFs in `target/latex-compile/` for a look (`pdftoppm -png`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{LatexTable, PREAMBLE, Placement, render};
use crate::report::builders::build_tables;
use crate::report::docs;

/// What installs the TeX this test needs on Debian.
const INSTALL: &str = "apt-get install texlive-latex-base texlive-latex-recommended texlive-latex-extra texlive-science poppler-utils fonts-dejavu-core";

/// The overfull boxes a document may have: none wider than this, in points.
const OVERFULL_TOLERANCE_PT: f64 = 1.0;

fn folder(name: &str) -> PathBuf {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/latex-compile")
        .join(name);
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("the test folder is created");
    folder
}

/// Runs pdflatex on `folder/<stem>.tex`; returns its log. pdflatex missing fails the test.
fn pdflatex(folder: &Path, stem: &str) -> String {
    let output = Command::new("pdflatex")
        .args(["-interaction=nonstopmode", "-halt-on-error"])
        .arg(format!("{stem}.tex"))
        .current_dir(folder)
        .output()
        .unwrap_or_else(|e| panic!("pdflatex cannot run ({e}): install TeX Live with `{INSTALL}`"));
    let log = std::fs::read_to_string(folder.join(format!("{stem}.log"))).unwrap_or_default();
    assert!(
        output.status.success(),
        "{}: pdflatex failed:\n{}",
        folder.join(stem).display(),
        log.lines()
            .filter(|l| l.starts_with('!') || l.starts_with("l."))
            .collect::<Vec<_>>()
            .join("\n")
    );
    log
}

/// The problems of a log: errors, overfull boxes past the tolerance, floats too large.
fn problems(log: &str) -> Vec<String> {
    log.lines()
        .filter(|line| {
            if line.starts_with('!') || line.contains("Float too large") {
                return true;
            }
            line.strip_prefix("Overfull \\hbox (")
                .and_then(|rest| rest.split_once("pt too wide"))
                .and_then(|(points, _)| points.parse::<f64>().ok())
                .is_some_and(|points| points > OVERFULL_TOLERANCE_PT)
        })
        .map(str::to_string)
        .collect()
}

/// The `WIDTH <name> <width>pt <height>pt` lines the probe writes to the log.
fn measured(log: &str, name: &str) -> (f64, f64) {
    let line = log
        .lines()
        .find_map(|l| l.strip_prefix(&format!("MEASURED {name} ")))
        .unwrap_or_else(|| panic!("{name}: no measurement in the log"));
    let points: Vec<f64> = line
        .split_whitespace()
        .map(|p| p.trim_end_matches("pt").parse().expect("a length in pt"))
        .collect();
    (points[0], points[1] + points[2])
}

/// The document of one table: its tabular measured, then inside the float it is meant for,
/// then its ready float.
fn table_document(part: &LatexTable) -> String {
    let environment = part.placement.environment();
    format!(
        "\\documentclass[twocolumn]{{article}}\n\\input{{preamble.tex}}\n\\newsavebox\\probe\n\
\\begin{{document}}\n\
\\sbox\\probe{{\\input{{{name}.tex}}}}\n\
\\typeout{{MEASURED {name} \\the\\wd\\probe\\space\\the\\ht\\probe\\space\\the\\dp\\probe}}\n\
\\begin{{{environment}}}[tbp]\n\\centering\n\\input{{{name}.tex}}\n\\end{{{environment}}}\n\
\\clearpage\n\\input{{{name}_float.tex}}\n\\end{{document}}\n",
        name = part.name
    )
}

/// A part's name, float, estimated width, measured width and height (pt).
type Size = (String, Placement, f64, f64, f64);

/// Compiles every part of `tables`; returns `(name, placement, width, height)` per part and
/// the problems found.
fn compile_tables(
    dataset: &str,
    tables: &[&crate::report::tables::Table],
) -> (Vec<Size>, Vec<String>) {
    let folder = folder(dataset);
    std::fs::write(folder.join("preamble.tex"), PREAMBLE).unwrap();
    let mut sizes = Vec::new();
    let mut problems_found = Vec::new();
    for table in tables {
        for part in render(table) {
            std::fs::write(folder.join(format!("{}.tex", part.name)), &part.tabular).unwrap();
            std::fs::write(folder.join(format!("{}_float.tex", part.name)), &part.float).unwrap();
            let stem = format!("compile_{}", part.name);
            std::fs::write(folder.join(format!("{stem}.tex")), table_document(&part)).unwrap();
            let log = pdflatex(&folder, &stem);
            let (width, height) = measured(&log, &part.name);
            for problem in problems(&log) {
                problems_found.push(format!("{dataset}/{}: {problem}", part.name));
            }
            if width > part.placement.width_pt() + OVERFULL_TOLERANCE_PT {
                problems_found.push(format!(
                    "{dataset}/{}: {width} pt wide, more than the {} pt of a {}",
                    part.name,
                    part.placement.width_pt(),
                    part.placement.environment()
                ));
            }
            sizes.push((
                part.name.clone(),
                part.placement,
                part.estimated_width_pt,
                width,
                height,
            ));
        }
    }
    (sizes, problems_found)
}

#[test]
fn every_table_of_the_saved_datasets_compiles_and_fits_a_two_column_page() {
    let docs_folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let manifest = docs::read_manifest(&docs_folder).expect("docs/data/datasets.toml reads");
    let mut all_problems = Vec::new();
    // `ACH_LATEX_DATASET=matrix` compiles the tables of one dataset only.
    let only = std::env::var("ACH_LATEX_DATASET").ok();
    for spec in &manifest.dataset {
        if only.as_ref().is_some_and(|name| *name != spec.name) {
            continue;
        }
        let dataset = docs::read_dataset(&docs_folder, spec).expect("the dataset reads");
        let report_tables = build_tables(&dataset.results());
        let (sizes, problems) = compile_tables(&spec.name, &report_tables.all());
        println!(
            "{}: every table's float, estimated width, measured width x height (pt)",
            spec.name
        );
        for (name, placement, estimated, width, height) in &sizes {
            println!(
                "  {name:<40} {:<7} {estimated:>6.1} {width:>6.1} x {height:>6.1}",
                placement.environment()
            );
        }
        all_problems.extend(problems);
    }
    assert!(all_problems.is_empty(), "{all_problems:#?}");
}

#[test]
fn every_figure_of_a_report_compiles_on_one_page_set() {
    let out = folder("figures_report");
    crate::report::tests::write_synthetic_results(&out);
    crate::report::render(&out).expect("the report renders");
    let mut pdfs: Vec<String> = std::fs::read_dir(out.join("figures"))
        .expect("figures")
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.ends_with(".pdf").then_some(name)
        })
        .collect();
    pdfs.sort();
    assert!(pdfs.len() >= 19, "{pdfs:?}");
    let mut body = String::new();
    for pdf in &pdfs {
        body.push_str(&format!(
            "\\noindent\\includegraphics{{figures/{pdf}}}\\par\\medskip\n"
        ));
    }
    std::fs::write(
        out.join("figures_page.tex"),
        format!(
            "\\documentclass[twocolumn]{{article}}\n\\usepackage{{graphicx}}\n\\begin{{document}}\n{body}\\end{{document}}\n"
        ),
    )
    .unwrap();
    let log = pdflatex(&out, "figures_page");
    let found = problems(&log);
    assert!(found.is_empty(), "{found:#?}");
}
