//! One MCP server: its connection (started again after it dies), its tool
//! and prompt lists (listed again on `list_changed`), and calls with a
//! timeout and the turn's cancel token.
//!
//! The handle and the state it shares are here; how the state is used is in
//! the parts: [`connection`] (connecting and the restart policy),
//! [`listing`] (tools and prompts, listed again) and [`call`] (tool calls,
//! their progress and `prompts/get`).

mod call;
mod connection;
mod listing;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, GetPromptResult, JsonObject, ProgressToken};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::call::CallProgress;
use self::connection::Connection;
use self::listing::Listing;
use super::error::{McpCallError, McpError};
use super::names::NameAllocator;
use super::options::McpOptions;
use super::server_handle::{CallsTools, ServerHandle};
use super::spec::McpServerSpec;
use super::tool::McpTool;
use super::transport::stdio::StderrTail;
use crate::tools::Progress;

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

struct ServerInner {
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
    stderr: StderrTail,
    /// Running calls' progress hooks, by the progress token of their request.
    progress: Mutex<HashMap<ProgressToken, CallProgress>>,
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
        let mut options = options;
        if let Some(timeout) = spec.call_timeout {
            options.call_timeout = timeout;
        }
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
            stderr: StderrTail::default(),
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

    /// The server's offered tools as [`McpTool`]s, named by `names`.
    pub fn mcp_tools(&self, names: &mut NameAllocator) -> Vec<McpTool> {
        let tools = self.inner.lock_tools().items.clone();
        let spec = &self.inner.spec;
        tools
            .into_iter()
            .filter(|tool| spec.tools.offers(&tool.name))
            .map(|tool| {
                let name = match &spec.tools.prefix {
                    Some(prefix) => names.allocate_prefixed(prefix, &spec.name, &tool.name),
                    None => names.allocate(&spec.name, &tool.name),
                };
                McpTool::new(
                    name,
                    &self.inner.spec.name,
                    &tool,
                    self.inner.spec.read_only_hints(),
                    self.handle(),
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

    /// The weak handle its tools hold.
    fn handle(&self) -> ServerHandle {
        let inner: Arc<dyn CallsTools> = self.inner.clone();
        ServerHandle::new(Arc::downgrade(&inner))
    }
}

impl CallsTools for ServerInner {
    fn call<'a>(
        self: Arc<Self>,
        tool: &'a str,
        arguments: Option<JsonObject>,
        cancel: &'a CancellationToken,
        progress: &'a Progress,
    ) -> BoxFuture<'a, Result<CallToolResult, McpCallError>> {
        Box::pin(
            async move { ServerInner::call_tool(&self, tool, arguments, cancel, progress).await },
        )
    }
}
