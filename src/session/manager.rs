//! Session ids → actor handles. Owned by the router; every operation is a
//! map lookup plus a mailbox send, so it never waits on a session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::runtime::AgentRuntime;
use super::shared::Shared;
use super::{SessionHandle, SessionMsg, SessionStart, Settings};

// Where `main` has always found it.
pub use super::shared::Defaults;

use crate::client::{ClientAbilities, ClientSink, Update};
use crate::context::ContextManager;
use crate::mcp::McpServerSpec;
use crate::providers::Providers;
use crate::store::{self, Metadata, Recorder, Store, StoreError};

/// A load in progress: the replay (empty for a resume), or why it failed.
pub type Loading = BoxFuture<'static, Result<Vec<Update>, StoreError>>;

/// Disk work done before a stored session is opened (a fork's copy).
type Prepare = Box<dyn FnOnce() -> Result<(), StoreError> + Send>;

/// Disk work on the blocking pool, off the router's reader task.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|err| Err(join_error(&err.to_string())))
}

fn join_error(detail: &str) -> StoreError {
    StoreError::Io {
        action: "cannot load",
        path: PathBuf::new(),
        source: std::io::Error::other(detail.to_string()),
    }
}

/// The settings a stored session continues with: what it was saved with,
/// except a provider no longer configured (the default provider and model
/// instead, and the notice saying so) and a mode no longer known (the
/// default mode). `metadata` is corrected to match, so it is saved so.
fn restored_settings(
    metadata: &mut Metadata,
    shared: &Shared,
) -> (Settings, Option<crate::events::Notice>) {
    let defaults = &shared.defaults;
    let mut notice = None;
    if shared.providers.config(&metadata.provider).is_none() {
        tracing::warn!(session = %metadata.id, provider = %metadata.provider, "the session's provider is no longer configured; using the default");
        notice = Some(super::record::saving_notice(
            "Saved session problem",
            format!(
                "It was saved with provider `{}`, which is no longer configured; it continues with `{}`.",
                metadata.provider, defaults.provider
            ),
        ));
        metadata.provider = defaults.provider.clone();
        metadata.model = defaults.model.clone();
    }
    if defaults.modes.find(&metadata.mode).is_none() {
        metadata.mode = defaults.mode.clone();
    }
    let settings = Settings {
        provider: metadata.provider.clone(),
        model: metadata.model.clone(),
        mode: metadata.mode.clone(),
        agent: metadata.agent.clone(),
        thought_level: (metadata.thought_level.as_deref())
            .and_then(crate::providers::Reasoning::parse)
            .unwrap_or(defaults.thought_level),
    };
    (settings, notice)
}

/// How long shutdown waits for turns to answer `cancelled` before giving up.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

pub struct SessionManager {
    sessions: HashMap<String, SessionHandle>,
    shared: Shared,
    /// Where sessions are saved; None keeps them in memory only.
    store: Option<Arc<Store>>,
    /// The agent card new sessions record.
    agent: Option<String>,
}

impl SessionManager {
    pub fn new(providers: Arc<Providers>, sink: Arc<dyn ClientSink>, defaults: Defaults) -> Self {
        Self {
            sessions: HashMap::new(),
            shared: Shared {
                runtime: Arc::new(AgentRuntime::new(None, defaults.subagents)),
                defaults: Arc::new(defaults),
                providers,
                client: sink,
            },
            store: None,
            agent: None,
        }
    }

    /// Save sessions in `store`, so they can be listed, loaded and resumed.
    pub fn with_store(mut self, store: Arc<Store>, agent: Option<String>) -> Self {
        self.shared.runtime = Arc::new(AgentRuntime::new(
            Some(Arc::clone(&store)),
            self.shared.defaults.subagents,
        ));
        self.store = Some(store);
        self.agent = agent;
        self
    }

    pub fn store(&self) -> Option<Arc<Store>> {
        self.store.clone()
    }

    /// The LLM providers every session draws on, and the default one's name.
    pub fn providers(&self) -> (Arc<crate::providers::Providers>, String) {
        (
            Arc::clone(&self.shared.providers),
            self.shared.defaults.provider.clone(),
        )
    }

    /// The unstable ACP features the config turned on.
    pub fn unstable(&self) -> crate::config::Unstable {
        self.shared.defaults.unstable
    }

    /// Config servers, with those of the client's request replacing any of the same name.
    fn servers(&self, mcp_servers: Vec<McpServerSpec>) -> Vec<McpServerSpec> {
        let mut servers: Vec<McpServerSpec> = self
            .shared
            .defaults
            .mcp_servers
            .iter()
            .filter(|configured| !mcp_servers.iter().any(|s| s.name == configured.name))
            .cloned()
            .collect();
        servers.extend(mcp_servers);
        servers
    }

    /// A stored session back in memory: its model, mode, agent card,
    /// "always" answers and context from disk, its MCP servers from the
    /// request. With `replay`, the future also yields the updates that
    /// show its conversation again (the caller sends them before
    /// answering). The disk is read on a blocking thread, never here: the
    /// handle exists at once (messages wait in its mailbox) and is closed
    /// if the session cannot be read. A session already open is reused.
    pub fn load(
        &mut self,
        id: &str,
        cwd: PathBuf,
        additional_directories: Vec<PathBuf>,
        client: ClientAbilities,
        mcp_servers: Vec<McpServerSpec>,
        replay: bool,
    ) -> Result<(mpsc::UnboundedSender<SessionMsg>, Loading), StoreError> {
        let store = self
            .store
            .clone()
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        if let Some(handle) = self.get(id) {
            let tx = handle.tx.clone();
            let id = id.to_string();
            let loading = async move {
                if !replay {
                    return Ok(Vec::new());
                }
                // The history is append-only: reading it beside our own writer is safe.
                blocking(move || {
                    store
                        .read(&id)
                        .map(|(_, events)| replay_for(&store, &id, &events, client))
                })
                .await
            };
            return Ok((tx, Box::pin(loading)));
        }
        Ok(self.open_stored(
            (id, store),
            (cwd, additional_directories),
            client,
            mcp_servers,
            replay,
            None,
        ))
    }

    /// `session/fork`: a copy of stored session `source` (its history as
    /// saved so far) under a new id, opened like a resume. The copy is made
    /// on a blocking thread before the open. With `at` (a cursor's
    /// checkpoint), the copy's history ends at that checkpoint.
    pub fn fork(
        &mut self,
        source: &str,
        at: Option<String>,
        (cwd, additional_directories): (PathBuf, Vec<PathBuf>),
        client: ClientAbilities,
        mcp_servers: Vec<McpServerSpec>,
    ) -> Result<(String, mpsc::UnboundedSender<SessionMsg>, Loading), StoreError> {
        let store = self
            .store
            .clone()
            .ok_or_else(|| StoreError::NotFound(source.to_string()))?;
        let id = uuid::Uuid::new_v4().to_string();
        let (source, copy_id, copying) = (source.to_string(), id.clone(), Arc::clone(&store));
        let prepare: Prepare = Box::new(move || copying.fork(&source, &copy_id, at.as_deref()));
        let (tx, loading) = self.open_stored(
            (&id, store),
            (cwd, additional_directories),
            client,
            mcp_servers,
            false,
            Some(prepare),
        );
        Ok((id, tx, loading))
    }

    /// A stored session's actor, its files read (after `prepare`, when
    /// given) on a blocking thread.
    fn open_stored(
        &mut self,
        (id, store): (&str, Arc<Store>),
        (cwd, additional_directories): (PathBuf, Vec<PathBuf>),
        client: ClientAbilities,
        mcp_servers: Vec<McpServerSpec>,
        replay: bool,
        prepare: Option<Prepare>,
    ) -> (mpsc::UnboundedSender<SessionMsg>, Loading) {
        self.sessions.retain(|_, handle| !handle.tx.is_closed());
        let (tx, rx) = mpsc::unbounded_channel();
        let (ready, loaded) = oneshot::channel();
        let mailbox = tx.downgrade();
        let shared = self.shared.clone();
        let servers = self.servers(mcp_servers);
        let read_id = id.to_string();
        let task = tokio::spawn(async move {
            let opened = blocking(move || {
                if let Some(prepare) = prepare {
                    prepare()?;
                }
                let (open, metadata, events) = store.open(&read_id)?;
                let updates = if replay {
                    replay_for(&store, &read_id, &events, client)
                } else {
                    Vec::new()
                };
                let restored = store::context_from(&events);
                let files = store::files_from(&events);
                let spent = store::totals_from(&events);
                let todos = store::todos_from(&events);
                tracing::info!(session = %read_id, events = events.len(), entries = restored.context.entries().len(), "session loaded");
                Ok((open, metadata, updates, restored, (files, spent, todos)))
            })
            .await;
            let (open, mut metadata, updates, restored, (files, spent, todos)) = match opened {
                Ok(opened) => opened,
                Err(err) => {
                    // Closed before the answer: the router forgets this handle.
                    drop(rx);
                    let _ = ready.send(Err(err));
                    return;
                }
            };
            let mut notices = Vec::new();
            if let Some(broken) = &metadata.broken {
                notices.push(super::record::saving_notice(
                    "This session stopped on an internal error",
                    format!(
                        "At {}, it stopped on an internal error in the agent ({}). Everything saved before that is intact, and the session goes on from there. If it happens again, please report it with the log (RUST_LOG=debug).",
                        broken.at, broken.detail
                    ),
                ));
            }
            let (settings, gone) = restored_settings(&mut metadata, &shared);
            notices.extend(gone);
            metadata.cwd = cwd.clone();
            let system_prompt = metadata.system_prompt.clone();
            let id = metadata.id.clone();
            let recorder = Recorder::start(open, metadata);
            // The request's list is the complete one now (empty: none).
            recorder.additional_directories(&additional_directories);
            if let Some(seen) = restored.cut_short {
                super::record::end_cut_short_turn(&recorder, seen);
            }
            let start = SessionStart {
                id,
                cwd,
                additional_directories,
                client,
                mcp_servers: servers,
                settings,
                agent_restored: true,
                history: restored.context,
                files,
                spent,
                todos,
                recorder: Some(recorder),
                save_failure: None,
                lineage: None,
                notices,
                client_prompt: system_prompt,
            };
            let _ = ready.send(Ok(updates));
            super::run(start, shared, mailbox, rx).await;
        });
        self.sessions.insert(
            id.to_string(),
            SessionHandle {
                id: id.to_string(),
                tx: tx.clone(),
                task,
            },
        );
        let loading = async move {
            loaded
                .await
                .unwrap_or_else(|_| Err(join_error("the session stopped while loading")))
        };
        (tx, Box::pin(loading))
    }

    /// A new session. `mcp_servers` (from `session/new`) replace config
    /// servers of the same name.
    pub fn create(
        &mut self,
        cwd: PathBuf,
        additional_directories: Vec<PathBuf>,
        client: ClientAbilities,
        mcp_servers: Vec<McpServerSpec>,
    ) -> &SessionHandle {
        let servers = self.servers(mcp_servers);
        let id = uuid::Uuid::new_v4().to_string();
        // Told in the first turn (see `TurnContext`), where every client reads it.
        let mut save_failure = None;
        let notices = Vec::new();
        let recorder = self.store.as_ref().and_then(|store| {
            let mut metadata = Metadata::new(
                &id,
                cwd.clone(),
                &self.shared.defaults.provider,
                &self.shared.defaults.model,
                &self.shared.defaults.mode,
            );
            metadata.agent = self.agent.clone();
            metadata.additional_directories = additional_directories.clone();
            metadata.thought_level = Some(self.shared.defaults.thought_level.as_str().into());
            match store.create(&metadata) {
                Ok(open) => Some(Recorder::start(open, metadata)),
                Err(err) => {
                    // The session still works; it just will not survive a restart.
                    tracing::warn!(session = %id, %err, "cannot save the new session");
                    save_failure = Some(format!(
                        "Saving this session failed ({err}): it works, but will not survive a restart. Check that the data directory (--data-dir) is writable.\n"
                    ));
                    None
                }
            }
        });
        let mut start = self.fresh(id.clone(), (cwd, additional_directories), client, servers);
        start.recorder = recorder;
        start.save_failure = save_failure;
        start.notices = notices;
        let handle = super::spawn(start, self.shared.clone());
        self.sessions.entry(id).or_insert(handle)
    }

    /// A session as `create` would start it, run only to be asked its
    /// options (`session/options`): nothing saved, no MCP server started,
    /// not listed here, its updates held (it is never `Started`). Dropping
    /// the handle ends it.
    pub fn probe(
        &self,
        cwd: PathBuf,
        additional_directories: Vec<PathBuf>,
        client: ClientAbilities,
    ) -> SessionHandle {
        let id = format!("options-{}", uuid::Uuid::new_v4());
        let start = self.fresh(id, (cwd, additional_directories), client, Vec::new());
        super::spawn(start, self.shared.clone())
    }

    /// A probe (see [`Self::probe`]) with stored session `id`'s settings as
    /// a load would restore them. Only its `metadata.json` is read: nothing
    /// is opened, locked or written, so the session may be open elsewhere.
    /// An archived session is refused as a load would refuse it.
    pub fn probe_stored(
        &self,
        id: &str,
        cwd: PathBuf,
        additional_directories: Vec<PathBuf>,
        client: ClientAbilities,
    ) -> BoxFuture<'static, Result<SessionHandle, StoreError>> {
        let (id, store, shared) = (id.to_string(), self.store.clone(), self.shared.clone());
        let probe_id = format!("options-{}", uuid::Uuid::new_v4());
        let mut start = self.fresh(probe_id, (cwd, additional_directories), client, Vec::new());
        Box::pin(async move {
            let store = store.ok_or_else(|| StoreError::NotFound(id.clone()))?;
            let mut metadata = blocking(move || {
                let metadata = store.metadata(&id)?;
                if metadata.archived {
                    return Err(StoreError::Archived(id));
                }
                Ok(metadata)
            })
            .await?;
            (start.settings, _) = restored_settings(&mut metadata, &shared);
            // The card's model and mode were saved after it applied them.
            start.agent_restored = true;
            Ok(super::spawn(start, shared))
        })
    }

    /// A new session's start with the configured defaults, nothing saved.
    fn fresh(
        &self,
        id: String,
        (cwd, additional_directories): (PathBuf, Vec<PathBuf>),
        client: ClientAbilities,
        mcp_servers: Vec<McpServerSpec>,
    ) -> SessionStart {
        let defaults = &self.shared.defaults;
        SessionStart {
            id,
            cwd,
            additional_directories,
            client,
            mcp_servers,
            settings: Settings {
                provider: defaults.provider.clone(),
                model: defaults.model.clone(),
                mode: defaults.mode.clone(),
                agent: defaults.agent.clone(),
                thought_level: defaults.thought_level,
            },
            agent_restored: false,
            history: ContextManager::new(),
            files: Default::default(),
            spent: Default::default(),
            todos: Vec::new(),
            recorder: None,
            save_failure: None,
            lineage: None,
            notices: Vec::new(),
            client_prompt: None,
        }
    }

    /// An open session (a load that failed left a closed handle: not one).
    pub fn get(&self, id: &str) -> Option<&SessionHandle> {
        self.sessions
            .get(id)
            .filter(|handle| !handle.tx.is_closed())
    }

    /// Whether `id` was open here and its actor is gone: it stopped on an
    /// internal error, or its load failed.
    pub fn stopped(&self, id: &str) -> bool {
        self.sessions
            .get(id)
            .is_some_and(|handle| handle.tx.is_closed())
    }

    pub fn remove(&mut self, id: &str) -> Option<SessionHandle> {
        self.sessions
            .remove(id)
            .filter(|handle| !handle.tx.is_closed())
    }

    pub fn len(&self) -> usize {
        self.sessions
            .values()
            .filter(|handle| !handle.tx.is_closed())
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Close every session: running turns are cancelled and answer before
    /// this returns (or the grace period runs out).
    pub async fn close_all(&mut self) {
        let handles: Vec<SessionHandle> = self.sessions.drain().map(|(_, handle)| handle).collect();
        let closing = handles.into_iter().map(SessionHandle::close);
        if tokio::time::timeout(CLOSE_GRACE, futures::future::join_all(closing))
            .await
            .is_err()
        {
            tracing::warn!("some sessions did not close within {CLOSE_GRACE:?}");
        }
    }
}

/// A stored conversation as the client with `abilities` is shown it live
/// (with its cursors for a client that takes them), ending with the
/// Markdown plan as it stands (for clients that take plans).
fn replay_for(
    store: &Store,
    id: &str,
    events: &[store::StoredEvent],
    abilities: ClientAbilities,
) -> Vec<Update> {
    let replayed = match abilities.cursors {
        Some(uses) => super::cursors::replay(events, uses),
        None => store::replay_from(events),
    };
    let mut updates: Vec<Update> = replayed
        .into_iter()
        .map(|update| super::live::plan_for_client(update, abilities))
        .collect();
    if abilities.plans {
        match store.plan(id) {
            Ok(Some((markdown, path))) => {
                let document = crate::events::PlanDocument {
                    markdown,
                    path: Some(path),
                };
                updates.push(super::live::plan_for_client(
                    Update::Agent(crate::events::AgentEvent::PlanDocument(Some(document))),
                    abilities,
                ));
            }
            Ok(None) => {}
            // The conversation still loads; the plan's file is named in the log.
            Err(err) => tracing::warn!(session = %id, %err, "cannot read the session's plan"),
        }
    }
    updates
}
