//! The client's `mcpServers` entries (ACP v1 and v2) as the agent's own
//! [`McpServerSpec`]s: each version's entry read into a [`McpWanted`],
//! then made a spec for the session.

use std::path::Path;

use agent_client_protocol_schema::{v1, v2};

use crate::acp::request::McpWanted;
use crate::mcp::{McpServerSpec, McpTransport, Relay, SpecError};

/// A wanted server as a spec, with stdio servers started in `cwd` (the
/// session's directory: ACP gives them none of their own). `acp` entries
/// are served over `relay`, and refused without one (`mcp_over_acp` off).
pub fn server_spec(
    server: McpWanted,
    cwd: &Path,
    relay: Option<&Relay>,
) -> Result<McpServerSpec, SpecError> {
    let spec = match (server, relay) {
        (McpWanted::Acp { name, server_id }, Some(relay)) => {
            McpServerSpec::acp(&name, &server_id, relay.clone())
        }
        (McpWanted::Acp { name, .. } | McpWanted::Unsupported { name }, _) => {
            return Err(SpecError::UnsupportedTransport { name });
        }
        (McpWanted::Spec(spec), _) => *spec,
    };
    spec.validate()?;
    Ok(match spec.transport {
        McpTransport::Stdio { cwd: None, .. } => spec.with_cwd(cwd),
        _ => spec,
    })
}

/// `headers` (name, value) on `spec`.
fn with_headers<'a>(
    spec: McpServerSpec,
    headers: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> McpServerSpec {
    headers
        .into_iter()
        .fold(spec, |spec, (name, value)| spec.with_header(name, value))
}

/// A stdio server's spec from its command line and environment.
fn stdio<'a>(
    name: &str,
    command: &Path,
    args: &[String],
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> McpServerSpec {
    env.into_iter().fold(
        McpServerSpec::stdio(name, command).with_args(args.iter().cloned()),
        |spec, (name, value)| spec.with_env(name, value),
    )
}

/// A v1 `mcpServers` entry, read.
pub fn read_v1(server: &v1::McpServer) -> McpWanted {
    McpWanted::Spec(Box::new(match server {
        v1::McpServer::Stdio(entry) => stdio(
            &entry.name,
            &entry.command,
            &entry.args,
            entry.env.iter().map(|var| (&var.name, &var.value)),
        ),
        v1::McpServer::Http(http) => with_headers(
            McpServerSpec::http(&http.name, &http.url),
            http.headers.iter().map(|h| (&h.name, &h.value)),
        ),
        v1::McpServer::Sse(sse) => with_headers(
            McpServerSpec::sse(&sse.name, &sse.url),
            sse.headers.iter().map(|h| (&h.name, &h.value)),
        ),
        v1::McpServer::Acp(entry) => {
            return McpWanted::Acp {
                name: entry.name.clone(),
                server_id: entry.server_id.0.to_string(),
            };
        }
        _ => return unsupported(),
    }))
}

/// A v2 `mcpServers` entry, read.
pub fn read_v2(server: &v2::McpServer) -> McpWanted {
    McpWanted::Spec(Box::new(match server {
        v2::McpServer::Stdio(entry) => stdio(
            &entry.name,
            &entry.command.0,
            &entry.args,
            entry.env.iter().map(|var| (&var.name, &var.value)),
        ),
        v2::McpServer::Http(http) => with_headers(
            McpServerSpec::http(&http.name, &http.url),
            http.headers.iter().map(|h| (&h.name, &h.value)),
        ),
        v2::McpServer::Acp(entry) => {
            return McpWanted::Acp {
                name: entry.name.clone(),
                server_id: entry.server_id.0.to_string(),
            };
        }
        _ => return unsupported(),
    }))
}

/// An entry of a kind this schema has and this agent does not speak.
fn unsupported() -> McpWanted {
    McpWanted::Unsupported {
        name: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: serde_json::Value) -> McpWanted {
        read_v1(&serde_json::from_value(json).unwrap())
    }

    #[test]
    fn stdio_entries_take_the_session_cwd() {
        let server = parse(serde_json::json!({
            "name": "fs",
            "command": "/usr/bin/node",
            "args": ["server.js", "/tmp"],
            "env": [{"name": "TOKEN", "value": "x"}]
        }));
        let spec = server_spec(server, Path::new("/work/project"), None).unwrap();
        assert_eq!(
            spec,
            McpServerSpec::stdio("fs", "/usr/bin/node")
                .with_args(["server.js", "/tmp"])
                .with_env("TOKEN", "x")
                .with_cwd("/work/project")
        );
    }

    #[test]
    fn http_and_sse_entries_keep_their_headers() {
        let http = parse(serde_json::json!({
            "type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer t"}]
        }));
        assert_eq!(
            server_spec(http, Path::new("/x"), None).unwrap(),
            McpServerSpec::http("web", "http://127.0.0.1:1/mcp")
                .with_header("Authorization", "Bearer t")
        );
        let sse = parse(serde_json::json!({
            "type": "sse", "name": "old", "url": "https://example.com/sse", "headers": []
        }));
        assert_eq!(
            server_spec(sse, Path::new("/x"), None).unwrap(),
            McpServerSpec::sse("old", "https://example.com/sse")
        );
    }

    struct Unanswered;

    impl crate::mcp::AcpRelay for Unanswered {
        fn request(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: Option<serde_json::Map<String, serde_json::Value>>,
        ) -> futures::future::BoxFuture<
            'static,
            Result<crate::mcp::RelayAnswer, crate::mcp::RelayError>,
        > {
            Box::pin(async { Err(crate::mcp::RelayError::Connection("no editor here".into())) })
        }

        fn subscribe(
            &self,
            _: &str,
        ) -> tokio::sync::mpsc::UnboundedReceiver<crate::mcp::RelayNotification> {
            tokio::sync::mpsc::unbounded_channel().1
        }
    }

    #[test]
    fn acp_entries_need_the_relay_and_a_server_id() {
        let entry = parse(serde_json::json!({"type": "acp", "name": "ed", "serverId": "s1"}));
        assert_eq!(
            server_spec(entry, Path::new("/x"), None).unwrap_err(),
            SpecError::UnsupportedTransport { name: "ed".into() }
        );
        let relay = Relay(std::sync::Arc::new(Unanswered));
        let entry = parse(serde_json::json!({"type": "acp", "name": "ed", "serverId": "s1"}));
        let spec = server_spec(entry, Path::new("/x"), Some(&relay)).unwrap();
        assert_eq!(spec, McpServerSpec::acp("ed", "s1", relay.clone()));
        assert_eq!(spec.target(), "acp:s1");
        let blank = parse(serde_json::json!({"type": "acp", "name": "ed", "serverId": " "}));
        assert_eq!(
            server_spec(blank, Path::new("/x"), Some(&relay)).unwrap_err(),
            SpecError::EmptyServerId { name: "ed".into() }
        );
    }

    #[test]
    fn unusable_entries_say_why() {
        let bad_url = parse(
            serde_json::json!({"type": "http", "name": "w", "url": "not a url", "headers": []}),
        );
        let err = server_spec(bad_url, Path::new("/x"), None).unwrap_err();
        assert!(err.to_string().contains("invalid URL `not a url`"), "{err}");

        let ftp = parse(
            serde_json::json!({"type": "http", "name": "w", "url": "ftp://x/", "headers": []}),
        );
        let err = server_spec(ftp, Path::new("/x"), None).unwrap_err();
        assert!(err.to_string().contains("only http and https"), "{err}");

        let header = parse(serde_json::json!({
            "type": "http", "name": "w", "url": "http://x/", "headers": [{"name": "bad header", "value": "v"}]
        }));
        assert_eq!(
            server_spec(header, Path::new("/x"), None).unwrap_err(),
            SpecError::InvalidHeader {
                name: "w".into(),
                header: "bad header".into()
            }
        );

        let unnamed =
            parse(serde_json::json!({"name": " ", "command": "x", "args": [], "env": []}));
        assert_eq!(
            server_spec(unnamed, Path::new("/x"), None).unwrap_err(),
            SpecError::EmptyName
        );

        let no_command =
            parse(serde_json::json!({"name": "n", "command": "", "args": [], "env": []}));
        assert!(matches!(
            server_spec(no_command, Path::new("/x"), None),
            Err(SpecError::EmptyCommand { .. })
        ));
    }
}
