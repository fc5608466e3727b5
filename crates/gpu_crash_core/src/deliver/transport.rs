//! The HTTP transport: one blocking POST of a gzip-compressed envelope.
//!
//! # Why `ureq` 3 with rustls, ring and webpki-roots
//!
//! A crash reporter ships inside games that run on players' machines, so its transport must work on
//! every machine the game runs on, without anything the player has to install:
//!
//! - **No OpenSSL.** `native-tls` (the `sentry` crate's default transport, via `reqwest`) links the
//!   system `libssl` on Linux. Distributions ship different, ABI-incompatible versions (1.1 vs 3),
//!   Steam runtime containers and immutable distributions may have another, and a game binary built on
//!   one distribution then fails to *start* on another. rustls is pure Rust and statically linked.
//! - **`ring` as the crypto provider** builds with only a C compiler on every tier-1 target (Windows
//!   MSVC included); `aws-lc-rs`, rustls' default, needs CMake (and NASM on some Windows setups) at
//!   build time, which is a burden on game developers' CI for no gain here.
//! - **`webpki-roots`** bundles Mozilla's root certificates, so HTTPS to sentry.io works on machines
//!   with no or outdated CA bundles (minimal containers, old Windows installs). The trade-off: a
//!   corporate TLS-intercepting proxy's private root is not trusted; self-hosted Sentry with a
//!   private CA needs a public certificate (or `http://` on a LAN).
//! - **`ureq` is blocking and small**: no async runtime (tokio) is pulled into the game. Uploads run
//!   on the crashing thread with a hard deadline, or on one background thread; a blocking client with
//!   a connect timeout and a whole-request timeout is the simplest correct fit.
//! - Bodies are gzip-compressed (`flate2` with the pure-Rust `miniz_oxide` backend): Sentry and
//!   Bugsink both accept `Content-Encoding: gzip`, which keeps a crash-time upload of a large report
//!   inside the upload timeout and under Bugsink's 20 MiB compressed-envelope limit.
//!
//! Proxies: `ureq` honours `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` (and `NO_PROXY`) from the environment.

use std::io::Write;
use std::time::Duration;

use sentry::transports::{RateLimiter, RateLimitingCategory};

use super::dsn::Dsn;

/// What the server said to one upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// 2xx. `rate_limit`: an `X-Sentry-Rate-Limits` that applies to events, for the next sends.
    Accepted {
        /// HTTP status.
        status: u16,
        /// How long events must not be sent, if the server said so.
        rate_limit: Option<Duration>,
    },
    /// 429: try again after `retry_after`.
    RateLimited {
        /// HTTP status.
        status: u16,
        /// From `X-Sentry-Rate-Limits` (event categories), else `Retry-After`, else 60 s; 1 s when
        /// the limit had already lapsed.
        retry_after: Duration,
    },
    /// 5xx: try again later (after `retry_after` when the server gave one).
    ServerError {
        /// HTTP status.
        status: u16,
        /// `Retry-After`, if any.
        retry_after: Option<Duration>,
        /// Start of the response body.
        body: String,
    },
    /// Any other status (bad key, project, payload): sending it again will not help.
    Rejected {
        /// HTTP status.
        status: u16,
        /// Start of the response body.
        body: String,
    },
    /// No HTTP answer: DNS, connect, TLS, timeout.
    Network(String),
}

/// Delay after a 429 whose limit had already lapsed when it was read: a `Retry-After` date in the
/// past, or `X-Sentry-Rate-Limits` on other categories only. A bare 429 gets sentry's 60 s default
/// from [`server_wait`]; a lapsed one is retried soon, but not in a tight loop.
const LAPSED_RATE_LIMIT: Duration = Duration::from_secs(1);

/// Sends one envelope and says what the server answered. The outbox's policy (retries, backoff,
/// `failed/`, the `sent/` record) reads only the [`SendOutcome`], so tests and the lifetime
/// simulation script outcomes through this without a server where a server adds nothing.
pub(crate) trait Transport: Send + Sync + std::fmt::Debug {
    /// POSTs `envelope` to `dsn`'s envelope endpoint, for at most `timeout`.
    fn send(&self, dsn: &Dsn, envelope: &[u8], timeout: Duration) -> SendOutcome;
}

impl Transport for HttpTransport {
    fn send(&self, dsn: &Dsn, envelope: &[u8], timeout: Duration) -> SendOutcome {
        HttpTransport::send(self, dsn, envelope, timeout)
    }
}

/// The blocking HTTPS client (see the module docs for the choice).
#[derive(Clone, Debug)]
pub struct HttpTransport {
    agent: ureq::Agent,
}

impl Default for HttpTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpTransport {
    /// A client that reports every status as a response (no redirects followed: a DSN that
    /// redirects is misconfigured and is reported as such).
    pub fn new() -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!(
                env!("CARGO_PKG_NAME"),
                "/",
                env!("CARGO_PKG_VERSION")
            ))
            .build();
        Self {
            agent: config.new_agent(),
        }
    }

    /// POSTs `envelope` to `dsn`'s envelope endpoint. `timeout` bounds the connect and the whole
    /// request (connect, send, response).
    pub fn send(&self, dsn: &Dsn, envelope: &[u8], timeout: Duration) -> SendOutcome {
        let timeout = timeout.max(Duration::from_millis(1));
        let body = match gzip(envelope) {
            Ok(b) => b,
            Err(e) => return SendOutcome::Network(format!("gzip failed: {e}")),
        };
        let result = self
            .agent
            .post(dsn.envelope_url())
            .header("X-Sentry-Auth", dsn.auth_header())
            .header("Content-Type", "application/x-sentry-envelope")
            .header("Content-Encoding", "gzip")
            .config()
            .timeout_connect(Some(timeout))
            .timeout_global(Some(timeout))
            .build()
            .send(&body[..]);
        let mut response = match result {
            Ok(r) => r,
            Err(e) => return SendOutcome::Network(e.to_string()),
        };
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let wait = server_wait(
            status,
            header("x-sentry-rate-limits").as_deref(),
            header("retry-after").as_deref(),
        );
        let body = response
            .body_mut()
            .with_config()
            .limit(4096)
            .read_to_vec()
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .unwrap_or_default();
        outcome(status, wait, body)
    }
}

/// What a response means for this upload, given the server's `wait` (see [`server_wait`]).
fn outcome(status: u16, wait: Option<Duration>, body: String) -> SendOutcome {
    match status {
        200..=299 => SendOutcome::Accepted {
            status,
            rate_limit: wait,
        },
        429 => SendOutcome::RateLimited {
            status,
            retry_after: wait.unwrap_or(LAPSED_RATE_LIMIT),
        },
        500..=599 => SendOutcome::ServerError {
            status,
            retry_after: wait,
            body,
        },
        _ => SendOutcome::Rejected { status, body },
    }
}

fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::fast(),
    );
    enc.write_all(bytes)?;
    enc.finish()
}

/// How long error events must not be sent after a response, as sentry's [`RateLimiter`] reads it:
/// `X-Sentry-Rate-Limits` (only limits on error events count) else `Retry-After` (seconds or an
/// HTTP date) else, for a bare 429, sentry's default delay.
fn server_wait(
    status: u16,
    rate_limits: Option<&str>,
    retry_after: Option<&str>,
) -> Option<Duration> {
    let mut limiter = RateLimiter::new();
    match (rate_limits, retry_after) {
        (Some(limits), _) => limiter.update_from_sentry_header(limits.trim()),
        (None, Some(after)) => limiter.update_from_retry_after(after.trim()),
        (None, None) if status == 429 => limiter.update_from_429(),
        (None, None) => {}
    }
    limiter.is_disabled(RateLimitingCategory::Error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within a second below `secs`: the limiter counts from the moment it read the header.
    fn about(wait: Option<Duration>, secs: u64) -> bool {
        wait.is_some_and(|w| {
            w <= Duration::from_secs(secs) && w + Duration::from_secs(1) > Duration::from_secs(secs)
        })
    }

    #[test]
    fn rate_limit_headers() {
        assert!(about(server_wait(429, None, Some("1")), 1));
        assert!(about(server_wait(429, None, Some(" 2.5 ")), 3));
        let in_ten =
            httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(10));
        assert!(about(server_wait(429, None, Some(&in_ten)), 10));
        let limits = "60:transaction:key, 2700:default;error:organization";
        assert!(about(server_wait(200, Some(limits), None), 2700));
        assert!(about(
            server_wait(429, Some("30::organization:quota_exceeded"), None),
            30
        ));
        assert_eq!(
            server_wait(200, Some("60:transaction;attachment:key"), None),
            None
        );
        assert!(about(server_wait(429, None, None), 60));
        assert_eq!(server_wait(503, None, None), None);
    }

    /// A 429 whose `Retry-After` date is already past is retried after a second: it used to fall to
    /// the 60 s default for a bare 429, which made a flush give up on a server that allowed a retry.
    #[test]
    fn lapsed_retry_after_date_is_retried_soon() {
        let past = httpdate::fmt_http_date(std::time::SystemTime::now() - Duration::from_secs(5));
        let wait = server_wait(429, None, Some(&past));
        // A literal, not LAPSED_RATE_LIMIT: the test is about the value, and must fail if it grows.
        assert_eq!(
            outcome(429, wait, String::new()),
            SendOutcome::RateLimited {
                status: 429,
                retry_after: Duration::from_secs(1)
            }
        );
        let bare = server_wait(429, None, None);
        assert!(matches!(
            outcome(429, bare, String::new()),
            SendOutcome::RateLimited { retry_after, .. } if retry_after > Duration::from_secs(59)
        ));
    }
}
