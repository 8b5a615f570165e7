//! crucible-agent: Crucible's internal agent as an ACP agent on stdio.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crucible_agent::acp::handshake::Handshake;
use crucible_agent::acp::{self, Router, Service, Unconfigured};
use crucible_agent::cli;
use crucible_agent::client::ClientSink;
use crucible_agent::config::{Config, Overrides};
use crucible_agent::providers::Providers;
use crucible_agent::session::manager::{Defaults, SessionManager};
use crucible_agent::store::Store;
use crucible_agent::transport::{self, Connection};

/// How long to wait for queued output after stdin closes.
const FLUSH_GRACE: Duration = Duration::from_secs(5);

/// How long the runtime waits for its blocking threads at exit. After stdout
/// closes or SIGTERM, one of them is still blocked reading stdin and can
/// never finish; without a bound the process would never exit.
const RUNTIME_GRACE: Duration = Duration::from_secs(1);

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Err(err) = init_logging(&cli) {
        eprintln!("crucible-agent: {err:#}");
        return ExitCode::from(2);
    }
    let (config_path, chosen_by) = cli.config_path();
    let overrides = Overrides {
        provider: cli.provider.clone(),
        model: cli.model.clone(),
        agent: cli.agent.clone(),
        profile: cli.profile.clone(),
    };
    if let Some(command) = &cli.command {
        return match run_command(&cli, command, &overrides) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(err) => {
                eprintln!("crucible-agent: {err:#}");
                ExitCode::FAILURE
            }
        };
    }
    // Answer `initialize` before building anything it does not need:
    // editors spawn an agent per thread and wait for this line. Only a
    // config that may turn on unstable features (which the answer lists)
    // is read first.
    let handshake = if Config::may_enable_unstable(&config_path) {
        Handshake::default()
    } else {
        match early_handshake() {
            Ok(handshake) => handshake,
            Err(err) => {
                tracing::info!(%err, "the client went away during the handshake");
                return ExitCode::SUCCESS;
            }
        }
    };
    let config = Config::load(&config_path, chosen_by, &overrides).map_err(anyhow::Error::from);
    if let Ok(config) = &config {
        log_config_report(config);
    }
    tracing::debug!(data_dir = %cli.data_dir().display(), "starting");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("crucible-agent: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(serve(config, cli.data_dir(), handshake));
    runtime.shutdown_timeout(RUNTIME_GRACE);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("crucible-agent: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Read the client's first message and answer it if it is `initialize`.
/// At EOF there is nothing to answer; the reader will see it again.
fn early_handshake() -> std::io::Result<Handshake> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    match transport::stdio::read_first_message(&mut input)? {
        Some(first) => acp::handshake::answer_first(first, &mut std::io::stdout().lock()),
        None => Ok(Handshake::default()),
    }
}

fn log_config_report(config: &Config) {
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    for ignored in &config.report.ignored {
        tracing::debug!(key = %ignored.key, "config key ignored: {}", ignored.why);
    }
    for decision in &config.report.decisions {
        tracing::debug!("config: {decision}");
    }
    tracing::debug!(config = ?config.source, "config read");
}

/// A subcommand for people: it may print to stdout. `Ok(false)` when it
/// found something broken.
fn run_command(
    cli: &cli::Cli,
    command: &cli::Command,
    overrides: &Overrides,
) -> anyhow::Result<bool> {
    use cli::sessions::Output;
    use cli::{Command, ConfigAction, SessionsAction};
    let (config_path, chosen_by) = cli.config_path();
    let data_dir = cli.data_dir();
    let store = Store::new(&data_dir);
    let mut out = std::io::stdout().lock();
    match command {
        Command::Config {
            action: ConfigAction::Init { force },
        } => {
            let existing = if *force {
                cli::init::Existing::Replace
            } else {
                cli::init::Existing::Keep
            };
            cli::init::init(&config_path, existing, &mut out)?;
        }
        Command::Config {
            action: ConfigAction::Path,
        } => cli::init::paths(&config_path, &data_dir, &mut out)?,
        Command::Sessions {
            action: SessionsAction::List { cwd, json },
        } => {
            let output = if *json { Output::Json } else { Output::Text };
            cli::sessions::list(&store, cwd.as_deref(), output, &mut out)?;
        }
        Command::Sessions {
            action: SessionsAction::Show { id, json },
        } => {
            let output = if *json { Output::Json } else { Output::Text };
            cli::sessions::show(&store, id, output, &mut out)?;
        }
        Command::Sessions {
            action: SessionsAction::Delete { id },
        } => cli::sessions::delete(&store, id, &mut out)?,
        Command::Setup { endpoint } => {
            let setup = cli::setup::Setup::new(config_path.clone(), endpoint);
            return Ok(cli::setup::run_in_terminal(setup)?);
        }
        Command::Serve {
            listen,
            tls_cert,
            tls_key,
        } => {
            let flags = cli::serve::Flags {
                listen: *listen,
                tls_cert: tls_cert.clone(),
                tls_key: tls_key.clone(),
            };
            return serve_remote(cli, &flags, overrides).map(|()| true);
        }
        Command::Doctor => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            return Ok(runtime.block_on(cli::doctor::run(
                &config_path,
                chosen_by,
                overrides,
                &data_dir,
                &mut out,
            ))?);
        }
    }
    Ok(true)
}

/// Speak ACP on stdin/stdout until stdin closes. `initialize` may already
/// be answered (`handshake`); a config that cannot be used still serves the
/// client, answering every session request with its error.
async fn serve(
    config: anyhow::Result<Config>,
    data_dir: std::path::PathBuf,
    handshake: Handshake,
) -> anyhow::Result<()> {
    let (connection, lines) = Connection::new();
    let mut writer = transport::stdio::spawn_stdout_writer(lines)
        .context("cannot start the stdout writer thread")?;
    // The version `initialize` settles, shared by the router and the sessions' client.
    let protocol = acp::protocol::Protocol::new(handshake.version);
    let client: Arc<dyn ClientSink> = Arc::new(acp::v2::client::NegotiatedClient::new(
        connection.clone(),
        protocol.clone(),
    ));
    let sessions = config.and_then(|config| sessions(&config, client.clone(), &data_dir));
    let mut service = match sessions {
        Ok(sessions) => Service::Ready(Box::new(
            Router::new(connection, sessions)
                .with_protocol(protocol, client)
                .after_handshake(handshake.client),
        )),
        Err(why) => {
            tracing::error!("{why}");
            eprintln!("crucible-agent: {why}");
            // Nothing sends through it: held, it would keep the writer from
            // ending at EOF (a 5 s wait and "output did not drain").
            drop(client);
            Service::Unconfigured(Unconfigured::new(connection, why.to_string()))
        }
    };
    if let Some(first) = handshake.pending {
        service.handle(first);
    }
    let stdin = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let read_result = tokio::select! {
        result = transport::stdio::run_reader(stdin, |message| service.handle(message)) => result,
        // The client closed stdout: nobody is listening any more. The
        // writer finds out when a write fails; the watch, at once.
        written = &mut writer => {
            tracing::info!(?written, "output closed");
            service.shutdown().await;
            return Ok(());
        }
        () = transport::stdio::stdout_closed() => {
            tracing::info!("the client closed stdout");
            service.shutdown().await;
            return Ok(());
        }
        // Asked to stop: end like EOF, every turn answered and saved.
        () = crucible_agent::platform::stop_requested() => {
            tracing::info!("asked to stop (SIGTERM); shutting down");
            Ok(())
        }
    };
    if let Err(err) = read_result {
        tracing::warn!(%err, "reading stdin failed; shutting down");
    }
    // EOF: cancel every turn, let them answer, flush, exit 0.
    service.shutdown().await;
    drop(service);
    match tokio::time::timeout(FLUSH_GRACE, writer).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(err))) => tracing::debug!(%err, "output closed while flushing"),
        Ok(Err(err)) => tracing::error!(%err, "writer thread failed"),
        Err(_) => tracing::warn!("output did not drain within {FLUSH_GRACE:?}"),
    }
    Ok(())
}

/// `serve`: the config must be usable (a server has nobody to tell
/// otherwise); then listen until SIGTERM or Ctrl-C.
fn serve_remote(
    cli: &cli::Cli,
    flags: &cli::serve::Flags,
    overrides: &Overrides,
) -> anyhow::Result<()> {
    let (config_path, chosen_by) = cli.config_path();
    let config = Config::load(&config_path, chosen_by, overrides)?;
    log_config_report(&config);
    let data_dir = cli.data_dir();
    let token = std::env::var(cli::serve::TOKEN_VARIABLE).ok();
    let plan = cli::serve::plan(&config.serve, flags, &data_dir, token)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Sessions talk to their connection's client, not to this one.
        let nobody: Arc<dyn ClientSink> = Arc::new(crucible_agent::client::Nobody);
        let sessions = sessions(&config, nobody, &data_dir)?;
        cli::serve::run(plan, sessions, &config).await?;
        anyhow::Ok(())
    })?;
    runtime.shutdown_timeout(RUNTIME_GRACE);
    Ok(())
}

/// The session manager the config describes.
fn sessions(
    config: &Config,
    sink: Arc<dyn ClientSink>,
    data_dir: &std::path::Path,
) -> anyhow::Result<SessionManager> {
    let defaults = Defaults::from_config(config).ok_or_else(|| {
        anyhow::anyhow!("no default provider is configured; add an [llm.providers.NAME] table (see `crucible-agent config init`)")
    })?;
    let providers = Arc::new(Providers::new(config.providers.clone()));
    let store = Arc::new(Store::new(data_dir));
    Ok(SessionManager::new(providers, sink, defaults)
        .with_store(store, config.default_agent.clone()))
}

fn init_logging(cli: &cli::Cli) -> anyhow::Result<()> {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let stderr_layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .with_filter(filter());
    let file_layer = match &cli.log_file {
        Some(path) => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).with_context(|| {
                    format!("cannot create the log directory {}", parent.display())
                })?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the log file {}", path.display()))?;
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(Arc::new(file))
                    .with_ansi(false)
                    .with_filter(filter()),
            )
        }
        None => None,
    };
    tracing_subscriber::registry()
        .with(stderr_layer)
        .with(file_layer)
        .try_init()
        .context("cannot start logging")?;
    Ok(())
}
