//! Figures as vector PDF for pdflatex: the SVG the report draws, converted by `svg2pdf` (the
//! Typst project's converter, on `usvg`) with its text embedded as subset fonts, scaled to
//! `\columnwidth` of a two-column `article`.
//!
//! The SVGs name the generic family `sans-serif`; it is resolved to DejaVu Sans from the
//! system's fonts (Debian's `fonts-dejavu-core`), so that every machine embeds the same font.
//! Without it the conversion fails and names the package: a PDF is never written with text
//! left out.

use std::sync::Arc;

use svg2pdf::usvg;

/// The font family the generic `sans-serif` of the SVGs becomes.
pub const SANS_SERIF_FAMILY: &str = "DejaVu Sans";

/// The Debian package that installs it.
pub const FONT_PACKAGE: &str = "fonts-dejavu-core";

/// The width of every PDF figure, in points: `\columnwidth` of a two-column `article`.
pub const FIGURE_WIDTH_PT: f64 = super::latex::COLUMN_WIDTH_PT;

/// Why a figure could not be converted to PDF.
#[derive(Debug, thiserror::Error)]
pub enum PdfError {
    /// The font the SVGs' text needs is not installed.
    #[error(
        "no {SANS_SERIF_FAMILY} font among the system's fonts, needed to embed the figures' text in their PDFs: install it with `apt-get install {FONT_PACKAGE}`"
    )]
    NoFont,
    /// The SVG could not be read.
    #[error("the SVG cannot be read: {0}")]
    Svg(String),
    /// Some text of the SVG could not be set with any font.
    #[error(
        "{drawn} of {expected} texts could be set with the system's fonts; install `{FONT_PACKAGE}`"
    )]
    MissingText {
        /// Texts in the SVG.
        expected: usize,
        /// Texts converted.
        drawn: usize,
    },
    /// `svg2pdf` failed.
    #[error("the PDF conversion failed: {0}")]
    Conversion(String),
}

/// The fonts the conversion embeds, loaded once per report.
pub struct PdfFonts {
    fontdb: Arc<usvg::fontdb::Database>,
}

impl PdfFonts {
    /// Loads the system's fonts and resolves `sans-serif` to [`SANS_SERIF_FAMILY`]; fails with
    /// [`PdfError::NoFont`] when it is not installed.
    pub fn load() -> Result<PdfFonts, PdfError> {
        let mut fontdb = usvg::fontdb::Database::new();
        fontdb.load_system_fonts();
        let found = fontdb.faces().any(|face| {
            face.families
                .iter()
                .any(|(family, _)| family == SANS_SERIF_FAMILY)
        });
        if !found {
            return Err(PdfError::NoFont);
        }
        fontdb.set_sans_serif_family(SANS_SERIF_FAMILY);
        Ok(PdfFonts {
            fontdb: Arc::new(fontdb),
        })
    }
}

/// The texts of an SVG with visible content (plotters writes each as one `<text>` element).
fn visible_texts(svg: &str) -> usize {
    svg.split("<text")
        .skip(1)
        .filter(|element| {
            let content = element
                .split_once('>')
                .map_or("", |(_, rest)| rest.split("</text>").next().unwrap_or(""));
            !content.trim().is_empty()
        })
        .count()
}

/// The text nodes of a parsed tree that were set with a font.
fn drawn_texts(group: &usvg::Group) -> usize {
    group
        .children()
        .iter()
        .map(|node| match node {
            usvg::Node::Group(group) => drawn_texts(group),
            usvg::Node::Text(text) => usize::from(!text.flattened().children().is_empty()),
            usvg::Node::Path(_) | usvg::Node::Image(_) => 0,
        })
        .sum()
}

/// The SVG `svg` as a PDF page [`FIGURE_WIDTH_PT`] wide, its text embedded.
pub fn svg_to_pdf(svg: &str, fonts: &PdfFonts) -> Result<Vec<u8>, PdfError> {
    let options = usvg::Options {
        fontdb: Arc::clone(&fonts.fontdb),
        font_family: SANS_SERIF_FAMILY.to_string(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| PdfError::Svg(e.to_string()))?;
    let expected = visible_texts(svg);
    let drawn = drawn_texts(tree.root());
    if drawn < expected {
        return Err(PdfError::MissingText { expected, drawn });
    }
    // The page is the SVG's size at `dpi` pixels per inch: choose it so the page is a column wide.
    let dpi = (f64::from(tree.size().width()) * 72.0 / FIGURE_WIDTH_PT) as f32;
    let mut pdf = svg2pdf::to_pdf(
        &tree,
        svg2pdf::ConversionOptions::default(),
        svg2pdf::PageOptions { dpi },
    )
    .map_err(|e| PdfError::Conversion(e.to_string()))?;
    sort_resource_entries(&mut pdf);
    Ok(pdf)
}

/// Whether `line` is one entry of a resource dictionary: `      /xo13 34 0 R`.
fn is_resource_entry(line: &[u8]) -> bool {
    let text = line.trim_ascii_start();
    text.len() < line.len()
        && text.starts_with(b"/")
        && text.ends_with(b" 0 R")
        && text.split(|&b| b == b' ').count() == 4
        && text[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b' ')
}

/// Sorts the entries of every resource dictionary. `svg2pdf` writes them in the order of a
/// `HashMap`, so the same SVG would give other bytes on every conversion; sorting the lines
/// of a dictionary keeps its length, so every offset of the file stays valid. Streams (binary)
/// are left as they are.
fn sort_resource_entries(pdf: &mut [u8]) {
    let mut start = 0;
    while start < pdf.len() {
        if pdf[start..].starts_with(b"stream\n") {
            match find(&pdf[start..], b"\nendstream") {
                Some(end) => start += end + b"\nendstream".len(),
                None => return,
            }
            continue;
        }
        let line_end = |from: usize| find(&pdf[from..], b"\n").map_or(pdf.len(), |n| from + n);
        let at_line_start = start == 0 || pdf[start - 1] == b'\n';
        if at_line_start && is_resource_entry(&pdf[start..line_end(start)]) {
            let mut end = start;
            while end < pdf.len() && is_resource_entry(&pdf[end..line_end(end)]) {
                end = line_end(end) + 1;
            }
            let end = end.min(pdf.len());
            let mut lines: Vec<Vec<u8>> = pdf[start..end]
                .split_inclusive(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect();
            lines.sort();
            pdf[start..end].copy_from_slice(&lines.concat());
            start = end;
        } else {
            start += 1;
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVG: &str = r#"<svg xmlns="http://www.w3.org/2000/svg" width="640" height="420" viewBox="0 0 640 420"><rect x="0" y="0" width="640" height="420" fill="white"/><text x="20" y="40" font-family="sans-serif" font-size="13">D-bar 0.25</text><text x="20" y="80"> </text></svg>"#;

    #[test]
    fn a_figure_becomes_a_column_wide_pdf_with_its_text_embedded() {
        let fonts = PdfFonts::load().expect(FONT_PACKAGE);
        let pdf = svg_to_pdf(SVG, &fonts).expect("the SVG converts");
        assert!(pdf.starts_with(b"%PDF-"));
        let text = String::from_utf8_lossy(&pdf);
        // The page is 229.5 pt wide (at 640 px by 420: 150.6 pt high).
        let media_box = text
            .split("/MediaBox [")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .expect("a media box");
        let sides: Vec<f64> = media_box
            .split_whitespace()
            .map(|n| n.parse().expect("a number"))
            .collect();
        assert!((sides[2] - 229.5).abs() < 0.01, "{media_box}");
        assert!(
            (sides[3] - 229.5 * 420.0 / 640.0).abs() < 0.01,
            "{media_box}"
        );
        assert!(text.contains("/FontFile2"), "the font is embedded");
        // The same SVG gives the same bytes.
        for _ in 0..8 {
            assert!(svg_to_pdf(SVG, &fonts).unwrap() == pdf, "deterministic");
        }
        assert_eq!(visible_texts(SVG), 1);
    }

    #[test]
    fn text_that_no_font_can_set_is_an_error_not_a_silent_gap() {
        let fonts = PdfFonts {
            fontdb: Arc::new(usvg::fontdb::Database::new()),
        };
        let error = svg_to_pdf(SVG, &fonts).unwrap_err();
        assert!(matches!(
            error,
            PdfError::MissingText {
                expected: 1,
                drawn: 0
            }
        ));
        assert!(error.to_string().contains(FONT_PACKAGE));
    }
}
