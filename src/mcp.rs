//! MCP client: the tools of Model Context Protocol servers, offered to the
//! model beside the built-ins. A session starts its servers with
//! [`McpManager::start`] (all at once, each within a start timeout); a server
//! that fails is recorded with a reason and the rest work. Each server tool is
//! an [`McpTool`] implementing [`crate::tools::Tool`], so the agent loop runs,
//! announces and asks permission for it like any other tool.
//!
//! Servers are reached over stdio (a child process in its own process group,
//! killed with the group on stop or drop), streamable HTTP, or the legacy
//! HTTP+SSE transport, or (unstable MCP-over-ACP) the editor itself over
//! the ACP connection. A server that dies is started again on the next call;
//! a `notifications/tools/list_changed` makes the server's tools listed again.
//!
//! Servers' prompts ([`McpPrompt`]) are listed too (again on
//! `notifications/prompts/list_changed`); sessions offer them as slash
//! commands (see [`crate::commands`]).

mod content;
mod error;
mod names;
mod options;
mod prompt;
mod relay;
mod server;
mod server_handle;
mod spec;
mod tool;
mod transport;

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::join_all;
use tokio::sync::watch;

pub use error::{McpCallError, McpError, StartError};
pub use names::{MAX_TOOL_NAME, NameAllocator, sanitize};
pub use options::McpOptions;
pub use prompt::{McpPrompt, McpPromptArgument};
pub use relay::{AcpRelay, Relay, RelayAnswer, RelayError, RelayNotification};
pub use server::McpServer;
pub use spec::{
    EnvInheritance, McpServerSpec, McpTransport, NamedSecrets, ReadOnlyHints, SpecError,
    StdioSandbox, ToolSelection,
};
pub use tool::McpTool;

use crate::model::Message;
use crate::tools::Tool;
use tokio_util::sync::CancellationToken;

/// The MCP servers of one session. Cheap to clone (an `Arc` inside); the
/// servers stop on [`McpManager::shutdown`] or when the last clone is dropped.
#[derive(Clone, Default)]
pub struct McpManager {
    inner: Arc<ManagerInner>,
}

#[derive(Default)]
struct ManagerInner {
    servers: Vec<McpServer>,
    failures: Vec<(String, String)>,
    changes: Arc<watch::Sender<u64>>,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpManager")
            .field("servers", &self.server_names())
            .field("failures", &self.inner.failures)
            .finish()
    }
}

impl McpManager {
    /// No servers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts every server concurrently. Never fails as a whole: a server
    /// that cannot be used or started is left out and listed in
    /// [`failures`](Self::failures).
    pub async fn start(specs: Vec<McpServerSpec>, options: McpOptions) -> Self {
        let changes = Arc::new(watch::Sender::new(0));
        let mut failures = Vec::new();
        let mut seen = HashSet::new();
        let mut startable = Vec::new();
        for spec in specs {
            if let Err(err) = spec.validate() {
                failures.push((spec.name.clone(), McpError::from(err).to_string()));
            } else if !seen.insert(spec.name.clone()) {
                let err = McpError::DuplicateName(spec.name.clone());
                failures.push((spec.name.clone(), err.to_string()));
            } else {
                startable.push(spec);
            }
        }
        let started = join_all(startable.into_iter().map(|spec| {
            let name = spec.name.clone();
            let start = McpServer::start_with_changes(spec, options.clone(), changes.clone());
            async move { (name, start.await) }
        }))
        .await;
        let mut servers = Vec::new();
        for (name, result) in started {
            match result {
                Ok(server) => servers.push(server),
                Err(err) => {
                    tracing::warn!(server = %name, error = %err, "MCP server not started");
                    failures.push((name, err.to_string()));
                }
            }
        }
        Self {
            inner: Arc::new(ManagerInner {
                servers,
                failures,
                changes,
            }),
        }
    }

    /// Every tool of every running server, named uniquely (see
    /// [`NameAllocator`]), in server order then each server's own order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut names = NameAllocator::new();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.inner.servers {
            for tool in server.mcp_tools(&mut names) {
                tools.push(Arc::new(tool));
            }
        }
        tools
    }

    /// Every prompt of every running server, in server order then each
    /// server's own order.
    pub fn prompts(&self) -> Vec<McpPrompt> {
        self.inner
            .servers
            .iter()
            .flat_map(|server| {
                server
                    .prompts()
                    .iter()
                    .map(|prompt| McpPrompt::new(server.name(), prompt))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// `prompts/get` of `prompt` from `server`: the messages it gives, for a user turn.
    pub async fn get_prompt(
        &self,
        server: &str,
        prompt: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        cancel: &CancellationToken,
    ) -> Result<Vec<Arc<Message>>, McpCallError> {
        let Some(found) = self.inner.servers.iter().find(|s| s.name() == server) else {
            return Err(McpCallError::ShutDown {
                server: server.to_string(),
            });
        };
        let result = found.get_prompt(prompt, arguments, cancel).await?;
        Ok(prompt::messages(&result))
    }

    /// The servers that could not be started: (name, a sentence saying why).
    pub fn failures(&self) -> Vec<(String, String)> {
        self.inner.failures.clone()
    }

    /// The running servers' names, in the order they were given.
    pub fn server_names(&self) -> Vec<String> {
        self.inner
            .servers
            .iter()
            .map(|server| server.name().to_string())
            .collect()
    }

    /// The servers.
    pub fn servers(&self) -> &[McpServer] {
        &self.inner.servers
    }

    /// Changes whenever a server's tool or prompt list changes (after a
    /// `list_changed` notification or a restart): call [`tools`](Self::tools)
    /// and [`prompts`](Self::prompts) again then.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// The process ids of the stdio servers now running: (name, pid).
    pub fn process_ids(&self) -> Vec<(String, u32)> {
        self.inner
            .servers
            .iter()
            .filter_map(|server| Some((server.name().to_string(), server.process_id()?)))
            .collect()
    }

    /// Stops every server (stdio children closed, then terminated, then
    /// killed with their process group). Clones of this manager stay valid;
    /// their tools then fail with "has been shut down".
    pub async fn shutdown(self) {
        join_all(self.inner.servers.iter().map(McpServer::stop)).await;
    }
}
