//! One table model, rendered three ways: Markdown (REPORT.md), tidy CSV (one row per series x
//! algorithm x metric, full precision), and LaTeX ([`super::latex`]).

use std::fmt::Write as _;

use super::compare::Verdict;

/// Horizontal alignment of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// Whether a column identifies a row or holds a measured value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Identifies the row (series, algorithm, metric): kept on every CSV row.
    Key,
    /// A value: one CSV row per value when the table is melted.
    Value,
}

/// One column.
#[derive(Clone, Debug)]
pub struct Column {
    /// Header in Markdown and LaTeX.
    pub header: String,
    /// Header in CSV (and the metric name when the table is melted).
    pub csv_name: String,
    /// Alignment.
    pub align: Align,
    /// Key or value.
    pub role: Role,
}

impl Column {
    /// A left-aligned key column.
    pub fn key(header: &str, csv_name: &str) -> Column {
        Column {
            header: header.to_string(),
            csv_name: csv_name.to_string(),
            align: Align::Left,
            role: Role::Key,
        }
    }

    /// A right-aligned value column.
    pub fn value(header: &str, csv_name: &str) -> Column {
        Column {
            header: header.to_string(),
            csv_name: csv_name.to_string(),
            align: Align::Right,
            role: Role::Value,
        }
    }

    /// A left-aligned value column (text values such as a verdict or a remark).
    pub fn text_value(header: &str, csv_name: &str) -> Column {
        Column {
            align: Align::Left,
            ..Column::value(header, csv_name)
        }
    }
}

/// One cell. Numbers keep full precision; `decimals` only governs Markdown and LaTeX.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// Text.
    Text(String),
    /// A label with a machine-friendly spelling for CSV (`D-bar` shown, `d_mean` in CSV).
    Label {
        /// Shown in Markdown and LaTeX.
        text: String,
        /// Written to CSV.
        csv: String,
    },
    /// A number (`None`: missing).
    Number {
        /// The value.
        value: Option<f64>,
        /// Decimals shown.
        decimals: usize,
    },
    /// A difference, shown with its sign.
    Difference {
        /// The value.
        value: Option<f64>,
        /// Decimals shown.
        decimals: usize,
    },
    /// A mean with the half-width of its 95 % CI.
    Estimate {
        /// The mean.
        mean: Option<f64>,
        /// The CI half-width.
        ci95: Option<f64>,
        /// Decimals shown.
        decimals: usize,
    },
    /// A p-value: fixed decimals from 0.001 up, scientific below.
    PValue(Option<f64>),
    /// A count.
    Count(Option<u64>),
    /// Whether a value falls in the agreement band.
    Verdict(Verdict),
}

impl Cell {
    /// Text cell.
    pub fn text(text: impl Into<String>) -> Cell {
        Cell::Text(text.into())
    }

    /// Number cell.
    pub fn number(value: Option<f64>, decimals: usize) -> Cell {
        Cell::Number { value, decimals }
    }
}

/// How a table becomes tidy CSV.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CsvShape {
    /// The table already has one row per observation: rows are written as they are.
    AsRows,
    /// Every value column becomes its own row: the key columns, then `variable` holding the
    /// column's CSV name, then the value (and its CI95 for estimates). `fixed` adds a constant
    /// column first, e.g. `metric = n_viol` when the melted columns are algorithms.
    Melt {
        /// Name of the column that receives the melted column's name.
        variable: &'static str,
        /// An optional constant column (name, value) written before `variable`.
        fixed: Option<(&'static str, &'static str)>,
    },
}

/// A table: what it shows, its columns and rows, and how it melts into CSV.
#[derive(Clone, Debug)]
pub struct Table {
    /// File stem: `tables/<name>.{md,tex,csv}`.
    pub name: String,
    /// Title (a Markdown heading in REPORT.md, a comment in LaTeX).
    pub title: String,
    /// Columns.
    pub columns: Vec<Column>,
    /// Rows; every row has one cell per column.
    pub rows: Vec<Vec<Cell>>,
    /// CSV shape.
    pub csv_shape: CsvShape,
}

/// A missing value in Markdown.
const MISSING: &str = "—";

/// `value` with `decimals` decimals, `-0.000` shown as `0.000`.
fn fixed(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    if text.starts_with('-') && text[1..].chars().all(|c| c == '0' || c == '.') {
        text[1..].to_string()
    } else {
        text
    }
}

/// A p-value in print: `0.0625`, `0.001`, or `1.9e-9` below 0.001.
pub fn format_p_value(p: f64) -> String {
    if p >= 0.001 {
        let text = format!("{p:.4}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else if p == 0.0 {
        "0".to_string()
    } else {
        let exponent = p.log10().floor() as i32;
        let mantissa = p / 10f64.powi(exponent);
        // Rounding may carry the mantissa to 10.0.
        let (mantissa, exponent) = if format!("{mantissa:.1}") == "10.0" {
            (1.0, exponent + 1)
        } else {
            (mantissa, exponent)
        };
        format!("{mantissa:.1}e{exponent}")
    }
}

fn finite(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite())
}

/// A cell as its Markdown table text.
pub fn markdown_cell(cell: &Cell) -> String {
    let none = MISSING;
    match cell {
        Cell::Text(text) | Cell::Label { text, .. } => escape_markdown(text),
        Cell::Number { value, decimals } => {
            finite(*value).map_or(none.to_string(), |v| fixed(v, *decimals))
        }
        Cell::Difference { value, decimals } => finite(*value).map_or(none.to_string(), |v| {
            let text = fixed(v, *decimals);
            if text.starts_with('-') || text.chars().all(|c| c == '0' || c == '.') {
                text
            } else {
                format!("+{text}")
            }
        }),
        Cell::Estimate {
            mean,
            ci95,
            decimals,
        } => match (finite(*mean), finite(*ci95)) {
            (None, _) => none.to_string(),
            (Some(m), None) => fixed(m, *decimals),
            (Some(m), Some(c)) => format!("{} ± {}", fixed(m, *decimals), fixed(c, *decimals)),
        },
        Cell::PValue(p) => finite(*p).map_or(none.to_string(), format_p_value),
        Cell::Count(n) => n.map_or(none.to_string(), |n| n.to_string()),
        Cell::Verdict(verdict) => match verdict {
            Verdict::Within { .. } => "ok".to_string(),
            Verdict::Outside { .. } => "**⚠ outside**".to_string(),
            Verdict::NotBanded => "n/a".to_string(),
            Verdict::NotRun => "not run".to_string(),
        },
    }
}

fn escape_markdown(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The table as a GitHub-flavoured Markdown table (no title).
pub fn to_markdown(table: &Table) -> String {
    let mut out = String::new();
    let headers: Vec<String> = table
        .columns
        .iter()
        .map(|c| escape_markdown(&c.header))
        .collect();
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let rules: Vec<&str> = table
        .columns
        .iter()
        .map(|c| match c.align {
            Align::Left => ":---",
            Align::Right => "---:",
        })
        .collect();
    let _ = writeln!(out, "| {} |", rules.join(" | "));
    for row in &table.rows {
        debug_assert_eq!(
            row.len(),
            table.columns.len(),
            "table {}: a row of {} cells under {} columns",
            table.name,
            row.len(),
            table.columns.len()
        );
        let cells: Vec<String> = row.iter().map(markdown_cell).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// A CSV field, quoted when it must be (RFC 4180).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn csv_number(value: Option<f64>) -> String {
    finite(value).map_or(String::new(), |v| format!("{v}"))
}

/// The CSV fields of one cell: estimates give two (mean, CI95), every other cell one.
fn csv_fields(cell: &Cell) -> Vec<String> {
    match cell {
        Cell::Text(text) => vec![csv_field(text)],
        Cell::Label { csv, .. } => vec![csv_field(csv)],
        Cell::Number { value, .. } | Cell::Difference { value, .. } => vec![csv_number(*value)],
        Cell::Estimate { mean, ci95, .. } => vec![csv_number(*mean), csv_number(*ci95)],
        Cell::PValue(p) => vec![csv_number(*p)],
        Cell::Count(n) => vec![n.map_or(String::new(), |n| n.to_string())],
        Cell::Verdict(verdict) => vec![
            match verdict {
                Verdict::Within { .. } => "within",
                Verdict::Outside { .. } => "outside",
                Verdict::NotBanded => "not_banded",
                Verdict::NotRun => "not_run",
            }
            .to_string(),
        ],
    }
}

/// Whether a cell holds no value.
fn is_missing(cell: &Cell) -> bool {
    match cell {
        Cell::Number { value, .. } | Cell::Difference { value, .. } | Cell::PValue(value) => {
            finite(*value).is_none()
        }
        Cell::Estimate { mean, .. } => finite(*mean).is_none(),
        Cell::Count(n) => n.is_none(),
        Cell::Text(_) | Cell::Label { .. } | Cell::Verdict(_) => false,
    }
}

/// Whether a column holds estimates (and so takes two CSV columns).
fn column_has_estimates(table: &Table, index: usize) -> bool {
    table
        .rows
        .iter()
        .any(|row| matches!(row.get(index), Some(Cell::Estimate { .. })))
}

/// The table as tidy CSV with full-precision numbers.
pub fn to_csv(table: &Table) -> String {
    let mut out = String::new();
    match &table.csv_shape {
        CsvShape::AsRows => {
            let mut headers = Vec::new();
            for (index, column) in table.columns.iter().enumerate() {
                headers.push(csv_field(&column.csv_name));
                if column_has_estimates(table, index) {
                    headers.push(csv_field(&format!("{}_ci95", column.csv_name)));
                }
            }
            let _ = writeln!(out, "{}", headers.join(","));
            for row in &table.rows {
                let mut fields = Vec::new();
                for (index, cell) in row.iter().enumerate() {
                    let mut cell_fields = csv_fields(cell);
                    if column_has_estimates(table, index) && cell_fields.len() == 1 {
                        cell_fields.push(String::new());
                    }
                    fields.extend(cell_fields);
                }
                let _ = writeln!(out, "{}", fields.join(","));
            }
        }
        CsvShape::Melt { variable, fixed } => {
            let keys: Vec<usize> = (0..table.columns.len())
                .filter(|&i| table.columns[i].role == Role::Key)
                .collect();
            let values: Vec<usize> = (0..table.columns.len())
                .filter(|&i| table.columns[i].role == Role::Value)
                .collect();
            let with_ci = values.iter().any(|&i| column_has_estimates(table, i));
            let mut headers: Vec<String> = keys
                .iter()
                .map(|&i| csv_field(&table.columns[i].csv_name))
                .collect();
            if let Some((name, _)) = fixed {
                headers.push(csv_field(name));
            }
            headers.push(csv_field(variable));
            headers.push("value".to_string());
            if with_ci {
                headers.push("ci95".to_string());
            }
            let _ = writeln!(out, "{}", headers.join(","));
            for row in &table.rows {
                let key_fields: Vec<String> =
                    keys.iter().flat_map(|&i| csv_fields(&row[i])).collect();
                for &i in &values {
                    // Tidy data has no rows for values that do not exist.
                    if is_missing(&row[i]) {
                        continue;
                    }
                    let mut fields = key_fields.clone();
                    if let Some((_, value)) = fixed {
                        fields.push(csv_field(value));
                    }
                    fields.push(csv_field(&table.columns[i].csv_name));
                    let mut value_fields = csv_fields(&row[i]);
                    if with_ci && value_fields.len() == 1 {
                        value_fields.push(String::new());
                    }
                    fields.extend(value_fields);
                    let _ = writeln!(out, "{}", fields.join(","));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_values_switch_to_scientific_below_one_thousandth() {
        assert_eq!(format_p_value(0.0625), "0.0625");
        assert_eq!(format_p_value(0.5), "0.5");
        assert_eq!(format_p_value(0.001), "0.001");
        assert_eq!(format_p_value(1.862645149230957e-9), "1.9e-9");
        assert_eq!(format_p_value(9.96e-5), "1.0e-4");
    }

    #[test]
    fn missing_values_are_a_dash_in_markdown() {
        let missing = [
            Cell::Number {
                value: None,
                decimals: 3,
            },
            Cell::Difference {
                value: None,
                decimals: 3,
            },
        ];
        for cell in &missing {
            assert_eq!(markdown_cell(cell), "—");
        }
    }

    #[test]
    fn negative_zero_is_printed_without_sign() {
        assert_eq!(fixed(-0.00001, 3), "0.000");
        assert_eq!(fixed(-0.5, 1), "-0.5");
    }
}
