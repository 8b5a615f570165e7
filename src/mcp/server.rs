//! One MCP server: its connection (started again after it dies), its tool
//! and prompt lists (listed again on `list_changed`), and calls with a
//! timeout and the turn's cancel token.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientRequest, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, JsonObject,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId, ServerResult,
};
use rmcp::service::{
    ClientInitializeError, NotificationContext, Peer, PeerRequestOptions, RoleClient,
    RunningService, ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::{ClientHandler, ServiceExt};
use thiserror::Error;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::names::NameAllocator;
use super::spec::{McpServerSpec, McpTransport, SpecError};
use super::tool::McpTool;
use super::{McpOptions, sse};
use crate::events::ToolContent;
use crate::tools::Progress;

/// How long a closed server gets to exit before SIGTERM, and again before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// After the process exits mid-call: how long an answer it sent just before
/// may take to arrive.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// After the answer to a call that reported progress: how long its last
/// progress notification may take to be handled.
const PROGRESS_GRACE: Duration = Duration::from_millis(20);
/// Stderr lines kept for error messages.
const STDERR_TAIL_LINES: usize = 5;
/// Longer stderr lines are cut (a server printing without newlines must not
/// grow memory).
const MAX_STDERR_LINE: usize = 4096;

/// Why a server could not be used or started.
#[derive(Debug, Error)]
pub enum McpError {
    #[error("server `{server}` failed to start: {source}")]
    Start {
        server: String,
        #[source]
        source: StartError,
    },
    #[error("server `{0}` is configured twice; only the first is used")]
    DuplicateName(String),
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// What went wrong while starting a server.
#[derive(Debug, Error)]
pub enum StartError {
    #[error("command `{command}` not found")]
    CommandNotFound { command: String },
    #[error("command `{command}` could not be run: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("working directory `{}` does not exist", .0.display())]
    MissingCwd(PathBuf),
    #[error("the process {status} before answering `initialize`{stderr}")]
    Exited { status: String, stderr: String },
    #[error("no answer within {} s{stderr}", .after.as_secs_f64())]
    Timeout { after: Duration, stderr: String },
    #[error("`initialize` failed: {reason}{stderr}")]
    Initialize { reason: String, stderr: String },
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("listing its tools failed: {0}")]
    ListTools(String),
}

/// Why a tool call failed (besides the tool reporting an error itself,
/// which is a result with `isError`).
#[derive(Debug, Error)]
pub enum McpCallError {
    #[error("cancelled by the user")]
    Cancelled,
    #[error(
        "MCP tool `{tool}` of server `{server}` did not answer within {} s; the call was cancelled",
        .after.as_secs_f64()
    )]
    Timeout {
        server: String,
        tool: String,
        after: Duration,
    },
    #[error(
        "MCP server `{server}` stopped during the call: {detail}; it will be {again} on the next call"
    )]
    Died {
        server: String,
        detail: String,
        /// "restarted" (stdio) or "reconnected" (HTTP).
        again: &'static str,
    },
    #[error("MCP server `{server}` is not available: {source}")]
    Unavailable {
        server: String,
        #[source]
        source: StartError,
    },
    #[error("MCP server `{server}` has been shut down")]
    ShutDown { server: String },
    #[error("MCP server `{server}` rejected the arguments: {message}")]
    InvalidParams { server: String, message: String },
    #[error("MCP server `{server}` answered with an error: {message}")]
    Server { server: String, message: String },
}

/// One MCP server. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<ServerInner>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.inner.spec.name)
            .field("target", &self.inner.spec.target())
            .finish_non_exhaustive()
    }
}

pub(crate) struct ServerInner {
    spec: McpServerSpec,
    options: McpOptions,
    /// The live connection, if any; held across (re)starts so concurrent
    /// calls wait for one start.
    slot: tokio::sync::Mutex<Option<Connection>>,
    tools: Mutex<Listing<rmcp::model::Tool>>,
    prompts: Mutex<Listing<rmcp::model::Prompt>>,
    changes: Arc<watch::Sender<u64>>,
    stopped: AtomicBool,
    /// Cancelled by stop(): a (re)start in progress gives up at once.
    stopping: CancellationToken,
    next_connection: AtomicU64,
    next_ticket: AtomicU64,
    /// The stdio child's pid, 0 when none.
    pid: AtomicU32,
    /// The last stderr lines, for error messages.
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Running calls' progress hooks, by the progress token of their request.
    progress: Mutex<std::collections::HashMap<ProgressToken, CallProgress>>,
}

/// A running call's progress hook and the last progress shown.
struct CallProgress {
    hook: Progress,
    /// None until the server reported progress for the call.
    last: Option<f64>,
}

/// A server's tools or prompts, as last listed.
struct Listing<T> {
    /// Which connection and which listing the items came from: an older
    /// listing finishing late must not replace a newer one.
    connection: u64,
    ticket: u64,
    items: Vec<T>,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Self {
            connection: 0,
            ticket: 0,
            items: Vec::new(),
        }
    }
}

impl McpServer {
    /// Starts the server (spawn or connect, `initialize`, list its tools)
    /// within `options.start_timeout`.
    pub async fn start(spec: McpServerSpec, options: McpOptions) -> Result<Self, McpError> {
        Self::start_with_changes(spec, options, Arc::new(watch::Sender::new(0))).await
    }

    pub(crate) async fn start_with_changes(
        spec: McpServerSpec,
        options: McpOptions,
        changes: Arc<watch::Sender<u64>>,
    ) -> Result<Self, McpError> {
        spec.validate()?;
        let inner = Arc::new(ServerInner {
            spec,
            options,
            slot: tokio::sync::Mutex::new(None),
            tools: Mutex::default(),
            prompts: Mutex::default(),
            changes,
            stopped: AtomicBool::new(false),
            stopping: CancellationToken::new(),
            next_connection: AtomicU64::new(0),
            next_ticket: AtomicU64::new(0),
            pid: AtomicU32::new(0),
            stderr_tail: Arc::default(),
            progress: Mutex::default(),
        });
        let connection = inner
            .connect_in_time()
            .await
            .map_err(|source| McpError::Start {
                server: inner.spec.name.clone(),
                source,
            })?;
        *inner.slot.lock().await = Some(connection);
        tracing::info!(
            server = %inner.spec.name,
            target = %inner.spec.target(),
            tools = inner.lock_tools().items.len(),
            prompts = inner.lock_prompts().items.len(),
            "MCP server started"
        );
        Ok(Self { inner })
    }

    pub fn name(&self) -> &str {
        &self.inner.spec.name
    }

    pub fn spec(&self) -> &McpServerSpec {
        &self.inner.spec
    }

    /// The stdio child's process id while it runs.
    pub fn process_id(&self) -> Option<u32> {
        match self.inner.pid.load(Ordering::SeqCst) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// The server's tools as last listed, under their MCP names.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner
            .lock_tools()
            .items
            .iter()
            .map(|tool| tool.name.to_string())
            .collect()
    }

    /// The server's tools as [`McpTool`]s, named by `names`.
    pub fn mcp_tools(&self, names: &mut NameAllocator) -> Vec<McpTool> {
        let tools = self.inner.lock_tools().items.clone();
        tools
            .into_iter()
            .map(|tool| {
                let name = names.allocate(&self.inner.spec.name, &tool.name);
                McpTool::new(
                    name,
                    &self.inner.spec.name,
                    &tool,
                    self.inner.spec.trust_read_only_hints,
                    Arc::downgrade(&self.inner),
                )
            })
            .collect()
    }

    /// The server's prompts as last listed (empty when it offers none).
    pub fn prompts(&self) -> Vec<rmcp::model::Prompt> {
        self.inner.lock_prompts().items.clone()
    }

    /// `prompts/get`; starts the server again first if it died.
    pub async fn get_prompt(
        &self,
        prompt: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> Result<GetPromptResult, McpCallError> {
        self.inner.get_prompt(prompt, arguments, cancel).await
    }

    /// Calls `tool`; starts the server again first if it died.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        cancel: &CancellationToken,
    ) -> Result<CallToolResult, McpCallError> {
        self.inner
            .call_tool(tool, arguments, cancel, &Progress::default())
            .await
    }

    /// Calls `tool`, passing the server's `notifications/progress` for the
    /// call on to `progress` as text ("Progress 3/5: message").
    pub async fn call_tool_with_progress(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        cancel: &CancellationToken,
        progress: &Progress,
    ) -> Result<CallToolResult, McpCallError> {
        self.inner
            .call_tool(tool, arguments, cancel, progress)
            .await
    }

    /// Closes the connection and stops the child (stdin closed, then
    /// SIGTERM, then SIGKILL, each to its whole process group). Later calls
    /// fail with [`McpCallError::ShutDown`].
    pub async fn stop(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        self.inner.stopping.cancel();
        let connection = self.inner.slot.lock().await.take();
        if let Some(connection) = connection {
            connection.close().await;
        }
        self.inner.pid.store(0, Ordering::SeqCst);
        tracing::info!(server = %self.inner.spec.name, "MCP server stopped");
    }

    pub(crate) fn from_inner(inner: Arc<ServerInner>) -> Self {
        Self { inner }
    }
}

impl ServerInner {
    fn lock_tools(&self) -> MutexGuard<'_, Listing<rmcp::model::Tool>> {
        self.tools
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn lock_prompts(&self) -> MutexGuard<'_, Listing<rmcp::model::Prompt>> {
        self.prompts
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn stderr_tail(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if tail.is_empty() {
            String::new()
        } else {
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            format!("; its last output: {}", lines.join(" | "))
        }
    }

    async fn connect_in_time(self: &Arc<Self>) -> Result<Connection, StartError> {
        let after = self.options.start_timeout;
        match tokio::time::timeout(after, self.connect()).await {
            Ok(result) => result,
            // The dropped attempt killed its child on the way out.
            Err(_) => Err(StartError::Timeout {
                after,
                stderr: self.stderr_tail(),
            }),
        }
    }

    async fn connect(self: &Arc<Self>) -> Result<Connection, StartError> {
        let id = self.next_connection.fetch_add(1, Ordering::SeqCst) + 1;
        let handler = Handler {
            server: Arc::downgrade(self),
            name: self.spec.name.clone(),
            connection: id,
        };
        let (service, child) = match &self.spec.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                self.lock_stderr_tail().clear();
                let (mut child, stdout, stdin) = ChildProcess::spawn(
                    &self.spec.name,
                    command,
                    args,
                    env,
                    cwd.as_deref(),
                    self.stderr_tail.clone(),
                )?;
                match handler.serve((stdout, stdin)).await {
                    Ok(service) => (service, Some(child)),
                    Err(err) => {
                        // Most often the process died: say how, with its last words.
                        let error = match child.wait_exit(Duration::from_secs(1)).await {
                            Some(status) => StartError::Exited {
                                status,
                                stderr: self.stderr_tail(),
                            },
                            None => StartError::Initialize {
                                reason: error_chain(&err),
                                stderr: self.stderr_tail(),
                            },
                        };
                        return Err(error);
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
                (service, None)
            }
            McpTransport::Sse { url, headers } => {
                let transport = sse::SseTransport::connect(url, headers).await?;
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|err| http_start_error(url, err))?;
                (service, None)
            }
        };
        let offers_tools = service
            .peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.tools.is_some());
        let ticket = self.take_ticket();
        let tools = if offers_tools {
            service
                .peer()
                .list_all_tools()
                .await
                .map_err(|err| StartError::ListTools(error_chain(&err)))?
        } else {
            Vec::new()
        };
        self.set_tools(id, ticket, tools);
        let offers_prompts = service
            .peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.prompts.is_some());
        if offers_prompts {
            let ticket = self.take_ticket();
            // Prompts are an extra: a server whose listing fails still serves its tools.
            match service.peer().list_all_prompts().await {
                Ok(prompts) => self.set_prompts(id, ticket, prompts),
                Err(err) => {
                    tracing::warn!(server = %self.spec.name, error = %error_chain(&err), "listing MCP prompts failed");
                }
            }
        }
        self.pid.store(
            child.as_ref().and_then(|c| c.pid).unwrap_or(0),
            Ordering::SeqCst,
        );
        Ok(Connection {
            service,
            child,
            dead: Arc::new(AtomicBool::new(false)),
        })
    }

    fn lock_stderr_tail(&self) -> MutexGuard<'_, VecDeque<String>> {
        self.stderr_tail
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn take_ticket(&self) -> u64 {
        self.next_ticket.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn set_tools(&self, connection: u64, ticket: u64, tools: Vec<rmcp::model::Tool>) {
        self.replace_listing(&self.tools, connection, ticket, tools);
    }

    fn set_prompts(&self, connection: u64, ticket: u64, prompts: Vec<rmcp::model::Prompt>) {
        self.replace_listing(&self.prompts, connection, ticket, prompts);
    }

    /// Keep a listing unless a newer one is already in; tell the session
    /// when what it offers changed.
    fn replace_listing<T: PartialEq>(
        &self,
        slot: &Mutex<Listing<T>>,
        connection: u64,
        ticket: u64,
        items: Vec<T>,
    ) {
        let changed = {
            let mut list = slot.lock().unwrap_or_else(|poison| poison.into_inner());
            if connection < list.connection || ticket < list.ticket {
                return;
            }
            let changed = list.items != items;
            *list = Listing {
                connection,
                ticket,
                items,
            };
            changed
        };
        if changed {
            self.changes.send_modify(|generation| *generation += 1);
        }
    }

    /// After `notifications/prompts/list_changed`.
    async fn relist_prompts(&self, peer: &Peer<RoleClient>, connection: u64) {
        let ticket = self.take_ticket();
        let listed = tokio::time::timeout(self.options.call_timeout, peer.list_all_prompts()).await;
        match listed.unwrap_or(Err(ServiceError::Timeout {
            timeout: self.options.call_timeout,
        })) {
            Ok(prompts) => {
                tracing::debug!(server = %self.spec.name, count = prompts.len(), "MCP prompts listed again");
                self.set_prompts(connection, ticket, prompts);
            }
            Err(err) => {
                tracing::warn!(server = %self.spec.name, error = %err, "listing MCP prompts again failed");
            }
        }
    }

    pub(crate) async fn get_prompt(
        self: &Arc<Self>,
        prompt: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> Result<GetPromptResult, McpCallError> {
        let link = tokio::select! {
            link = self.link() => link?,
            () = cancel.cancelled() => return Err(McpCallError::Cancelled),
        };
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
            Err(ServiceError::McpError(error)) if error.code == ErrorCode::INVALID_PARAMS => {
                Err(McpCallError::InvalidParams {
                    server,
                    message: error.message.to_string(),
                })
            }
            Err(ServiceError::McpError(error)) => Err(McpCallError::Server {
                server,
                message: error.message.to_string(),
            }),
            Err(err) => {
                link.dead.store(true, Ordering::SeqCst);
                Err(McpCallError::Server {
                    server,
                    message: error_chain(&err),
                })
            }
        }
    }

    /// After `notifications/tools/list_changed` (rmcp has already dropped
    /// its cached listing).
    async fn relist(&self, peer: &Peer<RoleClient>, connection: u64) {
        let ticket = self.take_ticket();
        let listed = tokio::time::timeout(self.options.call_timeout, peer.list_all_tools()).await;
        match listed.unwrap_or(Err(ServiceError::Timeout {
            timeout: self.options.call_timeout,
        })) {
            Ok(tools) => {
                tracing::debug!(server = %self.spec.name, count = tools.len(), "MCP tools listed again");
                self.set_tools(connection, ticket, tools);
            }
            Err(err) => {
                tracing::warn!(server = %self.spec.name, error = %err, "listing MCP tools again failed");
            }
        }
    }

    /// The live connection, started again if it died.
    async fn link(self: &Arc<Self>) -> Result<Link, McpCallError> {
        let shut_down = || McpCallError::ShutDown {
            server: self.spec.name.clone(),
        };
        if self.stopped.load(Ordering::SeqCst) {
            return Err(shut_down());
        }
        let mut slot = self.slot.lock().await;
        if self.stopped.load(Ordering::SeqCst) {
            return Err(shut_down());
        }
        if let Some(connection) = slot.as_ref()
            && connection.is_alive()
        {
            return Ok(connection.link());
        }
        if let Some(old) = slot.take() {
            tracing::info!(server = %self.spec.name, "MCP server stopped; starting it again");
            self.pid.store(0, Ordering::SeqCst);
            old.close().await;
        }
        let connected = tokio::select! {
            connected = self.connect_in_time() => connected,
            () = self.stopping.cancelled() => return Err(shut_down()),
        };
        match connected {
            Ok(connection) => {
                let link = connection.link();
                *slot = Some(connection);
                Ok(link)
            }
            Err(source) => Err(McpCallError::Unavailable {
                server: self.spec.name.clone(),
                source,
            }),
        }
    }

    pub(crate) async fn call_tool(
        self: &Arc<Self>,
        tool: &str,
        arguments: Option<JsonObject>,
        cancel: &CancellationToken,
        progress: &Progress,
    ) -> Result<CallToolResult, McpCallError> {
        let link = tokio::select! {
            link = self.link() => link?,
            () = cancel.cancelled() => return Err(McpCallError::Cancelled),
        };
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
                            detail: format!("the process {status}{}", self.stderr_tail()),
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

    fn lock_progress(
        &self,
    ) -> MutexGuard<'_, std::collections::HashMap<ProgressToken, CallProgress>> {
        self.progress
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// A server's progress for one of our calls, shown on that call.
    fn report_progress(&self, params: &ProgressNotificationParam) {
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
        match result {
            Ok(result) => Ok(result),
            Err(ServiceError::McpError(error)) if error.code == ErrorCode::INVALID_PARAMS => {
                Err(McpCallError::InvalidParams {
                    server,
                    message: error.message.to_string(),
                })
            }
            Err(ServiceError::McpError(error)) => Err(McpCallError::Server {
                server,
                message: error.message.to_string(),
            }),
            Err(ServiceError::Cancelled { reason }) => Err(McpCallError::Server {
                server,
                message: format!(
                    "the server cancelled the call{}",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                ),
            }),
            Err(ServiceError::Timeout { timeout }) => Err(McpCallError::Server {
                server,
                message: format!("no answer within {} s", timeout.as_secs_f64()),
            }),
            Err(err) => {
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
                            Ok(status) => format!("the process {status}{}", self.stderr_tail()),
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
                };
                Err(McpCallError::Died {
                    server,
                    detail,
                    again,
                })
            }
        }
    }
}

/// What a call needs of a connection, taken out so the slot's lock is not
/// held during the call.
#[derive(Clone)]
struct Link {
    peer: Peer<RoleClient>,
    dead: Arc<AtomicBool>,
    /// The stdio child's exit; never changes for HTTP servers.
    exit: watch::Receiver<Option<String>>,
}

struct Connection {
    service: RunningService<RoleClient, Handler>,
    child: Option<ChildProcess>,
    /// Set when a call saw the transport fail.
    dead: Arc<AtomicBool>,
}

impl Connection {
    fn is_alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
            && !self.service.is_closed()
            && !self.service.peer().is_transport_closed()
            && self
                .child
                .as_ref()
                .is_none_or(|child| child.exit.borrow().is_none())
    }

    fn link(&self) -> Link {
        Link {
            peer: self.service.peer().clone(),
            dead: self.dead.clone(),
            exit: match &self.child {
                Some(child) => child.exit.clone(),
                None => watch::channel(None).1,
            },
        }
    }

    /// Closes the session (which closes the child's stdin), then stops the child.
    async fn close(mut self) {
        if let Err(err) = self.service.close_with_timeout(STOP_GRACE).await {
            tracing::debug!(%err, "MCP service task ended badly");
        }
        if let Some(mut child) = self.child.take() {
            child.stop().await;
        }
    }
}

/// Answers what the server asks of us (ping, roots: rmcp's defaults) and
/// follows its notifications.
struct Handler {
    server: Weak<ServerInner>,
    name: String,
    connection: u64,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The newest version with an `initialize` handshake: what servers
        // that predate `server/discover` (nearly all) answer.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("crucible-agent", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // Runs in its own task, so asking the server here cannot block its answers.
        if let Some(server) = self.server.upgrade() {
            server.relist(&context.peer, self.connection).await;
        }
    }

    async fn on_prompt_list_changed(&self, context: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            server.relist_prompts(&context.peer, self.connection).await;
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(
            server = %self.name,
            progress = params.progress,
            total = ?params.total,
            message = ?params.message,
            "MCP progress"
        );
        if let Some(server) = self.server.upgrade() {
            server.report_progress(&params);
        }
    }
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

/// A stdio server process, in its own process group so that stopping it
/// also stops what it started (e.g. `npx` → `node`).
struct ChildProcess {
    pid: Option<u32>,
    /// Armed until the group has been killed.
    group: Option<libc::pid_t>,
    /// Set to how it ended, once it has.
    exit: watch::Receiver<Option<String>>,
}

impl ChildProcess {
    fn spawn(
        name: &str,
        command: &Path,
        args: &[String],
        env: &[(String, String)],
        cwd: Option<&Path>,
        stderr_tail: Arc<Mutex<VecDeque<String>>>,
    ) -> Result<(Self, ChildStdout, ChildStdin), StartError> {
        if let Some(dir) = cwd
            && !dir.is_dir()
        {
            return Err(StartError::MissingCwd(dir.to_path_buf()));
        }
        // A relative path with a directory part means "from the server's
        // directory"; std leaves that case unspecified.
        let program = match cwd {
            Some(dir) if command.is_relative() && command.components().count() > 1 => {
                dir.join(command)
            }
            _ => command.to_path_buf(),
        };
        let mut cmd = tokio::process::Command::new(&program);
        cmd.args(args)
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let shown = command.display().to_string();
        let mut child = cmd.spawn().map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => StartError::CommandNotFound {
                command: shown.clone(),
            },
            _ => StartError::Spawn {
                command: shown.clone(),
                source,
            },
        })?;
        let pid = child.id();
        let mut process = Self {
            pid,
            group: pid.and_then(|pid| libc::pid_t::try_from(pid).ok()),
            exit: watch::channel(None).1,
        };
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            // Cannot happen with piped stdio; `process` kills the child on drop.
            return Err(StartError::Spawn {
                command: shown,
                source: std::io::Error::other("its standard streams were not captured"),
            });
        };
        let pump = tokio::spawn(pump_stderr(name.to_string(), stderr, stderr_tail));
        let (exit_tx, exit_rx) = watch::channel(None);
        let server = name.to_string();
        // The waiter owns the child (and reaps it); kill_on_drop covers a
        // runtime shutting down under it.
        tokio::spawn(async move {
            let status = match child.wait().await {
                Ok(status) => describe_exit(status),
                Err(err) => format!("ended ({err})"),
            };
            // Its last words first, so messages about the exit can quote them
            // (bounded: something it started may hold stderr open).
            let _ = tokio::time::timeout(Duration::from_millis(500), pump).await;
            tracing::debug!(%server, %status, "MCP server process ended");
            let _ = exit_tx.send(Some(status));
        });
        process.exit = exit_rx;
        Ok((process, stdout, stdin))
    }

    /// How the process ended, if it does within `within`.
    async fn wait_exit(&mut self, within: Duration) -> Option<String> {
        tokio::time::timeout(within, wait_exited(&mut self.exit))
            .await
            .ok()
    }

    fn signal_group(&self, signal: libc::c_int) {
        if let Some(group) = self.group {
            // SAFETY: kill(2) on a process group id; it touches no memory of ours.
            unsafe {
                libc::kill(-group, signal);
            }
        }
    }

    /// The MCP stdio shutdown: stdin is already closed; then SIGTERM, then
    /// SIGKILL. Whatever else is left in its group goes too.
    async fn stop(&mut self) {
        if self.wait_exit(STOP_GRACE).await.is_none() {
            self.signal_group(libc::SIGTERM);
            if self.wait_exit(STOP_GRACE).await.is_none() {
                self.signal_group(libc::SIGKILL);
                let _ = self.wait_exit(STOP_GRACE).await;
            }
        }
        self.kill_group();
    }

    fn kill_group(&mut self) {
        self.signal_group(libc::SIGKILL);
        self.group = None;
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        // No orphans, also without an orderly stop (and without a runtime).
        self.kill_group();
    }
}

/// Resolves once the process has ended, with how; never for HTTP servers
/// (whose sender is dropped at once, keeping the value None).
async fn wait_exited(exit: &mut watch::Receiver<Option<String>>) -> String {
    let status = exit
        .wait_for(Option::is_some)
        .await
        .map(|status| status.clone().unwrap_or_default());
    match status {
        Ok(status) => status,
        Err(_) => std::future::pending().await,
    }
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "ended".to_string(),
    }
}

/// Logs each stderr line at debug and keeps the last few.
async fn pump_stderr(name: String, stderr: ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line_capped(&mut reader, &mut line, MAX_STDERR_LINE).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // Decoded per whole line, so a character split across reads survives.
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        tracing::debug!(server = %name, "MCP server stderr: {text}");
        let mut tail = tail.lock().unwrap_or_else(|poison| poison.into_inner());
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(crate::tools::shorten(text, 300));
    }
}

/// Reads up to and including a newline; keeps at most `cap` bytes of it but
/// consumes all of it. Returns the bytes consumed (0 at the end).
async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    out: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(consumed);
        }
        let (len, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buf.len(), false),
        };
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&buf[..len.min(room)]);
        reader.consume(len);
        consumed += len;
        if done {
            return Ok(consumed);
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
fn transport_cause(err: &(dyn std::error::Error + 'static)) -> String {
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

/// An error and its sources, without repeating a source its parent already
/// quotes.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
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

    #[tokio::test]
    async fn long_stderr_lines_are_capped_but_consumed() {
        let input = format!("{}\nnext\n", "x".repeat(10_000));
        let mut reader = BufReader::new(input.as_bytes());
        let mut line = Vec::new();
        let consumed = read_line_capped(&mut reader, &mut line, 100).await.unwrap();
        assert_eq!(consumed, 10_001);
        assert_eq!(line.len(), 100);
        line.clear();
        read_line_capped(&mut reader, &mut line, 100).await.unwrap();
        assert_eq!(line, b"next\n");
        line.clear();
        assert_eq!(
            read_line_capped(&mut reader, &mut line, 100).await.unwrap(),
            0
        );
    }

    #[test]
    fn error_chains_skip_repeated_causes() {
        let inner = std::io::Error::other("connection refused");
        let outer = StartError::Spawn {
            command: "x".into(),
            source: inner,
        };
        assert_eq!(
            error_chain(&outer),
            "command `x` could not be run: connection refused"
        );
    }
}
