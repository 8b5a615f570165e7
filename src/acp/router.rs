//! Method name → handler. Parses params into the ACP schema types, turns
//! them into messages for the session actors, and owns the answer to every
//! request (a [`Responder`]). Runs on the reader task and never waits: all
//! waiting happens in small tasks that hold the responder.
//!
//! This file is the dispatch and the turn (`session/new`, `session/prompt`,
//! `session/cancel`, `session/close`); the rest is by concept beside it:
//! `capabilities` (`initialize`, sign-in), `reopen` (load, resume, fork),
//! `stored` (list, delete, status, archive), `options` (modes, config
//! options, title), `providers`, with `params` reading params and
//! `answers` turning results into answers.

use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::oneshot;

use super::mcp_relay::McpRelay;
use super::protocol::Protocol;
use super::translate;
use crate::client::{ClientAbilities, ClientSink, CursorUse, SelectOption};
use crate::events::StopReason;
use crate::mcp::Relay;
use crate::model::{ClientPrompt, SessionId};
use crate::session::manager::SessionManager;
use crate::session::{Delivery, OpenRequest, PromptSubmission, SessionError, SessionMsg};
use crate::transport::{Connection, Inbound, Incoming, Responder, RpcError};
use answers::with_models;
use params::{check_roots, session_servers};

mod answers;
mod capabilities;
mod options;
mod params;
mod providers;
mod reopen;
mod stored;

pub(in crate::acp) use answers::session_error;
pub use capabilities::{
    ClientInfo, Extras, initialize_response, initialize_response_with, sign_in_for,
};
pub use params::parse;
pub(super) use params::tolerate;
pub(in crate::acp) use reopen::{NewAnswer, Reopen};

/// A request's handler, its params still raw (see [`Router::dispatch`]).
type Handler = Box<dyn FnOnce(&mut Router, &str, Value, Responder)>;

pub struct Router {
    pub(in crate::acp) connection: Connection,
    pub(in crate::acp) sessions: SessionManager,
    pub(in crate::acp) client: Option<ClientInfo>,
    /// The version this connection speaks (shared with its client port).
    pub(in crate::acp) protocol: Protocol,
    /// Where a load's replay goes: the sessions' client port, unrecorded.
    pub(in crate::acp) replay: Arc<dyn ClientSink>,
    /// Done when the last load or resume has sent its replay and answer:
    /// the next one waits for it, so replays never interleave and each
    /// answer follows its own replay.
    last_reopen: Option<oneshot::Receiver<()>>,
    /// Carries the editor's `acp` MCP servers (unstable `mcp_over_acp`).
    mcp_relay: Arc<McpRelay>,
}

impl Router {
    pub fn new(connection: Connection, sessions: SessionManager) -> Self {
        Self {
            mcp_relay: McpRelay::new(connection.clone()),
            replay: Arc::new(connection.clone()),
            connection,
            sessions,
            client: None,
            protocol: Protocol::default(),
            last_reopen: None,
        }
    }

    /// The connection's version, shared with `client`, the sessions'
    /// client port (which also takes the replays of loads).
    pub fn with_protocol(mut self, protocol: Protocol, client: Arc<dyn ClientSink>) -> Self {
        self.protocol = protocol;
        self.replay = client;
        self
    }

    /// A router for a client whose `initialize` was already answered
    /// (see [`super::handshake`]).
    pub fn after_handshake(mut self, client: Option<ClientInfo>) -> Self {
        self.client = client;
        self
    }

    pub fn client(&self) -> Option<&ClientInfo> {
        self.client.as_ref()
    }

    /// One line's message (or batch of them; see [`Connection::receive`]).
    pub fn handle(&mut self, message: Incoming) {
        let connection = self.connection.clone();
        connection.receive(message, |inbound| match inbound {
            Inbound::Request {
                method,
                params,
                responder,
            } => self.request(&method, params, responder),
            Inbound::Notification { method, params } => self.notification(&method, params),
        });
    }

    /// The client is gone: stop every session, answering their turns.
    pub async fn shutdown(&mut self) {
        self.sessions.close_all().await;
        self.connection.fail_pending();
    }

    fn request(&mut self, method: &str, params: Value, responder: Responder) {
        tracing::debug!(%method, "request");
        let params = match tolerate(method, params) {
            Ok(params) => params,
            Err(err) => return responder.respond(Err(err)),
        };
        let handler = match method {
            "initialize" => Self::dispatch(Self::initialize),
            "authenticate" => Self::dispatch(Self::authenticate),
            "logout" => return responder.respond_with(Ok(acp::LogoutResponse::new())),
            "session/new" => Self::dispatch(Self::new_session),
            "session/prompt" => Self::dispatch(Self::prompt),
            "session/set_config_option" => Self::dispatch(Self::set_config_option),
            "session/set_mode" => Self::dispatch(Self::set_mode),
            "session/set_model" => Self::dispatch(Self::set_model),
            "session/close" => Self::dispatch(Self::close_session),
            "session/load" => Self::dispatch(Self::load_session),
            "session/resume" => Self::dispatch(Self::resume_session),
            "session/list" => Self::dispatch(Self::list_sessions),
            "session/delete" => Self::dispatch(Self::delete_session),
            // Unstable: served only when `[acp] unstable` names them.
            "session/set_title" if self.sessions.unstable().set_title => {
                Self::dispatch(Self::set_title)
            }
            "session/status" if self.sessions.unstable().status => {
                Self::dispatch(Self::session_status)
            }
            "session/fork" if self.sessions.unstable().fork => Self::dispatch(Self::fork_session),
            "providers/list" if self.sessions.unstable().providers => {
                Self::dispatch(Self::list_providers)
            }
            "providers/set" if self.sessions.unstable().providers => {
                Self::dispatch(Self::set_provider)
            }
            "providers/disable" if self.sessions.unstable().providers => {
                Self::dispatch(Self::disable_provider)
            }
            "auth/status" if self.sessions.unstable().auth_status => {
                Self::dispatch(Self::auth_status)
            }
            "session/archive" if self.sessions.unstable().archive => {
                Self::dispatch(Self::archive_session)
            }
            "session/unarchive" if self.sessions.unstable().archive => {
                Self::dispatch(Self::unarchive_session)
            }
            "session/options" if self.sessions.unstable().options => {
                Self::dispatch(Self::session_options)
            }
            _ => return responder.respond(Err(RpcError::method_not_found(method))),
        };
        handler(self, method, params, responder);
    }

    /// The one way into a request handler: its params parsed into the
    /// handler's type, or an answer with the error naming the offending field.
    fn dispatch<Req: DeserializeOwned + 'static>(
        handler: fn(&mut Self, Req, Responder),
    ) -> Handler {
        Box::new(
            move |router, method, params, responder| match parse::<Req>(method, params) {
                Ok(request) => handler(router, request, responder),
                Err(err) => responder.respond(Err(err)),
            },
        )
    }

    fn notification(&mut self, method: &str, params: Value) {
        tracing::debug!(%method, "notification");
        match method {
            "session/cancel" => on_notification(method, params, |cancel| self.cancel_turn(cancel)),
            // Fires the token the request's responder carries.
            "$/cancel_request" => {
                on_notification(method, params, |cancel: acp::CancelRequestNotification| {
                    self.connection.cancel_request(&cancel.request_id)
                })
            }
            // The editor's MCP server speaking for a request of ours.
            "mcp/message" if self.sessions.unstable().mcp_over_acp => {
                on_notification(method, params, |message: acp::MessageMcpNotification| {
                    self.mcp_relay.deliver(message)
                })
            }
            // Unknown notifications are ignored, as JSON-RPC asks.
            _ => tracing::debug!(%method, "ignored notification"),
        }
    }

    pub(in crate::acp) fn cancel_turn(&mut self, cancel: acp::CancelNotification) {
        let id = SessionId::from(cancel.session_id.0.clone());
        match self.sessions.get(&id) {
            Some(session) => {
                session.send(SessionMsg::Cancel);
            }
            None => tracing::warn!(session = %cancel.session_id, "cancel for an unknown session"),
        }
    }

    /// A request's `systemPrompt` (stable since ACP 1.20: every client may send one).
    pub(in crate::acp) fn client_prompt(
        &self,
        method: &str,
        prompt: Option<acp::SystemPrompt>,
    ) -> Result<Option<ClientPrompt>, RpcError> {
        super::system_prompt::read(method, prompt)
    }

    /// The error for a request to a session that is not open here.
    pub(in crate::acp) fn not_running(&self, id: &SessionId) -> RpcError {
        if self.sessions.stopped(id) {
            RpcError::session_stopped(id.as_str())
        } else {
            RpcError::session_not_found(id.as_str())
        }
    }

    fn new_session(&mut self, request: acp::NewSessionRequest, responder: Responder) {
        self.open_new(request, v1_new_answer, responder);
    }

    /// `session/new` in either version: `answer` writes the answer from
    /// the new session's id and options.
    pub(in crate::acp) fn open_new(
        &mut self,
        request: acp::NewSessionRequest,
        answer: NewAnswer,
        responder: Responder,
    ) {
        let relay = self.acp_relay();
        let checked = session_servers(
            "session/new",
            &request.cwd,
            &request.mcp_servers,
            relay.as_ref(),
        )
        .and_then(|servers| Ok((servers, check_roots(&request.additional_directories)?)))
        .and_then(|checked| {
            Ok((
                checked,
                self.client_prompt("session/new", request.system_prompt)?,
                self.initial_options("session/new", &request.config_options)?,
            ))
        });
        let ((mcp_servers, roots), client_prompt, initial_options) = match checked {
            Ok(checked) => checked,
            Err(err) => return responder.respond(Err(err)),
        };
        let delivery = self.delivery();
        let session = self.sessions.create(OpenRequest {
            cwd: request.cwd,
            additional_directories: roots,
            client: self.abilities(),
            mcp_servers,
            client_prompt,
            initial_options,
        });
        let id = session.id.clone();
        let (reply, options) = oneshot::channel();
        session.send(SessionMsg::Options { reply });
        let tx = session.tx.clone();
        let extras = self.extras();
        tokio::spawn(async move {
            let Ok(options) = options.await else {
                return responder
                    .respond(Err(RpcError::internal("the new session stopped at once")));
            };
            match answer(id.as_str(), &options, extras) {
                Ok(value) => responder.respond(Ok(value)),
                Err(err) => responder.respond(Err(RpcError::internal(err.to_string()))),
            }
            // Only now may the session speak: its updates must follow this answer.
            let _ = tx.send(SessionMsg::Started { delivery });
        });
    }

    /// When the client takes updates, as its name tells.
    pub(in crate::acp) fn delivery(&self) -> Delivery {
        if self.client.as_ref().is_some_and(ClientInfo::interleaves) {
            Delivery::Interleaved
        } else {
            Delivery::InTurns
        }
    }

    /// What serves `acp` MCP servers, when `[acp] unstable` names `mcp_over_acp`.
    pub(in crate::acp) fn acp_relay(&self) -> Option<Relay> {
        self.sessions
            .unstable()
            .mcp_over_acp
            .then(|| self.mcp_relay.relay())
    }

    pub(in crate::acp) fn abilities(&self) -> ClientAbilities {
        self.client
            .as_ref()
            .map(|info| ClientAbilities {
                read_text_file: info.read_text_file,
                write_text_file: info.write_text_file,
                terminal: info.terminal,
                notices: info.notices,
                compaction: info.compaction,
                ask_user: info.elicitation,
                subagents: info.subagents || self.sessions.unstable().subagents,
                plans: info.plans,
                cursors: (info.cursors && self.sessions.unstable().cursors).then_some(CursorUse {
                    fork: self.sessions.unstable().fork,
                }),
                prompt_suggestions: info.prompt_suggestions
                    && self.sessions.unstable().prompt_suggestions,
            })
            .unwrap_or_default()
    }

    fn prompt(&mut self, request: acp::PromptRequest, responder: Responder) {
        let id = SessionId::from(request.session_id.0.clone());
        let Some(session) = self.sessions.get(&id) else {
            return responder.respond(Err(self.not_running(&id)));
        };
        let content = match translate::prompt_parts(request.prompt) {
            Ok(content) => content,
            Err(detail) => return responder.respond(Err(RpcError::invalid_params(detail))),
        };
        // The client's `$/cancel_request` for this prompt cancels the turn.
        let request_cancel = responder.cancellation().child_token();
        let with_usage = self.extras().usage;
        let (reply, answer) = oneshot::channel();
        session.send(SessionMsg::Prompt(PromptSubmission::answered_at_end(
            content,
            request_cancel.clone(),
            reply,
        )));
        tokio::spawn(async move {
            let result = match answer.await {
                Ok(result) => result,
                Err(_) => Err(SessionError::Crashed(
                    "the session stopped before answering".into(),
                )),
            };
            let answer = match result {
                Ok(end) if end.stop == StopReason::Cancelled && request_cancel.is_cancelled() => {
                    Err(RpcError::request_cancelled())
                }
                Ok(end) => Ok(acp::PromptResponse::new(translate::stop_reason(end.stop))
                    .usage(end.usage.filter(|_| with_usage).map(translate::turn_usage))),
                Err(err) => Err(session_error(err)),
            };
            responder.respond_with(answer);
        });
    }

    pub(in crate::acp) fn close_session(
        &mut self,
        request: acp::CloseSessionRequest,
        responder: Responder,
    ) {
        let id = SessionId::from(request.session_id.0.clone());
        let Some(session) = self.sessions.remove(&id) else {
            return responder.respond(Err(self.not_running(&id)));
        };
        tokio::spawn(async move {
            session.close().await;
            responder.respond_with(Ok(acp::CloseSessionResponse::new()));
        });
    }
}

/// The v1 answer to `session/new`: modes beside the config options, and
/// the old session-model extension's `models` (for clients that take it).
fn v1_new_answer(id: &str, options: &[SelectOption], extras: Extras) -> serde_json::Result<Value> {
    let response = acp::NewSessionResponse::new(id.to_string())
        .modes(translate::mode_state(options))
        .config_options(translate::config_options(options));
    with_models(response, options, extras)
}

/// A notification's params parsed for `handler`; a bad one has no one to
/// answer, so it is logged.
fn on_notification<N: DeserializeOwned>(method: &str, params: Value, handler: impl FnOnce(N)) {
    match parse::<N>(method, params) {
        Ok(notification) => handler(notification),
        Err(err) => tracing::warn!(%method, message = %err.message, "bad notification"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientSink;
    use crate::config::Config;
    use crate::providers::Providers;
    use crate::session::Defaults;
    use crate::transport::jsonrpc::parse_line;

    fn router() -> (Router, crate::transport::Outgoing) {
        let (connection, lines) = Connection::new();
        let config = Config::builtin_default();
        let sink: Arc<dyn ClientSink> = Arc::new(connection.clone());
        let manager = SessionManager::new(
            Arc::new(Providers::new(config.providers.clone())),
            sink,
            Defaults::from_config(&config).unwrap(),
        );
        (Router::new(connection, manager), lines)
    }

    fn feed(router: &mut Router, line: &str) {
        if let Some(message) = parse_line(line.as_bytes()) {
            router.handle(message);
        }
    }

    async fn next(lines: &mut crate::transport::Outgoing) -> Value {
        let line = tokio::time::timeout(std::time::Duration::from_secs(5), lines.recv())
            .await
            .expect("an answer")
            .expect("the connection is open");
        serde_json::from_slice(&line).unwrap()
    }

    #[tokio::test]
    async fn every_request_gets_one_answer_with_the_right_code() {
        let (mut router, mut lines) = router();
        let cwd = std::env::temp_dir();
        let table = [
            (r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#.to_string(), None),
            ("{oops".to_string(), Some(-32700)),
            (r#"{"jsonrpc":"2.0","id":2,"method":"no/such"}"#.to_string(), Some(-32601)),
            (r#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"x","mcpServers":[]}}"#.to_string(), Some(-32602)),
            (r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}"#.to_string(), Some(-32002)),
            (r#"{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"nope"}}"#.to_string(), Some(-32002)),
            (format!(r#"{{"jsonrpc":"2.0","id":6,"method":"session/new","params":{{"cwd":{},"mcpServers":[]}}}}"#, serde_json::to_string(&cwd).unwrap()), None),
        ];
        for (line, code) in table {
            feed(&mut router, &line);
            let answer = next(&mut lines).await;
            match code {
                Some(code) => assert_eq!(answer["error"]["code"], code, "{line} → {answer}"),
                None => assert!(answer.get("result").is_some(), "{line} → {answer}"),
            }
        }
        // Notifications, known or not, are never answered.
        feed(
            &mut router,
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}"#,
        );
        feed(&mut router, r#"{"jsonrpc":"2.0","method":"whatever"}"#);
        feed(&mut router, r#"{"jsonrpc":"2.0","id":7,"method":"logout"}"#);
        loop {
            let message = next(&mut lines).await;
            if message.get("method").is_some() {
                continue; // a session update (e.g. a model list, if a local Ollama answers)
            }
            assert_eq!(
                message["id"], 7,
                "only the logout was owed an answer: {message}"
            );
            break;
        }
    }

    #[tokio::test]
    async fn client_answers_reach_the_waiting_request() {
        let (router, mut lines) = router();
        let connection = router.connection.clone();
        let mut router = router;
        let asking = tokio::spawn(async move {
            connection
                .request(
                    "session/request_permission",
                    &serde_json::json!({"sessionId": "s"}),
                )
                .await
        });
        let sent = next(&mut lines).await;
        let id = sent["id"].clone();
        feed(
            &mut router,
            &serde_json::json!({"jsonrpc":"2.0","id":id,"result":{"outcome":{"outcome":"cancelled"}}}).to_string(),
        );
        let answer = asking.await.unwrap().unwrap();
        assert_eq!(answer["outcome"]["outcome"], "cancelled");
    }
}
