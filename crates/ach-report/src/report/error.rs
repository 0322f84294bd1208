//! Why a report could not be rendered: the typed error of the render path ([`super::render`],
//! loading saved results, writing tables and figures). Its message names the file, and for
//! content, the field, the value and the rule; binaries print it and choose the exit code.

use std::path::PathBuf;

use super::figures::FigureError;
use super::pdf::PdfError;

/// What to do when saved results are missing.
pub const RUN_FIRST: &str = "run `cargo xtask experiments` first";

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Saved results (a file or a folder) are missing or unreadable: run the matrix first.
    #[error("{}: cannot read: {source} — {RUN_FIRST}", path.display())]
    Missing {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file that exists could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An output file could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A saved file does not hold what it should; `detail` names the field, the value and
    /// the rule, or the format expected.
    #[error("{}: {detail}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, in words.
        detail: String,
    },
    /// A figure of a series could not be drawn.
    #[error("{series}: {source}")]
    Figure {
        /// The series.
        series: String,
        /// The cause.
        source: FigureError,
    },
    /// A figure could not be written as PDF (for the folder: the fonts are missing).
    #[error("{}: {source}", path.display())]
    Pdf {
        /// The PDF file, or the figures' folder.
        path: PathBuf,
        /// The cause.
        source: PdfError,
    },
}

/// The message of a report error, for callers that pass errors on as text.
impl From<ReportError> for String {
    fn from(error: ReportError) -> String {
        error.to_string()
    }
}
