//! `gpu-crash show` on a report of every drill scenario, against stored snapshots.
//!
//! The reports in tests/fixtures were written by the plugin in `examples/tiny_game.rs` under
//! `gpu-crash drill` on lavapipe (tests/fixtures/README.md says how to write them again). After a
//! deliberate change of the output, `UPDATE_SNAPSHOTS=1 cargo test -p gpu-crash --test
//! show_snapshots` rewrites tests/snapshots and `git diff` shows what changed.

mod common;

use std::path::Path;

use common::*;

#[test]
fn show_matches_the_snapshot_of_every_scenario() {
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut differ = Vec::new();
    for scenario in SCENARIOS {
        let output = gpu_crash()
            .arg("show")
            .arg(fixture(scenario))
            .output()
            .unwrap();
        let (stdout, stderr) = text(&output);
        assert!(output.status.success(), "{scenario}: {stderr}");
        let snapshot = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots")
            .join(format!("show-{scenario}.txt"));
        if update {
            std::fs::write(&snapshot, &stdout).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&snapshot)
            .unwrap_or_else(|e| panic!("{}: {e}", snapshot.display()));
        if stdout != expected {
            differ.push(format!(
                "--- {} (expected)\n{expected}\n--- gpu-crash show (actual)\n{stdout}",
                snapshot.display()
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// The line of `gpu-crash show <fixture>` that starts with `prefix`.
fn show_line(fixture: &str, prefix: &str) -> String {
    let output = gpu_crash()
        .arg("show")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(fixture),
        )
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line:\n{stdout}"))
        .to_owned()
}

/// A hang at a relaunch on the H100 host while the GPU was still busy with an earlier run's endless
/// shader (tests/fixtures/README.md): `show` names the earlier run's report it joins.
#[test]
fn show_names_the_earlier_hang_a_relaunch_joins() {
    assert_eq!(
        show_line("hang-after-earlier-h100.json", "  after "),
        "  after     the GPU hang report e63ea8c1c70e4e6ebf22cfc6b59154ac of process 552, 11 s before \
         on this GPU: most likely the GPU was still busy with it (sent under its issue)"
    );
}

/// A report whose culprit is a mesh inside a shared slab (written by tests/asset_naming.rs of the
/// root crate on lavapipe): `show` names the asset, the vertex, its bytes and who draws it.
#[test]
fn show_names_the_mesh_asset_of_the_culprit() {
    assert_eq!(
        show_line("mesh-asset.json", "  asset "),
        "  asset     mesh \"models/tree.mesh\", vertex 5 (32-byte vertices at [1664, 4864) of general \
         mesh slab 2), live, used by oak, birch"
    );
}

/// A drilled loss on lavapipe with the drill's budget cut to 1 MiB (written by the core's
/// tests/video_memory.rs): `show` gives each heap's usage of its budget, marks the one near it, and
/// counts the allocation the driver refused.
#[test]
fn show_gives_video_memory_at_the_fault() {
    assert_eq!(
        show_line("video-memory-near-budget.json", "  heap 0 "),
        "  heap 0 (device-local, 2.0 GiB): 64.0 MiB used of a 1.0 MiB budget (6403%)   <- near the \
         budget"
    );
    assert!(
        show_line("video-memory-near-budget.json", "  1 allocation(s) failed ").starts_with(
            "  1 allocation(s) failed since the device was made; the last: 1024.0 GiB of heap 0 \
             for DEVICE_MEMORY, "
        )
    );
    assert!(show_line(
        "video-memory-near-budget.json",
        "Note: video memory near the budget: "
    )
    .contains("over it"));
}
