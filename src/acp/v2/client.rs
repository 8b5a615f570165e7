//! The client port for a connection of either version: v1 as it always
//! was (`impl ClientSink for Connection`), v2 once `initialize` settled it:
//! updates through each session's v2 translation ([`SessionUpdates`]),
//! permission questions with a title and a subject, bracketed by
//! `state_update` `requires_action` … `running`. v2 has no client `fs` or
//! `terminal`, and a v2 client is never offered them ([`ClientInfo`] from
//! a v2 `initialize` says so), so those calls are refused here.
//!
//! [`ClientInfo`]: crate::acp::router::ClientInfo

use std::collections::HashMap;
use std::sync::Mutex;

use agent_client_protocol_schema::v1::CLIENT_METHOD_NAMES as V1_METHODS;
use agent_client_protocol_schema::v2;

use super::permission;
use super::updates::SessionUpdates;
use crate::acp::protocol::Protocol;
use crate::client::{
    Answer, ClientError, ClientFuture, ClientSink, CreateTerminal, PermissionChoice, Question,
    ReadTextFile, SessionState, TerminalExit, TerminalId, TerminalOutput, Update, WriteTextFile,
};
use crate::events::ToolCallInfo;
use crate::model::SessionId;
use crate::transport::Connection;
use crate::util::lock;

/// The sessions' client on a connection whose version `initialize` decides.
pub struct NegotiatedClient {
    connection: Connection,
    protocol: Protocol,
    /// Each v2 session's translation state, by session id.
    sessions: Mutex<HashMap<SessionId, SessionUpdates>>,
}

impl NegotiatedClient {
    pub fn new(connection: Connection, protocol: Protocol) -> Self {
        Self {
            connection,
            protocol,
            sessions: Mutex::default(),
        }
    }

    fn send_v2(&self, session_id: &SessionId, update: &Update) {
        let updates = lock(&self.sessions)
            .entry(session_id.clone())
            .or_default()
            .translate(update);
        for update in updates {
            let notification = v2::UpdateSessionNotification::new(session_id.to_string(), update);
            self.connection
                .notify(v2::CLIENT_METHOD_NAMES.session_update, &notification);
        }
    }

    fn ask_permission_v2(
        &self,
        session_id: &SessionId,
        call: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice> {
        let request = permission::request(session_id, call);
        let session_id = session_id.clone();
        Box::pin(async move {
            self.send_v2(&session_id, &Update::State(SessionState::RequiresAction));
            let answer = self
                .connection
                .request(v2::CLIENT_METHOD_NAMES.session_request_permission, &request)
                .await;
            self.send_v2(&session_id, &Update::State(SessionState::Running));
            let answer = answer.map_err(|err| ClientError::Failed(err.to_string()))?;
            let response: v2::RequestPermissionResponse =
                serde_json::from_value(answer).map_err(|err| {
                    ClientError::Failed(format!(
                        "its answer to {} could not be read: {err}",
                        v2::CLIENT_METHOD_NAMES.session_request_permission
                    ))
                })?;
            permission::choice(response)
        })
    }
}

/// What a v2 client is never asked (it was never offered them).
fn not_in_v2<T: Send + 'static>(what: &str) -> ClientFuture<'static, T> {
    let message = format!("ACP v2 has no client {what}");
    Box::pin(async move { Err(ClientError::Failed(message)) })
}

impl ClientSink for NegotiatedClient {
    fn send(&self, session_id: &SessionId, update: Update) {
        if self.protocol.is_v2() {
            self.send_v2(session_id, &update);
        } else {
            self.connection.send(session_id, update);
        }
    }

    fn room(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(self.connection.room())
    }

    /// Its translation state goes; a resume starts a fresh one, which
    /// gives a replay the same ids.
    fn session_ended(&self, session_id: &SessionId) {
        lock(&self.sessions).remove(session_id);
    }

    fn ask_user(&self, question: Question) -> ClientFuture<'_, Answer> {
        // `elicitation/create` kept its form shape in v2; offered only to
        // clients whose `initialize` has `elicitation.form`.
        ClientSink::ask_user(&self.connection, question)
    }

    fn request_permission(
        &self,
        session_id: &SessionId,
        call: &ToolCallInfo,
    ) -> ClientFuture<'_, PermissionChoice> {
        if self.protocol.is_v2() {
            self.ask_permission_v2(session_id, call)
        } else {
            self.connection.request_permission(session_id, call)
        }
    }

    fn read_text_file(&self, request: ReadTextFile) -> ClientFuture<'_, String> {
        if self.protocol.is_v2() {
            return not_in_v2(V1_METHODS.fs_read_text_file);
        }
        self.connection.read_text_file(request)
    }

    fn write_text_file(&self, request: WriteTextFile) -> ClientFuture<'_, ()> {
        if self.protocol.is_v2() {
            return not_in_v2(V1_METHODS.fs_write_text_file);
        }
        self.connection.write_text_file(request)
    }

    fn create_terminal(&self, request: CreateTerminal) -> ClientFuture<'_, TerminalId> {
        if self.protocol.is_v2() {
            return not_in_v2(V1_METHODS.terminal_create);
        }
        self.connection.create_terminal(request)
    }

    fn terminal_output(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalOutput> {
        if self.protocol.is_v2() {
            return not_in_v2(V1_METHODS.terminal_output);
        }
        self.connection.terminal_output(terminal)
    }

    fn wait_for_terminal_exit(&self, terminal: &TerminalId) -> ClientFuture<'_, TerminalExit> {
        if self.protocol.is_v2() {
            return not_in_v2(V1_METHODS.terminal_wait_for_exit);
        }
        self.connection.wait_for_terminal_exit(terminal)
    }

    fn kill_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        if self.protocol.is_v2() {
            return not_in_v2(V1_METHODS.terminal_kill);
        }
        self.connection.kill_terminal(terminal)
    }

    fn release_terminal(&self, terminal: &TerminalId) -> ClientFuture<'_, ()> {
        if self.protocol.is_v2() {
            return not_in_v2(V1_METHODS.terminal_release);
        }
        self.connection.release_terminal(terminal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::protocol::Version;
    use crate::events::{AgentEvent, StopReason, ToolKind};
    use serde_json::Value;

    async fn next(lines: &mut crate::transport::Outgoing) -> Value {
        serde_json::from_slice(&lines.recv().await.unwrap()).unwrap()
    }

    #[tokio::test]
    async fn a_v1_connection_is_spoken_to_as_before_and_a_v2_one_in_v2() {
        let (connection, mut lines) = Connection::new();
        let protocol = Protocol::default();
        let client = NegotiatedClient::new(connection, protocol.clone());
        client.send(
            &"s".into(),
            Update::Agent(AgentEvent::AgentText("hi".into())),
        );
        let v1 = next(&mut lines).await;
        assert_eq!(
            v1["params"]["update"]["sessionUpdate"],
            "agent_message_chunk"
        );
        assert!(v1["params"]["update"].get("messageId").is_none(), "{v1}");
        protocol.set(Version::V2);
        client.send(
            &"s".into(),
            Update::Agent(AgentEvent::AgentText("hi".into())),
        );
        let v2 = next(&mut lines).await;
        assert_eq!(v2["method"], "session/update");
        assert_eq!(
            v2["params"]["update"]["sessionUpdate"],
            "agent_message_chunk"
        );
        assert!(v2["params"]["update"]["messageId"].is_string(), "{v2}");
        client.send(
            &"s".into(),
            Update::State(SessionState::Idle(StopReason::EndTurn)),
        );
        let idle = next(&mut lines).await;
        assert_eq!(idle["params"]["update"]["sessionUpdate"], "state_update");
        assert_eq!(idle["params"]["update"]["state"], "idle");
        assert_eq!(idle["params"]["update"]["stopReason"], "end_turn");
    }

    #[tokio::test]
    async fn an_ended_session_leaves_no_translation_state_behind() {
        let (connection, mut lines) = Connection::new();
        let client = NegotiatedClient::new(connection, Protocol::new(Version::V2));
        for session in ["s1", "s2"] {
            client.send(
                &session.into(),
                Update::Agent(AgentEvent::AgentText("hi".into())),
            );
            next(&mut lines).await;
        }
        assert_eq!(lock(&client.sessions).len(), 2);
        client.session_ended(&"s1".into());
        let kept: Vec<SessionId> = lock(&client.sessions).keys().cloned().collect();
        assert_eq!(kept, ["s2"]);
    }

    #[tokio::test]
    async fn a_v2_permission_question_is_bracketed_by_requires_action_and_running() {
        let (connection, mut lines) = Connection::new();
        let client = std::sync::Arc::new(NegotiatedClient::new(
            connection.clone(),
            Protocol::new(Version::V2),
        ));
        let call = ToolCallInfo {
            id: "c1".into(),
            name: "shell".into(),
            title: "Run ls".into(),
            kind: ToolKind::Execute,
            raw_input: Value::Null,
            locations: Vec::new(),
        };
        let asking = tokio::spawn({
            let client = client.clone();
            async move { client.request_permission(&"s".into(), &call).await }
        });
        let state = next(&mut lines).await;
        assert_eq!(state["params"]["update"]["state"], "requires_action");
        let question = next(&mut lines).await;
        assert_eq!(question["method"], "session/request_permission");
        assert_eq!(question["params"]["title"], "Allow Run ls?");
        let id = serde_json::from_value(question["id"].clone()).unwrap();
        connection.resolve(
            &id,
            Ok(serde_json::json!({"outcome": {"outcome": "cancelled"}})),
        );
        let state = next(&mut lines).await;
        assert_eq!(state["params"]["update"]["state"], "running");
        assert_eq!(asking.await.unwrap(), Ok(PermissionChoice::Cancelled));
    }
}
