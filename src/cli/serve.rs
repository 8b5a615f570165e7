//! `crucible-agent serve`: the agent for remote ACP clients, over
//! Streamable HTTP and WebSocket on `/acp` (see `transport::remote`), with
//! the same sessions and store as on stdio. What it needs before it
//! listens is settled here: the address, the token, the roots, TLS.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::acp::remote::Hub;
use crate::acp::router::AllowedRoots;
use crate::config::Config;
use crate::config::serve::ServeSettings;
use crate::session::manager::SessionManager;
use crate::transport::remote::{self, Access};

use super::CliError;

/// The variable that gives `serve` its bearer token.
pub const TOKEN_VARIABLE: &str = "CRUCIBLE_AGENT_TOKEN";
/// The generated token's file, in the data dir.
const TOKEN_FILE: &str = "serve-token";

/// What the command line adds to `[serve]`.
#[derive(Debug, Default, Clone)]
pub struct Flags {
    pub listen: Option<SocketAddr>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

/// Where the token came from: one the user set may serve any address; a
/// generated one, loopback only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Variable,
    File(PathBuf),
    Generated(PathBuf),
}

/// The settled listener: address, token, who may come, where sessions go.
pub struct Plan {
    pub listen: SocketAddr,
    pub token: String,
    pub token_source: TokenSource,
    pub settings: ServeSettings,
    pub roots: Vec<PathBuf>,
}

/// Settle `[serve]` with the flags, the environment and the data dir; a
/// non-loopback address needs a token the user set.
pub fn plan(
    settings: &ServeSettings,
    flags: &Flags,
    data_dir: &Path,
    variable: Option<String>,
) -> Result<Plan, CliError> {
    let mut settings = settings.clone();
    if let (Some(cert), Some(key)) = (&flags.tls_cert, &flags.tls_key) {
        settings.tls = Some(crate::config::serve::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        });
    } else if flags.tls_cert.is_some() || flags.tls_key.is_some() {
        return Err(CliError::Refused(
            "--tls-cert and --tls-key go together: give both (the PEM certificate chain and its key)".into(),
        ));
    }
    let listen = flags.listen.unwrap_or(settings.listen);
    let (token, token_source) = token(&settings, data_dir, variable)?;
    if open_without_a_set_token(listen, &token_source) {
        return Err(CliError::Refused(format!(
            "serve --listen {listen} would take connections from other machines, and this token was generated, not set by you: set {TOKEN_VARIABLE} or [serve] token_file to a long random secret (and use TLS or a proxy that has it), or listen on 127.0.0.1"
        )));
    }
    let roots = if settings.roots.is_empty() {
        vec![std::env::current_dir()?]
    } else {
        settings.roots.clone()
    };
    let roots = roots
        .into_iter()
        .map(|root| {
            std::fs::canonicalize(&root).map_err(|err| {
                CliError::Refused(format!(
                    "[serve] roots: `{}` cannot be used ({err}); name existing directories",
                    root.display()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        listen,
        token,
        token_source,
        settings,
        roots,
    })
}

/// The token as it stands, nothing written: the variable's, the file's,
/// or the one generated into the data dir (None until the first start).
fn find_token(
    settings: &ServeSettings,
    data_dir: &Path,
    variable: Option<String>,
) -> Result<(Option<String>, TokenSource), CliError> {
    if let Some(token) = variable
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
    {
        return Ok((Some(token), TokenSource::Variable));
    }
    if let Some(path) = &settings.token_file {
        let token = read_token(path)?.ok_or_else(|| {
            CliError::Refused(format!(
                "[serve] token_file: `{}` does not exist or is empty; write a long random secret into it (for example: openssl rand -hex 32 > {})",
                path.display(),
                path.display()
            ))
        })?;
        return Ok((Some(token), TokenSource::File(path.clone())));
    }
    let path = data_dir.join(TOKEN_FILE);
    Ok((read_token(&path)?, TokenSource::Generated(path)))
}

/// Whether `listen` would take other machines' connections with a token
/// only this machine's files hold (a generated one serves loopback only).
fn open_without_a_set_token(listen: SocketAddr, source: &TokenSource) -> bool {
    !listen.ip().is_loopback() && matches!(source, TokenSource::Generated(_))
}

/// The token: [`find_token`]'s, or one generated now into the data dir
/// (kept there, owner-only, for the next start).
fn token(
    settings: &ServeSettings,
    data_dir: &Path,
    variable: Option<String>,
) -> Result<(String, TokenSource), CliError> {
    let (found, source) = find_token(settings, data_dir, variable)?;
    if let Some(token) = found {
        return Ok((token, source));
    }
    let path = data_dir.join(TOKEN_FILE);
    let mut bits = [0u8; 32];
    getrandom::fill(&mut bits)
        .map_err(|err| CliError::Refused(format!("no random bits for a token: {err}")))?;
    let token: String = bits.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::create_dir_all(data_dir)?;
    write_owner_only(&path, &token)?;
    Ok((token, source))
}

/// What `serve` would do with these settings, checked without writing
/// anything (for `doctor`): a summary, or the problem and its fix.
pub fn check(
    settings: &ServeSettings,
    data_dir: &Path,
    variable: Option<String>,
) -> Result<String, (String, String)> {
    let (_, source) = find_token(settings, data_dir, variable).map_err(|err| {
        let fix = "write a long random secret into the file, readable by this user (openssl rand -hex 32 > FILE)";
        (err.to_string(), fix.to_string())
    })?;
    if open_without_a_set_token(settings.listen, &source) {
        return Err((
            format!(
                "[serve] listen = {} takes other machines' connections, but no token is set (a generated one serves loopback only)",
                settings.listen
            ),
            format!("set {TOKEN_VARIABLE} or [serve] token_file, or listen on 127.0.0.1"),
        ));
    }
    let token = match &source {
        TokenSource::Variable => format!("the token is {TOKEN_VARIABLE}'s"),
        TokenSource::File(path) => format!("the token is in {}", path.display()),
        TokenSource::Generated(path) => {
            format!("a token generated into {} on first start", path.display())
        }
    };
    for root in &settings.roots {
        if !root.is_dir() {
            return Err((
                format!("[serve] roots: {} is not a directory", root.display()),
                "name existing directories, or leave roots out (sessions then work where serve starts)".into(),
            ));
        }
    }
    let scheme = match &settings.tls {
        Some(files) => {
            remote::tls::acceptor(&files.cert, &files.key).map_err(|err| {
                (
                    err.to_string(),
                    "fix [serve] tls_cert / tls_key (PEM files)".to_string(),
                )
            })?;
            "https"
        }
        None => "http",
    };
    Ok(format!(
        "`crucible-agent serve` would listen on {scheme}://{}/acp; {token}",
        settings.listen
    ))
}

/// The first line of `path`; None when it does not exist or is empty.
fn read_token(path: &Path) -> Result<Option<String>, CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text
            .lines()
            .next()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(String::from)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(CliError::Refused(format!(
            "cannot read the token file {}: {err}",
            path.display()
        ))),
    }
}

fn write_owner_only(path: &Path, text: &str) -> Result<(), CliError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(format!("{text}\n").as_bytes())?;
    file.sync_all()?;
    Ok(())
}

/// Listen and serve until SIGTERM or Ctrl-C; then every session's turn
/// is answered and saved, as when stdin closes on stdio.
pub async fn run(plan: Plan, sessions: SessionManager, config: &Config) -> Result<(), CliError> {
    let tls = match &plan.settings.tls {
        Some(files) => Some(
            remote::tls::acceptor(&files.cert, &files.key)
                .map_err(|err| CliError::Refused(err.to_string()))?,
        ),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(plan.listen).await.map_err(|err| {
        CliError::Refused(format!(
            "cannot listen on {}: {err} (another server there? choose another port with --listen)",
            plan.listen
        ))
    })?;
    let address = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let token_note = match &plan.token_source {
        TokenSource::Variable => format!("the token is {TOKEN_VARIABLE}'s"),
        TokenSource::File(path) | TokenSource::Generated(path) => {
            format!("the token is in {}", path.display())
        }
    };
    let roots: Vec<String> = plan.roots.iter().map(|r| r.display().to_string()).collect();
    eprintln!(
        "crucible-agent serve: listening on {scheme}://{address}/acp (Streamable HTTP and WebSocket); {token_note}; sessions in {}",
        roots.join(", ")
    );
    tracing::info!(%address, default_provider = %config.default_provider, "serving remote ACP");
    let hub = Arc::new(Hub::new(
        sessions,
        AllowedRoots::Within(plan.roots.into()),
        plan.settings.max_sessions_per_connection,
    ));
    let options = remote::Options {
        access: Access::new(&plan.token, plan.settings.allowed_origins.clone()),
        max_connections: plan.settings.max_connections,
        idle_timeout: plan.settings.idle_timeout,
        stall: plan.settings.stall_timeout,
        tls,
    };
    let stop = async {
        tokio::select! {
            () = crate::platform::stop_requested() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::info!("asked to stop; closing every connection and session");
    };
    // Sessions end (answering their turns) before the connections close.
    remote::serve(listener, options, hub, stop).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_serves_loopback_only_and_is_kept_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let settings = ServeSettings::default();
        let loopback = plan(&settings, &Flags::default(), dir.path(), None).unwrap();
        assert!(matches!(loopback.token_source, TokenSource::Generated(_)));
        assert_eq!(loopback.token.len(), 64);
        // Kept for the next start.
        let again = plan(&settings, &Flags::default(), dir.path(), None).unwrap();
        assert_eq!(again.token, loopback.token);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(TOKEN_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let everywhere = Flags {
            listen: Some("0.0.0.0:8719".parse().unwrap()),
            ..Flags::default()
        };
        let Err(err) = plan(&settings, &everywhere, dir.path(), None) else {
            panic!("a generated token on 0.0.0.0");
        };
        assert!(err.to_string().contains(TOKEN_VARIABLE), "{err}");
        let set = plan(
            &settings,
            &everywhere,
            dir.path(),
            Some("a-long-secret".into()),
        )
        .unwrap();
        assert_eq!(
            (set.token.as_str(), set.token_source),
            ("a-long-secret", TokenSource::Variable)
        );
    }

    #[test]
    fn doctor_finds_what_would_stop_serve_before_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let summary = check(&ServeSettings::default(), dir.path(), None).unwrap();
        assert!(summary.contains("127.0.0.1:8719/acp"), "{summary}");
        assert!(summary.contains("generated"), "{summary}");
        assert!(
            !dir.path().join(TOKEN_FILE).exists(),
            "doctor writes nothing"
        );
        let open = ServeSettings {
            listen: "0.0.0.0:8719".parse().unwrap(),
            ..ServeSettings::default()
        };
        let (problem, fix) = check(&open, dir.path(), None).unwrap_err();
        assert!(problem.contains("0.0.0.0:8719"), "{problem}");
        assert!(fix.contains(TOKEN_VARIABLE), "{fix}");
        assert!(check(&open, dir.path(), Some("secret".into())).is_ok());
        let missing = ServeSettings {
            token_file: Some(dir.path().join("nope")),
            ..ServeSettings::default()
        };
        let (problem, _) = check(&missing, dir.path(), None).unwrap_err();
        assert!(problem.contains("token_file"), "{problem}");
        let broken_tls = ServeSettings {
            tls: Some(crate::config::serve::TlsFiles {
                cert: dir.path().join("cert.pem"),
                key: dir.path().join("key.pem"),
            }),
            ..ServeSettings::default()
        };
        let (problem, fix) = check(&broken_tls, dir.path(), None).unwrap_err();
        assert!(problem.contains("cert.pem"), "{problem}");
        assert!(fix.contains("tls_cert"), "{fix}");
    }
}
