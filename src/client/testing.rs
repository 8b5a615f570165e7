//! The one client fake for unit tests: records what it is sent and asked,
//! and answers from a small script.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{
    ClientError, ClientFuture, ClientSink, CreateTerminal, PermissionChoice, ReadTextFile,
    TerminalExit, TerminalId, TerminalOutput, Update, WriteTextFile,
};
use crate::events::ToolCallInfo;
use crate::model::SessionId;
use crate::util::lock;

/// Which updates a [`RecordingClient`] panics on.
pub type UpdateTest = dyn Fn(&Update) -> bool + Send + Sync;

/// An editor that answers every permission question with `permission`
/// (none: it cannot ask), keeps written files in memory, and whose
/// terminals print "hi\n" and exit 3 (or never exit, with `commands_hang`).
#[derive(Default)]
pub struct RecordingClient {
    pub permission: Option<PermissionChoice>,
    pub commands_hang: bool,
    /// Panics when shown an update this matches (a bug's stand-in).
    pub panics_on: Option<Box<UpdateTest>>,
    updates: Mutex<Vec<(SessionId, Update)>>,
    requests: Mutex<Vec<String>>,
    files: Mutex<HashMap<PathBuf, String>>,
}

impl RecordingClient {
    pub fn answering(permission: PermissionChoice) -> Self {
        Self {
            permission: Some(permission),
            ..Self::default()
        }
    }

    /// Panics when shown a thought containing `marker` (sent by a turn).
    pub fn panicking_on(marker: &str) -> Self {
        let marker = marker.to_string();
        Self::panicking_when(
            move |update| matches!(update, Update::Agent(crate::events::AgentEvent::Thought(text)) if text.contains(&marker)),
        )
    }

    /// Panics when shown an update `matches` holds for.
    pub fn panicking_when(matches: impl Fn(&Update) -> bool + Send + Sync + 'static) -> Self {
        Self {
            panics_on: Some(Box::new(matches)),
            ..Self::default()
        }
    }

    /// Its commands never exit (until killed or timed out).
    pub fn hanging() -> Self {
        Self {
            commands_hang: true,
            ..Self::default()
        }
    }

    pub fn with_file(self, path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        lock(&self.files).insert(path.into(), text.into());
        self
    }

    /// The port methods called, in order (`send` aside).
    pub fn requests(&self) -> Vec<String> {
        lock(&self.requests).clone()
    }

    /// How often `method` was called.
    pub fn asked(&self, method: &str) -> usize {
        lock(&self.requests).iter().filter(|m| *m == method).count()
    }

    pub fn updates(&self) -> Vec<(SessionId, Update)> {
        lock(&self.updates).clone()
    }

    /// Forget the updates seen so far.
    pub fn clear(&self) {
        lock(&self.updates).clear();
    }

    pub fn file(&self, path: &Path) -> Option<String> {
        lock(&self.files).get(path).cloned()
    }

    fn record(&self, method: &str) {
        lock(&self.requests).push(method.to_string());
    }
}

impl ClientSink for RecordingClient {
    fn send(&self, session_id: &SessionId, update: Update) {
        if let Some(matches) = &self.panics_on
            && matches(&update)
        {
            panic!("a bug: {update:?}");
        }
        lock(&self.updates).push((session_id.clone(), update));
    }

    fn room(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    fn request_permission(
        &self,
        _: &SessionId,
        _: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice> {
        self.record("request_permission");
        let answer = self
            .permission
            .ok_or_else(|| ClientError::Failed("this client cannot ask".into()));
        Box::pin(async move { answer })
    }

    fn read_text_file(&self, request: ReadTextFile) -> ClientFuture<'_, String> {
        self.record("read_text_file");
        let path = request.path;
        let text = self
            .file(&path)
            .ok_or_else(|| ClientError::NotFound(format!("{} not found", path.display())));
        Box::pin(async move { text })
    }

    fn write_text_file(&self, request: WriteTextFile) -> ClientFuture<'_, ()> {
        self.record("write_text_file");
        lock(&self.files).insert(request.path, request.content);
        Box::pin(async { Ok(()) })
    }

    fn create_terminal(&self, request: CreateTerminal) -> ClientFuture<'_, TerminalId> {
        self.record("create_terminal");
        Box::pin(async move {
            Ok(TerminalId {
                session_id: request.session_id,
                terminal_id: "t1".into(),
            })
        })
    }

    fn terminal_output(&self, _: &TerminalId) -> ClientFuture<'_, TerminalOutput> {
        self.record("terminal_output");
        Box::pin(async {
            Ok(TerminalOutput {
                output: "hi\n".into(),
                ..TerminalOutput::default()
            })
        })
    }

    fn wait_for_terminal_exit(&self, _: &TerminalId) -> ClientFuture<'_, TerminalExit> {
        self.record("wait_for_terminal_exit");
        Box::pin(async move {
            if self.commands_hang {
                std::future::pending::<()>().await;
            }
            Ok(TerminalExit {
                exit_code: Some(3),
                signal: None,
            })
        })
    }

    fn kill_terminal(&self, _: &TerminalId) -> ClientFuture<'_, ()> {
        self.record("kill_terminal");
        Box::pin(async { Ok(()) })
    }

    fn release_terminal(&self, _: &TerminalId) -> ClientFuture<'_, ()> {
        self.record("release_terminal");
        Box::pin(async { Ok(()) })
    }
}
