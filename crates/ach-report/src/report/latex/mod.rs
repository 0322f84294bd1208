//! The report's tables as paper-ready LaTeX: for each table (or each part of a long one) a
//! float-free `tabular` (`tables/<name>.tex`, to `\input` in any float) and a ready float
//! (`tables/<name>_float.tex`: `table` or `table*` with `\caption` and `\label{tab:<name>}`),
//! and `tables/preamble.tex` with the packages both need.
//!
//! The layout is derived from the table model, the same for every table:
//! - headers and labels in the paper's notation ([`notation`]);
//! - numbers in `siunitx` `S` columns (decimal-aligned, true minus signs, $\times 10^{n}$), an
//!   estimate as two aligned columns (mean, $\pm$ CI), each rounded as [`numbers`] states;
//! - a column that holds the same value in every row is left out and stated in the notes;
//! - long free text (remarks, descriptions) becomes a lettered table note (`threeparttable`);
//! - a table of more than [`MAX_ROWS`] rows is split between groups of its first column
//!   (series, or the swept parameter), into parts `<name>_1`, `<name>_2`, ...;
//! - a table whose estimated width fits `\columnwidth` of a two-column `article` (229.5 pt) is a
//!   `table`, any other a `table*` (`\textwidth`, 469 pt); the compile test measures both.

pub mod notation;
pub mod numbers;

#[cfg(test)]
mod compile_tests;

use std::fmt::Write as _;

use super::compare::Verdict;
use super::tables::{Align, Cell, Role, Table};
use notation::latex_text;
use numbers::NumberShape;

/// The most body rows of one part: with its caption and notes it stays within a column's
/// height (550 pt in a two-column `article`).
pub const MAX_ROWS: usize = 36;

/// `\columnwidth` of `\documentclass[twocolumn]{article}` (10 pt, letter), in points.
pub const COLUMN_WIDTH_PT: f64 = 229.5;

/// `\textwidth` of the same class, in points.
pub const TEXT_WIDTH_PT: f64 = 469.0;

/// `\tabcolsep` of every generated `tabular`, in points (LaTeX's default is 6 pt).
const TABCOLSEP_PT: f64 = 3.0;

/// Free text longer than this becomes a table note; so does repeated text longer than
/// [`REPEATED_NOTE_FROM_CHARS`].
const NOTE_FROM_CHARS: usize = 24;

/// Repeated free text longer than this becomes a table note.
const REPEATED_NOTE_FROM_CHARS: usize = 12;

/// What `tables/preamble.tex` holds.
pub const PREAMBLE: &str = "\
% Packages the generated tables need (`cargo xtask report`): \\input this file in the preamble.
\\usepackage{booktabs}       % \\toprule, \\midrule, \\bottomrule
\\usepackage{siunitx}        % S columns: decimal-aligned numbers, true minus, x 10^n
\\usepackage{threeparttable} % table notes under a tabular
\\usepackage{amsmath}        % \\text in notes
";

/// Where a float goes in a two-column page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// `table`, one column wide.
    Column,
    /// `table*`, the full text width.
    FullWidth,
}

impl Placement {
    /// The float environment.
    pub fn environment(self) -> &'static str {
        match self {
            Placement::Column => "table",
            Placement::FullWidth => "table*",
        }
    }

    /// The width the table must fit, in points.
    pub fn width_pt(self) -> f64 {
        match self {
            Placement::Column => COLUMN_WIDTH_PT,
            Placement::FullWidth => TEXT_WIDTH_PT,
        }
    }
}

/// The estimate of a table's width is this much above the sum of its characters' widths (it
/// errs towards the wider float).
const ESTIMATE_MARGIN: f64 = 1.05;

/// The font size of a table: the text's, or one or two steps smaller for a table that is wider
/// than a page's text at the text's size (`\small` is 9 pt, `\footnotesize` 8 pt of 10 pt).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FontSize {
    Normal,
    Small,
    Footnote,
}

impl FontSize {
    fn fitting(estimated_pt: f64, width_pt: f64) -> FontSize {
        if estimated_pt <= width_pt {
            FontSize::Normal
        } else if estimated_pt * 0.9 <= width_pt {
            FontSize::Small
        } else {
            FontSize::Footnote
        }
    }

    fn command(self) -> &'static str {
        match self {
            FontSize::Normal => "",
            FontSize::Small => "\\small",
            FontSize::Footnote => "\\footnotesize",
        }
    }
}

/// One generated table (a whole table or one part of a split one).
#[derive(Clone, Debug)]
pub struct LatexTable {
    /// File stem: `tables/<name>.tex` and `tables/<name>_float.tex`; the label `tab:<name>`.
    pub name: String,
    /// Where it goes.
    pub placement: Placement,
    /// Its estimated width at `\normalsize`, in points (the measured one is the compile
    /// test's).
    pub estimated_width_pt: f64,
    /// The float-free `tabular` file.
    pub tabular: String,
    /// The `table`/`table*` file.
    pub float: String,
}

/// A cell laid out for LaTeX.
#[derive(Clone, Debug, PartialEq)]
enum Laid {
    /// Text (already LaTeX).
    Text(String),
    /// A number in `siunitx` input form.
    Number(String),
    /// A mean and the half-width of its CI, in `siunitx` input form.
    Estimate(String, Option<String>),
    /// No value.
    Missing,
}

impl Laid {
    /// The cell as it reads, to find columns that hold the same value in every row.
    fn reading(&self) -> String {
        match self {
            Laid::Text(text) => text.clone(),
            Laid::Number(number) => number.clone(),
            Laid::Estimate(mean, Some(ci)) => format!("{mean} \\pm {ci}"),
            Laid::Estimate(mean, None) => mean.clone(),
            Laid::Missing => "--".to_string(),
        }
    }
}

/// How a column is set.
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    /// `l`.
    Text,
    /// One `S` column.
    Number(NumberShape),
    /// Two `S` columns: the mean and `\pm` its CI.
    Estimate(NumberShape, NumberShape),
    /// Lettered notes: the column holds the marks.
    Notes,
}

/// A column after layout.
struct LaidColumn {
    /// The header in running text (the notes).
    header: String,
    /// The header as set above the column, and its estimated width.
    shown_header: (String, f64),
    kind: Kind,
    cells: Vec<Laid>,
}

/// `("A0", "Static-W")` of a label `Static-W (A0)`: the short name tables use, and the name
/// the notes give for it.
fn short_label(text: &str) -> Option<(&str, &str)> {
    let (name, rest) = text.split_once(" (")?;
    let short = rest.strip_suffix(')')?;
    (!short.is_empty() && !short.contains(' ')).then_some((short, name))
}

/// The legend of the short labels of a table: `A0 Static-W, A1 Static-Wt` (empty without).
fn label_legend(table: &Table) -> Option<String> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for cell in table.rows.iter().flatten() {
        if let Cell::Label { text, .. } = cell
            && let Some(pair) = short_label(text)
            && !pairs.contains(&pair)
        {
            pairs.push(pair);
        }
    }
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(short, name)| format!("{} {}", latex_text(short), latex_text(name)))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Lays out one cell.
fn lay_cell(cell: &Cell) -> Laid {
    let finite = |v: &Option<f64>| v.filter(|v| v.is_finite());
    match cell {
        Cell::Label { text, .. } if short_label(text).is_some() => {
            Laid::Text(latex_text(short_label(text).unwrap_or_default().0))
        }
        Cell::Text(text) | Cell::Label { text, .. } => {
            if text.is_empty() || text == "—" {
                Laid::Missing
            } else if text.parse::<f64>().is_ok() {
                Laid::Number(text.clone())
            } else {
                Laid::Text(latex_text(text))
            }
        }
        Cell::Number { value, decimals } => finite(value).map_or(Laid::Missing, |v| {
            Laid::Number(numbers::fixed(v, (*decimals).min(3)))
        }),
        Cell::Difference { value, decimals } => finite(value).map_or(Laid::Missing, |v| {
            let text = numbers::fixed(v, (*decimals).min(3));
            if text.starts_with('-') || text.chars().all(|c| c == '0' || c == '.') {
                Laid::Number(text)
            } else {
                Laid::Number(format!("+{text}"))
            }
        }),
        Cell::Estimate {
            mean,
            ci95,
            decimals,
        } => finite(mean).map_or(Laid::Missing, |m| {
            let (mean, ci) = numbers::estimate(m, finite(ci95), (*decimals).min(3));
            Laid::Estimate(mean, ci)
        }),
        Cell::PValue(p) => finite(p).map_or(Laid::Missing, |p| Laid::Number(numbers::p_value(p))),
        Cell::Count(n) => n.map_or(Laid::Missing, |n| Laid::Number(n.to_string())),
        Cell::Verdict(verdict) => Laid::Text(
            match verdict {
                Verdict::Within { .. } => "ok",
                Verdict::Outside { .. } => "\\textbf{outside}",
                Verdict::NotBanded => "n/a",
                Verdict::NotRun => "not run",
            }
            .to_string(),
        ),
    }
}

/// A difference in a row with one estimate is shown at that estimate's decimals.
fn align_differences(table: &Table, row: &[Cell], laid: &mut [Laid]) {
    let estimates: Vec<usize> = (0..row.len())
        .filter(|&i| matches!(laid[i], Laid::Estimate(_, Some(_))))
        .collect();
    let [estimate] = estimates[..] else {
        return;
    };
    let Laid::Estimate(mean, _) = &laid[estimate] else {
        return;
    };
    let decimals = NumberShape::of(mean).decimals;
    for (i, cell) in row.iter().enumerate() {
        if let Cell::Difference { value: Some(v), .. } = cell
            && v.is_finite()
            && table.columns[i].role == Role::Value
        {
            let text = numbers::fixed(*v, decimals);
            laid[i] = if text.starts_with('-') || text.chars().all(|c| c == '0' || c == '.') {
                Laid::Number(text)
            } else {
                Laid::Number(format!("+{text}"))
            };
        }
    }
}

/// The kind of a column from its cells.
fn column_kind(align: Align, role: Role, cells: &[Laid]) -> Kind {
    let numbers = cells
        .iter()
        .filter(|c| matches!(c, Laid::Number(_) | Laid::Estimate(..)))
        .count();
    // Visible characters, not LaTeX's (`\\textbf{outside}` is 7).
    let longest_text = cells
        .iter()
        .filter_map(|c| match c {
            Laid::Text(text) => Some((estimated_width_pt(text) / 5.0) as usize),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let texts = cells.iter().filter(|c| matches!(c, Laid::Text(_))).count();
    if numbers == 0 || (align == Align::Left && texts > numbers) {
        let repeated = cells.iter().enumerate().any(|(i, c)| {
            matches!(c, Laid::Text(_)) && cells[..i].iter().any(|earlier| earlier == c)
        });
        let long =
            longest_text > NOTE_FROM_CHARS || (repeated && longest_text > REPEATED_NOTE_FROM_CHARS);
        return if role == Role::Value && align == Align::Left && long {
            Kind::Notes
        } else {
            Kind::Text
        };
    }
    let mut mean = NumberShape::default();
    let mut ci: Option<NumberShape> = None;
    for cell in cells {
        match cell {
            Laid::Number(text) => mean = mean.union(NumberShape::of(text)),
            Laid::Estimate(m, c) => {
                mean = mean.union(NumberShape::of(m));
                if let Some(c) = c {
                    let shape = NumberShape::of(&format!("\\pm {c}"));
                    ci = Some(ci.map_or(shape, |s| s.union(shape)));
                }
            }
            Laid::Text(_) | Laid::Missing => {}
        }
    }
    match ci {
        Some(ci) => Kind::Estimate(mean, ci),
        None => Kind::Number(mean),
    }
}

/// The table's columns laid out, and the facts of the columns left out because every row
/// holds the same value.
fn lay_columns(table: &Table) -> (Vec<LaidColumn>, Vec<String>) {
    let mut laid_rows: Vec<Vec<Laid>> = table
        .rows
        .iter()
        .map(|row| row.iter().map(lay_cell).collect())
        .collect();
    for (row, laid) in table.rows.iter().zip(&mut laid_rows) {
        align_differences(table, row, laid);
    }
    let mut columns: Vec<LaidColumn> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let mut cells: Vec<Laid> = laid_rows.iter().map(|row| row[i].clone()).collect();
            trim_zero_decimals(&mut cells);
            let header = latex_text(&column.header);
            let kind = column_kind(column.align, column.role, &cells);
            let shown_header = if matches!(kind, Kind::Number(_)) {
                let content = cells
                    .iter()
                    .map(|c| estimated_width_pt(&c.reading()))
                    .fold(0.0, f64::max);
                set_header(&header, content)
            } else {
                let width = estimated_width_pt(&header);
                (header.clone(), width)
            };
            LaidColumn {
                header,
                shown_header,
                kind,
                cells,
            }
        })
        .collect();
    let constant = |c: &LaidColumn| {
        c.cells.len() >= 2
            && c.cells
                .iter()
                .all(|cell| cell.reading() == c.cells[0].reading())
    };
    let varying_values = columns
        .iter()
        .zip(&table.columns)
        .filter(|(c, model)| model.role == Role::Value && !constant(c))
        .count();
    let mut facts = Vec::new();
    if varying_values > 0 {
        columns.retain(|c| {
            if !constant(c) {
                return true;
            }
            match &c.cells[0] {
                Laid::Missing => {}
                Laid::Text(text) if c.kind == Kind::Notes => facts.push(text.clone()),
                cell => facts.push(format!("{} {}", c.header, reading_in_text(cell))),
            }
            false
        });
    }
    (columns, facts)
}

/// Drops the decimals of a column's numbers when every one of them is zero (`181.0`, `48.0`).
fn trim_zero_decimals(cells: &mut [Laid]) {
    let zero_decimals = |text: &str| {
        text.split_once('.')
            .is_some_and(|(_, decimals)| decimals.chars().all(|c| c == '0'))
    };
    let numbers: Vec<&String> = cells
        .iter()
        .filter_map(|c| match c {
            Laid::Number(n) => Some(n),
            _ => None,
        })
        .collect();
    if numbers.is_empty() || !numbers.iter().all(|n| zero_decimals(n)) {
        return;
    }
    for cell in cells {
        if let Laid::Number(n) = cell
            && let Some((integer, _)) = n.split_once('.')
        {
            *n = integer.to_string();
        }
    }
}

/// The header split into two lines at the space nearest its middle outside math, when it has
/// one: `CI$_{95}$ low` becomes `CI$_{95}$` over `low`.
fn header_lines(header: &str) -> Option<(&str, &str)> {
    let mut in_math = false;
    let middle = header.len() / 2;
    let mut best: Option<usize> = None;
    for (i, c) in header.char_indices() {
        match c {
            '$' => in_math = !in_math,
            ' ' if !in_math && best.is_none_or(|b| i.abs_diff(middle) < b.abs_diff(middle)) => {
                best = Some(i);
            }
            _ => {}
        }
    }
    best.map(|i| (&header[..i], &header[i + 1..]))
}

/// The header of a column as set: on two lines when one line would be wider than the
/// column's content.
fn set_header(header: &str, content_pt: f64) -> (String, f64) {
    let one_line = estimated_width_pt(header);
    match header_lines(header) {
        Some((first, second)) if one_line > content_pt + 2.0 * TABCOLSEP_PT => (
            format!("\\shortstack{{{first}\\\\{second}}}"),
            estimated_width_pt(first).max(estimated_width_pt(second)),
        ),
        _ => (header.to_string(), one_line),
    }
}

/// A laid cell in running text (a note).
fn reading_in_text(cell: &Laid) -> String {
    match cell {
        Laid::Text(text) => text.clone(),
        Laid::Number(n) => format!("\\num{{{n}}}"),
        Laid::Estimate(mean, Some(ci)) => format!("\\num{{{mean} +- {ci}}}"),
        Laid::Estimate(mean, None) => format!("\\num{{{mean}}}"),
        Laid::Missing => "--".to_string(),
    }
}

/// The row ranges of the parts: whole groups of equal first-column values (for a sweep point
/// `eps_on=0.05`, its parameter), packed greedily into parts of at most [`MAX_ROWS`] rows.
fn parts(columns: &[LaidColumn], rows: usize) -> Vec<std::ops::Range<usize>> {
    if rows <= MAX_ROWS || columns.is_empty() {
        return std::iter::once(0..rows).collect();
    }
    let key = |i: usize| {
        let reading = columns[0].cells[i].reading();
        reading.split('=').next().unwrap_or_default().to_string()
    };
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    for i in 0..rows {
        match groups.last_mut() {
            Some(group) if key(group.start) == key(i) => group.end = i + 1,
            _ => groups.push(i..i + 1),
        }
    }
    // A group longer than a part is cut into parts of its own.
    let groups = groups.into_iter().flat_map(|group| {
        group
            .clone()
            .step_by(MAX_ROWS)
            .map(move |start| start..(start + MAX_ROWS).min(group.end))
    });
    let mut parts: Vec<std::ops::Range<usize>> = Vec::new();
    for group in groups {
        match parts.last_mut() {
            Some(part) if group.end - part.start <= MAX_ROWS => part.end = group.end,
            _ => parts.push(group),
        }
    }
    parts
}

/// The width of a LaTeX text as set, roughly: 5 pt per visible character at 10 pt, 7 pt per
/// capital letter.
fn estimated_width_pt(text: &str) -> f64 {
    let capitals = text
        .split('\\')
        .enumerate()
        .map(|(index, piece)| {
            // After a backslash, the command's name is not set.
            let set = if index == 0 {
                piece
            } else {
                piece.trim_start_matches(|c: char| c.is_ascii_alphabetic())
            };
            set.chars().filter(char::is_ascii_uppercase).count()
        })
        .sum::<usize>();
    2.0 * capitals as f64 + estimated_visible_pt(text)
}

/// 5 pt per visible character at 10 pt.
fn estimated_visible_pt(text: &str) -> f64 {
    let mut visible = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                // A command: one glyph at most.
                while chars.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                    chars.next();
                }
                visible += 1;
            }
            '{' | '}' | '$' | '_' | '^' => {}
            _ => visible += 1,
        }
    }
    5.0 * visible as f64
}

/// The estimated width of the laid table.
fn estimated_table_width_pt(columns: &[LaidColumn], rows: &std::ops::Range<usize>) -> f64 {
    columns
        .iter()
        .map(|column| {
            let widest = |f: &dyn Fn(&Laid) -> String| {
                column.cells[rows.clone()]
                    .iter()
                    .map(|c| estimated_width_pt(&f(c)))
                    .fold(0.0, f64::max)
            };
            let header = column.shown_header.1;
            match &column.kind {
                Kind::Notes => 0.0,
                Kind::Estimate(..) => {
                    let mean = widest(&|c| match c {
                        Laid::Estimate(m, _) => m.clone(),
                        other => other.reading(),
                    });
                    let ci = widest(&|c| match c {
                        Laid::Estimate(_, Some(ci)) => format!("+{ci}"),
                        _ => String::new(),
                    });
                    4.0 * TABCOLSEP_PT + header.max(mean + ci)
                }
                _ => 2.0 * TABCOLSEP_PT + header.max(widest(&|c| c.reading())),
            }
        })
        .sum()
}

/// The column specification of one laid column.
fn column_spec(kind: &Kind) -> String {
    let number = |shape: &NumberShape| {
        let mut options = format!("table-format={}", shape.table_format());
        if shape.sign {
            options.push_str(",retain-explicit-plus");
        }
        format!("S[{options}]")
    };
    match kind {
        Kind::Text | Kind::Notes => "l".to_string(),
        Kind::Number(shape) => number(shape),
        Kind::Estimate(mean, ci) => format!("{}@{{\\,}}{}", number(mean), number(ci)),
    }
}

/// The header cell of one laid column.
fn header_cell(column: &LaidColumn) -> String {
    match column.kind {
        Kind::Text => column.header.clone(),
        Kind::Notes => String::new(),
        Kind::Number(_) => format!("{{{}}}", column.shown_header.0),
        Kind::Estimate(..) => format!("\\multicolumn{{2}}{{c}}{{{}}}", column.header),
    }
}

/// The body cells of one laid column in one row.
fn body_cell(column: &LaidColumn, cell: &Laid) -> String {
    let braced = |text: &str| format!("{{{text}}}");
    match (&column.kind, cell) {
        (Kind::Notes, _) | (Kind::Text, Laid::Missing) => String::new(),
        (Kind::Text, cell) => cell.reading(),
        (Kind::Number(_), Laid::Number(n)) => n.clone(),
        (Kind::Number(_), Laid::Estimate(m, _)) => m.clone(),
        (Kind::Number(_), other) => braced(&other.reading()),
        (Kind::Estimate(..), Laid::Estimate(m, Some(ci))) => format!("{m} & \\pm {ci}"),
        (Kind::Estimate(..), Laid::Estimate(m, None) | Laid::Number(m)) => format!("{m} & {{}}"),
        (Kind::Estimate(..), other) => format!("{} & {{}}", braced(&other.reading())),
    }
}

/// `a`, `b`, ..., `z`, `aa`, ...
fn note_letter(index: usize) -> String {
    let letter = (b'a' + (index % 26) as u8) as char;
    letter.to_string().repeat(index / 26 + 1)
}

/// The float-free tabular of rows `rows` of the laid table.
fn tabular(
    title: &str,
    columns: &[LaidColumn],
    rows: std::ops::Range<usize>,
    facts: &[String],
    legend: Option<&str>,
    size: FontSize,
) -> String {
    let note_columns: Vec<&LaidColumn> = columns.iter().filter(|c| c.kind == Kind::Notes).collect();
    let columns: Vec<&LaidColumn> = columns.iter().filter(|c| c.kind != Kind::Notes).collect();
    let (body, notes) = tabular_body(&columns, &note_columns, rows);
    let with_notes = !notes.is_empty() || !facts.is_empty() || legend.is_some();
    let mut out = String::new();
    let _ = writeln!(out, "% {title}");
    let _ = writeln!(
        out,
        "% Generated by `cargo xtask report`; needs the packages of tables/preamble.tex."
    );
    let _ = writeln!(
        out,
        "{{\\setlength{{\\tabcolsep}}{{{TABCOLSEP_PT}pt}}{}%",
        size.command()
    );
    if with_notes {
        let _ = writeln!(out, "\\begin{{threeparttable}}");
    }
    let spec: Vec<String> = columns.iter().map(|c| column_spec(&c.kind)).collect();
    let headers: Vec<String> = columns.iter().map(|c| header_cell(c)).collect();
    let _ = writeln!(out, "\\begin{{tabular}}{{@{{}}{}@{{}}}}", spec.join(" "));
    let _ = writeln!(out, "\\toprule");
    let _ = writeln!(out, "{} \\\\", headers.join(" & "));
    let _ = writeln!(out, "\\midrule");
    out.push_str(&body);
    let _ = writeln!(out, "\\bottomrule");
    let _ = writeln!(out, "\\end{{tabular}}");
    if with_notes {
        write_table_notes(&mut out, facts, legend, &notes);
        let _ = writeln!(out, "\\end{{threeparttable}}");
    }
    let _ = writeln!(out, "}}");
    out
}

/// The body lines of rows `rows` of the shown `columns`, each row's notes (from
/// `note_columns`) marked on its first cell, and the notes in order of first use.
fn tabular_body(
    columns: &[&LaidColumn],
    note_columns: &[&LaidColumn],
    rows: std::ops::Range<usize>,
) -> (String, Vec<String>) {
    let mut notes: Vec<String> = Vec::new();
    let mut body = String::new();
    for row in rows {
        let letters = row_note_letters(note_columns, row, &mut notes);
        let mut cells: Vec<String> = columns
            .iter()
            .map(|c| body_cell(c, &c.cells[row]))
            .collect();
        if let Some(first) = cells.first_mut()
            && !letters.is_empty()
        {
            first.push_str(&format!("\\tnote{{{}}}", letters.join(",")));
        }
        let _ = writeln!(body, "{} \\\\", cells.join(" & "));
    }
    (body, notes)
}

/// The letters of the notes of row `row`, lettered in order of first use: a note not yet in
/// `notes` is added to it. With more than one note column, a note names its column.
fn row_note_letters(
    note_columns: &[&LaidColumn],
    row: usize,
    notes: &mut Vec<String>,
) -> Vec<String> {
    let mut letters = Vec::new();
    for column in note_columns {
        let Laid::Text(text) = &column.cells[row] else {
            continue;
        };
        let note = if note_columns.len() > 1 {
            format!("{}: {text}", column.header)
        } else {
            text.clone()
        };
        let index = notes.iter().position(|n| *n == note).unwrap_or_else(|| {
            notes.push(note);
            notes.len() - 1
        });
        letters.push(note_letter(index));
    }
    letters
}

/// Writes the table notes under the tabular: the facts true in every row, the legend of the
/// labels, and the lettered notes.
fn write_table_notes(out: &mut String, facts: &[String], legend: Option<&str>, notes: &[String]) {
    let _ = writeln!(
        out,
        "\\begin{{tablenotes}}[flushleft]\\footnotesize\\raggedright"
    );
    if !facts.is_empty() {
        let _ = writeln!(out, "\\item[] In every row: {}.", facts.join("; "));
    }
    if let Some(legend) = legend {
        let _ = writeln!(out, "\\item[] {legend}.");
    }
    for (index, note) in notes.iter().enumerate() {
        let _ = writeln!(out, "\\item[{}] {note}", note_letter(index));
    }
    let _ = writeln!(out, "\\end{{tablenotes}}");
}

/// The ready float around a tabular.
fn float(placement: Placement, name: &str, caption: &str, tabular: &str) -> String {
    let environment = placement.environment();
    let mut out = String::new();
    let _ = writeln!(out, "\\begin{{{environment}}}[tbp]");
    let _ = writeln!(out, "\\centering");
    let _ = writeln!(out, "\\caption{{{caption}}}");
    let _ = writeln!(out, "\\label{{tab:{name}}}");
    out.push_str(tabular);
    let _ = writeln!(out, "\\end{{{environment}}}");
    out
}

/// Every generated file of one table: one [`LatexTable`] per part.
pub fn render(table: &Table) -> Vec<LatexTable> {
    let (columns, facts) = lay_columns(table);
    let legend = label_legend(table);
    let ranges = parts(&columns, table.rows.len());
    let count = ranges.len();
    ranges
        .into_iter()
        .enumerate()
        .map(|(index, rows)| {
            let (name, title) = if count == 1 {
                (table.name.clone(), table.title.clone())
            } else {
                let first = columns[0].cells[rows.start].reading();
                let last = columns[0].cells[rows.end - 1].reading();
                (
                    format!("{}_{}", table.name, index + 1),
                    format!(
                        "{} (part {} of {count}: {first} to {last})",
                        table.title,
                        index + 1
                    ),
                )
            };
            let estimated = ESTIMATE_MARGIN * estimated_table_width_pt(&columns, &rows);
            let placement = if estimated <= COLUMN_WIDTH_PT {
                Placement::Column
            } else {
                Placement::FullWidth
            };
            let size = FontSize::fitting(estimated, placement.width_pt());
            let tabular = tabular(&title, &columns, rows, &facts, legend.as_deref(), size);
            let float = float(placement, &name, &latex_caption(&title), &tabular);
            LatexTable {
                name,
                placement,
                estimated_width_pt: estimated,
                tabular,
                float,
            }
        })
        .collect()
}

/// A title as a caption: LaTeX text; the paper's `Table 2: ...` becomes `The paper's Table 2:
/// ...` (the float numbers its own tables).
fn latex_caption(title: &str) -> String {
    let text = latex_text(title);
    if title.starts_with("Table ") && title[6..].starts_with(|c: char| c.is_ascii_digit()) {
        format!("The paper's {text}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::Column;

    fn table(rows: Vec<Vec<Cell>>) -> Table {
        Table {
            name: "t".to_string(),
            title: "A test: D-bar per series".to_string(),
            columns: vec![
                Column::key("Series", "series"),
                Column::key("Algorithm", "algorithm"),
                Column::value("D-bar", "d_mean"),
                Column::value("n_viol", "n_viol"),
                Column::text_value("Remark", "remark"),
            ],
            rows,
            csv_shape: super::super::tables::CsvShape::AsRows,
        }
    }

    fn row(series: &str, mean: f64, remark: &str) -> Vec<Cell> {
        vec![
            Cell::text(series),
            Cell::text("ACH"),
            Cell::Estimate {
                mean: Some(mean),
                ci95: Some(0.0036),
                decimals: 4,
            },
            Cell::Count(Some(0)),
            Cell::text(remark),
        ]
    }

    #[test]
    fn constant_columns_go_to_the_notes_and_long_remarks_become_lettered_notes() {
        let remark = "a remark long enough to be a table note";
        let rendered = render(&table(vec![
            row("C1", 0.17783, remark),
            row("C2", 0.2, remark),
            row("C3", 0.3, ""),
        ]));
        assert_eq!(rendered.len(), 1);
        let text = &rendered[0].tabular;
        assert!(
            text.contains("\\item[] In every row: Algorithm ACH; $n_{\\mathrm{viol}}$ \\num{0}.")
        );
        assert!(
            text.contains("C1\\tnote{a} & 0.178 & \\pm 0.004 \\\\"),
            "{text}"
        );
        assert!(text.contains("C3 & 0.300 & \\pm 0.004 \\\\"), "{text}");
        assert!(text.contains("\\item[a] a remark long enough to be a table note"));
        assert!(text.contains("\\multicolumn{2}{c}{$\\bar D$}"));
        assert_eq!(rendered[0].placement, Placement::Column);
        assert!(rendered[0].float.starts_with("\\begin{table}[tbp]"));
        assert!(rendered[0].float.contains("\\label{tab:t}"));
    }

    #[test]
    fn long_tables_split_between_groups_of_their_first_column() {
        let rows: Vec<Vec<Cell>> = (0..50)
            .map(|i| row(&format!("p{}=0.{}", i / 10, i), 0.1, ""))
            .collect();
        let rendered = render(&table(rows));
        let names: Vec<&str> = rendered.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["t_1", "t_2"]);
        // Groups of ten rows: 30 in the first part, 20 in the second.
        assert_eq!(rendered[0].tabular.matches("\\pm 0.004").count(), 30);
        assert_eq!(rendered[1].tabular.matches("\\pm 0.004").count(), 20);
    }
}
