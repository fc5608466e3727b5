//! Fuzzing the readers of hostile files with proptest, bounded to run in `cargo test`: the report
//! reader (`read_report`, `read_vendor_binary`, then the envelope built from what was read) and the
//! outbox's reading of envelope files (a real outbox flush), on arbitrary bytes, mutated valid
//! files and huge length fields. No panic, no unbounded allocation (every read is capped, so a case
//! that allocated without bound would fail on the cap or run out of memory, not pass).
//!
//! `FUZZ_CASES` sets the cases per property (default 1024); each property prints its case count,
//! how many inputs the reader accepted, and its time.

#[path = "deliver_support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bevy_gpu_crash_reporter::report::{read_report, read_vendor_binary, CrashReport};
use bevy_gpu_crash_reporter::{DeliverySettings, Outbox};
use gpu_crash_core::test_support::build_envelope;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use support::*;

/// Values spliced into files: huge and negative numbers, deep nesting, hostile names and strings.
const HOSTILE: &[&str] = &[
    "18446744073709551616",
    "18446744073709551615",
    "-1",
    "1e999999",
    "null",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"/dev/zero\"",
    "\"../../../../etc/passwd\"",
    "\"/root/.ssh/id_ed25519\"",
    "\"\\u001b]0;x\\u0007\"",
    "{\"type\":\"attachment\",\"length\":18446744073709551615}\n",
    "{\"type\":\"event\",\"length\":4294967296}\n",
    "{\"type\":\"attachment\",\"length\":99999999999}\nxx",
    "\n\n\n",
];

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Splice(usize, &'static str),
    /// Replaces the first number after the n-th `"length":` (or `"size":`) with a hostile one.
    Length(usize, &'static str),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 0..24))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), prop::sample::select(HOSTILE)).prop_map(|(i, s)| Mutation::Splice(i, s)),
        (
            0usize..4,
            prop::sample::select(&["18446744073709551615", "4294967296", "99999999999", "0"][..])
        )
            .prop_map(|(n, s)| Mutation::Length(n, s)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let at = |i: usize, len: usize| i % (len + 1);
    match m {
        Mutation::Flip(i, b) if !bytes.is_empty() => {
            let i = i % bytes.len();
            bytes[i] ^= b | 1;
        }
        Mutation::Flip(..) => {}
        Mutation::Truncate(i) => bytes.truncate(at(*i, bytes.len())),
        Mutation::Insert(i, v) => {
            let i = at(*i, bytes.len());
            bytes.splice(i..i, v.iter().copied());
        }
        Mutation::Splice(i, s) => {
            let i = at(*i, bytes.len());
            bytes.splice(i..i, s.bytes());
        }
        Mutation::Length(n, value) => {
            for key in [&b"\"length\":"[..], b"\"size\":"] {
                let Some(start) = bytes
                    .windows(key.len())
                    .enumerate()
                    .filter(|(_, w)| *w == key)
                    .map(|(i, _)| i + key.len())
                    .nth(*n)
                else {
                    continue;
                };
                let end = start
                    + bytes[start..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit() || **b == b' ')
                        .count();
                bytes.splice(start..end, value.bytes());
                return;
            }
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("fuzz_readers")
        .join(format!("{name}-{}", run_tag()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(1024)
}

/// Runs `strategy` through `test` for [`cases`] cases and says how many ran, how many inputs the
/// reader accepted (`test` returns whether it did) and how long it took.
fn fuzz<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> bool) {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    });
    let (ran, accepted) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let start = Instant::now();
    let result = runner.run(&strategy, |value| {
        // Relaxed: counters read once, after the run, on this thread.
        ran.fetch_add(1, Ordering::Relaxed);
        if test(value) {
            accepted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    eprintln!(
        "fuzz {name}: {} cases ({} accepted by the reader) in {:.2} s",
        ran.load(Ordering::Relaxed),
        accepted.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
    result.unwrap();
}

/// A valid report as its file on disk, with a vendor binary beside it.
fn valid_report_bytes() -> Vec<u8> {
    let mut report = use_after_free("particles", 0x1000_0000);
    report
        .notes
        .push("panicked at /home/qa/src/main.rs:1:1: x".into());
    if let Some(v) = report.vendor_binary.as_mut() {
        v.file_name = Some("vendor.bin".into());
    }
    serde_json::to_vec_pretty(&report).unwrap()
}

/// What `gpu-crash upload` and the startup requeue do with a report file: read it and the vendor
/// binary it names (capped, only from its folder), then build the envelope and read it back.
/// Returns whether the report was read.
fn read_like_upload(path: &Path, settings: &DeliverySettings) -> bool {
    let Ok(report) = read_report(path) else {
        return false;
    };
    let vendor = read_vendor_binary(path, &report).ok().flatten();
    let mut bytes = Vec::new();
    build_envelope(&report, vendor.as_deref(), settings)
        .to_writer(&mut bytes)
        .unwrap();
    sentry::Envelope::from_slice(&bytes).expect("an envelope we built reads back");
    true
}

#[test]
fn report_reader_survives_arbitrary_and_mutated_files() {
    let dir = scratch("reports");
    std::fs::write(dir.join("vendor.bin"), [1u8, 2, 3]).unwrap();
    let settings = DeliverySettings {
        dsn_from_env: false,
        ..DeliverySettings::new(None, dir.join("outbox"))
    };
    let path = dir.join("gpu-crash-1-fuzz.json");
    let valid = valid_report_bytes();

    fuzz(
        "report, arbitrary bytes",
        prop::collection::vec(any::<u8>(), 0..4096),
        |bytes| {
            std::fs::write(&path, &bytes).unwrap();
            read_like_upload(&path, &settings)
        },
    );
    fuzz(
        "report, mutated valid report",
        prop::collection::vec(mutation(), 1..6),
        |mutations| {
            let mut bytes = valid.clone();
            mutations.iter().for_each(|m| apply(&mut bytes, m));
            std::fs::write(&path, &bytes).unwrap();
            read_like_upload(&path, &settings)
        },
    );
    fuzz(
        "report, hostile field values",
        (
            prop::sample::select(
                &[
                    "vendor_binary.file_name",
                    "vendor_binary.size",
                    "timestamp_ms",
                    "id",
                    "notes",
                    "schema_version",
                    "frame",
                    "breadcrumbs",
                ][..],
            ),
            prop::sample::select(HOSTILE),
        ),
        |(field, value)| {
            let mut json: serde_json::Value = serde_json::from_slice(&valid).unwrap();
            let hostile = serde_json::from_str(value.trim())
                .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
            let mut target = &mut json;
            for key in field.split('.') {
                target = &mut target[key];
            }
            *target = hostile;
            std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
            read_like_upload(&path, &settings)
        },
    );
}

/// The outbox's reading of envelope files, through a real flush: claim, capped read, parse, stamp.
/// Nothing listens at the DSN's port, so a well-formed envelope stays (connection refused, then the
/// backoff is past the deadline) and a malformed one goes to `failed/`.
#[test]
fn outbox_reader_survives_arbitrary_and_mutated_envelopes() {
    let dir = scratch("outbox");
    let settings = DeliverySettings {
        dsn_from_env: false,
        upload_timeout: Duration::from_millis(200),
        max_outbox_files: 1000,
        ..DeliverySettings::new(
            Some(
                format!("http://k@127.0.0.1:{}/1", free_port())
                    .parse()
                    .unwrap(),
            ),
            dir.clone(),
        )
    };
    let mut valid = Vec::new();
    let report: CrashReport = use_after_free("particles", 0x1000_0000);
    build_envelope(&report, Some(&[9u8; 64]), &settings)
        .to_writer(&mut valid)
        .unwrap();
    let name = "00000000000000000001-0123456789abcdef0123456789abcdef.envelope";

    let flush_one = |bytes: &[u8]| {
        // A fresh outbox value each time: no backoff carried over from the previous case.
        let outbox = Outbox::new(settings.clone());
        std::fs::write(dir.join(name), bytes).unwrap();
        let summary = outbox.flush(Instant::now() + Duration::from_millis(300));
        assert_eq!(summary.sent, 0, "{summary:?}");
        let _ = std::fs::remove_file(dir.join(name));
        let _ = std::fs::remove_dir_all(dir.join("failed"));
        // Accepted: read and parsed, then only the network stopped it.
        summary.failed == 0
    };
    fuzz(
        "envelope, arbitrary bytes",
        prop::collection::vec(any::<u8>(), 0..4096),
        |bytes| flush_one(&bytes),
    );
    fuzz(
        "envelope, mutated valid envelope",
        prop::collection::vec(mutation(), 1..6),
        |mutations| {
            let mut bytes = valid.clone();
            mutations.iter().for_each(|m| apply(&mut bytes, m));
            flush_one(&bytes)
        },
    );

    // A huge file (sparse: nothing on disk) is refused by its size and never read into memory; a
    // reader without the cap would try to allocate 8 GiB here.
    std::fs::File::create(dir.join(name))
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let summary = Outbox::new(settings.clone()).flush(Instant::now() + Duration::from_secs(5));
    assert_eq!(summary.failed, 1, "{summary:?}");
    assert!(
        summary
            .last_error
            .unwrap_or_default()
            .contains("larger than"),
        "refused by its size"
    );
}
