//! `gpu-crash upload` into a real Bugsink (Sentry-compatible) on 127.0.0.1: one event per report,
//! and a second run sends nothing (the outbox's `sent/` markers).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// A Bugsink started by scripts/bugsink-up.sh for this test binary; stopped on drop.
struct Bugsink {
    state_dir: PathBuf,
    url: String,
    token: String,
    project_id: String,
    dsn: String,
    agent: ureq::Agent,
}

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
}

impl Bugsink {
    fn start() -> Self {
        let state_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bugsink-gpu-crash-upload");
        let out = std::process::Command::new(repo_root().join("scripts/bugsink-up.sh"))
            .arg(&state_dir)
            .output()
            .expect("cannot run scripts/bugsink-up.sh");
        assert!(
            out.status.success(),
            "scripts/bugsink-up.sh failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let env = std::fs::read_to_string(state_dir.join("env")).unwrap();
        let get = |key: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("{key} missing in {}/env", state_dir.display()))
                .to_owned()
        };
        Bugsink {
            url: get("BUGSINK_URL"),
            token: get("BUGSINK_TOKEN"),
            project_id: get("BUGSINK_PROJECT_ID"),
            dsn: get("SENTRY_DSN"),
            state_dir,
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(30)))
                .build()
                .new_agent(),
        }
    }

    /// GET under `/api/canonical/0/`; `None` on 404.
    fn get(&self, path: &str) -> Option<Value> {
        let url = if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}/api/canonical/0/{path}", self.url)
        };
        let mut resp = self
            .agent
            .get(&url)
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let body = resp.body_mut().read_to_string().unwrap_or_default();
        match resp.status().as_u16() {
            404 => None,
            200 => Some(serde_json::from_str(&body).unwrap()),
            s => panic!("GET {url}: {s} {body}"),
        }
    }

    /// Every event of the project (through its issues).
    fn event_count(&self) -> usize {
        let mut count = 0;
        for issue in self.list(&format!("issues/?project={}", self.project_id)) {
            let id = issue["id"].as_str().unwrap().to_owned();
            count += self.list(&format!("events/?issue={id}")).len();
        }
        count
    }

    fn list(&self, first: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut next = Some(first.to_owned());
        while let Some(page) = next.take() {
            let v = self.get(&page).expect("list endpoint answered 404");
            out.extend(v["results"].as_array().cloned().unwrap_or_default());
            next = v["next"].as_str().map(str::to_owned);
        }
        out
    }
}

impl Drop for Bugsink {
    fn drop(&mut self) {
        let _ = std::process::Command::new(repo_root().join("scripts/bugsink-down.sh"))
            .arg(&self.state_dir)
            .output();
    }
}

/// A copy of fixture `name` in `dir` under a fresh id (Bugsink keeps events between runs).
fn fresh_report(name: &str, dir: &Path, n: u32) -> (PathBuf, String) {
    let mut report: Value = serde_json::from_slice(&std::fs::read(fixture(name)).unwrap()).unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let id = format!("{:016x}{:08x}{:08x}", nanos as u64, std::process::id(), n);
    report["id"] = id.clone().into();
    let path = dir.join(format!(
        "gpu-crash-{}-{id}.json",
        report["timestamp_ms"].as_u64().unwrap()
    ));
    std::fs::write(&path, serde_json::to_vec_pretty(&report).unwrap()).unwrap();
    (path, id)
}

#[test]
fn each_report_becomes_one_event_and_a_second_run_sends_nothing() {
    let server = Bugsink::start();
    let game = temp_dir("upload");
    let reports = game.join("gpu-crash-reports");
    std::fs::create_dir_all(&reports).unwrap();
    let ids: Vec<String> = ["use-after-free", "hang-in-pass"]
        .iter()
        .zip(1..)
        .map(|(name, n)| fresh_report(name, &reports, n).1)
        .collect();

    let upload = || {
        let output = gpu_crash()
            .args(["upload", "--dsn", &server.dsn])
            .arg(&reports)
            .env_remove("SENTRY_DSN")
            .output()
            .unwrap();
        let (stdout, stderr) = text(&output);
        assert!(output.status.success(), "{stdout}\n{stderr}");
        stdout
    };
    let first = upload();
    assert!(
        first.contains("sent 2, already sent 0, rejected 0, still pending 0"),
        "{first}"
    );
    for id in &ids {
        let event = server
            .get(&format!(
                "events/lookup/?project={}&event_id={id}",
                server.project_id
            ))
            .unwrap_or_else(|| panic!("event {id} is not in Bugsink"));
        assert_eq!(
            event["data"]["event_id"].as_str(),
            Some(id.as_str()),
            "{event}"
        );
    }
    let events = server.event_count();

    let second = upload();
    assert!(
        second.contains("sent 0, already sent 2, rejected 0, still pending 0"),
        "{second}"
    );
    assert_eq!(server.event_count(), events, "the second run sent nothing");
    // `list` shows both as sent.
    let output = gpu_crash().arg("list").arg(&game).output().unwrap();
    let (listing, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(listing.matches(" sent ").count(), 2, "{listing}");
    // The envelopes went through the game's own outbox, inside its report folder.
    assert_eq!(
        std::fs::read_dir(game.join("gpu-crash-reports/outbox/sent"))
            .unwrap()
            .count(),
        2
    );
}
