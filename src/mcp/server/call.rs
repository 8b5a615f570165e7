//! Calls on a server: `tools/call` with a timeout, the turn's cancel token
//! and the server's progress shown on the call; `prompts/get`. A call finds
//! the connection through [`ServerInner::link`], which starts the server
//! again if it died.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientRequest, ErrorCode, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, JsonObject, ProgressNotificationParam, ProgressToken,
    RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use tokio_util::sync::CancellationToken;

use super::ServerInner;
use super::connection::Link;
use crate::events::ToolContent;
use crate::mcp::error::McpCallError;
use crate::mcp::spec::McpTransport;
use crate::mcp::transport::stdio::{STOP_GRACE, wait_exited};
use crate::mcp::transport::transport_cause;
use crate::tools::Progress;
use crate::util::{error_chain, lock};

/// After the process exits mid-call: how long an answer it sent just before
/// may take to arrive.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// After the answer to a call that reported progress: how long its last
/// progress notification may take to be handled.
const PROGRESS_GRACE: Duration = Duration::from_millis(20);

/// A running call's progress hook and the last progress shown.
pub(super) struct CallProgress {
    hook: Progress,
    /// None until the server reported progress for the call.
    last: Option<f64>,
}

impl ServerInner {
    /// Calls `tool`; starts the server again first if it died.
    pub(crate) async fn call_tool(
        self: &Arc<Self>,
        tool: &str,
        arguments: Option<JsonObject>,
        cancel: &CancellationToken,
        progress: &Progress,
    ) -> Result<CallToolResult, McpCallError> {
        let link = self.link_unless_cancelled(cancel).await?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let peer = link.peer.clone();
        let call = self.send_call(&peer, params, progress);
        tokio::pin!(call);
        let after = self.options.call_timeout;
        let mut exit = link.exit.clone();
        tokio::select! {
            result = &mut call => self.finish(&link, result).await,
            () = cancel.cancelled() => Err(McpCallError::Cancelled),
            () = tokio::time::sleep(after) => Err(McpCallError::Timeout {
                server: self.spec.name.clone(),
                tool: tool.to_string(),
                after,
            }),
            status = wait_exited(&mut exit) => {
                // The answer may already be on its way.
                match tokio::time::timeout(EXIT_GRACE, &mut call).await {
                    Ok(result) => self.finish(&link, result).await,
                    Err(_) => {
                        link.dead.store(true, Ordering::SeqCst);
                        Err(McpCallError::Died {
                            server: self.spec.name.clone(),
                            detail: format!("the process {status}{}", self.stderr.describe()),
                            again: "restarted",
                        })
                    }
                }
            }
        }
    }

    /// `tools/call` with the call's progress hook registered under the
    /// request's progress token (rmcp picks the token, so `Peer::call_tool`
    /// cannot be used). Dropping this future (timeout, cancel) sends
    /// `notifications/cancelled`, as `Peer::call_tool` would.
    async fn send_call(
        &self,
        peer: &Peer<RoleClient>,
        params: CallToolRequestParams,
        progress: &Progress,
    ) -> Result<CallToolResult, ServiceError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        let mut guard = CallGuard {
            server: self,
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            token: handle.progress_token.clone(),
        };
        self.lock_progress().insert(
            guard.token.clone(),
            CallProgress {
                hook: progress.clone(),
                last: None,
            },
        );
        let result = handle.await_response().await;
        guard.id = None;
        // rmcp runs each notification in a task of its own, so progress sent
        // just before the answer may still be on its way: a moment for it.
        let reported = self
            .lock_progress()
            .get(&guard.token)
            .is_some_and(|call| call.last.is_some());
        if reported {
            tokio::time::sleep(PROGRESS_GRACE).await;
        }
        match result? {
            ServerResult::CallToolResult(result) => Ok(result),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }

    /// The live connection (see [`ServerInner::link`]), unless the turn is
    /// cancelled first.
    async fn link_unless_cancelled(
        self: &Arc<Self>,
        cancel: &CancellationToken,
    ) -> Result<Link, McpCallError> {
        tokio::select! {
            link = self.link() => link,
            () = cancel.cancelled() => Err(McpCallError::Cancelled),
        }
    }

    fn lock_progress(&self) -> MutexGuard<'_, HashMap<ProgressToken, CallProgress>> {
        lock(&self.progress)
    }

    /// A server's progress for one of our calls, shown on that call.
    pub(super) fn report_progress(&self, params: &ProgressNotificationParam) {
        let hook = {
            let mut calls = self.lock_progress();
            let Some(call) = calls.get_mut(&params.progress_token) else {
                return;
            };
            // Progress only grows; an older notification overtaken by a newer one is dropped.
            if call.last.is_some_and(|last| params.progress <= last) {
                return;
            }
            call.last = Some(params.progress);
            call.hook.clone()
        };
        hook.report(vec![ToolContent::Text(progress_text(params))]);
    }

    async fn finish(
        &self,
        link: &Link,
        result: Result<CallToolResult, ServiceError>,
    ) -> Result<CallToolResult, McpCallError> {
        let server = self.spec.name.clone();
        let err = match result {
            Ok(result) => return Ok(result),
            Err(err) => err,
        };
        if let Some(refused) = refusal(&server, &err) {
            return Err(refused);
        }
        match err {
            ServiceError::Cancelled { reason } => Err(McpCallError::Server {
                server,
                message: format!(
                    "the server cancelled the call{}",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                ),
            }),
            ServiceError::Timeout { timeout } => Err(McpCallError::Server {
                server,
                message: format!("no answer within {} s", timeout.as_secs_f64()),
            }),
            err => {
                if self.stopped.load(Ordering::SeqCst) {
                    return Err(McpCallError::ShutDown { server });
                }
                // The transport is gone: start afresh next time.
                link.dead.store(true, Ordering::SeqCst);
                let (detail, again) = match &self.spec.transport {
                    McpTransport::Stdio { .. } => {
                        let mut exit = link.exit.clone();
                        let waited = tokio::time::timeout(STOP_GRACE, wait_exited(&mut exit));
                        let detail = match waited.await {
                            Ok(status) => format!("the process {status}{}", self.stderr.describe()),
                            Err(_) => error_chain(&err),
                        };
                        (detail, "restarted")
                    }
                    McpTransport::Http { url, .. } | McpTransport::Sse { url, .. } => {
                        let detail = match err {
                            ServiceError::TransportClosed => {
                                format!("the connection to {url} closed")
                            }
                            other => format!(
                                "the connection to {url} failed: {}",
                                transport_cause(&other)
                            ),
                        };
                        (detail, "reconnected")
                    }
                    McpTransport::Acp { server_id, .. } => (
                        format!(
                            "the editor's server `{server_id}` stopped answering: {}",
                            error_chain(&err)
                        ),
                        "asked again",
                    ),
                };
                Err(McpCallError::Died {
                    server,
                    detail,
                    again,
                })
            }
        }
    }

    /// `prompts/get`; starts the server again first if it died.
    pub(crate) async fn get_prompt(
        self: &Arc<Self>,
        prompt: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> Result<GetPromptResult, McpCallError> {
        let link = self.link_unless_cancelled(cancel).await?;
        let mut params = GetPromptRequestParams::new(prompt.to_string());
        if !arguments.is_empty() {
            params.arguments = Some(arguments);
        }
        let after = self.options.call_timeout;
        let server = self.spec.name.clone();
        // Dropping the request (cancel, timeout) tells the server it was abandoned.
        let response = tokio::select! {
            response = link.peer.get_prompt_once(params) => response,
            () = cancel.cancelled() => return Err(McpCallError::Cancelled),
            () = tokio::time::sleep(after) => return Err(McpCallError::Server {
                server,
                message: format!("no answer to prompts/get within {} s", after.as_secs_f64()),
            }),
        };
        match response {
            Ok(GetPromptResponse::Complete(result)) => Ok(result),
            Ok(_) => Err(McpCallError::Server {
                server,
                message:
                    "the prompt asks the client for more input, which crucible does not support"
                        .into(),
            }),
            Err(err) => Err(refusal(&server, &err).unwrap_or_else(|| {
                link.dead.store(true, Ordering::SeqCst);
                McpCallError::Server {
                    server,
                    message: error_chain(&err),
                }
            })),
        }
    }
}

/// The caller's error when the server answered a request with an error of
/// its own; None when the request failed otherwise (transport, timeout…),
/// which each caller judges itself.
fn refusal(server: &str, err: &ServiceError) -> Option<McpCallError> {
    let ServiceError::McpError(error) = err else {
        return None;
    };
    let server = server.to_string();
    let message = error.message.to_string();
    Some(if error.code == ErrorCode::INVALID_PARAMS {
        McpCallError::InvalidParams { server, message }
    } else {
        McpCallError::Server { server, message }
    })
}

/// Ends a call's bookkeeping: its progress hook is dropped, and a call
/// abandoned before its answer is cancelled at the server.
struct CallGuard<'a> {
    server: &'a ServerInner,
    peer: Peer<RoleClient>,
    /// Set while the answer is outstanding.
    id: Option<RequestId>,
    token: ProgressToken,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.server.lock_progress().remove(&self.token);
        let Some(id) = self.id.take() else {
            return;
        };
        let notification = CancelledNotification::new(CancelledNotificationParam::new(
            Some(id),
            Some("request abandoned by the caller".into()),
        ));
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.send_notification(notification.into()).await;
            });
        }
    }
}

/// "Progress 3/5: message", "Progress 40%" or "Progress 3".
fn progress_text(params: &ProgressNotificationParam) -> String {
    let number = |value: f64| {
        if value.fract() == 0.0 && value.abs() < 1e15 {
            format!("{}", value as i64)
        } else {
            format!("{value:.1}")
        }
    };
    let mut text = match params.total {
        Some(total) if total > 0.0 => {
            format!("Progress {}/{}", number(params.progress), number(total))
        }
        _ => format!("Progress {}", number(params.progress)),
    };
    if let Some(message) = params.message.as_deref().filter(|m| !m.trim().is_empty()) {
        text.push_str(": ");
        text.push_str(message);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_a_short_sentence() {
        let params = |progress: f64, total: Option<f64>, message: Option<&str>| {
            let mut value = serde_json::json!({"progressToken": 1, "progress": progress});
            if let Some(total) = total {
                value["total"] = total.into();
            }
            if let Some(message) = message {
                value["message"] = message.into();
            }
            serde_json::from_value::<ProgressNotificationParam>(value).unwrap()
        };
        assert_eq!(
            progress_text(&params(3.0, Some(5.0), Some("copying"))),
            "Progress 3/5: copying"
        );
        assert_eq!(progress_text(&params(2.0, None, None)), "Progress 2");
        assert_eq!(
            progress_text(&params(0.5, Some(1.0), Some(" "))),
            "Progress 0.5/1"
        );
    }
}
