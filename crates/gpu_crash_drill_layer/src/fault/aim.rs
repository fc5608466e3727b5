//! `GPU_CRASH_DRILL_AIM=<file>`: the memory scenarios held back until the file's first line gives
//! them their target, `<label>[@<offset>]`, read at a submission; the first aim read stays.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::config::{aim_line, AimLine, Scenario};
use crate::log::log_line;
use crate::state::fault::FaultState;

/// Longest first line of an aim file that is read (a label and an offset are far shorter).
const AIM_LINE_LIMIT: u64 = 64 * 1024;

/// The first line of the aim file at `path`, as far as it is there; `None` when it cannot be read
/// (missing, or not readable yet): the drill keeps waiting.
fn read_aim_file(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    BufReader::new(file.take(AIM_LINE_LIMIT))
        .read_until(b'\n', &mut line)
        .ok()?;
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// `GPU_CRASH_DRILL_AIM`: the memory scenario `scenario` aimed by the file at `path`, read now (at
/// submission `n`) unless it was before; `None` while the file has no usable first line. The first
/// aim read stays for the device's life; a line without a label is logged once and waited past.
pub(super) fn aimed(
    fault: &mut FaultState,
    scenario: &Scenario,
    path: &Path,
    n: u64,
) -> Option<Scenario> {
    if let Some(aim) = &fault.aim {
        return Some(aim.clone());
    }
    match aim_line(scenario, &read_aim_file(path)?) {
        AimLine::NotYet => None,
        AimLine::NoLabel(line) => {
            if fault.aim_no_label.as_deref() != Some(line.as_str()) {
                log_line(&format!(
                    "GPU_CRASH_DRILL_AIM={}: first line \"{}\" has no label (expected \
                     <label>[@<offset>]); waiting for one",
                    path.display(),
                    line.escape_debug()
                ));
                fault.aim_no_label = Some(line);
            }
            None
        }
        AimLine::Aim(aim) => {
            log_line(&format!(
                "GPU_CRASH_DRILL_AIM={}: aim taken at submission {n}: {}",
                path.display(),
                aim.display()
            ));
            fault.aim = Some(aim.clone());
            Some(aim)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aim_file_is_waited_for_then_taken_once() {
        let dir = std::env::temp_dir().join(format!(
            "gpu_crash_drill-aim-unit-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("aim");
        let _ = std::fs::remove_file(&path);
        let mut fault = FaultState::default();
        let scenario = Scenario::InBounds {
            label: Some("keep".into()),
            offset: Some(4),
        };
        // Missing, empty, a first line without a label: not yet.
        assert_eq!(aimed(&mut fault, &scenario, &path, 1), None);
        std::fs::write(&path, "").unwrap();
        assert_eq!(aimed(&mut fault, &scenario, &path, 2), None);
        std::fs::write(&path, "@0x1e0\n").unwrap();
        assert_eq!(aimed(&mut fault, &scenario, &path, 3), None);
        assert_eq!(fault.aim_no_label.as_deref(), Some("@0x1e0"));
        assert_eq!(fault.aim, None);
        std::fs::write(&path, "slab@0x1e0\nsecond line\n").unwrap();
        let slab = Scenario::InBounds {
            label: Some("slab".into()),
            offset: Some(0x1e0),
        };
        assert_eq!(aimed(&mut fault, &scenario, &path, 4), Some(slab.clone()));
        // Fixed once taken: a new line, or no file at all, changes nothing.
        std::fs::write(&path, "other@8\n").unwrap();
        assert_eq!(aimed(&mut fault, &scenario, &path, 5), Some(slab.clone()));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(aimed(&mut fault, &scenario, &path, 6), Some(slab));
        let _ = std::fs::remove_dir(&dir);
    }
}
