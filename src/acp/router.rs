//! The router: each request read by its version's codec ([`super::v1`],
//! [`super::v2::requests`]) into the neutral [`Request`], then served by
//! one handler per method that knows nothing of versions, answering
//! through the request's [`Reply`]. Runs on the reader task and never
//! waits: all waiting happens in small tasks that hold the reply.
//!
//! This file is the dispatch and the turn (`session/new`, `session/prompt`,
//! `session/cancel`, `session/close`); the rest is by concept beside it:
//! `capabilities` (`initialize`, sign-in), `reopen` (load, resume, fork),
//! `stored` (list, delete, status, archive), `options` (modes, config
//! options, title), `providers`, with `params` checking params and
//! `answers` turning the sessions' errors into answers.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol_schema::v1::{self as acp, AGENT_METHOD_NAMES as NAMES};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::oneshot;

use super::mcp_relay::McpRelay;
use super::protocol::Protocol;
use super::request::{Opened, Place, PromptReply, Reply, Request, SessionId};
use crate::client::{ClientAbilities, ClientSink, CursorUse};
use crate::events::StopReason;
use crate::mcp::Relay;
use crate::model::Part;
use crate::session::manager::{Absent, SessionManager};
use crate::session::{
    Delivery, InsertReply, OpenRequest, PromptAnswer, PromptSubmission, SessionError, SessionMsg,
    TurnEnd, WhenBusy,
};
use crate::transport::{Connection, RpcError};
pub use params::AllowedRoots;
use params::{check_roots, session_servers};

mod answers;
mod capabilities;
mod options;
mod params;
mod providers;
mod reopen;
mod stored;

pub use super::methods::parse;
pub(in crate::acp) use answers::{session_error, with_models};
pub use capabilities::{
    ClientInfo, Extras, initialize_response, initialize_response_with, sign_in_for,
};
pub(in crate::acp) use params::tolerate;

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
    /// Where this connection's sessions may work (`[serve] roots`).
    roots: AllowedRoots,
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
            roots: AllowedRoots::Anywhere,
        }
    }

    /// Sessions only in these directories (a remote client's, `serve`).
    pub fn within(mut self, roots: AllowedRoots) -> Self {
        self.roots = roots;
        self
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

    /// The client is gone: its questions fail, and its sessions stop,
    /// answering their turns (on stdio), or run on to close once idle (a
    /// connection of `serve`: another may load them).
    pub async fn shutdown(&mut self) {
        self.sessions.client_gone().await;
        self.connection.fail_pending();
    }

    /// One handler per request, whatever version it came in.
    pub(in crate::acp) fn serve(&mut self, request: Request) {
        match request {
            Request::SignIn { method, reply } => self.sign_in(&method, reply),
            Request::SignOut(reply) => reply.send(Ok(())),
            Request::AuthStatus(reply) => self.auth_status(reply),
            Request::NewSession { place, reply } => self.open_new(place, reply),
            Request::Reopen {
                how,
                session,
                at,
                place,
                reply,
            } => self.reopen(how, session, at, place, reply),
            Request::Prompt {
                session,
                content,
                reply,
            } => self.prompt(&session, content, reply),
            Request::SetOption {
                session,
                option,
                value,
                reply,
            } => self.set_option(&session, option, value, reply),
            Request::SetMode {
                session,
                mode,
                reply,
            } => self.set_mode(&session, mode, reply),
            Request::SetModel {
                session,
                model,
                reply,
            } => self.set_model(&session, model, reply),
            Request::SetTitle {
                session,
                title,
                reply,
            } => self.set_title(&session, &title, reply),
            Request::Options {
                session,
                cwd,
                additional_directories,
                reply,
            } => self.session_options(session, cwd, &additional_directories, reply),
            Request::Close { session, reply } => self.close_session(&session, reply),
            Request::Delete { session, reply } => self.delete_session(session, reply),
            Request::List { query, reply } => self.list_sessions(query, reply),
            Request::Status { session, reply } => self.session_status(session, reply),
            Request::Archive {
                session,
                mark,
                reply,
            } => self.archive_session(session, mark, reply),
            Request::ListProviders(reply) => self.list_providers(reply),
            Request::SetProvider { change, reply } => self.set_provider(change, reply),
            Request::DisableProvider { provider, reply } => self.disable_provider(&provider, reply),
        }
    }

    pub(in crate::acp) fn notification(&mut self, method: &str, params: Value) {
        tracing::debug!(%method, "notification");
        match method {
            m if m == NAMES.session_cancel => {
                on_notification(method, params, |cancel| self.cancel_turn(cancel));
            }
            // Fires the token the request's responder carries.
            "$/cancel_request" => {
                on_notification(method, params, |cancel: acp::CancelRequestNotification| {
                    self.connection.cancel_request(&cancel.request_id);
                });
            }
            // The editor's MCP server speaking for a request of ours.
            m if m == NAMES.mcp_message && self.sessions.unstable().mcp_over_acp => {
                on_notification(method, params, |message: acp::MessageMcpNotification| {
                    self.mcp_relay.deliver(message);
                });
            }
            // Unknown notifications are ignored, as JSON-RPC asks.
            _ => tracing::debug!(%method, "ignored notification"),
        }
    }

    fn cancel_turn(&mut self, cancel: acp::CancelNotification) {
        match self
            .sessions
            .get(&SessionId::from(cancel.session_id.0.clone()))
        {
            Some(session) => {
                session.send(SessionMsg::Cancel);
            }
            None => tracing::warn!(session = %cancel.session_id, "cancel for an unknown session"),
        }
    }

    /// The error for a request to a session that is not open here.
    pub(in crate::acp) fn not_running(&self, id: &SessionId) -> RpcError {
        match self.sessions.absent(id) {
            Absent::Stopped => RpcError::session_stopped(id.as_str()),
            Absent::TakenOver => RpcError::session_taken_over(id.as_str()),
            Absent::NotOpen => RpcError::session_not_found(id.as_str()),
        }
    }

    /// `session/new`: the place checked, the session started, answered
    /// with its id and options; it speaks only after the answer.
    fn open_new(&mut self, place: Place, reply: Reply<Opened>) {
        if let Err(err) = self.room_for(None) {
            return reply.fail(err);
        }
        let checked = self.open_request(NAMES.session_new, place);
        let open = match checked {
            Ok(open) => open,
            Err(err) => return reply.fail(err),
        };
        let delivery = self.delivery();
        let session = self.sessions.create(open);
        let id = session.id.clone();
        let (options_reply, options) = oneshot::channel();
        session.send(SessionMsg::Options {
            reply: options_reply,
        });
        let tx = session.tx;
        tokio::spawn(async move {
            let Ok(options) = options.await else {
                return reply.fail(RpcError::internal("the new session stopped at once"));
            };
            reply.send(Ok(Opened { id, options }));
            // Only now may the session speak: its updates must follow this answer.
            let _ = tx.send(SessionMsg::Started { delivery });
        });
    }

    /// A session request's place checked and made the sessions' own.
    pub(in crate::acp) fn open_request(
        &self,
        method: &str,
        place: Place,
    ) -> Result<OpenRequest, RpcError> {
        let relay = self.acp_relay();
        let mcp_servers = session_servers(method, &place.cwd, place.mcp_servers, relay.as_ref())?;
        let additional_directories = check_roots(&place.additional_directories)?;
        let mut directories = vec![place.cwd.as_path()];
        directories.extend(additional_directories.iter().map(PathBuf::as_path));
        self.roots.check(&directories)?;
        Ok(OpenRequest {
            cwd: place.cwd,
            additional_directories,
            client: self.abilities(),
            mcp_servers,
            client_prompt: place.client_prompt,
            initial_options: self.initial_options(method, place.choices)?,
        })
    }

    /// Refuses a session this connection may not open: one more than
    /// `[serve] max_sessions_per_connection` (reopening one it has is fine).
    pub(in crate::acp) fn room_for(&self, reopened: Option<&SessionId>) -> Result<(), RpcError> {
        if reopened.is_some_and(|id| self.sessions.get(id).is_some()) || self.sessions.has_room() {
            return Ok(());
        }
        let limit = self.sessions.session_limit().unwrap_or_default();
        Err(RpcError::too_many_sessions(limit))
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

    /// `session/prompt`: v1 is answered when the turn ends, v2 as the
    /// message goes in (a busy session takes it as steering, when allowed).
    fn prompt(&mut self, session: &SessionId, content: Vec<Part>, reply: PromptReply) {
        let Some(handle) = self.sessions.get(session) else {
            let err = self.not_running(session);
            return match reply {
                PromptReply::AtEnd(reply) => reply.fail(err),
                PromptReply::AtInsertion { reply, .. } => reply.fail(err),
            };
        };
        let submission = match reply {
            PromptReply::AtEnd(reply) => {
                // The client's `$/cancel_request` for this prompt cancels the turn.
                let request_cancel = reply.cancellation().child_token();
                let (answered, answer) = oneshot::channel();
                let cancelled = request_cancel.clone();
                tokio::spawn(async move {
                    let result: Result<TurnEnd, SessionError> = match answer.await {
                        Ok(result) => result,
                        Err(_) => Err(SessionError::Crashed(
                            "the session stopped before answering".into(),
                        )),
                    };
                    reply.send(match result {
                        Ok(end)
                            if end.stop == StopReason::Cancelled && cancelled.is_cancelled() =>
                        {
                            Err(RpcError::request_cancelled())
                        }
                        Ok(end) => Ok(end),
                        Err(err) => Err(session_error(err)),
                    });
                });
                PromptSubmission::answered_at_end(content, request_cancel, answered)
            }
            PromptReply::AtInsertion {
                reply,
                idempotency_key,
            } => {
                let request_cancel = reply.cancellation().child_token();
                let when_busy = if self.sessions.unstable().steering {
                    WhenBusy::Steer
                } else {
                    WhenBusy::Refuse
                };
                let inserted =
                    InsertReply::new(move |inserted| reply.send(inserted.map_err(session_error)));
                PromptSubmission {
                    content,
                    request_cancel,
                    idempotency_key,
                    when_busy,
                    answer: PromptAnswer::AtInsertion(inserted),
                }
            }
        };
        handle.send(SessionMsg::Prompt(submission));
    }

    pub(in crate::acp) fn close_session(&mut self, session: &SessionId, reply: Reply<()>) {
        let Some(handle) = self.sessions.remove(session) else {
            return reply.fail(self.not_running(session));
        };
        tokio::spawn(async move {
            handle.close().await;
            reply.send(Ok(()));
        });
    }
}

/// A notification's params parsed for `handler`; a bad one has no one to
/// answer, so it is logged.
fn on_notification<N: DeserializeOwned>(method: &str, params: Value, handler: impl FnOnce(N)) {
    match parse::<N>(method, params) {
        Ok(notification) => handler(notification),
        Err(err) => tracing::warn!(%method, message = %err.message, "bad notification"),
    }
}
