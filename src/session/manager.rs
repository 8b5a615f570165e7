//! Session ids → actor handles. Owned by the router; every operation is a
//! map lookup plus a mailbox send, so it never waits on a session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{ClientAbilities, ClientSink, SessionConfig, SessionHandle, SessionMsg};
use crate::mcp::{McpOptions, McpServerSpec};
use crate::providers::Providers;

/// How long shutdown waits for turns to answer `cancelled` before giving up.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

pub struct Defaults {
    pub provider: String,
    pub model: String,
    pub max_turn_requests: u32,
    pub mode: String,
    pub rules: Arc<Vec<crate::permissions::Rule>>,
    /// `[mcp_servers]` from the config, started by every session.
    pub mcp_servers: Vec<McpServerSpec>,
    pub mcp_options: McpOptions,
    pub context: crate::context::ContextSettings,
    /// `--agent` or `[chat] default_agent`.
    pub agent: Option<String>,
    /// `[chat] system_prompt`.
    pub system_prompt: Option<String>,
}

pub struct SessionManager {
    sessions: HashMap<String, SessionHandle>,
    providers: Arc<Providers>,
    sink: Arc<dyn ClientSink>,
    defaults: Defaults,
}

impl SessionManager {
    pub fn new(providers: Arc<Providers>, sink: Arc<dyn ClientSink>, defaults: Defaults) -> Self {
        Self {
            sessions: HashMap::new(),
            providers,
            sink,
            defaults,
        }
    }

    /// A new session. `mcp_servers` (from `session/new`) replace config
    /// servers of the same name.
    pub fn create(
        &mut self,
        cwd: PathBuf,
        client: ClientAbilities,
        mcp_servers: Vec<McpServerSpec>,
    ) -> &SessionHandle {
        let mut servers: Vec<McpServerSpec> = self
            .defaults
            .mcp_servers
            .iter()
            .filter(|configured| !mcp_servers.iter().any(|s| s.name == configured.name))
            .cloned()
            .collect();
        servers.extend(mcp_servers);
        let id = uuid::Uuid::new_v4().to_string();
        let handle = super::spawn(
            SessionConfig {
                id: id.clone(),
                cwd,
                provider: self.defaults.provider.clone(),
                model: self.defaults.model.clone(),
                max_turn_requests: self.defaults.max_turn_requests,
                mode: self.defaults.mode.clone(),
                client,
                rules: Arc::clone(&self.defaults.rules),
                mcp_servers: servers,
                mcp_options: self.defaults.mcp_options.clone(),
                context: self.defaults.context,
                agent: self.defaults.agent.clone(),
                system_prompt: self.defaults.system_prompt.clone(),
            },
            Arc::clone(&self.providers),
            Arc::clone(&self.sink),
        );
        self.sessions.entry(id).or_insert(handle)
    }

    pub fn get(&self, id: &str) -> Option<&SessionHandle> {
        self.sessions.get(id)
    }

    pub fn remove(&mut self, id: &str) -> Option<SessionHandle> {
        self.sessions.remove(id)
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Close every session: running turns are cancelled and answer before
    /// this returns (or the grace period runs out).
    pub async fn close_all(&mut self) {
        let handles: Vec<SessionHandle> = self.sessions.drain().map(|(_, handle)| handle).collect();
        let closing = handles.into_iter().map(|handle| async move {
            close(handle).await;
        });
        if tokio::time::timeout(CLOSE_GRACE, futures::future::join_all(closing))
            .await
            .is_err()
        {
            tracing::warn!("some sessions did not close within {CLOSE_GRACE:?}");
        }
    }
}

/// Ask an actor to close and wait until it has.
pub async fn close(handle: SessionHandle) {
    let (reply, done) = oneshot::channel();
    if handle.send(SessionMsg::Close { reply }) {
        let _ = done.await;
    }
    let _ = handle.task.await;
}
