//! Sessions that outlive their connection (`crucible-agent serve`): which
//! connection each session is attached to now, and a client port per
//! session that sends its updates and questions to that connection's
//! client, whichever it is at the moment.
//!
//! A connection that goes leaves its sessions orphaned: their turns run
//! on (a question for the user counts as cancelled, updates are saved but
//! shown to nobody) and an orphan closes itself once idle. Any connection
//! may attach a session again (`session/load`, `session/resume`), taking
//! it over from another one, which then gets an error for it. A question
//! for the user moves with its session: asked of the connection that has
//! it when it moves (the old one's request is withdrawn).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::Notify;

use crate::client::{
    Answer, ClientError, ClientFuture, ClientSink, CreateTerminal, PermissionChoice, Question,
    ReadTextFile, TerminalExit, TerminalId, TerminalOutput, Update, WriteTextFile,
};
use crate::events::ToolCallInfo;
use crate::model::SessionId;
use crate::util::lock;

/// A connection's key among the process's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner(u64);

/// Where a session stands among the connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attachment {
    /// Shown to this connection's client.
    To(Owner),
    /// Its connection went; it closes itself once idle.
    Orphaned,
}

/// Every connection's client, and every session's attachment.
#[derive(Default)]
pub struct Attachments {
    board: Mutex<Board>,
    /// Some session's attachment changed (a takeover, a connection gone).
    moved: Notify,
}

#[derive(Default)]
struct Board {
    clients: HashMap<Owner, Arc<dyn ClientSink>>,
    sessions: HashMap<SessionId, Attachment>,
    next_owner: u64,
}

impl Attachments {
    /// A new connection, whose sessions talk to `client`.
    pub fn connect(&self, client: Arc<dyn ClientSink>) -> Owner {
        let mut board = lock(&self.board);
        board.next_owner += 1;
        let owner = Owner(board.next_owner);
        board.clients.insert(owner, client);
        owner
    }

    /// The connection went: its sessions are orphaned (returned, so each
    /// can be told to close once idle).
    pub fn disconnect(&self, owner: Owner) -> Vec<SessionId> {
        let mut board = lock(&self.board);
        board.clients.remove(&owner);
        let mut orphaned = Vec::new();
        for (id, attachment) in &mut board.sessions {
            if *attachment == Attachment::To(owner) {
                *attachment = Attachment::Orphaned;
                orphaned.push(id.clone());
            }
        }
        drop(board);
        self.moved.notify_waiters();
        orphaned
    }

    /// A session newly open for `owner`.
    pub fn attach_new(&self, id: &SessionId, owner: Owner) {
        lock(&self.board)
            .sessions
            .insert(id.clone(), Attachment::To(owner));
    }

    /// An open session attached to `owner` (taken over from another
    /// connection, or adopted as an orphan). False when it is no longer
    /// open here (it closed itself): it must be opened from the store.
    pub fn take_over(&self, id: &SessionId, owner: Owner) -> bool {
        let moved = match lock(&self.board).sessions.get_mut(id) {
            Some(attachment) => {
                *attachment = Attachment::To(owner);
                true
            }
            None => false,
        };
        self.moved.notify_waiters();
        moved
    }

    pub fn attachment(&self, id: &SessionId) -> Option<Attachment> {
        lock(&self.board).sessions.get(id).copied()
    }

    /// The sessions attached to `owner` now.
    pub fn count(&self, owner: Owner) -> usize {
        let board = lock(&self.board);
        let mine = Attachment::To(owner);
        board.sessions.values().filter(|a| **a == mine).count()
    }

    /// The session closed (or is closing): it is attached nowhere.
    pub fn forget(&self, id: &SessionId) {
        lock(&self.board).sessions.remove(id);
    }

    /// For an idle session's actor: true (and the session forgotten, so
    /// that no connection takes it over now) when it is an orphan that
    /// should close. Atomic with [`Self::take_over`].
    pub fn release_if_orphaned(&self, id: &SessionId) -> bool {
        let mut board = lock(&self.board);
        if board.sessions.get(id) == Some(&Attachment::Orphaned) {
            board.sessions.remove(id);
            true
        } else {
            false
        }
    }

    /// The client port of session `id`.
    pub fn port(self: &Arc<Self>, id: &SessionId) -> Arc<dyn ClientSink> {
        Arc::new(SessionPort {
            attachments: Arc::clone(self),
            session: id.clone(),
        })
    }

    /// `work`'s outcome, or None once session `id` is attached otherwise
    /// than `now` (its client changed before `work` was done).
    async fn unless_moved<T>(
        &self,
        id: &SessionId,
        now: Option<Attachment>,
        work: impl Future<Output = T>,
    ) -> Option<T> {
        tokio::pin!(work);
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if self.attachment(id) != now {
                return None;
            }
            tokio::select! {
                outcome = &mut work => return Some(outcome),
                () = moved => {}
            }
        }
    }

    /// The client of the connection `id` is attached to; None for an orphan.
    fn client_of(&self, id: &SessionId) -> Option<Arc<dyn ClientSink>> {
        let board = lock(&self.board);
        match board.sessions.get(id)? {
            Attachment::To(owner) => board.clients.get(owner).cloned(),
            Attachment::Orphaned => None,
        }
    }
}

/// One session's way to its client, through its attachment: what it sends
/// while orphaned is shown to nobody (it is saved all the same), and what
/// it asks is answered as a client that went away would answer.
struct SessionPort {
    attachments: Arc<Attachments>,
    session: SessionId,
}

impl SessionPort {
    fn client(&self) -> Result<Arc<dyn ClientSink>, ClientError> {
        self.attachments
            .client_of(&self.session)
            .ok_or(ClientError::Disconnected)
    }

    /// A question for the user: `ask` of the attached client, asked again
    /// of the new one when the session moves before the answer; `gone`
    /// when no client can answer (none is attached, or it went).
    async fn ask_following<T>(
        &self,
        gone: impl Fn() -> T,
        ask: impl Fn(Arc<dyn ClientSink>) -> ClientFuture<'static, T>,
    ) -> Result<T, ClientError> {
        loop {
            let now = self.attachments.attachment(&self.session);
            let Ok(client) = self.client() else {
                return Ok(gone());
            };
            match (self.attachments)
                .unless_moved(&self.session, now, ask(client))
                .await
            {
                None => {}
                Some(Err(ClientError::Disconnected)) => return Ok(gone()),
                Some(answer) => return answer,
            }
        }
    }

    /// `ask` of the attached client, or the error an absent one gives.
    fn forward<'a, T: Send + 'a>(
        &'a self,
        ask: impl FnOnce(Arc<dyn ClientSink>) -> ClientFuture<'static, T> + Send + 'a,
    ) -> ClientFuture<'a, T> {
        let client = self.client();
        Box::pin(async move { ask(client?).await })
    }
}

impl ClientSink for SessionPort {
    fn send(&self, session_id: &SessionId, update: Update) {
        match self.client() {
            Ok(client) => client.send(session_id, update),
            Err(_) => {
                tracing::trace!(session = %self.session, "orphaned: an update shown to nobody");
            }
        }
    }

    fn room(&self) -> BoxFuture<'_, ()> {
        let client = self.client().ok();
        Box::pin(async move {
            if let Some(client) = client {
                client.room().await;
            }
        })
    }

    /// A client that is gone (or goes while asked) counts as cancelled; a
    /// session taken over while asking asks its new client.
    fn request_permission(
        &self,
        session_id: &SessionId,
        call: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice> {
        let (session_id, call) = (session_id.clone(), call.clone());
        Box::pin(self.ask_following(
            || PermissionChoice::Cancelled,
            move |client| {
                let (session_id, call) = (session_id.clone(), call.clone());
                Box::pin(async move { client.request_permission(&session_id, &call).await })
            },
        ))
    }

    fn read_text_file(&self, request: ReadTextFile) -> ClientFuture<'_, String> {
        self.forward(|client| Box::pin(async move { client.read_text_file(request).await }))
    }

    fn write_text_file(&self, request: WriteTextFile) -> ClientFuture<'_, ()> {
        self.forward(|client| Box::pin(async move { client.write_text_file(request).await }))
    }

    fn create_terminal(&self, request: CreateTerminal) -> ClientFuture<'_, TerminalId> {
        self.forward(|client| Box::pin(async move { client.create_terminal(request).await }))
    }

    fn terminal_output(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalOutput> {
        let terminal = terminal.clone();
        self.forward(|client| Box::pin(async move { client.terminal_output(&terminal).await }))
    }

    fn wait_for_terminal_exit(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalExit> {
        let terminal = terminal.clone();
        self.forward(|client| {
            Box::pin(async move { client.wait_for_terminal_exit(&terminal).await })
        })
    }

    fn kill_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        let terminal = terminal.clone();
        self.forward(|client| Box::pin(async move { client.kill_terminal(&terminal).await }))
    }

    fn release_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        let terminal = terminal.clone();
        self.forward(|client| Box::pin(async move { client.release_terminal(&terminal).await }))
    }

    fn session_ended(&self, session_id: &SessionId) {
        if let Ok(client) = self.client() {
            client.session_ended(session_id);
        }
    }

    /// As [`Self::request_permission`]: it follows its session.
    fn ask_user(&self, question: Question) -> ClientFuture<'_, Answer> {
        Box::pin(self.ask_following(
            || Answer::Cancelled,
            move |client| {
                let question = question.clone();
                Box::pin(async move { client.ask_user(question).await })
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::testing::RecordingClient;
    use crate::events::AgentEvent;

    fn text(text: &str) -> Update {
        Update::Agent(AgentEvent::AgentText(text.into()))
    }

    fn texts(client: &RecordingClient) -> Vec<String> {
        (client.updates().into_iter())
            .filter_map(|(_, update)| match update {
                Update::Agent(AgentEvent::AgentText(text)) => Some(text),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_session_speaks_to_the_connection_it_is_attached_to_now() {
        let attachments = Arc::new(Attachments::default());
        let (first, second) = (
            Arc::new(RecordingClient::default()),
            Arc::new(RecordingClient::default()),
        );
        let a = attachments.connect(first.clone());
        let b = attachments.connect(second.clone());
        let id = SessionId::random();
        attachments.attach_new(&id, a);
        let port = attachments.port(&id);
        port.send(&id, text("one"));
        assert!(attachments.take_over(&id, b));
        assert_eq!(attachments.attachment(&id), Some(Attachment::To(b)));
        port.send(&id, text("two"));
        assert_eq!(texts(&first), ["one"]);
        assert_eq!(texts(&second), ["two"]);
        assert_eq!((attachments.count(a), attachments.count(b)), (0, 1));
    }

    #[tokio::test]
    async fn an_orphan_asks_nobody_and_closes_only_while_still_orphaned() {
        let attachments = Arc::new(Attachments::default());
        let client = Arc::new(RecordingClient::answering(PermissionChoice::AllowOnce));
        let owner = attachments.connect(client.clone());
        let id = SessionId::random();
        attachments.attach_new(&id, owner);
        assert_eq!(attachments.disconnect(owner), std::slice::from_ref(&id));
        let port = attachments.port(&id);
        port.send(&id, text("unseen"));
        assert!(texts(&client).is_empty());
        let call = ToolCallInfo {
            id: "call-1".into(),
            name: "write_file".into(),
            title: "Write a.txt".into(),
            kind: crate::events::ToolKind::Edit,
            raw_input: serde_json::Value::Null,
            locations: Vec::new(),
        };
        assert_eq!(
            port.request_permission(&id, &call).await,
            Ok(PermissionChoice::Cancelled)
        );
        let read = ReadTextFile {
            session_id: id.clone(),
            path: "/x".into(),
            line: None,
            limit: None,
        };
        assert_eq!(
            port.read_text_file(read).await,
            Err(ClientError::Disconnected)
        );
        // Adopted by a new connection, it is no orphan: it stays.
        let next = attachments.connect(Arc::new(RecordingClient::default()));
        assert!(attachments.take_over(&id, next));
        assert!(!attachments.release_if_orphaned(&id));
        attachments.disconnect(next);
        assert!(attachments.release_if_orphaned(&id));
        // Released, it can no longer be taken over: it is opened anew.
        assert!(!attachments.take_over(&id, next));
    }
}
