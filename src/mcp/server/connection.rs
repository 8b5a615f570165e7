//! A server's connection: made through its transport, checked before each
//! use and made again when it died (the restart policy), closed on stop.
//! The client handler answering the server lives on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use tokio::sync::watch;

use super::ServerInner;
use crate::mcp::error::{McpCallError, StartError};
use crate::mcp::transport::stdio::{ChildProcess, STOP_GRACE};
use crate::mcp::transport::{self};

/// What a call needs of a connection, taken out so the slot's lock is not
/// held during the call.
#[derive(Clone)]
pub(super) struct Link {
    pub(super) peer: Peer<RoleClient>,
    pub(super) dead: Arc<AtomicBool>,
    /// The stdio child's exit; never changes for HTTP servers.
    pub(super) exit: watch::Receiver<Option<String>>,
}

pub(super) struct Connection {
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
    pub(super) async fn close(mut self) {
        if let Err(err) = self.service.close_with_timeout(STOP_GRACE).await {
            tracing::debug!(%err, "MCP service task ended badly");
        }
        if let Some(mut child) = self.child.take() {
            child.stop().await;
        }
    }
}

impl ServerInner {
    pub(super) async fn connect_in_time(self: &Arc<Self>) -> Result<Connection, StartError> {
        let after = self.options.start_timeout;
        match tokio::time::timeout(after, self.connect()).await {
            Ok(result) => result,
            // The dropped attempt killed its child on the way out.
            Err(_) => Err(StartError::Timeout {
                after,
                stderr: self.stderr.describe(),
            }),
        }
    }

    /// Spawn or connect, `initialize`, list the tools and prompts.
    async fn connect(self: &Arc<Self>) -> Result<Connection, StartError> {
        let id = self.next_connection.fetch_add(1, Ordering::SeqCst) + 1;
        let handler = Handler {
            server: Arc::downgrade(self),
            name: self.spec.name.clone(),
            connection: id,
        };
        let (service, child) =
            transport::serve(handler, &self.spec.name, &self.spec.transport, &self.stderr).await?;
        self.list_at_start(service.peer(), id).await?;
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

    /// The live connection, started again if it died.
    pub(super) async fn link(self: &Arc<Self>) -> Result<Link, McpCallError> {
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
}

/// Answers what the server asks of us (ping, roots: rmcp's defaults) and
/// follows its notifications.
pub(super) struct Handler {
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
            server.relist_tools(&context.peer, self.connection).await;
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
