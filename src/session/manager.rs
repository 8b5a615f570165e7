//! Session ids → actor handles. Owned by the router; every operation is a
//! map lookup plus a mailbox send, so it never waits on a session.
//!
//! On stdio one manager serves the one client. `serve` gives each
//! connection a view of one map ([`SessionManager::for_connection`]): a
//! connection sees the sessions attached to it ([`super::attachments`]),
//! a load takes a session over from another connection, and a connection
//! that goes leaves its sessions running, to close once idle.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::attachments::{Attachment, Attachments, Owner};
use super::runtime::AgentRuntime;
use super::shared::Shared;
use super::{InitialOption, OpenRequest, SessionHandle, SessionMsg, SessionStart, Settings};

// Where `main` has always found it.
pub use super::shared::Defaults;

use crate::client::{ClientAbilities, ClientSink, Update};
use crate::context::ContextManager;
use crate::mcp::McpServerSpec;
use crate::model::SessionId;
use crate::providers::Providers;
use crate::store::{self, Metadata, Recorder, Store, StoreError};
use crate::util::lock;

/// A load in progress: the replay (empty for a resume), or why it failed.
pub type Loading = BoxFuture<'static, Result<Vec<Update>, StoreError>>;

/// Disk work done before a stored session is opened (a fork's copy).
type Prepare = Box<dyn FnOnce() -> Result<(), StoreError> + Send>;

/// Whether a reopened session's conversation is shown to the client again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// `session/load`: the conversation goes out again before the answer.
    Conversation,
    /// `session/resume` and `session/fork`: the client has it already.
    Nothing,
}

/// A stored session to open: where it is, and the disk work before (a
/// fork's copy).
struct StoredSession {
    id: SessionId,
    store: Arc<Store>,
    prepare: Option<Prepare>,
    /// The actor that had it open and is closing (it holds the files' lock).
    closing: Option<tokio::task::JoinHandle<()>>,
}

/// What a session's files held when it was opened.
struct ReadSession {
    open: store::OpenSession,
    metadata: Metadata,
    /// The updates that show its conversation again (none without a replay).
    replay: Vec<Update>,
    restored: store::Restored,
    files: crate::context::rewind::FileHistory,
    spent: crate::context::spend::Totals,
    todos: Vec<crate::events::TodoItem>,
    /// The idempotency keys its user messages were saved with.
    keys: std::collections::HashMap<String, String>,
}

/// Where a session works and with what: its directories, what the client
/// offers, and its MCP servers (the config's with the request's).
struct Workplace {
    cwd: PathBuf,
    additional_directories: Vec<PathBuf>,
    client: ClientAbilities,
    mcp_servers: Vec<McpServerSpec>,
}

impl Workplace {
    /// A probe's: no MCP server is started for it.
    fn probed(cwd: PathBuf, additional_directories: Vec<PathBuf>, client: ClientAbilities) -> Self {
        Self {
            cwd,
            additional_directories,
            client,
            mcp_servers: Vec::new(),
        }
    }
}

/// The client's system prompt and initial options for a session.
struct Choices {
    client_prompt: Option<crate::model::ClientPrompt>,
    initial_options: Vec<InitialOption>,
}

impl Choices {
    /// Queued in the session's mailbox before anything the caller sends after.
    fn send(self, tx: &mpsc::UnboundedSender<SessionMsg>) {
        // Without one, a stored session keeps the prompt saved with it.
        if let Some(prompt) = self.client_prompt {
            let _ = tx.send(SessionMsg::SystemPrompt(prompt));
        }
        if !self.initial_options.is_empty() {
            let _ = tx.send(SessionMsg::InitialOptions(self.initial_options));
        }
    }
}

/// Reads a stored session's files (after its preparation), on a blocking thread.
fn read_stored(
    stored: StoredSession,
    client: ClientAbilities,
    replay: Replay,
) -> Result<ReadSession, StoreError> {
    let StoredSession {
        id, store, prepare, ..
    } = stored;
    if let Some(prepare) = prepare {
        prepare()?;
    }
    let (open, metadata, events) = store.open(&id)?;
    let replay = match replay {
        Replay::Conversation => replay_for(&store, &id, &events, client),
        Replay::Nothing => Vec::new(),
    };
    let restored = store::context_from(&events);
    tracing::info!(session = %id, events = events.len(), entries = restored.context.entries().len(), "session loaded");
    Ok(ReadSession {
        open,
        metadata,
        replay,
        files: store::files_from(&events),
        spent: store::totals_from(&events),
        todos: store::todos_from(&events),
        keys: store::keys_from(&events),
        restored,
    })
}

/// What a stored session starts from, and its replay: its settings as
/// they can be restored, the problems to tell, its recorder started.
fn stored_start(
    read: ReadSession,
    workplace: Workplace,
    shared: &Shared,
) -> (SessionStart, Vec<Update>) {
    let ReadSession {
        open,
        mut metadata,
        replay,
        restored,
        files,
        spent,
        todos,
        keys,
    } = read;
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
    let (settings, gone) = restored_settings(&mut metadata, shared);
    notices.extend(gone);
    metadata.cwd = workplace.cwd.clone();
    let system_prompt = metadata.system_prompt.clone();
    let id = metadata.id.clone();
    let recorder = Recorder::start(open, metadata);
    // The request's list is the complete one now (empty: none).
    recorder.additional_directories(&workplace.additional_directories);
    if let Some(seen) = restored.cut_short {
        super::record::end_cut_short_turn(&recorder, seen);
    }
    let start = SessionStart {
        id,
        cwd: workplace.cwd,
        additional_directories: workplace.additional_directories,
        client: workplace.client,
        mcp_servers: workplace.mcp_servers,
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
        idempotency_keys: keys,
    };
    (start, replay)
}

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

/// The open sessions' handles, by id (shared by every connection's view).
type Handles = Arc<Mutex<HashMap<SessionId, SessionHandle>>>;

/// An open session as a request finds it: its id and mailbox.
#[derive(Clone)]
pub struct SessionRef {
    pub id: SessionId,
    pub tx: mpsc::UnboundedSender<SessionMsg>,
}

impl SessionRef {
    pub fn send(&self, msg: SessionMsg) -> bool {
        self.tx.send(msg).is_ok()
    }
}

/// Whose sessions a manager serves.
#[derive(Clone, Copy)]
enum Served {
    /// Every session of the process (stdio's one client).
    All,
    /// Those attached to one connection, at most `limit` at once (`serve`).
    Connection { owner: Owner, limit: usize },
}

/// Why a session is not open for this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absent {
    /// Not open (never, or no longer).
    NotOpen,
    /// Its actor stopped on an internal error, or its load failed.
    Stopped,
    /// Another connection loaded it since (`serve`).
    TakenOver,
}

pub struct SessionManager {
    sessions: Handles,
    shared: Shared,
    /// Where sessions are saved; None keeps them in memory only.
    store: Option<Arc<Store>>,
    /// The agent card new sessions record.
    agent: Option<String>,
    served: Served,
}

impl SessionManager {
    pub fn new(providers: Arc<Providers>, sink: Arc<dyn ClientSink>, defaults: Defaults) -> Self {
        Self {
            sessions: Handles::default(),
            shared: Shared {
                runtime: Arc::new(AgentRuntime::new(None, defaults.subagents)),
                defaults: Arc::new(defaults),
                providers,
                client: sink,
                attachments: None,
            },
            store: None,
            agent: None,
            served: Served::All,
        }
    }

    /// Sessions shared by several connections (`serve`): each is shown to
    /// the connection it is attached to; see [`Self::for_connection`].
    pub fn shared_by_connections(mut self) -> Self {
        self.shared.attachments = Some(Arc::default());
        self
    }

    /// The view of connection `client`: the sessions it opens or loads
    /// (at most `limit` at once) talk to `client`. None unless the manager
    /// is [`Self::shared_by_connections`].
    pub fn for_connection(&self, client: Arc<dyn ClientSink>, limit: usize) -> Option<Self> {
        let attachments = self.shared.attachments.as_ref()?;
        let owner = attachments.connect(client);
        Some(Self {
            sessions: Arc::clone(&self.sessions),
            shared: self.shared.clone(),
            store: self.store.clone(),
            agent: self.agent.clone(),
            served: Served::Connection { owner, limit },
        })
    }

    /// This view's connection and the attachments it is among; None on
    /// stdio (every session is the one client's).
    fn connection(&self) -> Option<(Owner, &Attachments)> {
        match (self.served, &self.shared.attachments) {
            (Served::Connection { owner, .. }, Some(attachments)) => Some((owner, attachments)),
            _ => None,
        }
    }

    /// Whether this connection may open one more session.
    pub fn has_room(&self) -> bool {
        match (self.connection(), self.session_limit()) {
            (Some((owner, attachments)), Some(limit)) => attachments.count(owner) < limit,
            _ => true,
        }
    }

    /// The most sessions a connection may have open at once (`serve`).
    pub fn session_limit(&self) -> Option<usize> {
        match self.served {
            Served::Connection { limit, .. } => Some(limit),
            Served::All => None,
        }
    }

    /// `id` newly open here: attached to this connection.
    fn attach_new(&self, id: &SessionId) {
        if let Some((owner, attachments)) = self.connection() {
            attachments.attach_new(id, owner);
        }
    }

    /// Whether the open session `id` is this connection's to use.
    fn is_mine(&self, id: &SessionId) -> bool {
        self.connection().is_none_or(|(owner, attachments)| {
            attachments.attachment(id) == Some(Attachment::To(owner))
        })
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

    /// Where `request` says the session works (its MCP servers the
    /// config's, with the request's replacing any of the same name), and
    /// what the client chose for it.
    fn split(&self, request: OpenRequest) -> (Workplace, Choices) {
        let OpenRequest {
            cwd,
            additional_directories,
            client,
            mcp_servers,
            client_prompt,
            initial_options,
        } = request;
        let workplace = Workplace {
            cwd,
            additional_directories,
            client,
            mcp_servers: self.servers(mcp_servers),
        };
        let choices = Choices {
            client_prompt,
            initial_options,
        };
        (workplace, choices)
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
    /// request. With [`Replay::Conversation`], the future also yields the
    /// updates that show its conversation again (the caller sends them
    /// before answering). The disk is read on a blocking thread, never
    /// here: the handle exists at once (messages wait in its mailbox) and
    /// is closed if the session cannot be read. A session already open is
    /// reused.
    pub fn load(
        &mut self,
        id: &SessionId,
        request: OpenRequest,
        replay: Replay,
    ) -> Result<(mpsc::UnboundedSender<SessionMsg>, Loading), StoreError> {
        let store = self
            .store
            .clone()
            .ok_or_else(|| StoreError::NotFound(id.clone()))?;
        if let Some(tx) = self.reattach(id) {
            let choices = Choices {
                client_prompt: request.client_prompt,
                initial_options: request.initial_options,
            };
            choices.send(&tx);
            let (id, client) = (id.clone(), request.client);
            let loading = async move {
                if replay == Replay::Nothing {
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
        // An orphan that closed itself may still be saving: it goes first.
        let closing = lock(&self.sessions).remove(id).map(|handle| handle.task);
        let stored = StoredSession {
            id: id.clone(),
            store,
            prepare: None,
            closing,
        };
        Ok(self.open_stored(stored, request, replay))
    }

    /// The mailbox of `id` when it is open, now attached to this
    /// connection (taken over from another, or adopted as an orphan).
    fn reattach(&self, id: &SessionId) -> Option<mpsc::UnboundedSender<SessionMsg>> {
        let sessions = lock(&self.sessions);
        let handle = sessions.get(id).filter(|handle| !handle.tx.is_closed())?;
        if let Some((owner, attachments)) = self.connection() {
            if !attachments.take_over(id, owner) {
                // It closed itself as an orphan a moment ago.
                return None;
            }
            tracing::debug!(session = %id, "attached to a new connection");
        }
        Some(handle.tx.clone())
    }

    /// `session/fork`: a copy of stored session `source` (its history as
    /// saved so far) under a new id, opened like a resume. The copy is made
    /// on a blocking thread before the open. With `at` (a cursor's
    /// checkpoint), the copy's history ends at that checkpoint.
    pub fn fork(
        &mut self,
        source: &SessionId,
        at: Option<String>,
        request: OpenRequest,
    ) -> Result<(SessionId, mpsc::UnboundedSender<SessionMsg>, Loading), StoreError> {
        let store = self
            .store
            .clone()
            .ok_or_else(|| StoreError::NotFound(source.clone()))?;
        let id = SessionId::random();
        let (source, copy_id, copying) = (source.clone(), id.clone(), Arc::clone(&store));
        let prepare: Prepare = Box::new(move || copying.fork(&source, &copy_id, at.as_deref()));
        let stored = StoredSession {
            id: id.clone(),
            store,
            prepare: Some(prepare),
            closing: None,
        };
        let (tx, loading) = self.open_stored(stored, request, Replay::Nothing);
        Ok((id, tx, loading))
    }

    /// A stored session's actor, its files read (after its preparation,
    /// when it has one) on a blocking thread.
    fn open_stored(
        &mut self,
        mut stored: StoredSession,
        request: OpenRequest,
        replay: Replay,
    ) -> (mpsc::UnboundedSender<SessionMsg>, Loading) {
        lock(&self.sessions).retain(|_, handle| !handle.tx.is_closed());
        let (tx, rx) = mpsc::unbounded_channel();
        let (ready, loaded) = oneshot::channel();
        let mailbox = tx.downgrade();
        let shared = self.shared.clone();
        let id = stored.id.clone();
        let (workplace, choices) = self.split(request);
        let client = workplace.client;
        let task = tokio::spawn(async move {
            if let Some(closing) = stored.closing.take() {
                let _ = closing.await;
            }
            let read = blocking(move || read_stored(stored, client, replay)).await;
            let read = match read {
                Ok(read) => read,
                Err(err) => {
                    // Closed before the answer: the router forgets this handle.
                    drop(rx);
                    let _ = ready.send(Err(err));
                    return;
                }
            };
            let (start, updates) = stored_start(read, workplace, &shared);
            let _ = ready.send(Ok(updates));
            super::run(start, shared, mailbox, rx).await;
        });
        self.attach_new(&id);
        lock(&self.sessions).insert(
            id.clone(),
            SessionHandle {
                id,
                tx: tx.clone(),
                task,
            },
        );
        choices.send(&tx);
        let loading = async move {
            loaded
                .await
                .unwrap_or_else(|_| Err(join_error("the session stopped while loading")))
        };
        (tx, Box::pin(loading))
    }

    /// A new session. The request's MCP servers replace config servers of
    /// the same name.
    pub fn create(&mut self, request: OpenRequest) -> SessionRef {
        let (workplace, choices) = self.split(request);
        let id = SessionId::random();
        // Told in the first turn (see `TurnContext`), where every client reads it.
        let mut save_failure = None;
        let recorder = self.store.as_ref().and_then(|store| {
            let mut metadata = Metadata::new(
                &id,
                workplace.cwd.clone(),
                &self.shared.defaults.provider,
                &self.shared.defaults.model,
                &self.shared.defaults.mode,
            );
            metadata.agent = self.agent.clone();
            metadata.additional_directories = workplace.additional_directories.clone();
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
        let mut start = self.fresh(id.clone(), workplace);
        start.recorder = recorder;
        start.save_failure = save_failure;
        let handle = super::spawn(start, self.shared.clone());
        choices.send(&handle.tx);
        self.attach_new(&id);
        let session = SessionRef {
            id: id.clone(),
            tx: handle.tx.clone(),
        };
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, handle| !handle.tx.is_closed());
        sessions.insert(id, handle);
        session
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
        let id = SessionId::from(format!("options-{}", uuid::Uuid::new_v4()));
        let start = self.fresh(id, Workplace::probed(cwd, additional_directories, client));
        super::spawn(start, self.shared.clone())
    }

    /// A probe (see [`Self::probe`]) with stored session `id`'s settings as
    /// a load would restore them. Only its `metadata.json` is read: nothing
    /// is opened, locked or written, so the session may be open elsewhere.
    /// An archived session is refused as a load would refuse it.
    pub fn probe_stored(
        &self,
        id: &SessionId,
        cwd: PathBuf,
        additional_directories: Vec<PathBuf>,
        client: ClientAbilities,
    ) -> BoxFuture<'static, Result<SessionHandle, StoreError>> {
        let (id, store, shared) = (id.clone(), self.store.clone(), self.shared.clone());
        let probe_id = SessionId::from(format!("options-{}", uuid::Uuid::new_v4()));
        let workplace = Workplace::probed(cwd, additional_directories, client);
        let mut start = self.fresh(probe_id, workplace);
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
    fn fresh(&self, id: SessionId, workplace: Workplace) -> SessionStart {
        let defaults = &self.shared.defaults;
        SessionStart {
            id,
            cwd: workplace.cwd,
            additional_directories: workplace.additional_directories,
            client: workplace.client,
            mcp_servers: workplace.mcp_servers,
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
            idempotency_keys: Default::default(),
        }
    }

    /// An open session of this connection's (a load that failed left a
    /// closed handle: not one).
    pub fn get(&self, id: &SessionId) -> Option<SessionRef> {
        let sessions = lock(&self.sessions);
        let handle = sessions.get(id).filter(|handle| !handle.tx.is_closed())?;
        self.is_mine(id).then(|| SessionRef {
            id: handle.id.clone(),
            tx: handle.tx.clone(),
        })
    }

    /// Why `id` is not open for this connection (see [`Self::get`]).
    pub fn absent(&self, id: &SessionId) -> Absent {
        let stopped = lock(&self.sessions)
            .get(id)
            .map(|handle| handle.tx.is_closed());
        match stopped {
            Some(true) => Absent::Stopped,
            Some(false) if !self.is_mine(id) => Absent::TakenOver,
            _ => Absent::NotOpen,
        }
    }

    /// This connection's session `id`, no longer open to anyone (to be closed).
    pub fn remove(&mut self, id: &SessionId) -> Option<SessionHandle> {
        if !self.is_mine(id) {
            return None;
        }
        let handle = lock(&self.sessions).remove(id)?;
        if let Some(attachments) = &self.shared.attachments {
            attachments.forget(id);
        }
        (!handle.tx.is_closed()).then_some(handle)
    }

    pub fn len(&self) -> usize {
        (lock(&self.sessions).values())
            .filter(|handle| !handle.tx.is_closed())
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The client is gone. On stdio (or for the whole process) every
    /// session closes: running turns are cancelled and answer before this
    /// returns (or the grace period runs out). A connection of `serve`
    /// leaves its sessions running: each closes once idle (it stays
    /// saved), unless another connection loads it first.
    pub async fn client_gone(&self) {
        if let Some((owner, attachments)) = self.connection() {
            let orphaned = attachments.disconnect(owner);
            let sessions = lock(&self.sessions);
            for id in orphaned {
                if let Some(handle) = sessions.get(&id) {
                    handle.send(SessionMsg::Detached);
                }
            }
            return;
        }
        let handles: Vec<SessionHandle> = (lock(&self.sessions).drain())
            .map(|(_, handle)| handle)
            .collect();
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
/// (with its cursors for a client that takes them), its messages whole,
/// ending with the Markdown plan as it stands (for clients that take plans).
fn replay_for(
    store: &Store,
    id: &SessionId,
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
        .map(crate::client::AgentMessage::whole)
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
