//! Reports are hostile input: `upload` attaches no file outside the report's folder and `show`
//! prints no terminal control sequence from a report (issue 32 item 6); mutated reports through
//! both, fuzzed with proptest (`FUZZ_CASES`, default 256: each case runs the tool twice), neither
//! panic nor print a raw escape.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;

/// Bytes no upload may carry: a stand-in for `~/.ssh/id_ed25519`.
const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- hostile-files-test-secret";

/// A server on 127.0.0.1 that reads each request whole and answers 400: the outbox then moves the
/// envelope to `failed/`, where the test reads exactly what was uploaded.
fn rejecting_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 64 * 1024];
            let complete = loop {
                let Ok(n) = stream.read(&mut chunk) else {
                    break false;
                };
                if n == 0 {
                    break false;
                }
                buf.extend_from_slice(&chunk[..n]);
                let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    break true;
                }
            };
            if complete {
                let _ = stream.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 8\r\nConnection: close\r\n\r\nrejected",
                );
            }
        }
    });
    port
}

/// A copy of the use-after-free fixture in `dir`, its vendor binary named `vendor_name`.
fn report_naming(dir: &Path, vendor_name: &str) -> PathBuf {
    let mut report: Value =
        serde_json::from_slice(&std::fs::read(fixture("use-after-free")).unwrap()).unwrap();
    report["vendor_binary"]["file_name"] = vendor_name.into();
    let path = dir.join(format!(
        "gpu-crash-{}-{}.json",
        report["timestamp_ms"],
        report["id"].as_str().unwrap()
    ));
    std::fs::write(&path, serde_json::to_vec_pretty(&report).unwrap()).unwrap();
    path
}

/// Issue 32 item 6: a report naming a file outside its folder (an absolute path, `..`) does not get
/// that file uploaded as its vendor binary.
#[test]
fn upload_attaches_no_file_outside_the_reports_folder() {
    let port = rejecting_server();
    let home = temp_dir("hostile-upload");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let key = ssh.join("id_ed25519");
    std::fs::write(&key, SECRET).unwrap();
    let reports = home.join("reports");
    std::fs::create_dir_all(&reports).unwrap();

    for (i, name) in [key.to_str().unwrap(), "../.ssh/id_ed25519"]
        .into_iter()
        .enumerate()
    {
        let outbox = home.join(format!("outbox-{i}"));
        let report = report_naming(&reports, name);
        let output = gpu_crash()
            .arg("upload")
            .arg("--dsn")
            .arg(format!("http://k@127.0.0.1:{port}/1"))
            .arg("--outbox")
            .arg(&outbox)
            .arg(&report)
            .env_remove("SENTRY_DSN")
            .output()
            .unwrap();
        let (stdout, stderr) = text(&output);
        assert!(!stderr.contains("panicked"), "{stderr}");
        let failed: Vec<PathBuf> = std::fs::read_dir(outbox.join("failed"))
            .unwrap_or_else(|e| panic!("{name}: no failed/ ({e}):\n{stdout}\n{stderr}"))
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(failed.len(), 1, "{name}: {failed:?}\n{stdout}\n{stderr}");
        let uploaded = String::from_utf8_lossy(&std::fs::read(&failed[0]).unwrap()).into_owned();
        assert!(
            !uploaded.contains(SECRET),
            "{name}: the upload carried {} as the vendor binary",
            key.display()
        );
        assert!(
            stderr.contains("vendor binary"),
            "{name}: says nothing of the refused attachment:\n{stderr}"
        );
        std::fs::remove_file(&report).unwrap();
    }
}

/// Issue 32 item 6: `show` prints a report's strings with control characters escaped, so a report
/// cannot retitle, clear or reprogram the terminal that shows it.
#[test]
fn show_escapes_terminal_control_sequences() {
    let dir = temp_dir("hostile-show");
    let mut report: Value =
        serde_json::from_slice(&std::fs::read(fixture("use-after-free")).unwrap()).unwrap();
    report["summary"] = "GPU fault \u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mred".into();
    report["notes"] = serde_json::json!(["note \u{9b}1;1H\rfake line\u{202e}txt.exe"]);
    report["gpu"]["gpu_name"] = "GPU\u{1b}[8m hidden".into();
    let path = dir.join("gpu-crash-1-hostile.json");
    std::fs::write(&path, serde_json::to_vec(&report).unwrap()).unwrap();

    let output = gpu_crash().arg("show").arg(&path).output().unwrap();
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\r', '\u{202e}'] {
        assert!(
            !stdout.contains(bad),
            "show printed {bad:?} raw:\n{}",
            stdout.escape_debug()
        );
    }
    assert!(stdout.contains("pwned"), "the text itself is still shown");
    assert!(stdout.contains("fake line"));
}

/// Values spliced into reports: huge numbers, deep nesting, hostile names and strings.
const HOSTILE: &[&str] = &[
    "18446744073709551616",
    "-1",
    "1e999999",
    "null",
    "\"\\u0000\"",
    "\"/dev/zero\"",
    "\"../../../../etc/passwd\"",
    "\"\\u001b]0;x\\u0007\\u001b[2J\"",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
];

/// `gpu-crash show` and `upload`'s parsing path on mutated reports (bytes flipped, cut, hostile
/// values spliced in, hostile values in fields): no panic, no raw escape, only the documented exit
/// codes.
#[test]
fn show_and_upload_survive_mutated_reports() {
    let port = rejecting_server();
    let dir = temp_dir("fuzz-cli");
    let valid = std::fs::read(fixture("use-after-free")).unwrap();
    let fixture_json: Value = serde_json::from_slice(&valid).unwrap();
    let vendor = fixture_json["vendor_binary"]["file_name"].as_str().unwrap();
    std::fs::write(dir.join(vendor), [1u8; 70]).unwrap();
    let path = dir.join("gpu-crash-1-fuzz.json");
    let outbox = dir.join("outbox");
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    });
    // Field mutations weigh most: a flipped byte mostly leaves JSON that is refused at once.
    let mutation = prop_oneof![
        1 => (any::<usize>(), 1u8..).prop_map(|(i, b)| (0u8, i, b, "")),
        1 => any::<usize>().prop_map(|i| (1u8, i, 0, "")),
        1 => (any::<usize>(), prop::sample::select(HOSTILE)).prop_map(|(i, s)| (2u8, i, 0, s)),
        4 => (0usize..6, prop::sample::select(HOSTILE)).prop_map(|(f, s)| (3u8, f, 0, s)),
    ];
    let start = std::time::Instant::now();
    let (ran, shown) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let result = runner.run(&prop::collection::vec(mutation, 1..4), |mutations| {
        ran.set(ran.get() + 1);
        let mut bytes = valid.clone();
        for (kind, i, b, s) in mutations {
            let at = i % (bytes.len() + 1);
            match kind {
                0 if !bytes.is_empty() => {
                    let i = i % bytes.len();
                    bytes[i] ^= b;
                }
                1 => bytes.truncate(at),
                2 => {
                    bytes.splice(at..at, s.bytes());
                }
                3 => {
                    let Ok(mut json) = serde_json::from_slice::<Value>(&bytes) else {
                        continue;
                    };
                    let field = [
                        "summary",
                        "notes",
                        "vendor_binary",
                        "timestamp_ms",
                        "id",
                        "gpu",
                    ][i];
                    // The text fields get the value as a string (escapes and all), the rest as JSON.
                    json[field] = match field {
                        "summary" | "id" => Value::String(s.to_owned()),
                        "notes" => serde_json::json!([s]),
                        _ => {
                            serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned()))
                        }
                    };
                    bytes = serde_json::to_vec(&json).unwrap();
                }
                _ => {}
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        let show = gpu_crash().arg("show").arg(&path).output().unwrap();
        let (stdout, stderr) = text(&show);
        prop_assert!(!stderr.contains("panicked"), "show panicked: {stderr}");
        prop_assert!(matches!(show.status.code(), Some(0 | 2)), "{stderr}");
        prop_assert!(
            !stdout.contains('\x1b') && !stderr.contains('\x1b'),
            "raw ESC"
        );
        shown.set(shown.get() + usize::from(show.status.success()));
        let _ = std::fs::remove_dir_all(&outbox);
        let upload = gpu_crash()
            .arg("upload")
            .arg("--dsn")
            .arg(format!("http://k@127.0.0.1:{port}/1"))
            .arg("--outbox")
            .arg(&outbox)
            .arg(&path)
            .env_remove("SENTRY_DSN")
            .output()
            .unwrap();
        let (stdout, stderr) = text(&upload);
        prop_assert!(!stderr.contains("panicked"), "upload panicked: {stderr}");
        prop_assert!(matches!(upload.status.code(), Some(0..=2)), "{stderr}");
        prop_assert!(
            !stdout.contains('\x1b') && !stderr.contains('\x1b'),
            "raw ESC"
        );
        Ok(())
    });
    eprintln!(
        "fuzz gpu-crash show/upload: {} cases ({} shown) in {:.2} s",
        ran.get(),
        shown.get(),
        start.elapsed().as_secs_f64()
    );
    result.unwrap();
}

/// Issue 51 item 12: `show --html` never writes through a symlink planted where the page goes, and
/// the page is the player's alone (owner-only).
#[cfg(unix)]
#[test]
fn show_html_replaces_a_planted_symlink_and_writes_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("html-symlink");
    let report = dir.join("gpu-crash-0-use-after-free.json");
    std::fs::copy(fixture("use-after-free"), &report).unwrap();
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"keep me").unwrap();
    let page = report.with_extension("html");
    std::os::unix::fs::symlink(&victim, &page).unwrap();
    let output = gpu_crash()
        .args(["show", "--html"])
        .arg(&report)
        .output()
        .unwrap();
    let (_, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"keep me",
        "written through the symlink"
    );
    let meta = std::fs::symlink_metadata(&page).unwrap();
    assert!(meta.is_file(), "the page replaced the link");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
}
