//! Session ids → actor handles. Owned by the router; every operation is a
//! map lookup plus a mailbox send, so it never waits on a session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{ClientAbilities, ClientSink, SessionConfig, SessionHandle, SessionMsg, Update};
use crate::mcp::{McpOptions, McpServerSpec};
use crate::providers::Providers;
use crate::store::{self, Metadata, Recorder, Store, StoreError};

/// How long shutdown waits for turns to answer `cancelled` before giving up.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

pub struct Defaults {
    pub provider: String,
    pub model: String,
    pub max_turn_requests: u32,
    pub mode: String,
    pub modes: crate::modes::ModeRegistry,
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
    /// Where sessions are saved; None keeps them in memory only.
    store: Option<Arc<Store>>,
    /// The agent card new sessions record.
    agent: Option<String>,
}

impl SessionManager {
    pub fn new(providers: Arc<Providers>, sink: Arc<dyn ClientSink>, defaults: Defaults) -> Self {
        Self {
            sessions: HashMap::new(),
            providers,
            sink,
            defaults,
            store: None,
            agent: None,
        }
    }

    /// Save sessions in `store`, so they can be listed, loaded and resumed.
    pub fn with_store(mut self, store: Arc<Store>, agent: Option<String>) -> Self {
        self.store = Some(store);
        self.agent = agent;
        self
    }

    pub fn store(&self) -> Option<Arc<Store>> {
        self.store.clone()
    }

    /// Config servers, with those of the client's request replacing any of the same name.
    fn servers(&self, mcp_servers: Vec<McpServerSpec>) -> Vec<McpServerSpec> {
        let mut servers: Vec<McpServerSpec> = self
            .defaults
            .mcp_servers
            .iter()
            .filter(|configured| !mcp_servers.iter().any(|s| s.name == configured.name))
            .cloned()
            .collect();
        servers.extend(mcp_servers);
        servers
    }

    /// A stored session back in memory: its model, mode, "always" answers
    /// and context from disk, its MCP servers from the request. With
    /// `replay`, also the updates that show its conversation again (the
    /// caller sends them before answering). A session already open here is
    /// reused.
    pub fn load(
        &mut self,
        id: &str,
        cwd: PathBuf,
        client: ClientAbilities,
        mcp_servers: Vec<McpServerSpec>,
        replay: bool,
    ) -> Result<(&SessionHandle, Vec<Update>), StoreError> {
        let store = self
            .store
            .clone()
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        if self.sessions.contains_key(id) {
            let updates = if replay {
                // The history is append-only: reading it beside our own writer is safe.
                store::replay_from(&store.read(id)?.1)
            } else {
                Vec::new()
            };
            let handle = self
                .sessions
                .get(id)
                .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
            return Ok((handle, updates));
        }
        let (open, mut metadata, events) = store.open(id)?;
        if self.providers.config(&metadata.provider).is_none() {
            tracing::warn!(session = %id, provider = %metadata.provider, "the session's provider is no longer configured; using the default");
            metadata.provider = self.defaults.provider.clone();
            metadata.model = self.defaults.model.clone();
        }
        if self.defaults.modes.find(&metadata.mode).is_none() {
            metadata.mode = self.defaults.mode.clone();
        }
        metadata.cwd = cwd.clone();
        let updates = if replay {
            store::replay_from(&events)
        } else {
            Vec::new()
        };
        let history = store::context_from(&events);
        tracing::info!(session = %id, events = events.len(), messages = history.len(), "session loaded");
        let servers = self.servers(mcp_servers);
        let config = SessionConfig {
            id: id.to_string(),
            cwd,
            provider: metadata.provider.clone(),
            model: metadata.model.clone(),
            max_turn_requests: self.defaults.max_turn_requests,
            mode: metadata.mode.clone(),
            modes: self.defaults.modes.clone(),
            client,
            rules: Arc::clone(&self.defaults.rules),
            mcp_servers: servers,
            mcp_options: self.defaults.mcp_options.clone(),
            history,
            recorder: Some(Recorder::start(open, metadata)),
            context: self.defaults.context,
            // The store does not keep the card yet; a card's model and mode
            // must not override the ones the session was saved with.
            agent: None,
            system_prompt: self.defaults.system_prompt.clone(),
        };
        let handle = super::spawn(config, Arc::clone(&self.providers), Arc::clone(&self.sink));
        let handle = self.sessions.entry(id.to_string()).or_insert(handle);
        Ok((handle, updates))
    }

    /// A new session. `mcp_servers` (from `session/new`) replace config
    /// servers of the same name.
    pub fn create(
        &mut self,
        cwd: PathBuf,
        client: ClientAbilities,
        mcp_servers: Vec<McpServerSpec>,
    ) -> &SessionHandle {
        let servers = self.servers(mcp_servers);
        let id = uuid::Uuid::new_v4().to_string();
        let recorder = self.store.as_ref().and_then(|store| {
            let mut metadata = Metadata::new(
                &id,
                cwd.clone(),
                &self.defaults.provider,
                &self.defaults.model,
                &self.defaults.mode,
            );
            metadata.agent = self.agent.clone();
            match store.create(&metadata) {
                Ok(open) => Some(Recorder::start(open, metadata)),
                Err(err) => {
                    // The session still works; it just will not survive a restart.
                    tracing::warn!(session = %id, %err, "cannot save the new session");
                    None
                }
            }
        });
        let handle = super::spawn(
            SessionConfig {
                id: id.clone(),
                cwd,
                provider: self.defaults.provider.clone(),
                model: self.defaults.model.clone(),
                max_turn_requests: self.defaults.max_turn_requests,
                mode: self.defaults.mode.clone(),
                modes: self.defaults.modes.clone(),
                client,
                rules: Arc::clone(&self.defaults.rules),
                mcp_servers: servers,
                mcp_options: self.defaults.mcp_options.clone(),
                context: self.defaults.context,
                agent: self.defaults.agent.clone(),
                system_prompt: self.defaults.system_prompt.clone(),
                history: Vec::new(),
                recorder,
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
