//! An open session's writer: a thread of its own owns the files, so the
//! session only ever puts lines on a channel. What the session tells it is
//! said in the session's terms (a prompt, a round, a context operation…);
//! the lines it writes are the store's own ([`super::disk`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::StoreError;
use super::disk::{Metadata, PromptIds, StoredEvent};
use super::files::{OpenSession, PLAN, now_rfc3339, remove_file, write_atomic, write_metadata};
use super::views::title_from;
use crate::client::{
    ClientFuture, ClientSink, CreateTerminal, PermissionChoice, PlanContent, ReadTextFile,
    TODO_PLAN_ID, TerminalExit, TerminalId, TerminalOutput, Update, WriteTextFile,
};
use crate::context::{ContextOp, TokenEstimator};
use crate::events::{AgentEvent, ToolCallInfo, ToolContent};
use crate::model::{Message, SessionId};

enum Op {
    Append(StoredEvent),
    Metadata(Box<Metadata>),
    /// The Markdown plan replaced (Some) or removed (None); answered with
    /// the file's path once written.
    Plan(Option<String>, PlanReply),
    /// Answered once everything queued before it is written (or failed).
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

type PlanReply = oneshot::Sender<Result<std::path::PathBuf, StoreError>>;

/// Whether the writer's last write failed, and whether the user was told
/// (once a session: on a disk that is nearly full, writes fail and succeed
/// by turns, and one warning says it).
#[derive(Default)]
struct SaveHealth {
    /// Why the last write failed; None once one succeeds again.
    failure: Mutex<Option<String>>,
    told: std::sync::atomic::AtomicBool,
}

impl SaveHealth {
    fn failed(&self, why: String) {
        crate::util::lock(&self.failure).get_or_insert(why);
    }

    fn succeeded(&self) {
        *crate::util::lock(&self.failure) = None;
    }
}

/// A handle on a stored session. Clones share the writer and the metadata,
/// so a running turn and the permission gate can record the moment
/// something happens, not when the actor next gets to it.
/// A panic's message is kept to this length.
const MAX_CRASH_DETAIL_CHARS: usize = 500;

#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Op>,
    metadata: Arc<Mutex<Metadata>>,
    health: Arc<SaveHealth>,
    blobs: super::Blobs,
    /// The session's directory (its plan is read beside the writer).
    dir: std::path::PathBuf,
}

/// The session's settings, as the metadata keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings<'a> {
    pub mode: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub agent: Option<&'a str>,
    pub thought_level: &'a str,
}

/// The session got its title: the client is told with this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Titled {
    pub title: String,
    pub updated_at: String,
}

impl Recorder {
    /// Start the writer for an open session.
    pub fn start(open: OpenSession, metadata: Metadata) -> Self {
        let (tx, rx) = mpsc::channel();
        let id = metadata.id.clone();
        let health = Arc::new(SaveHealth::default());
        let blobs = super::Blobs::on_disk(open.dir.clone());
        let dir = open.dir.clone();
        let writer_health = Arc::clone(&health);
        let spawned = std::thread::Builder::new()
            .name(format!("store-{}", short(&id)))
            .spawn(move || write_loop(open, rx, &id, &writer_health));
        if let Err(err) = spawned {
            tracing::warn!(%err, "cannot start the session writer; this session is not saved");
            health.failed(format!("the session writer cannot start: {err}"));
        }
        Self {
            tx,
            metadata: Arc::new(Mutex::new(metadata)),
            health,
            blobs,
            dir,
        }
    }

    /// Once everything recorded so far is written: why saving fails, if it
    /// does and the user has not been told yet (then they count as told).
    pub async fn failure_to_tell(&self) -> Option<String> {
        let (done, written) = oneshot::channel();
        if self.tx.send(Op::Flush(done)).is_ok() {
            // A disk that hangs must not hold the turn's answer.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), written).await;
        }
        let failure = crate::util::lock(&self.health.failure).clone()?;
        let told = self
            .health
            .told
            .swap(true, std::sync::atomic::Ordering::SeqCst);
        (!told).then_some(failure)
    }

    /// A copy of the metadata as last changed.
    pub fn metadata(&self) -> Metadata {
        self.lock().clone()
    }

    /// The user's prompt, as the model gets it. The first one names the
    /// session: then the title is returned, for the client.
    pub fn prompt(&self, message: &Message) -> Option<Titled> {
        self.append(StoredEvent::prompt(now_rfc3339(), message));
        self.title_from_prompt(message)
    }

    /// [`Recorder::prompt`] with the id the message is known by.
    pub fn prompt_with_id(&self, message: &Message, ids: &PromptIds) -> Option<Titled> {
        self.append(StoredEvent::prompt_with_id(now_rfc3339(), message, ids));
        self.title_from_prompt(message)
    }

    /// A message that joined the running turn, where it went in.
    pub fn steered(&self, message: &Message, ids: &PromptIds) {
        self.append(StoredEvent::steered(now_rfc3339(), message, ids));
    }

    /// The first prompt names the session: then the title is returned.
    fn title_from_prompt(&self, message: &Message) -> Option<Titled> {
        if self.lock().title.is_some() {
            return None;
        }
        let title = title_from(message)?;
        let updated_at = self.update(|m| m.title = Some(title.clone()));
        Some(Titled { title, updated_at })
    }

    /// The messages one model round added to the context (its answer, and
    /// its tool calls' results).
    pub fn round(&self, messages: &[Arc<Message>]) {
        self.append(StoredEvent::round(messages));
    }

    /// The agent wrote a file (the content it replaced is a blob already).
    pub fn file_changed(&self, change: &crate::context::rewind::FileChange) {
        self.append(StoredEvent::FileChanged {
            change: change.clone().into(),
        });
    }

    /// A rewind took turns back, with their files.
    pub fn rewound(&self, rewind: &crate::context::rewind::Rewind) {
        self.append(StoredEvent::Rewound {
            rewind: rewind.clone().into(),
        });
    }

    pub fn rewind_undone(&self, id: u64) {
        self.append(StoredEvent::RewindUndone { id });
    }

    /// Replaces the session's Markdown plan (`plan.md` beside its
    /// history, written whole or not at all): the file's absolute path.
    pub async fn save_plan(&self, markdown: String) -> Result<std::path::PathBuf, StoreError> {
        let (done, written) = oneshot::channel();
        self.tx
            .send(Op::Plan(Some(markdown), done))
            .map_err(|_| writer_gone())?;
        written.await.map_err(|_| writer_gone())?
    }

    /// Removes the session's Markdown plan without waiting (a failure is
    /// logged by the writer); later plans are written after it.
    pub fn discard_plan(&self) {
        let (done, _) = oneshot::channel();
        let _ = self.tx.send(Op::Plan(None, done));
    }

    /// Whether the session has a Markdown plan now.
    pub fn has_plan(&self) -> bool {
        self.dir.join(PLAN).is_file()
    }

    /// Removes the session's Markdown plan (none is fine).
    pub async fn remove_plan(&self) -> Result<(), StoreError> {
        let (done, removed) = oneshot::channel();
        self.tx
            .send(Op::Plan(None, done))
            .map_err(|_| writer_gone())?;
        removed.await.map_err(|_| writer_gone())?.map(|_| ())
    }

    /// Where this session keeps file versions.
    pub fn blobs(&self) -> super::Blobs {
        self.blobs.clone()
    }

    /// A change to the context stack, in the order it applied.
    pub fn context_op(&self, op: &ContextOp) {
        self.append(StoredEvent::context(op));
    }

    /// The turn is over; `estimator`: what the provider's usage taught.
    pub fn turn_end(&self, estimator: Option<TokenEstimator>) {
        self.append(StoredEvent::turn_end(estimator));
    }

    /// A prompt turn is over, with what the session has spent so far.
    pub fn turn_end_spent(
        &self,
        estimator: Option<TokenEstimator>,
        spent: crate::context::spend::Totals,
    ) {
        self.append(StoredEvent::turn_end_spent(estimator, spent));
        // A turn that ended normally: the session works again.
        if self.lock().broken.is_some() {
            self.update(|m| m.broken = None);
        }
    }

    /// What the client was shown, for replay (only the conversation is
    /// kept; a reference to another session is display only).
    pub fn shown(&self, update: &Update) {
        let event = match update {
            Update::Agent(AgentEvent::ToolCallUpdate(progress))
                if progress
                    .content
                    .iter()
                    .any(|c| matches!(c, ToolContent::Session { .. })) =>
            {
                let mut progress = progress.clone();
                progress
                    .content
                    .retain(|c| !matches!(c, ToolContent::Session { .. }));
                AgentEvent::ToolCallUpdate(progress)
            }
            Update::Agent(event) | Update::Tagged { event, .. } => event.clone(),
            // The todo list as a client that takes plans by id saw it.
            Update::Plan {
                plan_id,
                plan: PlanContent::Items(items),
            } if plan_id == TODO_PLAN_ID => AgentEvent::Plan(items.clone()),
            Update::PlanRemoved { plan_id } if plan_id == TODO_PLAN_ID => {
                AgentEvent::Plan(Vec::new())
            }
            _ => return,
        };
        if let Some(event) = StoredEvent::shown(&event) {
            self.append(event);
        }
    }

    /// The settings now: what changed since the last call is recorded.
    pub fn settings(&self, now: Settings<'_>) {
        let saved = self.metadata();
        let mode_changed = saved.mode != now.mode;
        let model_changed = saved.provider != now.provider || saved.model != now.model;
        if mode_changed {
            self.append(StoredEvent::ModeChanged {
                mode: now.mode.to_string(),
            });
        }
        if model_changed {
            self.append(StoredEvent::ModelChanged {
                provider: now.provider.to_string(),
                model: now.model.to_string(),
            });
        }
        let thought_changed = saved.thought_level.as_deref() != Some(now.thought_level);
        if mode_changed || model_changed || thought_changed || saved.agent.as_deref() != now.agent {
            self.update(|m| {
                m.mode = now.mode.to_string();
                m.provider = now.provider.to_string();
                m.model = now.model.to_string();
                m.agent = now.agent.map(str::to_string);
                m.thought_level = Some(now.thought_level.to_string());
            });
        }
    }

    /// The workspace roots besides `cwd` a load or resume activated; saved
    /// when they differ from the stored ones.
    pub fn additional_directories(&self, roots: &[std::path::PathBuf]) {
        if self.lock().additional_directories != roots {
            self.update(|m| m.additional_directories = roots.to_vec());
        }
    }

    /// The client's `systemPrompt` for this session, saved for loads.
    pub fn system_prompt(&self, prompt: Option<&crate::model::ClientPrompt>) {
        if self.lock().system_prompt.as_ref() != prompt {
            self.update(|m| m.system_prompt = prompt.cloned());
        }
    }

    /// The budgets `/budget` set for this session, saved for loads.
    pub fn budgets(&self, budgets: crate::context::spend::Budgets) {
        self.update(|m| m.budgets = Some(budgets.into()));
    }

    /// A turn or the session stopped on an internal error: kept in the
    /// history, and marked in the metadata until a turn ends normally.
    pub fn crashed(&self, detail: &str) {
        let at = now_rfc3339();
        let detail: String = detail.chars().take(MAX_CRASH_DETAIL_CHARS).collect();
        self.append(StoredEvent::Crashed {
            at: at.clone(),
            detail: detail.clone(),
        });
        self.update(|m| m.broken = Some(super::disk::Broken { at, detail }));
    }

    /// The budgets saved with the session (none set: all off).
    pub fn saved_budgets(&self) -> crate::context::spend::Budgets {
        self.lock().budgets.map(Into::into).unwrap_or_default()
    }

    /// A title the user gave (it replaces the one from the first prompt).
    pub fn retitle(&self, title: &str) -> Titled {
        let updated_at = self.update(|m| m.title = Some(title.to_string()));
        Titled {
            title: title.to_string(),
            updated_at,
        }
    }

    /// The "always" answers given so far, by tool name (true allows).
    pub fn permissions_remembered(&self, rules: BTreeMap<String, bool>) {
        self.update(|m| m.permissions = rules);
    }

    /// A child session was started from this one (a `delegate` call).
    pub fn child_started(&self, child_id: &SessionId) {
        self.update(|m| m.children.push(child_id.clone()));
    }

    /// A sink that forwards to `inner` and records what the client is
    /// shown, in the order it is shown.
    pub fn wrap(&self, inner: Arc<dyn ClientSink>) -> Arc<dyn ClientSink> {
        Arc::new(RecordingSink {
            inner,
            session_id: self.lock().id.clone(),
            recorder: self.clone(),
        })
    }

    /// Write everything queued, then release the files and the lock.
    pub async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.tx.send(Op::Close(done)).is_ok() {
            let _ = closed.await;
        }
    }

    fn append(&self, event: StoredEvent) {
        let _ = self.tx.send(Op::Append(event));
    }

    /// Change the metadata and write it, with a fresh `updated_at` (returned).
    fn update(&self, change: impl FnOnce(&mut Metadata)) -> String {
        // Sent under the lock: the writer gets the versions in the order they were made.
        let mut metadata = self.lock();
        change(&mut metadata);
        metadata.updated_at = now_rfc3339();
        let _ = self.tx.send(Op::Metadata(Box::new(metadata.clone())));
        metadata.updated_at.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Metadata> {
        crate::util::lock(&self.metadata)
    }
}

fn writer_gone() -> StoreError {
    StoreError::Io {
        action: "cannot save the plan of",
        path: std::path::PathBuf::from("this session"),
        source: std::io::Error::other("the session's writer has stopped"),
    }
}

fn short(id: &SessionId) -> &str {
    let id = id.as_str();
    id.get(..8).unwrap_or(id)
}

fn write_loop(mut open: OpenSession, rx: mpsc::Receiver<Op>, id: &SessionId, health: &SaveHealth) {
    let mut failed = false;
    while let Ok(first) = rx.recv() {
        // Take whatever else is queued: one write for a burst of chunks.
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut lines: Vec<u8> = Vec::new();
        let mut pending: Option<StoredEvent> = None;
        let mut metadata: Option<Box<Metadata>> = None;
        let mut close: Option<oneshot::Sender<()>> = None;
        let mut flushed: Vec<oneshot::Sender<()>> = Vec::new();
        let mut plans = Vec::new();
        let mut reach = Reach::PageCache;
        for op in batch {
            match op {
                Op::Append(event) => {
                    if matches!(
                        event,
                        StoredEvent::UserPrompt { .. }
                            | StoredEvent::SteeredPrompt { .. }
                            | StoredEvent::Round { .. }
                            | StoredEvent::Rewound { .. }
                            | StoredEvent::RewindUndone { .. }
                            | StoredEvent::Context { .. }
                            | StoredEvent::TurnEnd { .. }
                    ) {
                        reach = Reach::Disk;
                    }
                    if let (
                        Some(StoredEvent::Update { update: last }),
                        StoredEvent::Update { update: next },
                    ) = (pending.as_mut(), &event)
                        && last.coalesce(next)
                    {
                        continue;
                    }
                    if let Some(done) = pending.replace(event) {
                        encode(&done, &mut lines);
                    }
                }
                Op::Metadata(m) => metadata = Some(m),
                Op::Plan(markdown, done) => plans.push((markdown, done)),
                Op::Flush(done) => flushed.push(done),
                Op::Close(done) => close = Some(done),
            }
        }
        if let Some(done) = pending {
            encode(&done, &mut lines);
        }
        if !lines.is_empty() {
            match append(&mut open.history, &lines, reach) {
                Ok(()) => {
                    failed = false;
                    health.succeeded();
                }
                Err(err) => {
                    if !failed {
                        tracing::warn!(session = %id, %err, "cannot append to the session history");
                    }
                    failed = true;
                    health.failed(format!("its history cannot be written ({err})"));
                }
            }
        }
        if let Some(metadata) = metadata
            && let Err(err) = write_metadata(&open.dir, &metadata)
        {
            tracing::warn!(session = %id, %err, "cannot save the session metadata");
            health.failed(format!("its metadata cannot be written ({err})"));
        }
        for (markdown, done) in plans {
            let written = match markdown {
                Some(markdown) => write_atomic(&open.dir, PLAN, markdown.as_bytes()),
                None => remove_file(&open.dir, PLAN).map(|()| open.dir.join(PLAN)),
            };
            if let Err(err) = &written {
                tracing::warn!(session = %id, %err, "cannot save the session's plan");
            }
            let _ = done.send(written);
        }
        for done in flushed {
            let _ = done.send(());
        }
        if let Some(done) = close {
            drop(open);
            let _ = done.send(());
            return;
        }
    }
}

/// How far an append goes before it counts as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    PageCache,
    /// Turn boundaries reach the disk itself, not just the page cache.
    Disk,
}

/// Append whole lines or nothing: a write that fails part-way (a full disk)
/// is cut back off, so no torn line is left for the next append to run on.
fn append(history: &mut std::fs::File, lines: &[u8], reach: Reach) -> std::io::Result<()> {
    let before = history.metadata()?.len();
    let written = history.write_all(lines).and_then(|()| match reach {
        Reach::Disk => history.sync_data(),
        Reach::PageCache => Ok(()),
    });
    if written.is_err() {
        let _ = history.set_len(before);
    }
    written
}

fn encode(event: &StoredEvent, out: &mut Vec<u8>) {
    match serde_json::to_vec(event) {
        Ok(line) => {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
        Err(err) => tracing::warn!(%err, "cannot encode a history event"),
    }
}

/// Forwards to the client and records what it shows of this session.
struct RecordingSink {
    inner: Arc<dyn ClientSink>,
    session_id: SessionId,
    recorder: Recorder,
}

impl ClientSink for RecordingSink {
    fn send(&self, session_id: &SessionId, update: Update) {
        if *session_id == self.session_id {
            self.recorder.shown(&update);
        }
        self.inner.send(session_id, update);
    }

    fn room(&self) -> futures::future::BoxFuture<'_, ()> {
        self.inner.room()
    }

    fn session_ended(&self, session_id: &SessionId) {
        self.inner.session_ended(session_id);
    }

    // Requests are not history: they pass straight through.
    fn request_permission(
        &self,
        session_id: &SessionId,
        call: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice> {
        self.inner.request_permission(session_id, call)
    }

    fn read_text_file(&self, request: ReadTextFile) -> ClientFuture<'_, String> {
        self.inner.read_text_file(request)
    }

    fn write_text_file(&self, request: WriteTextFile) -> ClientFuture<'_, ()> {
        self.inner.write_text_file(request)
    }

    fn create_terminal(&self, request: CreateTerminal) -> ClientFuture<'_, TerminalId> {
        self.inner.create_terminal(request)
    }

    fn terminal_output(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalOutput> {
        self.inner.terminal_output(terminal)
    }

    fn wait_for_terminal_exit(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalExit> {
        self.inner.wait_for_terminal_exit(terminal)
    }

    fn kill_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        self.inner.kill_terminal(terminal)
    }

    fn release_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        self.inner.release_terminal(terminal)
    }

    fn ask_user(
        &self,
        question: crate::client::Question,
    ) -> ClientFuture<'_, crate::client::Answer> {
        self.inner.ask_user(question)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::testing::RecordingClient;
    use crate::events::AgentEvent;
    use crate::model::Message;
    use crate::store::Store;
    use std::path::PathBuf;

    /// A new session `id` in a fresh data dir (kept alive by the TempDir).
    fn recording(id: &str) -> (tempfile::TempDir, Store, Recorder) {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        let mut metadata = Metadata::new(&id.into(), PathBuf::from("/p"), "prov", "model", "act");
        metadata.thought_level = Some("off".into());
        let open = store.create(&metadata).unwrap();
        (data, store, Recorder::start(open, metadata))
    }

    #[tokio::test]
    async fn a_crash_marks_the_session_until_a_turn_ends_normally() {
        let (_data, store, recorder) = recording("s1");
        recorder.crashed(&"x".repeat(2_000));
        recorder.turn_end(None);
        recorder.close().await;
        let (metadata, events) = store.read(&"s1".into()).unwrap();
        let broken = metadata.broken.expect("marked");
        assert_eq!(broken.detail.len(), MAX_CRASH_DETAIL_CHARS);
        assert!(
            matches!(events[0], StoredEvent::Crashed { .. }),
            "{events:?}"
        );

        let (open, metadata, _) = store.open(&"s1".into()).unwrap();
        let recorder = Recorder::start(open, metadata);
        recorder.turn_end_spent(None, Default::default());
        recorder.close().await;
        assert_eq!(store.metadata(&"s1".into()).unwrap().broken, None);
    }

    #[tokio::test]
    async fn the_markdown_plan_is_a_file_beside_the_history_replaced_whole_and_removed() {
        let (_data, store, recorder) = recording("s1");
        assert!(!recorder.has_plan());
        assert_eq!(store.plan(&"s1".into()).unwrap(), None);
        let path = recorder.save_plan("# Plan\n1. One\n".into()).await.unwrap();
        assert!(path.is_absolute(), "{}", path.display());
        assert_eq!(path, store.dir().join("s1").join(PLAN));
        let path = recorder.save_plan("# Plan\n1. Two\n".into()).await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Plan\n1. Two\n");
        assert_eq!(
            store.plan(&"s1".into()).unwrap(),
            Some(("# Plan\n1. Two\n".to_string(), path.clone()))
        );
        assert!(recorder.has_plan());
        // No temporary file is left beside it.
        let names: Vec<String> = std::fs::read_dir(store.dir().join("s1"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".tmp"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
        // A whole fork takes it along; one at a cursor does not.
        recorder.context_op(&ContextOp::Checkpoint { name: "c".into() });
        recorder.close().await;
        store.fork(&"s1".into(), &"whole".into(), None).unwrap();
        store.fork(&"s1".into(), &"cut".into(), Some("c")).unwrap();
        assert_eq!(
            store.plan(&"whole".into()).unwrap().unwrap().0,
            "# Plan\n1. Two\n"
        );
        assert_eq!(store.plan(&"cut".into()).unwrap(), None);

        let (open, metadata, _) = store.open(&"s1".into()).unwrap();
        let recorder = Recorder::start(open, metadata);
        assert!(recorder.has_plan());
        recorder.remove_plan().await.unwrap();
        assert!(!path.exists());
        // Twice is fine.
        recorder.remove_plan().await.unwrap();
        recorder.save_plan("again".into()).await.unwrap();
        recorder.discard_plan();
        recorder.close().await;
        assert_eq!(store.plan(&"s1".into()).unwrap(), None);
    }

    #[tokio::test]
    async fn plans_by_id_are_kept_as_the_todo_list_and_session_links_not_at_all() {
        use crate::events::{TodoItem, TodoPriority, TodoStatus, ToolCallProgress, ToolStatus};
        let (_data, store, recorder) = recording("s1");
        let sink = recorder.wrap(Arc::new(RecordingClient::default()));
        let items = vec![TodoItem {
            content: "Fix".into(),
            status: TodoStatus::Pending,
            priority: TodoPriority::Medium,
        }];
        sink.send(
            &"s1".into(),
            Update::Plan {
                plan_id: TODO_PLAN_ID.into(),
                plan: PlanContent::Items(items.clone()),
            },
        );
        let progress = |content| ToolCallProgress {
            id: "c1".into(),
            name: "delegate".into(),
            status: ToolStatus::Completed,
            content,
            locations: Vec::new(),
            raw_output: None,
        };
        let summary = ToolContent::Text("done".into());
        let linked = vec![
            ToolContent::Session {
                session_id: "child".into(),
            },
            summary.clone(),
        ];
        sink.send(
            &"s1".into(),
            Update::Agent(AgentEvent::ToolCallUpdate(progress(linked))),
        );
        sink.send(
            &"s1".into(),
            Update::PlanRemoved {
                plan_id: TODO_PLAN_ID.into(),
            },
        );
        recorder.close().await;
        let (_, events) = store.read(&"s1".into()).unwrap();
        assert_eq!(
            crate::store::replay_from(&events),
            vec![
                Update::Agent(AgentEvent::Plan(items)),
                Update::Agent(AgentEvent::ToolCallUpdate(progress(vec![summary]))),
                Update::Agent(AgentEvent::Plan(Vec::new())),
            ]
        );
    }

    #[tokio::test]
    async fn prompt_suggestions_reach_the_client_and_are_not_recorded() {
        let (_data, store, recorder) = recording("s1");
        let client = Arc::new(RecordingClient::default());
        let sink = recorder.wrap(Arc::clone(&client) as Arc<dyn ClientSink>);
        let offered = Update::PromptSuggestions(vec!["Continue".into()]);
        sink.send(&"s1".into(), offered.clone());
        sink.send(&"s1".into(), Update::PromptSuggestions(Vec::new()));
        recorder.close().await;
        assert_eq!(client.updates().len(), 2);
        assert_eq!(client.updates()[0].1, offered);
        let (_, events) = store.read(&"s1".into()).unwrap();
        assert_eq!(crate::store::replay_from(&events), Vec::<Update>::new());
    }

    #[tokio::test]
    async fn what_the_sink_forwards_is_what_the_store_replays() {
        let (_data, store, recorder) = recording("s1");
        let sink = recorder.wrap(Arc::new(RecordingClient::default()));
        // The first prompt names the session.
        let titled = recorder.prompt(&Message::user_text("hello")).unwrap();
        assert_eq!(titled.title, "hello");
        assert_eq!(titled.updated_at, recorder.metadata().updated_at);
        for piece in ["a", "b", "c"] {
            sink.send(
                &"s1".into(),
                Update::Agent(AgentEvent::AgentText(piece.into())),
            );
        }
        sink.send(
            &"s1".into(),
            Update::Agent(AgentEvent::Usage {
                used: 1,
                size: 2,
                cost: None,
            }),
        );
        sink.send(&"s1".into(), Update::CurrentMode("auto".into()));
        sink.send(
            &"other".into(),
            Update::Agent(AgentEvent::AgentText("no".into())),
        );
        recorder.close().await;
        let (metadata, events) = store.read(&"s1".into()).unwrap();
        assert_eq!(metadata.title.as_deref(), Some("hello"));
        let replay = crate::store::replay_from(&events);
        assert_eq!(
            replay,
            vec![
                Update::UserPrompt(crate::client::UserPrompt {
                    message_id: "prompt-0".into(),
                    content: vec![crate::model::Part::Text {
                        text: "hello".into()
                    }],
                    origin: crate::client::PromptOrigin::Replayed,
                }),
                Update::Agent(AgentEvent::AgentText("abc".into())),
            ]
        );
        // Closed: the lock is free for another process.
        assert!(store.open(&"s1".into()).is_ok());
    }

    /// Each semantic call writes the line (or metadata) it stands for.
    #[tokio::test]
    async fn each_call_writes_its_line() {
        let (_data, store, recorder) = recording("s2");
        let settings = |mode, model, agent| Settings {
            mode,
            provider: "prov",
            model,
            agent,
            thought_level: "off",
        };
        recorder.prompt(&Message::user_text("first"));
        assert_eq!(recorder.prompt(&Message::user_text("second")), None);
        recorder.round(&[Arc::new(Message::assistant_text("answer"))]);
        recorder.context_op(&ContextOp::Checkpoint { name: "cp".into() });
        recorder.turn_end(Some(TokenEstimator {
            drift: 1.25,
            observations: 2,
        }));
        // Unchanged settings write nothing; a new card only the metadata.
        recorder.settings(settings("act", "model", None));
        recorder.settings(settings("act", "model", Some("coder")));
        recorder.settings(settings("auto", "other", Some("coder")));
        recorder.permissions_remembered(BTreeMap::from([("write_file".to_string(), true)]));
        recorder.close().await;

        let dir = store.dir().join("s2");
        let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = history
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .map(|mut line: serde_json::Value| {
                line.as_object_mut().unwrap().remove("at");
                line
            })
            .collect();
        let text = |role: &str, text: &str| serde_json::json!({"role": role, "parts": [{"type": "text", "text": text}]});
        assert_eq!(
            lines,
            [
                serde_json::json!({"event": "user_prompt", "message": text("user", "first")}),
                serde_json::json!({"event": "user_prompt", "message": text("user", "second")}),
                serde_json::json!({"event": "round", "messages": [text("assistant", "answer")]}),
                serde_json::json!({"event": "context", "op": {"op": "checkpoint", "name": "cp"}}),
                serde_json::json!({"event": "turn_end", "estimator": {"drift": 1.25, "observations": 2}}),
                serde_json::json!({"event": "mode_changed", "mode": "auto"}),
                serde_json::json!({"event": "model_changed", "provider": "prov", "model": "other"}),
            ]
        );
        let metadata: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("metadata.json")).unwrap()).unwrap();
        assert_eq!(metadata["format_version"], 1);
        assert_eq!(metadata["title"], "first");
        assert_eq!(metadata["mode"], "auto");
        assert_eq!(metadata["model"], "other");
        assert_eq!(metadata["agent"], "coder");
        assert_eq!(
            metadata["permissions"],
            serde_json::json!({"write_file": true})
        );
    }
}
