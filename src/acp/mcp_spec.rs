//! The client's `mcpServers` entries (ACP) as the agent's own
//! [`McpServerSpec`]s.

use std::path::Path;

use agent_client_protocol_schema::v1 as acp;

use crate::mcp::{McpServerSpec, McpTransport, Relay, SpecError};

/// An ACP `mcpServers` entry, with stdio servers started in `cwd` (the
/// session's directory: ACP gives them none of their own). `acp` entries
/// are served over `relay`, and refused without one (`mcp_over_acp` off).
pub fn server_spec(
    server: &acp::McpServer,
    cwd: &Path,
    relay: Option<&Relay>,
) -> Result<McpServerSpec, SpecError> {
    let spec = match (server, relay) {
        (acp::McpServer::Acp(entry), Some(relay)) => {
            let spec = McpServerSpec::acp(&entry.name, entry.server_id.0.as_ref(), relay.clone());
            spec.validate()?;
            spec
        }
        _ => spec_of(server)?,
    };
    Ok(match spec.transport {
        McpTransport::Stdio { cwd: None, .. } => spec.with_cwd(cwd),
        _ => spec,
    })
}

fn spec_of(server: &acp::McpServer) -> Result<McpServerSpec, SpecError> {
    let with_headers = |spec: McpServerSpec, headers: &[acp::HttpHeader]| {
        headers.iter().fold(spec, |spec, header| {
            spec.with_header(&header.name, &header.value)
        })
    };
    let spec = match server {
        acp::McpServer::Stdio(stdio) => stdio.env.iter().fold(
            McpServerSpec::stdio(&stdio.name, &stdio.command).with_args(stdio.args.iter().cloned()),
            |spec, var| spec.with_env(&var.name, &var.value),
        ),
        acp::McpServer::Http(http) => {
            with_headers(McpServerSpec::http(&http.name, &http.url), &http.headers)
        }
        acp::McpServer::Sse(sse) => {
            with_headers(McpServerSpec::sse(&sse.name, &sse.url), &sse.headers)
        }
        // The enum is non-exhaustive (e.g. the unstable `acp` transport).
        #[allow(unreachable_patterns)]
        _ => {
            return Err(SpecError::UnsupportedTransport {
                name: acp_name(server),
            });
        }
    };
    spec.validate()?;
    Ok(spec)
}

/// The name of an entry of a kind this code does not know, via its JSON.
fn acp_name(server: &acp::McpServer) -> String {
    /// Every kind of entry has a name.
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    serde_json::to_value(server)
        .ok()
        .and_then(|value| serde_json::from_value::<Named>(value).ok())
        .map(|named| named.name)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: serde_json::Value) -> acp::McpServer {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn stdio_entries_take_the_session_cwd() {
        let server = parse(serde_json::json!({
            "name": "fs",
            "command": "/usr/bin/node",
            "args": ["server.js", "/tmp"],
            "env": [{"name": "TOKEN", "value": "x"}]
        }));
        let spec = server_spec(&server, Path::new("/work/project"), None).unwrap();
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
            spec_of(&http).unwrap(),
            McpServerSpec::http("web", "http://127.0.0.1:1/mcp")
                .with_header("Authorization", "Bearer t")
        );
        let sse = parse(serde_json::json!({
            "type": "sse", "name": "old", "url": "https://example.com/sse", "headers": []
        }));
        assert_eq!(
            server_spec(&sse, Path::new("/x"), None).unwrap(),
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
            server_spec(&entry, Path::new("/x"), None).unwrap_err(),
            SpecError::UnsupportedTransport { name: "ed".into() }
        );
        let relay = Relay(std::sync::Arc::new(Unanswered));
        let spec = server_spec(&entry, Path::new("/x"), Some(&relay)).unwrap();
        assert_eq!(spec, McpServerSpec::acp("ed", "s1", relay.clone()));
        assert_eq!(spec.target(), "acp:s1");
        let blank = parse(serde_json::json!({"type": "acp", "name": "ed", "serverId": " "}));
        assert_eq!(
            server_spec(&blank, Path::new("/x"), Some(&relay)).unwrap_err(),
            SpecError::EmptyServerId { name: "ed".into() }
        );
    }

    #[test]
    fn unusable_entries_say_why() {
        let bad_url = parse(
            serde_json::json!({"type": "http", "name": "w", "url": "not a url", "headers": []}),
        );
        let err = spec_of(&bad_url).unwrap_err();
        assert!(err.to_string().contains("invalid URL `not a url`"), "{err}");

        let ftp = parse(
            serde_json::json!({"type": "http", "name": "w", "url": "ftp://x/", "headers": []}),
        );
        let err = spec_of(&ftp).unwrap_err();
        assert!(err.to_string().contains("only http and https"), "{err}");

        let header = parse(serde_json::json!({
            "type": "http", "name": "w", "url": "http://x/", "headers": [{"name": "bad header", "value": "v"}]
        }));
        assert_eq!(
            spec_of(&header).unwrap_err(),
            SpecError::InvalidHeader {
                name: "w".into(),
                header: "bad header".into()
            }
        );

        let unnamed =
            parse(serde_json::json!({"name": " ", "command": "x", "args": [], "env": []}));
        assert_eq!(spec_of(&unnamed).unwrap_err(), SpecError::EmptyName);

        let no_command =
            parse(serde_json::json!({"name": "n", "command": "", "args": [], "env": []}));
        assert!(matches!(
            spec_of(&no_command),
            Err(SpecError::EmptyCommand { .. })
        ));
    }
}
