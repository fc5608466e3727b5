//! The report's engine version is the Bevy this crate was built with.

/// Reports carry `engine_version` = `BEVY_VERSION`: it must be the Bevy that Cargo.lock resolved.
#[test]
fn bevy_version_matches_cargo_lock() {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"))
        .expect("Cargo.lock");
    let locked = lock
        .split("[[package]]")
        .find(|p| p.lines().any(|l| l.trim() == "name = \"bevy\""))
        .and_then(|p| {
            p.lines()
                .find_map(|l| l.trim().strip_prefix("version = \""))
                .map(|v| v.trim_end_matches('"').to_owned())
        })
        .expect("bevy in Cargo.lock");
    assert_eq!(bevy_gpu_crash_reporter::BEVY_VERSION, locked);
}
