//! `doctor`: everything that stops a first run, checked at once and shown
//! as a table with what to fix. Keys are resolved, never printed.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::CliError;
use crate::config::{ChosenBy, Config, ConfigError, ConfigReport, Overrides};
use crate::mcp::McpTransport;
use crate::providers::settings::{ProviderKind, ProviderSettings, ToolCalling};
use crate::providers::{Provider, Providers};
use crate::tools::environment::Inherit;
use crate::tools::sandbox::{SandboxMode, SandboxSettings, Support};

/// How long an endpoint may take to list its models.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Fail,
}

struct Check {
    status: Status,
    what: String,
    detail: String,
    fix: Option<String>,
}

impl Check {
    fn ok(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            status: Status::Ok,
            what: what.into(),
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(what: impl Into<String>, detail: impl Into<String>, fix: Option<String>) -> Self {
        Self {
            status: Status::Warn,
            what: what.into(),
            detail: detail.into(),
            fix,
        }
    }

    fn fail(what: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            status: Status::Fail,
            what: what.into(),
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Run every check and print the table; `Ok(false)` when something is broken.
pub async fn run(
    config_path: &Path,
    chosen_by: ChosenBy,
    overrides: &Overrides,
    data_dir: &Path,
    out: &mut dyn Write,
) -> Result<bool, CliError> {
    let mut checks = Vec::new();
    match Config::load(config_path, chosen_by, overrides) {
        Ok(config) => {
            if config.source.is_some() || config_path.exists() {
                checks.push(Check::ok("config", config_path.display().to_string()));
            } else {
                checks.push(Check::warn(
                    "config",
                    format!(
                        "no file at {}; using the built-in default (Ollama at localhost:11434)",
                        config_path.display()
                    ),
                    Some("run `crucible-agent config init` and edit it".into()),
                ));
            }
            for warning in &config.warnings {
                checks.push(Check::warn("config", warning.clone(), None));
            }
            report_keys(&config.report, &mut checks);
            check_providers(&config, &mut checks).await;
            check_mcp(&config, &mut checks);
            checks.push(check_reads(&config.declared_reads));
            check_environment(&config, &mut checks);
            checks.push(check_sandbox(&config.sandbox, &Support::probe()));
            let token = std::env::var(super::serve::TOKEN_VARIABLE).ok();
            checks.push(match super::serve::check(&config.serve, data_dir, token) {
                Ok(summary) => Check::ok("serve", summary),
                Err((problem, fix)) => Check::fail("serve", problem, fix),
            });
        }
        Err(err) => {
            let fix = config_fix(&err, config_path);
            checks.push(Check::fail("config", err.to_string(), fix));
        }
    }
    checks.push(check_data_dir(data_dir));
    print(&checks, out)?;
    Ok(checks.iter().all(|c| c.status != Status::Fail))
}

/// What to do about a config that does not load: always an edit of the
/// user's own file, never a fresh one over it.
fn config_fix(err: &ConfigError, path: &Path) -> String {
    match err {
        ConfigError::Invalid { key, .. } => format!(
            "follow the message for `{key}` in {}; the rest of the file can stay",
            path.display()
        ),
        ConfigError::Parse { .. } => format!(
            "correct the TOML at the place named above in {}",
            path.display()
        ),
        ConfigError::Flag { flag, .. } => {
            format!("change {flag} on the command line (or in the editor's agent settings)")
        }
        ConfigError::Read { .. } => format!(
            "make {} readable, or name another file with --config or $CRUCIBLE_CONFIG",
            path.display()
        ),
    }
}

async fn check_providers(config: &Config, checks: &mut Vec<Check>) {
    // A quick answer or none: no retries, a short connect timeout.
    let mut quick = config.clone();
    for provider in quick.providers.values_mut() {
        provider.retry.max_retries = 0;
        provider.connect_timeout = provider.connect_timeout.min(Duration::from_secs(3));
    }
    let providers = Providers::new(quick.providers.clone());
    for (name, provider) in &quick.providers {
        let key = check_key(name, provider);
        let key_ok = key.status != Status::Fail;
        checks.push(key);
        checks.push(check_tool_calling(name, provider));
        if !key_ok {
            continue;
        }
        let Some(client) = providers.get(name) else {
            continue;
        };
        checks.push(check_endpoint(name, provider, &*client).await);
    }
}

/// Whether the provider has the key it needs, and where it comes from.
fn check_key(name: &str, provider: &ProviderSettings) -> Check {
    let what = format!("provider {name} key");
    let needs_key = provider.kind == ProviderKind::Anthropic
        || provider
            .service
            .default_endpoint()
            .is_some_and(|own| provider.endpoint == own && provider.key_variable().is_some());
    match (&provider.api_key, &provider.missing_key_variable) {
        (_, Some(variable)) => Check::fail(
            what,
            format!("environment variable {variable} is not set"),
            format!("export {variable} in the environment your editor starts the agent from"),
        ),
        (Some(key), None) => Check::ok(what, format!("from {} (not shown)", key.source)),
        (None, None) if needs_key => {
            let variable = provider.key_variable().unwrap_or("API_KEY");
            Check::fail(
                what,
                "no API key configured",
                format!(
                    "set api_key = \"${{{variable}}}\" in [llm.providers.{name}] and export {variable}"
                ),
            )
        }
        (None, None) => Check::ok(what, "none (a local server needs none)"),
    }
}

/// The server itself, even when `available_models` spares sessions the
/// question: does it answer, and does it list the default model.
async fn check_endpoint(name: &str, provider: &ProviderSettings, client: &dyn Provider) -> Check {
    let what = format!("provider {name} endpoint");
    let answer = tokio::time::timeout(ENDPOINT_TIMEOUT, client.list_models()).await;
    match answer {
        Ok(Ok(models)) => {
            let listed = models.iter().any(|m| {
                m.id == provider.default_model
                    || m.id.strip_suffix(":latest") == Some(provider.default_model.as_str())
            });
            if models.is_empty() || listed {
                Check::ok(
                    what,
                    format!("{} answers ({} models)", provider.endpoint, models.len()),
                )
            } else {
                Check::warn(
                    what,
                    format!(
                        "{} answers, but its {} models do not include `{}`",
                        provider.endpoint,
                        models.len(),
                        provider.default_model
                    ),
                    Some(format!(
                        "check default_model in [llm.providers.{name}] (the server lists: {})",
                        models
                            .iter()
                            .take(5)
                            .map(|m| m.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                )
            }
        }
        Ok(Err(err)) => Check::fail(
            what,
            err.to_string(),
            format!(
                "check `endpoint` and the key in [llm.providers.{name}], and that the server runs"
            ),
        ),
        Err(_) => Check::fail(
            what,
            format!(
                "{} did not answer within {ENDPOINT_TIMEOUT:?}",
                provider.endpoint
            ),
            format!("check `endpoint` in [llm.providers.{name}] and that the server runs"),
        ),
    }
}

/// How the provider's models get their tools: which run prompted.
fn check_tool_calling(name: &str, provider: &ProviderSettings) -> Check {
    let describe = |mode: ToolCalling| match mode {
        ToolCalling::Auto => "native, prompted if the server refuses tools",
        ToolCalling::Native => "native",
        ToolCalling::Prompted => "prompted (tools in the system prompt, calls read from text)",
    };
    let mut models = vec![(
        provider.default_model.as_str(),
        provider.tool_calling_for(&provider.default_model),
    )];
    models.extend(
        (provider.model_tool_calling.iter())
            .filter(|(model, _)| **model != provider.default_model)
            .map(|(model, mode)| (model.as_str(), *mode)),
    );
    let mut detail: Vec<String> = models
        .iter()
        .map(|(model, mode)| format!("{model}: {}", describe(*mode)))
        .collect();
    if !provider.model_tool_calling.is_empty() || provider.tool_calling != ToolCalling::Auto {
        detail.push(format!("other models: {}", describe(provider.tool_calling)));
    }
    Check::ok(format!("provider {name} tool calling"), detail.join("; "))
}

/// The keys used, those read past (grouped by why), and which key won
/// where two set the same thing.
fn report_keys(report: &ConfigReport, checks: &mut Vec<Check>) {
    if !report.used.is_empty() {
        checks.push(Check::ok("keys used", report.used.join(", ")));
    }
    let mut ignored: Vec<(&str, Vec<&str>)> = Vec::new();
    for item in &report.ignored {
        match ignored.iter_mut().find(|(why, _)| *why == item.why) {
            Some((_, keys)) => keys.push(&item.key),
            None => ignored.push((&item.why, vec![&item.key])),
        }
    }
    for (why, keys) in ignored {
        checks.push(Check::ok(
            "keys ignored",
            format!("{}: {why}", keys.join(", ")),
        ));
    }
    for decision in &report.decisions {
        checks.push(Check::ok("key won", decision.clone()));
    }
}

fn check_mcp(config: &Config, checks: &mut Vec<Check>) {
    for server in &config.mcp_servers {
        let what = format!("mcp {}", server.name);
        match &server.transport {
            McpTransport::Stdio { command, .. } => match which::which(command) {
                Ok(path) => checks.push(Check::ok(what, format!("command {}", path.display()))),
                Err(_) => checks.push(Check::fail(
                    what,
                    format!("command `{}` is not found on PATH", command.display()),
                    format!(
                        "install it, or fix `command` in [mcp_servers.{}] (or set enabled = false)",
                        server.name
                    ),
                )),
            },
            McpTransport::Http { url, .. } | McpTransport::Sse { url, .. } => {
                checks.push(Check::ok(what, format!("{url} (remote; not contacted)")));
            }
            // Only the editor declares these, never the config.
            McpTransport::Acp { server_id, .. } => {
                checks.push(Check::ok(what, format!("acp:{server_id} (the editor's)")));
            }
        }
    }
}

/// Which tools run as reads without a question in act (`[permissions] reads`).
fn check_reads(reads: &crate::permissions::DeclaredReads) -> Check {
    let tools = if reads.tools().is_empty() {
        "none".to_string()
    } else {
        reads.tools().join(", ")
    };
    let from = if reads.is_default() {
        "the default: the reads of Crucible's kiln server `crucible`; `reads` in [permissions] replaces the list, `reads = []` turns it off, a rule with decision \"ask\" asks for one"
    } else {
        "[permissions] reads"
    };
    Check::ok(
        "permissions reads",
        format!("run as reads (kind read, no question in act): {tools} ({from})"),
    )
}

/// The effective `[shell_environment]` here: counts, never values.
fn check_environment(config: &Config, checks: &mut Vec<Check>) {
    let policy = &config.shell_environment;
    let env = policy.for_command();
    let inherit = match policy.inherit {
        Inherit::All => "all",
        Inherit::Core => "core",
        Inherit::None => "none",
    };
    checks.push(Check::ok(
        "shell environment",
        format!(
            "inherit {inherit}: commands get {} variable(s) ({} set by the config); {} left out, {} of them by an exclude (their values are redacted from tool results)",
            env.variables.len(),
            policy.set.len(),
            env.left_out,
            env.excluded,
        ),
    ));
    let inheriting: Vec<&str> = config
        .mcp_servers
        .iter()
        .filter(|server| {
            matches!(
                server.transport,
                McpTransport::Stdio {
                    inherit_env: true,
                    ..
                }
            )
        })
        .map(|server| server.name.as_str())
        .collect();
    let detail = if inheriting.is_empty() {
        "stdio servers get PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, TMPDIR and their own env"
            .to_string()
    } else {
        format!(
            "stdio servers get PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, TMPDIR and their own env; the agent's whole environment: {}",
            inheriting.join(", ")
        )
    };
    checks.push(Check::ok("mcp environment", detail));
}

/// Whether commands can be confined here, and how they will be.
fn check_sandbox(settings: &SandboxSettings, support: &Support) -> Check {
    let mode = settings.mode.as_str();
    let network = if settings.network { "on" } else { "off" };
    match (support, settings.mode) {
        (Support::Available { mechanism, .. }, SandboxMode::Off) => Check::ok(
            "sandbox",
            format!("available ({mechanism}), but [sandbox] mode = \"off\": commands run with your full rights"),
        ),
        (Support::Available { mechanism, network_gap: Some(gap) }, _) if !settings.network => Check::warn(
            "sandbox",
            format!("{mechanism}: commands run {mode}, but {gap}"),
            None,
        ),
        (Support::Available { mechanism, .. }, _) => Check::ok(
            "sandbox",
            format!("available ({mechanism}): commands run {mode}, network {network}"),
        ),
        (Support::Unavailable(reason), SandboxMode::Off) => Check::ok(
            "sandbox",
            format!("off; it would not be available here: {reason}"),
        ),
        (Support::Unavailable(reason), _) => Check::warn(
            "sandbox",
            format!("not available: {reason}. Commands run with your full rights; in auto mode each asks first"),
            Some("use a system with a sandbox (Linux with Landlock, or macOS), or set [sandbox] mode = \"off\" to run commands unasked in auto mode".into()),
        ),
    }
}

fn check_data_dir(data_dir: &Path) -> Check {
    let sessions = data_dir.join("sessions");
    let probe = sessions.join(format!(".doctor-{}", std::process::id()));
    let written = std::fs::create_dir_all(&sessions)
        .and_then(|()| std::fs::write(&probe, b"ok"))
        .and_then(|()| std::fs::remove_file(&probe));
    match written {
        Ok(()) => Check::ok("data dir", format!("{} is writable", data_dir.display())),
        Err(err) => Check::fail(
            "data dir",
            format!("cannot write in {}: {err}", sessions.display()),
            "make it writable, or point --data-dir / CRUCIBLE_DATA_DIR at a directory that is",
        ),
    }
}

fn print(checks: &[Check], out: &mut dyn Write) -> std::io::Result<()> {
    let width = checks
        .iter()
        .map(|c| c.what.len())
        .max()
        .unwrap_or(5)
        .max(5);
    writeln!(out, "{:<width$}  {:<6}  DETAIL", "CHECK", "STATUS")?;
    for check in checks {
        let status = match check.status {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        writeln!(
            out,
            "{:<width$}  {:<6}  {}",
            check.what, status, check.detail
        )?;
        if let Some(fix) = &check.fix {
            writeln!(out, "{:<width$}  {:<6}  fix: {fix}", "", "")?;
        }
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    writeln!(out)?;
    if failed == 0 {
        writeln!(out, "all good")?;
    } else {
        writeln!(out, "{failed} problem(s) to fix (see `fix:` above)")?;
    }
    Ok(())
}
