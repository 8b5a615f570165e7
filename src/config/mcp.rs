//! `[mcp]` and `[mcp_servers.NAME]`: the MCP servers every session starts
//! with, and how they are run. Our spelling of a server table is mapped
//! here; [`super::server_table`] reads it, as it reads Crucible's.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::error::ConfigError;
use super::non_zero;
use super::raw::{RawMcp, RawMcpServer};
use super::report::ConfigReport;
use super::server_table::{
    Protocol, RemoteServer, ServerTable, StdioServer, inheritance, sandboxing,
};
use super::upstream::validate_upstream;
use crate::mcp::{McpOptions, McpServerSpec, ReadOnlyHints};

fn validate_options(raw: RawMcp, path: &Path) -> Result<McpOptions, ConfigError> {
    let defaults = McpOptions::default();
    let seconds = |value: Option<u64>, default: Duration, key: &str| {
        let fix = "Use a number of seconds above 0, or leave it out.";
        let secs = non_zero(value, path, key, "is 0", fix)?;
        Ok::<_, ConfigError>(secs.map(Duration::from_secs).unwrap_or(default))
    };
    Ok(McpOptions {
        start_timeout: seconds(
            raw.start_timeout_secs,
            defaults.start_timeout,
            "mcp.start_timeout_secs",
        )?,
        call_timeout: seconds(
            raw.call_timeout_secs,
            defaults.call_timeout,
            "mcp.call_timeout_secs",
        )?,
    })
}

/// `[mcp]` and the servers of both spellings: ours, then Crucible's
/// `[[mcp.servers]]` (see [`super::upstream`]) whose names ours do not take.
pub(super) fn validate(
    mut raw: RawMcp,
    ours: BTreeMap<String, RawMcpServer>,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
    report: &mut ConfigReport,
) -> Result<McpSection, ConfigError> {
    let upstream = validate_upstream(raw.servers.take().unwrap_or_default(), path, env, warnings)?;
    let mut servers = validate_servers(ours, path, env)?;
    for spec in upstream {
        if servers.iter().any(|ours| ours.name == spec.name) {
            report.decide(format!(
                "MCP server `{0}`: [mcp_servers.{0}] wins over the [[mcp.servers]] entry",
                spec.name
            ));
        } else {
            servers.push(spec);
        }
    }
    let options = validate_options(raw, path)?;
    Ok(McpSection { servers, options })
}

/// What the MCP tables give: the servers every session starts, and how.
pub(super) struct McpSection {
    pub servers: Vec<McpServerSpec>,
    pub options: McpOptions,
}

/// The enabled servers, in name order.
fn validate_servers(
    raw: BTreeMap<String, RawMcpServer>,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<McpServerSpec>, ConfigError> {
    raw.into_iter()
        .filter(|(_, server)| server.enabled != Some(false))
        .map(|(name, server)| validate_server(&name, server, path, env))
        .collect()
}

fn validate_server(
    name: &str,
    server: RawMcpServer,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<McpServerSpec, ConfigError> {
    let table = ServerTable::new(format!("mcp_servers.{name}"), path, env);
    let hints = match server.trust_read_only_hints {
        Some(false) => ReadOnlyHints::Ignored,
        _ => ReadOnlyHints::Trusted,
    };
    let kind = match server.kind.as_deref() {
        Some(kind) => kind,
        None if server.url.is_some() => "http",
        None => "stdio",
    };
    let spec = match kind {
        "stdio" => stdio(&table, server)?.into_spec(name),
        "http" => remote(&table, Protocol::StreamableHttp, server)?.into_spec(name),
        "sse" => remote(&table, Protocol::LegacySse, server)?.into_spec(name),
        other => {
            return Err(table.invalid(
                "type",
                format!("`{other}` is not an MCP transport"),
                "Use \"stdio\" (with command), \"http\" or \"sse\" (with url).",
            ));
        }
    };
    table.checked(spec.with_read_only_hints(hints))
}

fn stdio(table: &ServerTable<'_>, server: RawMcpServer) -> Result<StdioServer, ConfigError> {
    let command = table.required(
        server.command,
        "command",
        "Name the program that runs the server, e.g. command = \"npx\", or set url for an HTTP server.",
    )?;
    Ok(StdioServer {
        command,
        args: server.args.unwrap_or_default(),
        env: table.secrets("env", server.env)?,
        environment: inheritance(server.inherit_env),
        cwd: server.cwd,
        sandbox: sandboxing(server.sandbox),
    })
}

/// Streamable HTTP, or the older SSE transport.
fn remote(
    table: &ServerTable<'_>,
    protocol: Protocol,
    server: RawMcpServer,
) -> Result<RemoteServer, ConfigError> {
    if server.sandbox == Some(true) {
        return Err(table.invalid(
            "sandbox",
            "only a stdio server is a process the sandbox can confine",
            "Remove `sandbox`, or run the server over stdio (command = …).",
        ));
    }
    let url = table.required(
        server.url,
        "url",
        "Give the server's URL, e.g. url = \"http://127.0.0.1:3001/mcp\".",
    )?;
    Ok(RemoteServer {
        protocol,
        url,
        headers: table.secrets("headers", server.headers)?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load, refusal};
    use std::time::Duration;

    #[test]
    fn mcp_servers_can_distrust_read_only_hints() {
        let text = "[mcp_servers.a]\ncommand = \"x\"\n[mcp_servers.b]\ncommand = \"y\"\ntrust_read_only_hints = false";
        let servers = load(text, &[]).unwrap().mcp_servers;
        assert!(servers[0].trust_read_only_hints);
        assert!(!servers[1].trust_read_only_hints);
    }

    #[test]
    fn stdio_servers_inherit_the_whole_environment_only_when_asked() {
        let text = "[mcp_servers.a]\ncommand = \"x\"\n[mcp_servers.b]\ncommand = \"y\"\ninherit_env = true\n[[mcp.servers]]\nname = \"c\"\n[mcp.servers.transport]\ncommand = \"z\"\ninherit_env = true";
        let servers = load(text, &[]).unwrap().mcp_servers;
        let inherits: Vec<(&str, bool)> = servers
            .iter()
            .map(|s| match &s.transport {
                crate::mcp::McpTransport::Stdio { inherit_env, .. } => {
                    (s.name.as_str(), *inherit_env)
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(inherits, [("a", false), ("b", true), ("c", true)]);
    }

    #[test]
    fn mcp_servers_are_read_with_secrets_from_the_environment() {
        let text = "[mcp_servers.local]\ncommand = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv = { TOKEN = \"${MY_TOKEN}\" }\n[mcp_servers.remote]\ntype = \"http\"\nurl = \"http://127.0.0.1:3001/mcp\"\nheaders = { Authorization = \"Bearer ${MY_TOKEN}\" }\n[mcp_servers.off]\ncommand = \"x\"\nenabled = false\n[mcp]\ncall_timeout_secs = 5";
        let config = load(text, &[("MY_TOKEN", "t0k")]).unwrap();
        let names: Vec<&str> = config.mcp_servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["local", "remote"]);
        assert_eq!(config.mcp_options.call_timeout, Duration::from_secs(5));
        let crate::mcp::McpTransport::Http { headers, .. } = &config.mcp_servers[1].transport
        else {
            panic!("{:?}", config.mcp_servers[1])
        };
        assert_eq!(headers[0], ("Authorization".into(), "Bearer t0k".into()));
        // Tokens never show in Debug output (and so never in logs).
        let debug = format!("{:?}", config.mcp_servers);
        assert!(!debug.contains("t0k"), "{debug}");
        assert!(debug.contains("Authorization=***"), "{debug}");
        let err = refusal(text);
        assert!(err.contains("MY_TOKEN"), "{err}");
        let err = refusal("[mcp_servers.x]\ntype = \"http\"");
        assert!(err.contains("mcp_servers.x.url"), "{err}");
        let err = refusal("[mcp_servers.x]\nargs = []");
        assert!(err.contains("mcp_servers.x.command"), "{err}");
    }
}
