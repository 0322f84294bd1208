//! `cargo xtask stats FILE.csv --x COLUMN --y COLUMN [--json]`: paired statistics of two
//! columns of a CSV file, computed by `ach-stats`.
//!
//! The command prints the Wilcoxon signed-rank test of `x - y` in scipy's and in R's
//! conventions, Cliff's delta of `x` against `y` with its 95 % interval and magnitude label, and
//! the mean with its Student t 95 % interval of each column. With `--json` it prints the same as
//! one JSON object whose `wilcoxon` list covers every combination of scipy's `zero_method`,
//! `method`, `correction` and `alternative`.
//!
//! Input errors (unreadable file, missing column, a cell that is not a finite number, too few
//! rows) are reported on stderr naming the file, the row, the column and the rule, and the
//! command exits with status 2. Rows are numbered as a spreadsheet numbers them: the header is
//! row 1.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use ach_stats::{
    Alternative, CliffCiOptions, Convention, Summary, WilcoxonMethod, WilcoxonOptions,
    WilcoxonResult, ZeroMethod, cliffs_delta_ci, wilcoxon,
};
use serde_json::{Value, json};

/// Arguments of `cargo xtask stats`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The CSV file (comma-separated, header row first, optional double quotes).
    pub file: PathBuf,
    /// The column holding the first sample (x, the treatment).
    #[arg(long = "x", value_name = "COLUMN")]
    pub x_column: String,
    /// The column holding the second sample (y, the control), paired with x by row.
    #[arg(long = "y", value_name = "COLUMN")]
    pub y_column: String,
    /// Print the results as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command; returns status 2 for any input error.
pub fn run(args: Args) -> ExitCode {
    match execute(&args) {
        Ok(output) => {
            print!("{output}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Reads the file and renders the report, or returns the error message.
fn execute(args: &Args) -> Result<String, String> {
    let display = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file)
        .map_err(|error| format!("{display}: cannot read the file: {error}"))?;
    let columns = read_paired_columns(&display, &text, &args.x_column, &args.y_column)?;
    let report = Report::compute(&display, &columns)?;
    Ok(if args.json {
        let mut rendered =
            serde_json::to_string_pretty(&report.to_json()).expect("JSON values always render");
        rendered.push('\n');
        rendered
    } else {
        report.to_text()
    })
}

/// The two parsed columns.
#[derive(Debug, Clone, PartialEq)]
struct PairedColumns {
    x_name: String,
    y_name: String,
    x: Vec<f64>,
    y: Vec<f64>,
}

/// Splits one CSV line into fields: commas separate fields, a field may be enclosed in double
/// quotes (a doubled quote inside stands for one quote), and surrounding spaces are trimmed.
fn split_csv_line(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut in_quotes = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, in_quotes) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', true) => in_quotes = false,
            ('"', false) if field.trim().is_empty() => {
                field.clear();
                in_quotes = true;
            }
            (',', false) => fields.push(std::mem::take(&mut field).trim().to_string()),
            (c, _) => field.push(c),
        }
    }
    if in_quotes {
        return Err("a quoted field is not closed".to_string());
    }
    fields.push(field.trim().to_string());
    Ok(fields)
}

/// Parses the CSV text and extracts the two columns, with errors naming file, row and column.
fn read_paired_columns(
    file: &str,
    text: &str,
    x_column: &str,
    y_column: &str,
) -> Result<PairedColumns, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim_end_matches('\r')))
        .filter(|(_, line)| !line.trim().is_empty());
    let (header_row, header_line) = lines
        .next()
        .ok_or_else(|| format!("{file}: the file is empty; a header row is required"))?;
    let header =
        split_csv_line(header_line).map_err(|e| format!("{file}: row {header_row}: {e}"))?;
    let find = |name: &str| -> Result<usize, String> {
        header
            .iter()
            .position(|column| column == name)
            .ok_or_else(|| {
                let available: Vec<String> = header.iter().map(|c| format!("\"{c}\"")).collect();
                format!(
                    "{file}: there is no column \"{name}\"; the available columns are {}",
                    available.join(", ")
                )
            })
    };
    let x_index = find(x_column)?;
    let y_index = find(y_column)?;

    let mut x = Vec::new();
    let mut y = Vec::new();
    for (row, line) in lines {
        let fields = split_csv_line(line).map_err(|e| format!("{file}: row {row}: {e}"))?;
        for (index, name, values) in [(x_index, x_column, &mut x), (y_index, y_column, &mut y)] {
            let cell = fields.get(index).ok_or_else(|| {
                format!(
                    "{file}: row {row} has {} fields, so column \"{name}\" (field {}) is missing",
                    fields.len(),
                    index + 1
                )
            })?;
            values.push(parse_cell(file, row, name, cell)?);
        }
    }
    if x.len() < 2 {
        return Err(format!(
            "{file}: {} data rows, but the paired statistics need at least 2",
            x.len()
        ));
    }
    Ok(PairedColumns {
        x_name: x_column.to_string(),
        y_name: y_column.to_string(),
        x,
        y,
    })
}

fn parse_cell(file: &str, row: usize, column: &str, cell: &str) -> Result<f64, String> {
    if cell.is_empty() {
        return Err(format!(
            "{file}: row {row}, column \"{column}\": the cell is empty, but every row needs a \
             number in both columns"
        ));
    }
    match cell.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value),
        Ok(_) => Err(format!(
            "{file}: row {row}, column \"{column}\": \"{cell}\" is not a finite number"
        )),
        Err(_) => Err(format!(
            "{file}: row {row}, column \"{column}\": \"{cell}\" is not a number"
        )),
    }
}

/// One Wilcoxon run with its options.
struct WilcoxonEntry {
    options: WilcoxonOptions,
    outcome: Result<WilcoxonResult, String>,
}

/// Everything the command prints.
struct Report {
    file: String,
    x_name: String,
    y_name: String,
    n: usize,
    scipy: Vec<WilcoxonEntry>,
    r: Vec<WilcoxonEntry>,
    cliff: Result<ach_stats::CliffsDeltaCi, String>,
    summary_x: Summary,
    summary_y: Summary,
}

impl Report {
    fn compute(file: &str, columns: &PairedColumns) -> Result<Self, String> {
        let (x, y) = (&columns.x, &columns.y);
        let run = |options: WilcoxonOptions| WilcoxonEntry {
            options,
            outcome: wilcoxon(x, y, &options).map_err(|error| error.to_string()),
        };
        let mut scipy = Vec::new();
        for zero_method in ZeroMethod::ALL {
            for method in WilcoxonMethod::ALL {
                for correction in [false, true] {
                    for alternative in Alternative::ALL {
                        scipy.push(run(WilcoxonOptions {
                            convention: Convention::Scipy,
                            zero_method,
                            method,
                            correction,
                            alternative,
                        }));
                    }
                }
            }
        }
        let mut r = Vec::new();
        for correction in [true, false] {
            for alternative in Alternative::ALL {
                r.push(run(WilcoxonOptions {
                    correction,
                    ..WilcoxonOptions::r_default()
                }
                .with_alternative(alternative)));
            }
        }
        let summary = |name: &str, values: &[f64]| {
            Summary::of(values).map_err(|error| format!("{file}: column \"{name}\": {error}"))
        };
        Ok(Self {
            file: file.to_string(),
            x_name: columns.x_name.clone(),
            y_name: columns.y_name.clone(),
            n: x.len(),
            scipy,
            r,
            cliff: cliffs_delta_ci(x, y, &CliffCiOptions::default())
                .map_err(|error| error.to_string()),
            summary_x: summary(&columns.x_name, x)?,
            summary_y: summary(&columns.y_name, y)?,
        })
    }

    fn to_json(&self) -> Value {
        let entry_json = |entry: &WilcoxonEntry| {
            let options = &entry.options;
            let mut value = json!({
                "zero_method": options.zero_method.name(),
                "method": options.method.name(),
                "correction": options.correction,
                "alternative": options.alternative.name(),
            });
            match &entry.outcome {
                Ok(result) => {
                    value["statistic"] = json!(result.statistic);
                    value["pvalue"] = json!(result.pvalue);
                    value["resolved_method"] = json!(result.resolved_method);
                    if let Some(z) = result.zstatistic {
                        value["zstatistic"] = json!(z);
                    }
                    if !result.warnings.is_empty() {
                        let messages: Vec<&str> =
                            result.warnings.iter().map(|w| w.message()).collect();
                        value["warnings"] = json!(messages);
                    }
                }
                Err(message) => {
                    value["statistic"] = Value::Null;
                    value["pvalue"] = Value::Null;
                    value["error"] = json!(message);
                }
            }
            value
        };
        let summary_json = |summary: &Summary| {
            json!({
                "n": summary.n,
                "mean": summary.mean,
                "sd": summary.sd,
                "ci95_half_width": summary.ci95_half_width,
            })
        };
        let cliff = match &self.cliff {
            Ok(ci) => json!({
                "delta": ci.estimate.delta,
                "magnitude": ci.estimate.magnitude.name(),
                "ci_low": ci.lower,
                "ci_high": ci.upper,
                "confidence_level": ci.confidence_level,
                "variance": "unbiased",
                "quantile": "student-t",
            }),
            Err(message) => json!({ "error": message }),
        };
        json!({
            "file": self.file,
            "x": self.x_name,
            "y": self.y_name,
            "n": self.n,
            "wilcoxon": self.scipy.iter().map(entry_json).collect::<Vec<_>>(),
            "wilcoxon_r": self.r.iter().map(|entry| {
                let mut value = entry_json(entry);
                if let Some(object) = value.as_object_mut() {
                    object.remove("zero_method");
                    object.remove("method");
                    object.insert("exact".to_string(), json!("NULL (default)"));
                }
                value
            }).collect::<Vec<_>>(),
            "cliffs_delta": cliff,
            "summary_x": summary_json(&self.summary_x),
            "summary_y": summary_json(&self.summary_y),
        })
    }

    fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}: x = \"{}\", y = \"{}\", {} pairs (differences x - y)",
            self.file, self.x_name, self.y_name, self.n
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Wilcoxon signed-rank test, scipy convention (scipy.stats.wilcoxon defaults: \
             zero_method=wilcox, correction=False, method=auto; statistic = min(R+, R-) when \
             two-sided, else R+)"
        );
        for entry in self.scipy.iter().filter(|entry| {
            let defaults = WilcoxonOptions::scipy_default();
            entry.options.zero_method == defaults.zero_method
                && entry.options.method == defaults.method
                && entry.options.correction == defaults.correction
        }) {
            write_wilcoxon_line(&mut out, entry, "statistic");
        }
        let _ = writeln!(
            out,
            "Wilcoxon signed-rank test, R convention (wilcox.test(x, y, paired = TRUE): zeros \
             dropped, correct = TRUE, exact only for n < 50 without ties or zeros; V = R+)"
        );
        for entry in self.r.iter().filter(|entry| entry.options.correction) {
            write_wilcoxon_line(&mut out, entry, "V");
        }
        let _ = writeln!(
            out,
            "  (all {} scipy combinations of zero_method, method, correction and alternative: \
             use --json)",
            self.scipy.len()
        );
        let _ = writeln!(out);
        match &self.cliff {
            Ok(ci) => {
                let _ = writeln!(
                    out,
                    "Cliff's delta (x vs y as independent samples): {:.6} ({}), 95% CI [{:.6}, \
                     {:.6}] (effsize defaults: unbiased variance, Student t)",
                    ci.estimate.delta,
                    ci.estimate.magnitude.name(),
                    ci.lower,
                    ci.upper
                );
            }
            Err(message) => {
                let _ = writeln!(out, "Cliff's delta: not available: {message}");
            }
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "Mean +- Student t 95% CI half width (sd)");
        for (name, summary) in [
            (&self.x_name, &self.summary_x),
            (&self.y_name, &self.summary_y),
        ] {
            let _ = writeln!(
                out,
                "  {name}: {:.6} +- {:.6} (sd {:.6}, n {})",
                summary.mean, summary.ci95_half_width, summary.sd, summary.n
            );
        }
        out
    }
}

fn write_wilcoxon_line(out: &mut String, entry: &WilcoxonEntry, statistic_name: &str) {
    let alternative = entry.options.alternative.name();
    match &entry.outcome {
        Ok(result) => {
            let method = match result.resolved_method {
                ach_stats::ResolvedMethod::Exact => "exact",
                ach_stats::ResolvedMethod::Asymptotic => "normal approximation",
                ach_stats::ResolvedMethod::Permutation => "exhaustive sign-flip permutation",
            };
            let _ = write!(
                out,
                "  {alternative:>9}: {statistic_name} = {}, p = {:.6e} ({method})",
                result.statistic, result.pvalue
            );
            for warning in &result.warnings {
                let _ = write!(out, "; warning: {}", warning.message());
            }
            let _ = writeln!(out);
        }
        Err(message) => {
            let _ = writeln!(out, "  {alternative:>9}: not available: {message}");
        }
    }
}

/// Exposes the parsing and reporting logic to the CLI test without a process.
#[cfg(test)]
mod tests {
    use super::*;

    fn columns(text: &str) -> Result<PairedColumns, String> {
        read_paired_columns("data.csv", text, "ach", "base")
    }

    #[test]
    fn bad_cell_names_file_row_and_column() {
        let text = "run,ach,base\n1,0.9,0.8\n2,abc,0.7\n";
        assert_eq!(
            columns(text).unwrap_err(),
            "data.csv: row 3, column \"ach\": \"abc\" is not a number"
        );
        let text = "run,ach,base\n1,0.9,0.8\n2,0.5,nan\n";
        assert_eq!(
            columns(text).unwrap_err(),
            "data.csv: row 3, column \"base\": \"nan\" is not a finite number"
        );
    }

    #[test]
    fn missing_column_lists_the_available_ones() {
        let error = read_paired_columns("data.csv", "a,b\n1,2\n", "ach", "b").unwrap_err();
        assert_eq!(
            error,
            "data.csv: there is no column \"ach\"; the available columns are \"a\", \"b\""
        );
    }

    #[test]
    fn short_rows_and_empty_cells_are_errors() {
        assert!(
            columns("ach,base\n1,2\n3\n")
                .unwrap_err()
                .contains("row 3 has 1 fields")
        );
        assert!(
            columns("ach,base\n1,2\n3,\n")
                .unwrap_err()
                .contains("the cell is empty")
        );
        assert!(
            columns("ach,base\n1,2\n")
                .unwrap_err()
                .contains("at least 2")
        );
        assert!(columns("").unwrap_err().contains("the file is empty"));
    }

    #[test]
    fn quoted_fields_are_parsed() {
        assert_eq!(
            split_csv_line(r#" "a,b" , "say ""hi""",3"#).unwrap(),
            vec!["a,b", "say \"hi\"", "3"]
        );
        assert!(split_csv_line("\"open").is_err());
    }

    #[test]
    fn report_covers_every_scipy_combination() {
        let text = "ach,base\n6,0\n8,0\n14,0\n16,0\n23,0\n24,0\n28,0\n29,0\n41,0\n-48,0\n49,0\n\
                    56,0\n60,0\n-67,0\n75,0\n";
        let parsed = columns(text).unwrap();
        let report = Report::compute("data.csv", &parsed).unwrap();
        let json = report.to_json();
        let entries = json["wilcoxon"].as_array().unwrap();
        assert_eq!(entries.len(), 54);
        let default = entries
            .iter()
            .find(|e| {
                e["zero_method"] == "wilcox"
                    && e["method"] == "auto"
                    && e["correction"] == false
                    && e["alternative"] == "two-sided"
            })
            .unwrap();
        assert_eq!(default["statistic"], 24.0);
        assert_eq!(default["pvalue"], 0.041259765625);
        assert_eq!(json["cliffs_delta"]["magnitude"], "large");
        assert!(json["summary_x"]["ci95_half_width"].as_f64().unwrap() > 20.9);
        assert!(report.to_text().contains("V = 96"));
    }
}
