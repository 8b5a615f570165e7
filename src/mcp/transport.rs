//! Reaching an MCP server: a child process on stdio, streamable HTTP, the
//! legacy HTTP+SSE transport, or the editor over ACP. Each ends in an rmcp transport on which
//! the client handler is served; what follows does not care which.

pub(crate) mod acp;
mod sse;
pub(crate) mod stdio;

use std::time::Duration;

use rmcp::service::{ClientInitializeError, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::{ClientHandler, ServiceExt};

use self::stdio::{ChildProcess, Environment, StderrTail};
use super::error::StartError;
use super::spec::McpTransport;
use crate::util::error_chain;

/// Spawns or connects to server `name` and runs the MCP handshake with
/// `handler`. The stdio child comes back beside the service: stopping it is
/// the caller's part.
pub(crate) async fn serve<H: ClientHandler>(
    handler: H,
    name: &str,
    transport: &McpTransport,
    stderr: &StderrTail,
) -> Result<(RunningService<RoleClient, H>, Option<ChildProcess>), StartError> {
    match transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            inherit_env,
            cwd,
            sandbox,
        } => {
            stderr.clear();
            let environment = if *inherit_env {
                Environment::Inherited(env)
            } else {
                Environment::Base(env)
            };
            let (mut child, stdout, stdin) = ChildProcess::spawn(
                name,
                command,
                args,
                environment,
                cwd.as_deref(),
                sandbox,
                stderr.clone(),
            )?;
            match handler.serve((stdout, stdin)).await {
                Ok(service) => Ok((service, Some(child))),
                Err(err) => {
                    // Most often the process died: say how, with its last words.
                    Err(match child.wait_exit(Duration::from_secs(1)).await {
                        Some(status) => StartError::Exited {
                            status,
                            stderr: stderr.describe(),
                        },
                        None => StartError::Initialize {
                            reason: error_chain(&err),
                            stderr: stderr.describe(),
                        },
                    })
                }
            }
        }
        McpTransport::Http { url, headers } => {
            let mut map = std::collections::HashMap::new();
            for (key, value) in headers {
                // validate() checked these already.
                if let (Ok(key), Ok(value)) = (
                    reqwest::header::HeaderName::from_bytes(key.as_bytes()),
                    reqwest::header::HeaderValue::from_str(value),
                ) {
                    map.insert(key, value);
                }
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map);
            let transport = StreamableHttpClientTransport::from_config(config);
            let service = handler
                .serve(transport)
                .await
                .map_err(|err| http_start_error(url, err))?;
            Ok((service, None))
        }
        McpTransport::Sse { url, headers } => {
            let transport = sse::SseTransport::connect(url, headers).await?;
            let service = handler
                .serve(transport)
                .await
                .map_err(|err| http_start_error(url, err))?;
            Ok((service, None))
        }
        McpTransport::Acp { server_id, relay } => {
            let transport = acp::AcpTransport::new(relay, server_id);
            let service = handler
                .serve(transport)
                .await
                .map_err(|err| StartError::Initialize {
                    reason: error_chain(&err),
                    stderr: String::new(),
                })?;
            Ok((service, None))
        }
    }
}

/// Why connecting to an HTTP server failed, in its own words rather than
/// rmcp's (which name transport types).
fn http_start_error(url: &str, err: ClientInitializeError) -> StartError {
    match err {
        // `error` is not marked as the source: follow it by hand.
        ClientInitializeError::TransportError { error, .. } => StartError::Unreachable {
            url: url.to_string(),
            reason: transport_cause(&error),
        },
        ClientInitializeError::ConnectionClosed(_) => StartError::Unreachable {
            url: url.to_string(),
            reason: "the connection closed".to_string(),
        },
        other => StartError::Initialize {
            reason: error_chain(&other),
            stderr: String::new(),
        },
    }
}

/// The deepest useful cause of a transport error: the HTTP client's own
/// error (e.g. "connection refused") when rmcp wraps one, else the last
/// source.
pub(crate) fn transport_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut current = Some(err);
    let mut last = err;
    while let Some(cause) = current {
        if let Some(StreamableHttpError::Client(inner)) =
            cause.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return error_chain(inner);
        }
        if let Some(inner) = cause.downcast_ref::<sse::SseError>() {
            return inner.to_string();
        }
        last = cause;
        current = cause.source();
    }
    last.to_string()
}
