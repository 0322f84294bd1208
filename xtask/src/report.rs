//! Reports rendered from saved results: REPORT.md, tables and figures.
//!
//! Not built yet (the reports issue builds it): `render` does nothing so far.

use std::path::Path;

/// Renders the report of the results in `out`. Not built yet: writes nothing.
pub fn render(_out: &Path) -> Result<(), String> {
    Ok(())
}
