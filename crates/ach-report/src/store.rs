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

/// First bytes of the optional block after a record's body: the per-algorithm mean
/// coefficient of variation of the true loads ([`ach_sim::Aggregates::cv_true_mean`]), written
/// only when some algorithm has it (a series with `report_cv = true`). A record without it is
/// byte for byte the record of the format before the block existed.
const CV_MAGIC: &[u8; 8] = b"ACHCV001";

/// First bytes of the second optional block (after the CV block, if any): the per-algorithm
/// fraction of forwarded requests ([`ach_sim::Aggregates::forwarded_fraction`]), written only
/// when some algorithm has it (one that routes requests its own way, such as CH-BL).
const FW_MAGIC: &[u8; 8] = b"ACHFW001";

/// An optional block after a record's body: one optional number per algorithm, kept outside
/// the bincode body so that records without it stay byte for byte as before it existed.
struct OptionalBlock {
    magic: &'static [u8; 8],
    field: fn(&mut ach_sim::Aggregates) -> &mut Option<f64>,
}

/// The optional blocks, in the order they are written.
const OPTIONAL_BLOCKS: [OptionalBlock; 2] = [
    OptionalBlock {
        magic: CV_MAGIC,
        field: |a| &mut a.cv_true_mean,
    },
    OptionalBlock {
        magic: FW_MAGIC,
        field: |a| &mut a.forwarded_fraction,
    },
];

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
    for block in OPTIONAL_BLOCKS {
        let values: Vec<Option<f64>> = record
            .algorithms
            .iter()
            .map(|a| {
                let mut aggregates = a.aggregates;
                *(block.field)(&mut aggregates)
            })
            .collect();
        if values.iter().any(Option::is_some) {
            bytes.extend_from_slice(block.magic);
            let encoded = bincode::serde::encode_to_vec(&values, bincode::config::standard())
                .expect("a list of numbers always encodes");
            bytes.extend_from_slice(&encoded);
        }
    }
    bytes
}

/// Decodes a record; `None` if the bytes are not a complete record of this format. Each
/// optional block may be there or not, in the order [`encode`] writes them.
pub fn decode(bytes: &[u8]) -> Option<RunRecord> {
    let body = bytes.strip_prefix(MAGIC.as_slice())?;
    let (mut record, used) =
        bincode::serde::decode_from_slice::<RunRecord, _>(body, bincode::config::standard())
            .ok()?;
    let mut rest = &body[used..];
    for block in OPTIONAL_BLOCKS {
        let Some(encoded) = rest.strip_prefix(block.magic.as_slice()) else {
            continue;
        };
        let (values, used) = bincode::serde::decode_from_slice::<Vec<Option<f64>>, _>(
            encoded,
            bincode::config::standard(),
        )
        .ok()?;
        if values.len() != record.algorithms.len() {
            return None;
        }
        for (algorithm, value) in record.algorithms.iter_mut().zip(values) {
            *(block.field)(&mut algorithm.aggregates) = value;
        }
        rest = &encoded[used..];
    }
    rest.is_empty().then_some(record)
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
    fn records_of_grid_points_round_trip() {
        let point = ach_sim::SweepPoint {
            coordinates: vec![
                ach_sim::config::Coordinate {
                    parameter: "noise.sigma".into(),
                    value: 0.05,
                },
                ach_sim::config::Coordinate {
                    parameter: "cluster.nodes".into(),
                    value: 100.0,
                },
            ],
        };
        let record = RunRecord {
            series: "G".into(),
            point: Some(point),
            run_index: 3,
            seed: 7,
            profile: ach_sim::Profile::Paper,
            fingerprint: 11,
            algorithms: Vec::new(),
        };
        assert_eq!(decode(&encode(&record)), Some(record));
    }

    fn record_with_two_algorithms() -> RunRecord {
        let algorithm = |name: &str| ach_sim::AlgorithmRecord {
            name: name.into(),
            aggregates: ach_sim::Aggregates::of(&[0.3, 0.2], &[], &[0.0, 1.0], 1, 0),
            d_trace: vec![0.3, 0.2],
            d_true_trace: Vec::new(),
            m_trace: vec![0.0, 1.0],
            violations: Vec::new(),
        };
        RunRecord {
            series: "S".into(),
            point: None,
            run_index: 0,
            seed: 42,
            profile: ach_sim::Profile::Paper,
            fingerprint: 5,
            algorithms: vec![algorithm("ACH"), algorithm("A0")],
        }
    }

    #[test]
    fn a_record_without_cv_has_no_trailing_block() {
        let record = record_with_two_algorithms();
        let bytes = encode(&record);
        let body = bincode::serde::encode_to_vec(&record, bincode::config::standard()).unwrap();
        assert_eq!(bytes, [MAGIC.as_slice(), &body].concat());
        assert_eq!(decode(&bytes), Some(record));
    }

    #[test]
    fn the_cv_block_round_trips_and_is_checked() {
        let mut record = record_with_two_algorithms();
        record.algorithms[0].aggregates.cv_true_mean = Some(0.125);
        record.algorithms[1].aggregates.cv_true_mean = Some(0.25);
        let bytes = encode(&record);
        let plain = encode(&record_with_two_algorithms());
        assert_eq!(&bytes[..plain.len()], plain.as_slice());
        assert_eq!(&bytes[plain.len()..plain.len() + 8], CV_MAGIC.as_slice());
        assert_eq!(decode(&bytes), Some(record));
        // A cut or foreign trailing block is not a record.
        assert!(decode(&bytes[..bytes.len() - 1]).is_none());
        assert!(decode(&[plain.as_slice(), b"junk"].concat()).is_none());
    }

    #[test]
    fn the_forwarded_block_round_trips_alone_and_after_the_cv_block() {
        let plain = encode(&record_with_two_algorithms());
        let mut forwarded = record_with_two_algorithms();
        forwarded.algorithms[1].aggregates.forwarded_fraction = Some(0.0625);
        let bytes = encode(&forwarded);
        assert_eq!(&bytes[..plain.len()], plain.as_slice());
        assert_eq!(&bytes[plain.len()..plain.len() + 8], FW_MAGIC.as_slice());
        assert_eq!(decode(&bytes), Some(forwarded.clone()));

        let mut both = forwarded;
        both.algorithms[0].aggregates.cv_true_mean = Some(0.125);
        let bytes = encode(&both);
        assert_eq!(&bytes[plain.len()..plain.len() + 8], CV_MAGIC.as_slice());
        assert!(
            bytes
                .windows(8)
                .skip(plain.len() + 8)
                .any(|w| w == FW_MAGIC.as_slice())
        );
        assert_eq!(decode(&bytes), Some(both));
        // Cut, repeated or out-of-order blocks are not a record.
        assert!(decode(&bytes[..bytes.len() - 1]).is_none());
        let fw_at = plain.len()
            + bytes[plain.len()..]
                .windows(8)
                .position(|w| w == FW_MAGIC.as_slice())
                .unwrap();
        let swapped = [
            &bytes[..plain.len()],
            &bytes[fw_at..],
            &bytes[plain.len()..fw_at],
        ]
        .concat();
        assert!(decode(&swapped).is_none());
        let twice = [bytes.as_slice(), &bytes[fw_at..]].concat();
        assert!(decode(&twice).is_none());
    }

    #[test]
    fn a_truncated_or_foreign_file_is_not_a_record() {
        assert!(decode(b"").is_none());
        assert!(decode(b"ACHREC01").is_none());
        assert!(decode(b"something else entirely").is_none());
    }
}
