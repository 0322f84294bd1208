//! The marked blocks of a Markdown file under `docs/` (see the parent module): finding them,
//! reading their options, and filling them from a dataset's tables.

use std::fmt::Write as _;

use crate::report::tables::{Table, markdown_cell, to_markdown};

/// A wrong block of a Markdown file: the line it opens on and the rule it breaks.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {rule}")]
pub struct BlockError {
    /// The line the block opens on (from 1).
    pub line: usize,
    /// The rule broken.
    pub rule: BlockRule,
}

/// The rules a marked block must follow.
#[derive(Debug, thiserror::Error)]
pub enum BlockRule {
    /// The opening comment has no `-->`.
    #[error("a block opened here is never closed by -->")]
    Unclosed,
    /// No closing comment follows.
    #[error("no {close} after this block")]
    NoClose {
        /// The closing comment expected.
        close: &'static str,
    },
    /// An option is not `key=value`.
    #[error("option {pair:?} must be key=value")]
    NotKeyValue {
        /// The option's text.
        pair: String,
    },
    /// `part` is not `mean`.
    #[error("part = {value:?}: the only part is mean")]
    Part {
        /// The value given.
        value: String,
    },
    /// `data` or `table` is missing.
    #[error("a block needs data=<dataset> and table=<table name>")]
    DataAndTable,
    /// `data` names no dataset.
    #[error("data = {data:?} is not a dataset of docs/data/datasets.toml")]
    UnknownDataset {
        /// The value given.
        data: String,
    },
    /// `table` names no table of the dataset.
    #[error("table = {table:?} is not a table of dataset {data} ({known})")]
    UnknownTable {
        /// The value given.
        table: String,
        /// The dataset.
        data: String,
        /// The dataset's tables, comma-separated.
        known: String,
    },
    /// A filter or `columns` names no column of the table.
    #[error("{header:?} is not a column of table {table} ({known})")]
    UnknownColumn {
        /// The header given.
        header: String,
        /// The table.
        table: String,
        /// The table's headers, comma-separated.
        known: String,
    },
    /// No row passes the filters.
    #[error("no row of table {table} of dataset {data} matches the filters")]
    NoRow {
        /// The table.
        table: String,
        /// The dataset.
        data: String,
    },
    /// A value block has no `column`.
    #[error("a value block needs column=<header>")]
    ValueColumn,
    /// A value block's filters pass more or fewer than one row.
    #[error(
        "{rows} rows of table {table} of dataset {data} match the filters: a value block needs exactly one"
    )]
    NotOneRow {
        /// How many rows pass.
        rows: usize,
        /// The table.
        table: String,
        /// The dataset.
        data: String,
    },
    /// A value block's `column` is not one of the kept columns.
    #[error("{column:?} is not a column of table {table}")]
    ValueColumnMissing {
        /// The header given.
        column: String,
        /// The table.
        table: String,
    },
}

pub(super) const TABLE_OPEN: &str = "<!-- table ";
const TABLE_CLOSE: &str = "<!-- /table -->";
pub(super) const VALUE_OPEN: &str = "<!-- value ";
const VALUE_CLOSE: &str = "<!-- /value -->";

/// `text` with every block filled from the tables `lookup` gives per dataset name.
pub(super) fn fill_blocks<'t>(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<&'t [Table]>,
) -> Result<String, BlockError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let next_table = rest.find(TABLE_OPEN);
        let next_value = rest.find(VALUE_OPEN);
        let (start, is_table) = match (next_table, next_value) {
            (None, None) => break,
            (Some(t), Some(v)) if v < t => (v, false),
            (Some(t), _) => (t, true),
            (None, Some(v)) => (v, false),
        };
        let line = text[..text.len() - rest.len() + start]
            .matches('\n')
            .count()
            + 1;
        let (open, close) = if is_table {
            (TABLE_OPEN, TABLE_CLOSE)
        } else {
            (VALUE_OPEN, VALUE_CLOSE)
        };
        let at_line = |rule| BlockError { line, rule };
        out.push_str(&rest[..start]);
        let after_open = &rest[start + open.len()..];
        let options_end = after_open
            .find("-->")
            .ok_or_else(|| at_line(BlockRule::Unclosed))?;
        let options_text = &after_open[..options_end];
        let body_start = &after_open[options_end + 3..];
        let body_end = body_start
            .find(close)
            .ok_or_else(|| at_line(BlockRule::NoClose { close }))?;
        let options = Options::parse(options_text).map_err(at_line)?;
        let tables = lookup(&options.data).ok_or_else(|| {
            at_line(BlockRule::UnknownDataset {
                data: options.data.clone(),
            })
        })?;
        let generated = if is_table {
            options
                .select(tables)
                .map(|table| format!("\n\n{}\n", to_markdown(&table)))
        } else {
            options.value(tables)
        }
        .map_err(at_line)?;
        let _ = write!(out, "{open}{options_text}-->{generated}{close}");
        rest = &body_start[body_end + close.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The options of one block.
#[derive(Debug)]
struct Options {
    data: String,
    table: String,
    /// Column header -> accepted cell texts.
    filters: Vec<(String, Vec<String>)>,
    columns: Option<Vec<String>>,
    column: Option<String>,
    mean_only: bool,
}

impl Options {
    fn parse(text: &str) -> Result<Options, BlockRule> {
        let mut options = Options {
            data: String::new(),
            table: String::new(),
            filters: Vec::new(),
            columns: None,
            column: None,
            mean_only: false,
        };
        for pair in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| BlockRule::NotKeyValue {
                pair: pair.to_string(),
            })?;
            let (key, value) = (key.trim(), value.trim());
            let list = || value.split(',').map(|v| v.trim().to_string()).collect();
            match key {
                "data" => options.data = value.to_string(),
                "table" => options.table = value.to_string(),
                "columns" => options.columns = Some(list()),
                "column" => options.column = Some(value.to_string()),
                "part" if value == "mean" => options.mean_only = true,
                "part" => {
                    return Err(BlockRule::Part {
                        value: value.to_string(),
                    });
                }
                _ => options.filters.push((key.to_string(), list())),
            }
        }
        if options.data.is_empty() || options.table.is_empty() {
            return Err(BlockRule::DataAndTable);
        }
        Ok(options)
    }

    /// The rows of the named table that pass every filter, with the chosen columns.
    fn select(&self, tables: &[Table]) -> Result<Table, BlockRule> {
        let table = tables
            .iter()
            .find(|t| t.name == self.table)
            .ok_or_else(|| {
                let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
                BlockRule::UnknownTable {
                    table: self.table.clone(),
                    data: self.data.clone(),
                    known: names.join(", "),
                }
            })?;
        let index = |header: &str| {
            table
                .columns
                .iter()
                .position(|c| c.header == header)
                .ok_or_else(|| {
                    let headers: Vec<&str> =
                        table.columns.iter().map(|c| c.header.as_str()).collect();
                    BlockRule::UnknownColumn {
                        header: header.to_string(),
                        table: self.table.clone(),
                        known: headers.join(", "),
                    }
                })
        };
        let mut filters = Vec::new();
        for (header, accepted) in &self.filters {
            filters.push((index(header)?, accepted));
        }
        let keep: Vec<usize> = match &self.columns {
            Some(headers) => headers.iter().map(|h| index(h)).collect::<Result<_, _>>()?,
            None => (0..table.columns.len()).collect(),
        };
        let rows: Vec<Vec<_>> = table
            .rows
            .iter()
            .filter(|row| {
                filters
                    .iter()
                    .all(|(k, accepted)| accepted.contains(&markdown_cell(&row[*k])))
            })
            .map(|row| keep.iter().map(|&k| row[k].clone()).collect())
            .collect();
        if rows.is_empty() {
            return Err(BlockRule::NoRow {
                table: self.table.clone(),
                data: self.data.clone(),
            });
        }
        Ok(Table {
            columns: keep.iter().map(|&k| table.columns[k].clone()).collect(),
            rows,
            ..table.clone()
        })
    }

    /// The text of `column` in the one row that passes every filter.
    fn value(&self, tables: &[Table]) -> Result<String, BlockRule> {
        let column = self.column.as_ref().ok_or(BlockRule::ValueColumn)?;
        let table = self.select(tables)?;
        if table.rows.len() != 1 {
            return Err(BlockRule::NotOneRow {
                rows: table.rows.len(),
                table: self.table.clone(),
                data: self.data.clone(),
            });
        }
        let k = table
            .columns
            .iter()
            .position(|c| &c.header == column)
            .ok_or_else(|| BlockRule::ValueColumnMissing {
                column: column.clone(),
                table: self.table.clone(),
            })?;
        let text = markdown_cell(&table.rows[0][k]);
        Ok(if self.mean_only {
            text.split(" ± ").next().unwrap_or_default().to_string()
        } else {
            text
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::{Cell, Column, CsvShape};

    fn tables() -> Vec<Table> {
        let table = Table {
            name: "all_algorithms".into(),
            title: "All".into(),
            columns: vec![
                Column::key("Series", "series"),
                Column::key("Algorithm", "algorithm"),
                Column::value("D-bar", "d_mean"),
            ],
            rows: vec![
                vec![
                    Cell::text("C1"),
                    Cell::text("ACH"),
                    Cell::Estimate {
                        mean: Some(0.1787),
                        ci95: Some(0.0051),
                        decimals: 4,
                    },
                ],
                vec![
                    Cell::text("C2"),
                    Cell::text("ACH"),
                    Cell::Estimate {
                        mean: Some(0.0159),
                        ci95: Some(0.0005),
                        decimals: 4,
                    },
                ],
            ],
            csv_shape: CsvShape::AsRows,
        };
        vec![table]
    }

    fn fill(text: &str) -> Result<String, BlockError> {
        let tables = tables();
        fill_blocks(text, &|name| (name == "d").then_some(tables.as_slice()))
    }

    #[test]
    fn blocks_are_filled_and_filling_twice_changes_nothing() {
        let text = "Before\n<!-- table data=d; table=all_algorithms; Series=C2 -->\nold\n<!-- /table -->\nC1: <!-- value data=d; table=all_algorithms; Series=C1; column=D-bar; part=mean -->x<!-- /value -->.\n";
        let filled = fill(text).unwrap();
        assert_eq!(
            filled,
            "Before\n<!-- table data=d; table=all_algorithms; Series=C2 -->\n\n| Series | Algorithm | D-bar |\n| :--- | :--- | ---: |\n| C2 | ACH | 0.0159 ± 0.0005 |\n\n<!-- /table -->\nC1: <!-- value data=d; table=all_algorithms; Series=C1; column=D-bar; part=mean -->0.1787<!-- /value -->.\n"
        );
        assert_eq!(fill(&filled).unwrap(), filled);
    }

    #[test]
    fn bad_blocks_say_what_is_wrong_and_where() {
        let cases = [
            (
                "<!-- table data=d; table=nope -->\n<!-- /table -->",
                "line 1: table = \"nope\"",
            ),
            (
                "\n<!-- table data=x; table=all_algorithms -->\n<!-- /table -->",
                "line 2: data = \"x\"",
            ),
            (
                "<!-- table data=d; table=all_algorithms; Series=C9 -->\n<!-- /table -->",
                "no row",
            ),
            (
                "<!-- table data=d; table=all_algorithms; Colour=red -->\n<!-- /table -->",
                "\"Colour\" is not a column",
            ),
            (
                "<!-- value data=d; table=all_algorithms; column=D-bar -->1<!-- /value -->",
                "2 rows",
            ),
            (
                "<!-- table data=d; table=all_algorithms -->\n",
                "no <!-- /table -->",
            ),
            (
                "<!-- value data=d; table=all_algorithms; part=sd; Series=C1 -->1<!-- /value -->",
                "part",
            ),
            (
                "text\nC1: <!-- value data=d; table=nope; column=D-bar -->1<!-- /value -->",
                "line 2: table",
            ),
        ];
        for (text, expected) in cases {
            let error = fill(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
