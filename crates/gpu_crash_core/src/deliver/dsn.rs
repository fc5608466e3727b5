//! The Sentry DSN: sentry-types' [`sentry::types::Dsn`], parsed with errors that say what is wrong.

use std::fmt;
use std::str::FromStr;

use sentry::types::ParseDsnError;

/// The form every message points at.
const FORM: &str = "expected http(s)://PUBLIC_KEY@HOST[:PORT]/PROJECT_ID";

/// A Sentry DSN, e.g. `https://0123abcd@o1.ingest.sentry.io/42`.
///
/// sentry-types' `Dsn` with a [`FromStr`] whose errors name the part that is wrong: a game developer
/// pastes this string into a config file, and "invalid url" does not say which part to fix.
///
/// Its `Debug` leaves out the secret key (a DSN sits in settings that get logged); envelopes on disk
/// name it without its secret too (see `build_envelope` in `deliver`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Dsn(sentry::types::Dsn);

/// Why a DSN string was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DsnError {
    /// The string is empty or only whitespace.
    #[error("the Sentry DSN is empty ({FORM})")]
    Empty,
    /// The scheme is not `http` or `https` (empty: `://` is missing).
    #[error("the Sentry DSN has scheme {0:?}; only \"http\" and \"https\" are supported ({FORM})")]
    BadScheme(String),
    /// No `public_key@` before the host.
    #[error(
        "the Sentry DSN has no public key before '@' ({FORM}); copy the DSN from the project's \
         \"Client Keys\" settings"
    )]
    MissingPublicKey,
    /// No project id as the last path segment.
    #[error("the Sentry DSN has no project id at the end of its path ({FORM})")]
    MissingProjectId,
    /// The project id is not a number.
    #[error("the Sentry DSN's project id {0:?} is not a number ({FORM})")]
    BadProjectId(String),
    /// Not a URL: no host, or a port that is not a number in 1..=65535.
    #[error("the Sentry DSN is not a valid URL: check its host and port ({FORM})")]
    NotAUrl,
}

impl FromStr for Dsn {
    type Err = DsnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(DsnError::Empty);
        }
        // The scheme first: sentry-types checks it last, and a wrong scheme is the likeliest typo.
        let scheme = s.split_once("://").map_or("", |(scheme, _)| scheme);
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(DsnError::BadScheme(scheme.to_ascii_lowercase()));
        }
        let bad_project_id = || {
            let path = s.split(['?', '#']).next().unwrap_or_default();
            let last = path.trim_end_matches('/').rsplit('/').next();
            DsnError::BadProjectId(last.unwrap_or_default().to_owned())
        };
        let dsn: sentry::types::Dsn = s.parse().map_err(|e| match e {
            ParseDsnError::NoUsername => DsnError::MissingPublicKey,
            ParseDsnError::NoProjectId => DsnError::MissingProjectId,
            ParseDsnError::InvalidProjectId(_) => bad_project_id(),
            ParseDsnError::InvalidScheme => DsnError::BadScheme(scheme.to_owned()),
            ParseDsnError::InvalidUrl => DsnError::NotAUrl,
        })?;
        // sentry-types takes any string; Sentry and Bugsink number their projects.
        let id = dsn.project_id().value();
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad_project_id());
        }
        Ok(Self(dsn))
    }
}

impl From<sentry::types::Dsn> for Dsn {
    fn from(dsn: sentry::types::Dsn) -> Self {
        Self(dsn)
    }
}

impl fmt::Display for Dsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for Dsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Dsn").field(&self.redacted_text()).finish()
    }
}

impl Dsn {
    /// The DSN as text with its secret key, if any, left out: `https://public:@host/42`.
    fn redacted_text(&self) -> String {
        let text = self.0.to_string();
        match self.0.secret_key() {
            Some(secret) => text.replacen(&format!(":{secret}@"), ":@", 1),
            None => text,
        }
    }

    /// The DSN without its secret key: what an envelope names (Sentry authenticates by the public
    /// key; the secret, a legacy of old DSNs, goes only into the `X-Sentry-Auth` header). `None`
    /// in the unlikely case that the DSN without its secret does not parse: then none is named.
    pub(crate) fn without_secret(&self) -> Option<sentry::types::Dsn> {
        match self.0.secret_key() {
            Some(_) => self
                .redacted_text()
                .parse::<sentry::types::Dsn>()
                .ok()
                .filter(|d| d.secret_key().is_none()),
            None => Some(self.0.clone()),
        }
    }

    /// sentry-types' DSN.
    pub fn as_sentry(&self) -> &sentry::types::Dsn {
        &self.0
    }

    /// Host name or IP literal.
    pub fn host(&self) -> &str {
        self.0.host()
    }

    /// `{scheme}://{host}[:{port}]{path}api/{project_id}/envelope/`.
    pub fn envelope_url(&self) -> String {
        self.0.envelope_api_url().to_string()
    }

    /// The `X-Sentry-Auth` header value.
    pub(crate) fn auth_header(&self) -> String {
        let client = concat!(env!("CARGO_PKG_NAME"), "/", env!("CARGO_PKG_VERSION"));
        self.0.to_auth(Some(client)).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sentry_and_bugsink_dsns() {
        let d: Dsn = "https://abc123@o1.ingest.sentry.io/42".parse().unwrap();
        assert_eq!(
            d.envelope_url(),
            "https://o1.ingest.sentry.io/api/42/envelope/"
        );
        assert!(d.auth_header().contains("sentry_key=abc123"));
        let d: Dsn = "http://k:secret@127.0.0.1:8765/sub/path/7".parse().unwrap();
        assert_eq!(
            d.envelope_url(),
            "http://127.0.0.1:8765/sub/path/api/7/envelope/"
        );
        let public = d.without_secret().unwrap();
        assert_eq!(public.secret_key(), None);
        assert_eq!(
            public.envelope_api_url().as_str(),
            "http://127.0.0.1:8765/sub/path/api/7/envelope/"
        );
        assert!(!format!("{d:?}").contains("secret"), "{d:?}");
        let d: Dsn = "http://k@[::1]:9000/3".parse().unwrap();
        assert_eq!(d.envelope_url(), "http://[::1]:9000/api/3/envelope/");
    }

    #[test]
    fn rejects_bad_dsns_with_the_reason() {
        let err = |s: &str| s.parse::<Dsn>().unwrap_err();
        assert_eq!(err(""), DsnError::Empty);
        assert_eq!(err("ftp://k@h/1"), DsnError::BadScheme("ftp".into()));
        assert_eq!(err("k@h/1"), DsnError::BadScheme(String::new()));
        assert_eq!(err("https://h/1"), DsnError::MissingPublicKey);
        assert_eq!(err("https://@h/1"), DsnError::MissingPublicKey);
        assert_eq!(err("https://k@h"), DsnError::MissingProjectId);
        assert_eq!(err("https://k@h/"), DsnError::MissingProjectId);
        assert_eq!(err("https://k@h/abc"), DsnError::BadProjectId("abc".into()));
        assert_eq!(err("https://k@h:99999/1"), DsnError::NotAUrl);
        assert_eq!(err("https://k@:80/1"), DsnError::NotAUrl);
        assert!(err("ftp://k@h/1")
            .to_string()
            .contains("only \"http\" and \"https\""));
    }
}
