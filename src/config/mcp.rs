//! `[mcp]` and `[mcp_servers.NAME]`: the MCP servers every session starts
//! with, and how they are run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::error::{ConfigError, invalid};
use super::non_zero;
use super::raw::{RawMcp, RawMcpServer};
use crate::mcp::{McpOptions, McpServerSpec};
use crate::providers::settings::expand_env;

pub(super) fn validate_options(raw: RawMcp, path: &Path) -> Result<McpOptions, ConfigError> {
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

/// The enabled servers, in name order.
pub(super) fn validate_servers(
    raw: BTreeMap<String, RawMcpServer>,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<McpServerSpec>, ConfigError> {
    let mut specs = Vec::new();
    for (name, server) in raw {
        if server.enabled == Some(false) {
            continue;
        }
        let spec = validate_server(&name, server, path, env)?;
        spec.validate().map_err(|err| {
            invalid(
                path,
                format!("mcp_servers.{name}"),
                err.to_string(),
                "Fix the server's settings.",
            )
        })?;
        specs.push(spec);
    }
    Ok(specs)
}

fn validate_server(
    name: &str,
    mut server: RawMcpServer,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<McpServerSpec, ConfigError> {
    let table = ServerTable { name, path, env };
    let trust_read_only_hints = server.trust_read_only_hints.unwrap_or(true);
    let kind = match server.kind.take() {
        Some(kind) => kind,
        None if server.url.is_some() => "http".into(),
        None => "stdio".into(),
    };
    let spec = match kind.as_str() {
        "stdio" => table.stdio(server)?,
        "http" | "sse" => table.remote(kind == "http", server)?,
        other => {
            return Err(invalid(
                path,
                table.key("type"),
                format!("`{other}` is not an MCP transport"),
                "Use \"stdio\" (with command), \"http\" or \"sse\" (with url).",
            ));
        }
    };
    Ok(spec.with_trust_read_only_hints(trust_read_only_hints))
}

/// `[mcp_servers.NAME]` of the file at `path`.
struct ServerTable<'a> {
    name: &'a str,
    path: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl ServerTable<'_> {
    fn key(&self, field: &str) -> String {
        format!("mcp_servers.{}.{field}", self.name)
    }

    fn required(
        &self,
        value: Option<String>,
        field: &str,
        fix: &str,
    ) -> Result<String, ConfigError> {
        value.ok_or_else(|| invalid(self.path, self.key(field), "is missing", fix))
    }

    /// Secrets (tokens in headers or env) stay out of the file: ${VAR}.
    fn expand(&self, field: String, value: &str) -> Result<String, ConfigError> {
        expand_env(value, self.env).map_err(|var| {
            invalid(
                self.path,
                self.key(&field),
                format!("refers to ${{{var}}}, which is not set"),
                format!("Export {var} in the environment the editor starts the agent from."),
            )
        })
    }

    fn stdio(&self, server: RawMcpServer) -> Result<McpServerSpec, ConfigError> {
        let command = self.required(
            server.command,
            "command",
            "Name the program that runs the server, e.g. command = \"npx\", or set url for an HTTP server.",
        )?;
        let mut spec =
            McpServerSpec::stdio(self.name, command).with_args(server.args.unwrap_or_default());
        for (variable, value) in server.env.unwrap_or_default() {
            let value = self.expand(format!("env.{variable}"), &value)?;
            spec = spec.with_env(variable, value);
        }
        if let Some(cwd) = server.cwd {
            spec = spec.with_cwd(cwd);
        }
        Ok(spec
            .with_inherit_env(server.inherit_env.unwrap_or(false))
            .with_sandbox(server.sandbox.unwrap_or(false)))
    }

    /// Streamable HTTP, or the older SSE transport.
    fn remote(&self, http: bool, server: RawMcpServer) -> Result<McpServerSpec, ConfigError> {
        if server.sandbox == Some(true) {
            return Err(invalid(
                self.path,
                self.key("sandbox"),
                "only a stdio server is a process the sandbox can confine",
                "Remove `sandbox`, or run the server over stdio (command = …).",
            ));
        }
        let url = self.required(
            server.url,
            "url",
            "Give the server's URL, e.g. url = \"http://127.0.0.1:3001/mcp\".",
        )?;
        let mut spec = if http {
            McpServerSpec::http(self.name, url)
        } else {
            McpServerSpec::sse(self.name, url)
        };
        for (header, value) in server.headers.unwrap_or_default() {
            let value = self.expand(format!("headers.{header}"), &value)?;
            spec = spec.with_header(header, value);
        }
        Ok(spec)
    }
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
