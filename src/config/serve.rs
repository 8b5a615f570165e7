//! `[serve]`: how `crucible-agent serve` takes remote ACP clients (over
//! Streamable HTTP and WebSocket): where it listens, who may come in, which
//! directories their sessions may work in, and how much each may hold.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::error::{ConfigError, invalid};

/// Where `serve` listens unless `--listen` or `[serve] listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8719";

/// `[serve]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServe {
    pub listen: Option<String>,
    pub token_file: Option<String>,
    pub allowed_origins: Option<Vec<String>>,
    pub roots: Option<Vec<String>>,
    pub max_connections: Option<usize>,
    pub max_sessions_per_connection: Option<usize>,
    pub idle_timeout_secs: Option<u64>,
    pub stall_timeout_secs: Option<u64>,
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
}

/// `[serve]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    pub listen: SocketAddr,
    /// A file holding the bearer token (its first line); None: the
    /// `CRUCIBLE_AGENT_TOKEN` variable, or one generated into the data dir.
    pub token_file: Option<PathBuf>,
    /// `Origin` values a browser page may come from (`scheme://host[:port]`);
    /// a request with any other `Origin` is refused. A request without one
    /// (a native client) is not.
    pub allowed_origins: Vec<String>,
    /// The directories a session's `cwd` may be in; empty: the directory
    /// `serve` started in.
    pub roots: Vec<PathBuf>,
    pub max_connections: usize,
    pub max_sessions_per_connection: usize,
    /// A connection with no open stream for this long is closed.
    pub idle_timeout: Duration,
    /// A client that takes none of its messages for this long (its
    /// buffers full) is disconnected.
    pub stall_timeout: Duration,
    pub tls: Option<TlsFiles>,
}

/// A certificate chain and its private key, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Default for ServeSettings {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8719)),
            token_file: None,
            allowed_origins: Vec::new(),
            roots: Vec::new(),
            max_connections: 1024,
            max_sessions_per_connection: 64,
            idle_timeout: Duration::from_secs(300),
            stall_timeout: Duration::from_secs(60),
            tls: None,
        }
    }
}

pub(super) fn validate(
    raw: RawServe,
    path: &Path,
    home: Option<&Path>,
) -> Result<ServeSettings, ConfigError> {
    let defaults = ServeSettings::default();
    let limits = Limits::validate(&raw, path, &defaults)?;
    let listen = match raw.listen.as_deref() {
        None => defaults.listen,
        Some(text) => parse_listen(text).map_err(|problem| {
            invalid(
                path,
                "serve.listen",
                problem,
                "Give an address and port, such as \"127.0.0.1:8719\" or \"[::1]:8719\".",
            )
        })?,
    };
    let file = |key: &str, text: Option<String>| -> Result<Option<PathBuf>, ConfigError> {
        text.map(|text| absolute(&text, home).ok_or_else(|| not_absolute(path, key, &text)))
            .transpose()
    };
    let tls = match (
        file("serve.tls_cert", raw.tls_cert)?,
        file("serve.tls_key", raw.tls_key)?,
    ) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (None, None) => None,
        (Some(_), None) | (None, Some(_)) => {
            return Err(invalid(
                path,
                "serve.tls_cert",
                "one of tls_cert and tls_key is set without the other",
                "Set both (the PEM certificate chain and its private key), or neither.",
            ));
        }
    };
    let mut roots = Vec::new();
    for (index, root) in raw.roots.unwrap_or_default().into_iter().enumerate() {
        let key = format!("serve.roots[{index}]");
        roots.push(absolute(&root, home).ok_or_else(|| not_absolute(path, &key, &root))?);
    }
    Ok(ServeSettings {
        listen,
        token_file: file("serve.token_file", raw.token_file)?,
        allowed_origins: origins(raw.allowed_origins.unwrap_or_default(), path)?,
        roots,
        max_connections: limits.max_connections,
        max_sessions_per_connection: limits.max_sessions_per_connection,
        idle_timeout: limits.idle_timeout,
        stall_timeout: limits.stall_timeout,
        tls,
    })
}

fn origins(written: Vec<String>, path: &Path) -> Result<Vec<String>, ConfigError> {
    let mut origins = Vec::new();
    for (index, origin) in written.into_iter().enumerate() {
        let normalized = normalize_origin(&origin).ok_or_else(|| {
            invalid(
                path,
                format!("serve.allowed_origins[{index}]"),
                format!("`{origin}` is not an origin"),
                "Write it as a browser sends it: scheme, host and port only, such as \"https://app.example.com\" or \"http://localhost:3000\".",
            )
        })?;
        origins.push(normalized);
    }
    Ok(origins)
}

/// The counts and times of `[serve]`, each above 0.
struct Limits {
    max_connections: usize,
    max_sessions_per_connection: usize,
    idle_timeout: Duration,
    stall_timeout: Duration,
}

impl Limits {
    fn validate(
        raw: &RawServe,
        path: &Path,
        defaults: &ServeSettings,
    ) -> Result<Self, ConfigError> {
        let count = |value: Option<usize>, key: &str, default: usize| match value {
            Some(0) => Err(invalid(
                path,
                key,
                "0 would refuse everything",
                "Give a number above 0, or leave the key out for the default.",
            )),
            Some(value) => Ok(value),
            None => Ok(default),
        };
        let seconds = |value: Option<u64>, key: &str, fix: &str, default: Duration| match value {
            Some(0) => Err(invalid(
                path,
                key,
                "0 would close every connection at once",
                fix,
            )),
            Some(secs) => Ok(Duration::from_secs(secs)),
            None => Ok(default),
        };
        Ok(Self {
            max_connections: count(
                raw.max_connections,
                "serve.max_connections",
                defaults.max_connections,
            )?,
            max_sessions_per_connection: count(
                raw.max_sessions_per_connection,
                "serve.max_sessions_per_connection",
                defaults.max_sessions_per_connection,
            )?,
            idle_timeout: seconds(
                raw.idle_timeout_secs,
                "serve.idle_timeout_secs",
                "Give the seconds a connection may go without an open stream, such as 300.",
                defaults.idle_timeout,
            )?,
            stall_timeout: seconds(
                raw.stall_timeout_secs,
                "serve.stall_timeout_secs",
                "Give the seconds a client may leave its messages unread, such as 60.",
                defaults.stall_timeout,
            )?,
        })
    }
}

/// `HOST:PORT` as `--listen` and `[serve] listen` take it; `localhost`
/// is the IPv4 loopback.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    let resolved = match text.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}"),
        None => text.to_string(),
    };
    resolved.parse().map_err(|_| {
        format!("`{text}` is not an address and port (such as 127.0.0.1:8719 or [::1]:8719)")
    })
}

/// An origin as browsers send it: lowercase `scheme://host[:port]`, the
/// default port left out; None for anything else (a path, no scheme).
pub fn normalize_origin(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('/');
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https")
        || rest.is_empty()
        || rest.contains(['/', '?', '#', '@'])
    {
        return None;
    }
    let rest = rest.to_ascii_lowercase();
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let host = rest.strip_suffix(default_port).unwrap_or(&rest);
    Some(format!("{scheme}://{host}"))
}

fn absolute(text: &str, home: Option<&Path>) -> Option<PathBuf> {
    let expanded = match (text.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(text),
    };
    expanded.is_absolute().then_some(expanded)
}

fn not_absolute(path: &Path, key: &str, text: &str) -> ConfigError {
    invalid(
        path,
        key,
        format!("`{text}` is not an absolute path"),
        "Give an absolute path or one starting with `~/`.",
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load, refusal};
    use super::*;

    #[test]
    fn serve_is_read_and_checked_with_errors_naming_the_key() {
        assert_eq!(load("", &[]).unwrap().serve, ServeSettings::default());
        let text = "[serve]\nlisten = \"0.0.0.0:9000\"\ntoken_file = \"/etc/agent/token\"\n\
                    allowed_origins = [\"HTTPS://App.Example.com:443/\", \"http://localhost:3000\"]\n\
                    roots = [\"/srv/code\"]\nmax_connections = 10\nmax_sessions_per_connection = 2\n\
                    idle_timeout_secs = 60\nstall_timeout_secs = 5\ntls_cert = \"/etc/agent/cert.pem\"\ntls_key = \"/etc/agent/key.pem\"";
        let serve = load(text, &[]).unwrap().serve;
        assert_eq!(serve.listen, "0.0.0.0:9000".parse().unwrap());
        assert_eq!(serve.token_file, Some(PathBuf::from("/etc/agent/token")));
        assert_eq!(
            serve.allowed_origins,
            ["https://app.example.com", "http://localhost:3000"]
        );
        assert_eq!(serve.roots, [PathBuf::from("/srv/code")]);
        assert_eq!(
            (serve.max_connections, serve.max_sessions_per_connection),
            (10, 2)
        );
        assert_eq!(serve.idle_timeout, Duration::from_secs(60));
        assert_eq!(serve.stall_timeout, Duration::from_secs(5));
        assert!(serve.tls.is_some());
        for (text, key) in [
            ("listen = \"here\"", "serve.listen"),
            (
                "allowed_origins = [\"app.example.com\"]",
                "serve.allowed_origins[0]",
            ),
            ("roots = [\"code\"]", "serve.roots[0]"),
            ("max_connections = 0", "serve.max_connections"),
            ("idle_timeout_secs = 0", "serve.idle_timeout_secs"),
            ("tls_cert = \"/c.pem\"", "serve.tls_cert"),
            ("lisen = \"x\"", "lisen"),
        ] {
            let err = refusal(&format!("[serve]\n{text}"));
            assert!(err.contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn origins_are_compared_as_browsers_send_them() {
        assert_eq!(
            normalize_origin("https://x.dev:443").as_deref(),
            Some("https://x.dev")
        );
        assert_eq!(
            normalize_origin("http://127.0.0.1:8080").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(normalize_origin("https://x.dev/path"), None);
        assert_eq!(normalize_origin("null"), None);
        assert_eq!(
            parse_listen("localhost:80"),
            Ok("127.0.0.1:80".parse().unwrap())
        );
    }
}
