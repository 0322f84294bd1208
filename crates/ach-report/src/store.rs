//! Where results live on disk and how they are written: the one module that knows the record
//! format (bincode 2, behind a small header), so the format can be swapped here alone.
//!
//! Every file is written atomically: to a temporary file in the same folder, then renamed over
//! the target. A killed process (Ctrl-C, kill -9) leaves either the old file, the new file, or a
//! stray temporary file (never read as a result, and removed by the next matrix started in the
//! same folder, see [`remove_stray_temporaries`]), never a half-written result. Files are not
//! fsynced: a power loss may lose the last results, which a rerun then recomputes.

use std::io::Write;
use std::path::{Path, PathBuf};

use ach_sim::RunRecord;
use ach_sim::matrix::Job;

/// First bytes of a record file.
const MAGIC: &[u8; 8] = b"ACHREC01";

/// The record file of a job: `DIR/runs/<series>/run_NNN.bin`, or
/// `DIR/runs/<series>/<parameter>=<value>/run_NNN.bin` for a sweep point.
pub fn record_path(out: &Path, job: &Job) -> PathBuf {
    let mut path = out.join("runs").join(&job.config.name);
    if let Some(point) = &job.point {
        path.push(point.label());
    }
    path.push(format!("run_{:03}.bin", job.run_index));
    path
}

/// Encodes a record.
pub fn encode(record: &RunRecord) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    let body = bincode::serde::encode_to_vec(record, bincode::config::standard())
        .expect("a record always encodes");
    bytes.extend_from_slice(&body);
    bytes
}

/// Decodes a record; `None` if the bytes are not a complete record of this format.
pub fn decode(bytes: &[u8]) -> Option<RunRecord> {
    let body = bytes.strip_prefix(MAGIC.as_slice())?;
    let (record, used) =
        bincode::serde::decode_from_slice::<RunRecord, _>(body, bincode::config::standard())
            .ok()?;
    (used == body.len()).then_some(record)
}

/// Reads the record of `job` if it exists, decodes, and matches the job (same series, point,
/// run, seed, profile and configuration fingerprint). Anything else is not reused.
pub fn reusable_record(out: &Path, job: &Job, profile: ach_sim::Profile) -> Option<RunRecord> {
    let bytes = std::fs::read(record_path(out, job)).ok()?;
    let record = decode(&bytes)?;
    let matches = record.series == job.config.name
        && record.point == job.point
        && record.run_index == job.run_index
        && record.seed == job.seed()
        && record.profile == profile
        && record.fingerprint == job.fingerprint(profile)
        && record.algorithms.len() == job.config.algorithms.len();
    matches.then_some(record)
}

/// The name of the temporary file `write_atomic` writes before renaming it to `name`.
fn temporary_name(name: &str) -> String {
    format!(".{name}.tmp{}", std::process::id())
}

/// True for a file name [`temporary_name`] could have made (in any process).
fn is_temporary_name(name: &str) -> bool {
    name.starts_with('.')
        && name
            .rsplit_once(".tmp")
            .is_some_and(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Removes the temporary files that killed runs left anywhere under `out`; returns how many.
pub fn remove_stray_temporaries(out: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    let mut folders = vec![out.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                folders.push(path);
            } else if is_temporary_name(&entry.file_name().to_string_lossy()) {
                std::fs::remove_file(&path)?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// Writes `bytes` to `path` atomically, creating parent folders.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(temporary_name(&name));
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_recognised() {
        assert!(is_temporary_name(&temporary_name("run_001.bin")));
        assert!(is_temporary_name(".summary.json.tmp123"));
        assert!(!is_temporary_name("run_001.bin"));
        assert!(!is_temporary_name(".hidden"));
        assert!(!is_temporary_name(".x.tmpabc"));
    }

    #[test]
    fn a_truncated_or_foreign_file_is_not_a_record() {
        assert!(decode(b"").is_none());
        assert!(decode(b"ACHREC01").is_none());
        assert!(decode(b"something else entirely").is_none());
    }
}
