//! An open session's writer: a thread of its own owns the files, so the
//! session actor only ever puts events on a channel.

use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::events::{StoredEvent, StoredUpdate};
use super::files::{Metadata, OpenSession, now_rfc3339, write_metadata};
use crate::client::PermissionChoice;
use crate::client::{ClientFuture, ClientSink, Update};
use crate::client::{CreateTerminal, ReadTextFile, TerminalExit, TerminalId};
use crate::client::{TerminalOutput, WriteTextFile};
use crate::events::ToolCallInfo;

enum Op {
    Append(StoredEvent),
    Metadata(Box<Metadata>),
    Close(oneshot::Sender<()>),
}

/// A handle on a stored session. Clones share the writer and the metadata,
/// so a running turn and the permission gate can record the moment
/// something happens, not when the actor next gets to it.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Op>,
    metadata: Arc<Mutex<Metadata>>,
}

impl Recorder {
    /// Start the writer for an open session.
    pub fn start(open: OpenSession, metadata: Metadata) -> Self {
        let (tx, rx) = mpsc::channel();
        let id = metadata.id.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("store-{}", short(&id)))
            .spawn(move || write_loop(open, rx, &id));
        if let Err(err) = spawned {
            tracing::warn!(%err, "cannot start the session writer; this session is not saved");
        }
        Self {
            tx,
            metadata: Arc::new(Mutex::new(metadata)),
        }
    }

    /// A copy of the metadata as last changed.
    pub fn metadata(&self) -> Metadata {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Metadata> {
        crate::util::lock(&self.metadata)
    }

    pub fn record(&self, event: StoredEvent) {
        let _ = self.tx.send(Op::Append(event));
    }

    /// Change the metadata and write it (with a fresh `updated_at`).
    pub fn update(&self, change: impl FnOnce(&mut Metadata)) {
        // Sent under the lock: the writer gets the versions in the order they were made.
        let mut metadata = self.lock();
        change(&mut metadata);
        metadata.updated_at = now_rfc3339();
        let _ = self.tx.send(Op::Metadata(Box::new(metadata.clone())));
    }

    /// A sink that records what it forwards (the replayable part).
    pub fn wrap(&self, inner: Arc<dyn ClientSink>) -> Arc<dyn ClientSink> {
        Arc::new(RecordingSink {
            inner,
            session_id: self.lock().id.clone(),
            tx: std::sync::Mutex::new(self.tx.clone()),
        })
    }

    /// Write everything queued, then release the files and the lock.
    pub async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.tx.send(Op::Close(done)).is_ok() {
            let _ = closed.await;
        }
    }
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn write_loop(mut open: OpenSession, rx: mpsc::Receiver<Op>, id: &str) {
    let mut failed = false;
    while let Ok(first) = rx.recv() {
        // Take whatever else is queued: one write for a burst of chunks.
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut lines: Vec<u8> = Vec::new();
        let mut pending: Option<StoredEvent> = None;
        let mut metadata: Option<Box<Metadata>> = None;
        let mut close: Option<oneshot::Sender<()>> = None;
        let mut boundary = false;
        for op in batch {
            match op {
                Op::Append(event) => {
                    boundary |= matches!(
                        event,
                        StoredEvent::UserPrompt { .. }
                            | StoredEvent::Messages { .. }
                            | StoredEvent::Round { .. }
                            | StoredEvent::Context { .. }
                            | StoredEvent::TurnEnd { .. }
                    );
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
                Op::Close(done) => close = Some(done),
            }
        }
        if let Some(done) = pending {
            encode(&done, &mut lines);
        }
        if !lines.is_empty() {
            let written = open.history.write_all(&lines).and_then(|()| {
                if boundary {
                    // Turn boundaries reach the disk itself, not just the page cache.
                    open.history.sync_data()
                } else {
                    Ok(())
                }
            });
            match written {
                Ok(()) => failed = false,
                Err(err) if !failed => {
                    failed = true;
                    tracing::warn!(session = %id, %err, "cannot append to the session history");
                }
                Err(_) => {}
            }
        }
        if let Some(metadata) = metadata
            && let Err(err) = write_metadata(&open.dir, &metadata)
        {
            tracing::warn!(session = %id, %err, "cannot save the session metadata");
        }
        if let Some(done) = close {
            drop(open);
            let _ = done.send(());
            return;
        }
    }
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

/// Forwards to the client and records the replayable updates, in the order
/// the client gets them.
struct RecordingSink {
    inner: Arc<dyn ClientSink>,
    session_id: String,
    // std's Sender is Sync since 1.72, but a Mutex keeps this independent of that.
    tx: std::sync::Mutex<mpsc::Sender<Op>>,
}

impl ClientSink for RecordingSink {
    fn send(&self, session_id: &str, update: Update) {
        if session_id == self.session_id
            && let Some(stored) = StoredUpdate::from_update(&update)
        {
            let tx = self.tx.lock().unwrap_or_else(|poison| poison.into_inner());
            let _ = tx.send(Op::Append(StoredEvent::Update { update: stored }));
        }
        self.inner.send(session_id, update);
    }

    // Requests are not history: they pass straight through.
    fn request_permission(
        &self,
        session_id: &str,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::testing::RecordingClient;
    use crate::events::AgentEvent;
    use crate::model::Message;
    use crate::store::Store;
    use std::path::PathBuf;

    #[tokio::test]
    async fn what_the_sink_forwards_is_what_the_store_replays() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        let metadata = Metadata::new("s1", PathBuf::from("/p"), "prov", "model", "act");
        let open = store.create(&metadata).unwrap();
        let recorder = Recorder::start(open, metadata);
        let sink = recorder.wrap(Arc::new(RecordingClient::default()));
        recorder.record(StoredEvent::UserPrompt {
            at: now_rfc3339(),
            message: Message::user_text("hello"),
        });
        for piece in ["a", "b", "c"] {
            sink.send("s1", Update::Agent(AgentEvent::AgentText(piece.into())));
        }
        sink.send("s1", Update::Agent(AgentEvent::Usage { used: 1, size: 2 }));
        sink.send("s1", Update::CurrentMode("auto".into()));
        recorder.update(|m| m.title = Some("hello".into()));
        recorder.close().await;
        let (metadata, events) = store.read("s1").unwrap();
        assert_eq!(metadata.title.as_deref(), Some("hello"));
        let replay = crate::store::replay_from(&events);
        assert_eq!(
            replay,
            vec![
                Update::UserMessage(crate::model::Part::Text {
                    text: "hello".into()
                }),
                Update::Agent(AgentEvent::AgentText("abc".into())),
            ]
        );
        // Closed: the lock is free for another process.
        assert!(store.open("s1").is_ok());
    }
}
