//! Sentry DSN parsing: `{scheme}://{public_key}@{host}[:{port}][/{path}]/{project_id}`.

use std::fmt;
use std::str::FromStr;

/// A parsed Sentry DSN, e.g. `https://0123abcd@o1.ingest.sentry.io/42`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dsn {
    scheme: String,
    public_key: String,
    host: String,
    port: Option<u16>,
    path: String,
    project_id: String,
}

/// Why a DSN string was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DsnError {
    /// The string is empty or only whitespace.
    Empty,
    /// The scheme is not `http` or `https` (or `://` is missing).
    BadScheme(String),
    /// No `public_key@` before the host.
    MissingPublicKey,
    /// No host after `@`.
    MissingHost,
    /// The port is not a number in 1..=65535.
    BadPort(String),
    /// No project id as the last path segment.
    MissingProjectId,
    /// The project id is not a decimal number.
    BadProjectId(String),
}

impl fmt::Display for DsnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const FORM: &str = "expected http(s)://PUBLIC_KEY@HOST[:PORT]/PROJECT_ID";
        match self {
            Self::Empty => write!(f, "the Sentry DSN is empty ({FORM})"),
            Self::BadScheme(s) if s.is_empty() => {
                write!(f, "the Sentry DSN has no scheme ({FORM})")
            }
            Self::BadScheme(s) => write!(
                f,
                "the Sentry DSN has scheme {s:?}; only \"http\" and \"https\" are supported ({FORM})"
            ),
            Self::MissingPublicKey => write!(
                f,
                "the Sentry DSN has no public key before '@' ({FORM}); copy the DSN from the project's \
                 \"Client Keys\" settings"
            ),
            Self::MissingHost => write!(f, "the Sentry DSN has no host ({FORM})"),
            Self::BadPort(p) => write!(f, "the Sentry DSN has an invalid port {p:?} ({FORM})"),
            Self::MissingProjectId => {
                write!(f, "the Sentry DSN has no project id at the end of its path ({FORM})")
            }
            Self::BadProjectId(p) => write!(
                f,
                "the Sentry DSN's project id {p:?} is not a number ({FORM})"
            ),
        }
    }
}

impl std::error::Error for DsnError {}

impl FromStr for Dsn {
    type Err = DsnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(DsnError::Empty);
        }
        let Some((scheme, rest)) = s.split_once("://") else {
            return Err(DsnError::BadScheme(String::new()));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(DsnError::BadScheme(scheme));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let Some((userinfo, hostport)) = authority.rsplit_once('@') else {
            return Err(DsnError::MissingPublicKey);
        };
        // `key:secret@` (legacy DSNs): the secret is ignored, as by every current Sentry SDK.
        let public_key = userinfo.split(':').next().unwrap_or_default();
        if public_key.is_empty() {
            return Err(DsnError::MissingPublicKey);
        }
        let (host, port) = split_host_port(hostport)?;
        if host.is_empty() {
            return Err(DsnError::MissingHost);
        }
        let path = path.split(['?', '#']).next().unwrap_or_default();
        let trimmed = path.trim_end_matches('/');
        let (prefix, project_id) = match trimmed.rsplit_once('/') {
            Some((prefix, id)) => (prefix, id),
            None => ("", ""),
        };
        if project_id.is_empty() {
            return Err(DsnError::MissingProjectId);
        }
        if !project_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(DsnError::BadProjectId(project_id.to_owned()));
        }
        Ok(Self {
            scheme,
            public_key: public_key.to_owned(),
            host: host.to_owned(),
            port,
            path: prefix.to_owned(),
            project_id: project_id.to_owned(),
        })
    }
}

fn split_host_port(hostport: &str) -> Result<(&str, Option<u16>), DsnError> {
    // IPv6 literal: [::1]:9000
    if let Some(rest) = hostport.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err(DsnError::MissingHost);
        };
        let host = &hostport[..end + 2];
        let after = &rest[end + 1..];
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(parse_port(p)?))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(DsnError::BadPort(after.to_owned())),
        };
    }
    match hostport.rsplit_once(':') {
        Some((host, port)) => Ok((host, Some(parse_port(port)?))),
        None => Ok((hostport, None)),
    }
}

fn parse_port(p: &str) -> Result<u16, DsnError> {
    match p.parse::<u16>() {
        Ok(n) if n != 0 => Ok(n),
        _ => Err(DsnError::BadPort(p.to_owned())),
    }
}

impl fmt::Display for Dsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}@{}", self.scheme, self.public_key, self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        write!(f, "{}/{}", self.path, self.project_id)
    }
}

impl Dsn {
    /// `http` or `https`.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The public key (`sentry_key`).
    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// Host name or IP literal (IPv6 in brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The explicit port, if the DSN has one.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The project id.
    pub fn project_id(&self) -> &str {
        &self.project_id
    }

    /// `{scheme}://{host}[:{port}]{path}/api/{project_id}/envelope/`.
    pub fn envelope_url(&self) -> String {
        let mut url = format!("{}://{}", self.scheme, self.host);
        if let Some(port) = self.port {
            url.push_str(&format!(":{port}"));
        }
        url.push_str(&format!("{}/api/{}/envelope/", self.path, self.project_id));
        url
    }

    /// The `X-Sentry-Auth` header value.
    pub fn auth_header(&self) -> String {
        format!(
            "Sentry sentry_version=7, sentry_key={}, sentry_client={}/{}",
            self.public_key,
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION")
        )
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
        assert_eq!(d.public_key(), "abc123");
        let d: Dsn = "http://k:secret@127.0.0.1:8765/sub/path/7".parse().unwrap();
        assert_eq!(
            d.envelope_url(),
            "http://127.0.0.1:8765/sub/path/api/7/envelope/"
        );
        assert_eq!(d.to_string(), "http://k@127.0.0.1:8765/sub/path/7");
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
        assert_eq!(
            err("https://k@h:99999/1"),
            DsnError::BadPort("99999".into())
        );
        assert_eq!(err("https://k@:80/1"), DsnError::MissingHost);
        assert!(err("ftp://k@h/1")
            .to_string()
            .contains("only \"http\" and \"https\""));
    }
}
