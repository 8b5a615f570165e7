//! Method name → handler. Parses params into the ACP schema types, turns
//! them into messages for the session actors, and owns the answer to every
//! request (a [`Responder`]). Runs on the reader task and never waits: all
//! waiting happens in small tasks that hold the responder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use agent_client_protocol_schema::v1::RequestId;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::oneshot;

use super::mcp_relay::McpRelay;
use super::{mcp_spec, translate};
use crate::client::{ClientAbilities, ClientSink, CursorUse, SelectOption};
use crate::events::StopReason;
use crate::mcp::{McpServerSpec, Relay};
use crate::model::ClientPrompt;
use crate::session::manager::{self, SessionManager};
use crate::session::{SessionError, SessionMsg};
use crate::transport::jsonrpc::{INTERNAL_ERROR, INVALID_REQUEST, RESOURCE_NOT_FOUND};
use crate::transport::{Connection, Incoming, Responder, RpcError};

mod providers;
mod unstable;

pub use unstable::initialize_response_with;

/// What the client said about itself in `initialize`.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub read_text_file: bool,
    pub write_text_file: bool,
    pub terminal: bool,
    pub notices: bool,
    pub compaction: bool,
    pub elicitation: bool,
    /// Takes delegated agents as sessions (`subagents`).
    pub subagents: bool,
    /// Takes plans by id (`plan`: `plan_update`, `plan_removed`).
    pub plans: bool,
    /// Takes `cursor_update` (unstable `session.cursors`).
    pub cursors: bool,
    /// Takes `prompt_suggestions_update` (unstable `session.promptSuggestions`).
    pub prompt_suggestions: bool,
    /// Can run a `terminal` sign-in method: `auth.terminal`, or the
    /// `_meta` flag `"terminal-auth": true` that clients before ACP 1.20
    /// (and the ACP registry's validator) send instead.
    pub terminal_auth: bool,
    pub name: Option<String>,
}

impl ClientInfo {
    /// What `initialize` tells about the client (logged: it is the first
    /// thing to look at when a client misbehaves).
    pub fn from_request(request: &acp::InitializeRequest) -> Self {
        let caps = &request.client_capabilities;
        let info = Self {
            read_text_file: caps.fs.read_text_file,
            write_text_file: caps.fs.write_text_file,
            terminal: caps.terminal,
            notices: caps.session.as_ref().is_some_and(|s| s.notices.is_some()),
            compaction: caps
                .session
                .as_ref()
                .is_some_and(|s| s.compaction.is_some()),
            elicitation: (caps.elicitation.as_ref())
                .is_some_and(acp::ElicitationCapabilities::supports_form),
            subagents: caps.subagents.is_some(),
            plans: caps.plan.is_some(),
            cursors: caps.session.as_ref().is_some_and(|s| s.cursors.is_some()),
            prompt_suggestions: (caps.session.as_ref())
                .is_some_and(|s| s.prompt_suggestions.is_some()),
            terminal_auth: caps.auth.terminal
                || (caps.meta.as_ref())
                    .and_then(|meta| meta.get("terminal-auth"))
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false),
            name: request.client_info.as_ref().map(|info| info.name.clone()),
        };
        tracing::info!(client = ?info, requested = %request.protocol_version, "initialize");
        info
    }

    /// Whether the client takes notifications between a request and its
    /// answer. Clients that name themselves (`clientInfo`: Zed, acpx, the
    /// SDKs) do; Crucible's own client sends none and reads the next line
    /// after a request as its answer, so updates made outside a turn wait
    /// for its next turn.
    fn interleaves(&self) -> bool {
        self.name.is_some()
    }
}

/// A request's handler, its params still raw (see [`Router::dispatch`]).
type Handler = Box<dyn FnOnce(&mut Router, &str, Value, Responder)>;

pub struct Router {
    connection: Connection,
    sessions: SessionManager,
    client: Option<ClientInfo>,
    /// Done when the last load or resume has sent its replay and answer:
    /// the next one waits for it, so replays never interleave and each
    /// answer follows its own replay.
    last_reopen: Option<oneshot::Receiver<()>>,
    /// Carries the editor's `acp` MCP servers (unstable `mcp_over_acp`).
    mcp_relay: Arc<McpRelay>,
}

/// How a stored session comes back: `session/load` replays its history to
/// the client first, `session/resume` does not; `session/fork` (unstable)
/// resumes a copy under a new id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reopen {
    Load,
    Resume,
    Fork,
}

impl Reopen {
    fn method(self) -> &'static str {
        match self {
            Reopen::Load => "session/load",
            Reopen::Resume => "session/resume",
            Reopen::Fork => "session/fork",
        }
    }
}

impl Router {
    pub fn new(connection: Connection, sessions: SessionManager) -> Self {
        Self {
            mcp_relay: McpRelay::new(connection.clone()),
            connection,
            sessions,
            client: None,
            last_reopen: None,
        }
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

    pub fn handle(&mut self, message: Incoming) {
        match message {
            Incoming::Request { id, method, params } => {
                let responder = Responder::new(id, self.connection.clone(), method.clone());
                self.request(&method, params, responder);
            }
            Incoming::Notification { method, params } => self.notification(&method, params),
            Incoming::Response { id, result } => self.connection.resolve(&id, result),
            Incoming::Invalid { id, error } => {
                tracing::warn!(code = error.code, message = %error.message, "invalid message from client");
                self.connection
                    .respond(&id.unwrap_or(RequestId::Null), Err(error));
            }
        }
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

    fn cancel_turn(&mut self, cancel: acp::CancelNotification) {
        match self.sessions.get(&cancel.session_id.0) {
            Some(session) => {
                session.send(SessionMsg::Cancel);
            }
            None => tracing::warn!(session = %cancel.session_id, "cancel for an unknown session"),
        }
    }

    /// A request's `systemPrompt` (stable since ACP 1.20: every client may send one).
    fn client_prompt(
        &self,
        method: &str,
        prompt: Option<acp::SystemPrompt>,
    ) -> Result<Option<ClientPrompt>, RpcError> {
        super::system_prompt::read(method, prompt)
    }

    /// The error for a request to a session that is not open here.
    fn not_running(&self, id: &str) -> RpcError {
        if self.sessions.stopped(id) {
            RpcError::session_stopped(id)
        } else {
            RpcError::session_not_found(id)
        }
    }

    fn initialize(&mut self, request: acp::InitializeRequest, responder: Responder) {
        let client = ClientInfo::from_request(&request);
        let response = initialize_response_with(self.sessions.unstable());
        responder.respond_with(Ok(sign_in_for(response, &client)));
        self.client = Some(client);
    }

    fn authenticate(&mut self, request: acp::AuthenticateRequest, responder: Responder) {
        let (providers, _) = self.sessions.providers();
        responder.respond_with(super::auth::authenticate(
            &request,
            &super::auth::state(&providers),
        ));
    }

    fn new_session(&mut self, request: acp::NewSessionRequest, responder: Responder) {
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
        let ((mcp_servers, roots), client_prompt, initial) = match checked {
            Ok(checked) => checked,
            Err(err) => return responder.respond(Err(err)),
        };
        let client = self.abilities();
        let interleaves = self.interleaves();
        let session = self
            .sessions
            .create(request.cwd, roots, client, mcp_servers);
        let id = session.id.clone();
        if let Some(prompt) = client_prompt {
            session.send(SessionMsg::SystemPrompt(prompt));
        }
        if !initial.is_empty() {
            session.send(SessionMsg::InitialOptions(initial));
        }
        let (reply, options) = oneshot::channel();
        session.send(SessionMsg::Options { reply });
        let tx = session.tx.clone();
        tokio::spawn(async move {
            let Ok(options) = options.await else {
                return responder
                    .respond(Err(RpcError::internal("the new session stopped at once")));
            };
            let response = acp::NewSessionResponse::new(id)
                .modes(translate::mode_state(&options))
                .config_options(translate::config_options(&options));
            match with_models(response, &options) {
                Ok(value) => responder.respond(Ok(value)),
                Err(err) => responder.respond(Err(RpcError::internal(err.to_string()))),
            }
            // Only now may the session speak: its updates must follow this answer.
            let _ = tx.send(SessionMsg::Started { interleaves });
        });
    }

    fn interleaves(&self) -> bool {
        self.client.as_ref().is_some_and(ClientInfo::interleaves)
    }

    /// What serves `acp` MCP servers, when `[acp] unstable` names `mcp_over_acp`.
    fn acp_relay(&self) -> Option<Relay> {
        self.sessions
            .unstable()
            .mcp_over_acp
            .then(|| self.mcp_relay.relay())
    }

    fn abilities(&self) -> ClientAbilities {
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

    fn load_session(&mut self, request: acp::LoadSessionRequest, responder: Responder) {
        let (id, cwd, roots) = (
            request.session_id,
            request.cwd,
            request.additional_directories,
        );
        let prompt = self
            .client_prompt(Reopen::Load.method(), request.system_prompt)
            .and_then(|prompt| {
                let initial =
                    self.initial_options(Reopen::Load.method(), &request.config_options)?;
                Ok((prompt, initial))
            });
        let (prompt, initial) = match prompt {
            Ok(prompt) => prompt,
            Err(err) => return responder.respond(Err(err)),
        };
        self.reopen(
            Reopen::Load,
            (&id.0, None),
            (cwd, roots),
            (&request.mcp_servers, prompt, initial),
            responder,
        );
    }

    fn resume_session(&mut self, request: acp::ResumeSessionRequest, responder: Responder) {
        let (id, cwd, roots) = (
            request.session_id,
            request.cwd,
            request.additional_directories,
        );
        let prompt = self
            .client_prompt(Reopen::Resume.method(), request.system_prompt)
            .and_then(|prompt| {
                let initial =
                    self.initial_options(Reopen::Resume.method(), &request.config_options)?;
                Ok((prompt, initial))
            });
        let (prompt, initial) = match prompt {
            Ok(prompt) => prompt,
            Err(err) => return responder.respond(Err(err)),
        };
        self.reopen(
            Reopen::Resume,
            (&id.0, None),
            (cwd, roots),
            (&request.mcp_servers, prompt, initial),
            responder,
        );
    }

    /// `session/load`, `session/resume` and `session/fork`: the session back in memory; a
    /// load's replay goes out before the answer, and the session speaks
    /// only after it.
    fn reopen(
        &mut self,
        how: Reopen,
        (id, at): (&str, Option<String>),
        (cwd, roots): (PathBuf, Vec<PathBuf>),
        (servers, client_prompt, initial): (
            &[acp::McpServer],
            Option<ClientPrompt>,
            Vec<(String, String)>,
        ),
        responder: Responder,
    ) {
        let relay = self.acp_relay();
        let checked = session_servers(how.method(), &cwd, servers, relay.as_ref())
            .and_then(|servers| Ok((servers, check_roots(&roots)?)));
        let (mcp_servers, roots) = match checked {
            Ok(checked) => checked,
            Err(err) => return responder.respond(Err(err)),
        };
        let client = self.abilities();
        let interleaves = self.interleaves();
        let replay = how == Reopen::Load;
        let loaded = match how {
            Reopen::Fork => self
                .sessions
                .fork(id, at, (cwd, roots), client, mcp_servers),
            Reopen::Load | Reopen::Resume => self
                .sessions
                .load(id, cwd, roots, client, mcp_servers, replay)
                .map(|(tx, loading)| (id.to_string(), tx, loading)),
        };
        let (id, tx, loading) = match loaded {
            Ok(loaded) => loaded,
            Err(err) => return responder.respond(Err(store_error(err))),
        };
        // Without one, the session keeps the prompt saved with it.
        if let Some(prompt) = client_prompt {
            let _ = tx.send(SessionMsg::SystemPrompt(prompt));
        }
        if !initial.is_empty() {
            let _ = tx.send(SessionMsg::InitialOptions(initial));
        }
        // Asked now, so the session answers it before any prompt sent after this request.
        let (reply, options) = oneshot::channel();
        let _ = tx.send(SessionMsg::Options { reply });
        let connection = self.connection.clone();
        let (done, next) = oneshot::channel();
        let previous = self.last_reopen.replace(next);
        tokio::spawn(async move {
            // Dropped (sent) when this one has answered, whatever the outcome.
            let _done = done;
            if let Some(previous) = previous {
                let _ = previous.await;
            }
            let updates = match loading.await {
                Ok(updates) => updates,
                Err(err) => return responder.respond(Err(store_error(err))),
            };
            let Ok(options) = options.await else {
                return responder.respond(Err(RpcError::internal("the session stopped at once")));
            };
            // The replay goes straight to the client: it is not recorded again.
            for update in updates {
                connection.send(&id, update);
            }
            match reopened(how, &id, &options) {
                Ok(value) => responder.respond(Ok(value)),
                Err(err) => responder.respond(Err(RpcError::internal(err.to_string()))),
            }
            let _ = tx.send(SessionMsg::Started { interleaves });
        });
    }

    fn list_sessions(&mut self, request: acp::ListSessionsRequest, responder: Responder) {
        let Some(store) = self.sessions.store() else {
            return responder.respond_with(Ok(acp::ListSessionsResponse::new(Vec::new())));
        };
        // Without the opt-in, archived sessions (from an earlier run that had
        // it) stay out of the list: they cannot be opened.
        let archive = self.sessions.unstable().archive;
        let filter = if archive {
            request.archived.clone().unwrap_or_default()
        } else {
            acp::SessionArchiveFilter::Exclude
        };
        let keep: fn(bool) -> bool = match filter {
            acp::SessionArchiveFilter::Exclude => |archived| !archived,
            acp::SessionArchiveFilter::Include => |_| true,
            acp::SessionArchiveFilter::Only => |archived| archived,
            _ => {
                return responder.respond(Err(RpcError::invalid_params(
                    "session/list: field `archived` is not one of `exclude`, `include`, `only`",
                )));
            }
        };
        tokio::spawn(async move {
            let listed = tokio::task::spawn_blocking(move || store.list()).await;
            let mut sessions = match listed {
                Ok(sessions) => sessions,
                Err(err) => return responder.respond(Err(RpcError::internal(err.to_string()))),
            };
            sessions.retain(|s| keep(s.archived));
            let page = crate::store::list_page(
                sessions,
                request.cwd.as_deref(),
                request.cursor.as_deref(),
                LIST_PAGE_SIZE,
            );
            let infos = page
                .sessions
                .into_iter()
                .map(|s| {
                    let meta = translate::list_meta(&s);
                    acp::SessionInfo::new(s.id, s.cwd)
                        .additional_directories(s.additional_directories)
                        .title(s.title)
                        .updated_at(s.updated_at)
                        .archived(archive.then_some(s.archived))
                        .meta(meta)
                })
                .collect();
            responder.respond_with(Ok(
                acp::ListSessionsResponse::new(infos).next_cursor(page.next_cursor)
            ));
        });
    }

    fn delete_session(&mut self, request: acp::DeleteSessionRequest, responder: Responder) {
        let id = request.session_id.0.to_string();
        let open = self.sessions.remove(&id);
        let store = self.sessions.store();
        tokio::spawn(async move {
            let was_open = open.is_some();
            if let Some(session) = open {
                manager::close(session).await;
            }
            let deleted = match store {
                Some(store) => {
                    let id = id.clone();
                    tokio::task::spawn_blocking(move || store.delete(&id))
                        .await
                        .unwrap_or_else(|err| {
                            Err(crate::store::StoreError::Io {
                                action: "cannot delete",
                                path: Default::default(),
                                source: std::io::Error::other(err),
                            })
                        })
                }
                None => Err(crate::store::StoreError::NotFound(id.clone())),
            };
            let answer = match deleted {
                Ok(()) => Ok(acp::DeleteSessionResponse::new()),
                // Open only in memory (it could not be saved): closing it was the delete.
                Err(crate::store::StoreError::NotFound(_)) if was_open => {
                    Ok(acp::DeleteSessionResponse::new())
                }
                Err(err) => Err(store_error(err)),
            };
            responder.respond_with(answer);
        });
    }

    fn prompt(&mut self, request: acp::PromptRequest, responder: Responder) {
        let Some(session) = self.sessions.get(&request.session_id.0) else {
            return responder.respond(Err(self.not_running(&request.session_id.0)));
        };
        let content = match translate::prompt_parts(request.prompt) {
            Ok(content) => content,
            Err(detail) => return responder.respond(Err(RpcError::invalid_params(detail))),
        };
        // The client's `$/cancel_request` for this prompt cancels the turn.
        let request_cancel = responder.cancellation().child_token();
        // Unstable in the schema, so asked for; Crucible's client (it sends
        // no clientInfo) reads it and always gets it.
        let with_usage = self.sessions.unstable().usage
            || self.client.as_ref().is_some_and(|info| info.name.is_none());
        let (reply, answer) = oneshot::channel();
        session.send(SessionMsg::Prompt {
            content,
            request_cancel: request_cancel.clone(),
            reply,
        });
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

    fn set_config_option(
        &mut self,
        request: acp::SetSessionConfigOptionRequest,
        responder: Responder,
    ) {
        let Some(session) = self.sessions.get(&request.session_id.0) else {
            return responder.respond(Err(self.not_running(&request.session_id.0)));
        };
        let Some(value) = request.value.as_value_id() else {
            return responder.respond(Err(RpcError::invalid_params(format!(
                "value: option `{}` takes one of its listed value ids, not a boolean",
                request.config_id
            ))));
        };
        let (reply, answer) = oneshot::channel();
        session.send(SessionMsg::SetOption {
            id: request.config_id.0.to_string(),
            value: value.0.to_string(),
            reply,
        });
        tokio::spawn(async move {
            let answer = session_answer(answer).await.map(|options| {
                acp::SetSessionConfigOptionResponse::new(translate::config_options(&options))
            });
            responder.respond_with(answer);
        });
    }

    fn set_mode(&mut self, request: acp::SetSessionModeRequest, responder: Responder) {
        let Some(session) = self.sessions.get(&request.session_id.0) else {
            return responder.respond(Err(self.not_running(&request.session_id.0)));
        };
        let (reply, answer) = oneshot::channel();
        session.send(SessionMsg::SetMode {
            mode: request.mode_id.0.to_string(),
            reply,
        });
        tokio::spawn(async move {
            let answer = session_answer(answer)
                .await
                .map(|()| acp::SetSessionModeResponse::new());
            responder.respond_with(answer);
        });
    }

    fn set_model(&mut self, request: SetModelRequest, responder: Responder) {
        let Some(session) = self.sessions.get(&request.session_id) else {
            return responder.respond(Err(self.not_running(&request.session_id)));
        };
        let (reply, answer) = oneshot::channel();
        session.send(SessionMsg::SetModel {
            model: request.model_id,
            reply,
        });
        tokio::spawn(async move {
            let answer = session_answer(answer).await.map(|()| serde_json::json!({}));
            responder.respond(answer);
        });
    }

    fn close_session(&mut self, request: acp::CloseSessionRequest, responder: Responder) {
        let Some(session) = self.sessions.remove(&request.session_id.0) else {
            return responder.respond(Err(self.not_running(&request.session_id.0)));
        };
        tokio::spawn(async move {
            manager::close(session).await;
            responder.respond_with(Ok(acp::CloseSessionResponse::new()));
        });
    }
}

/// The answer to a load or a resume: where the session's settings stand.
fn reopened(how: Reopen, id: &str, options: &[SelectOption]) -> serde_json::Result<Value> {
    let (modes, config) = (
        translate::mode_state(options),
        translate::config_options(options),
    );
    match how {
        Reopen::Load => with_models(
            acp::LoadSessionResponse::new()
                .modes(modes)
                .config_options(config),
            options,
        ),
        Reopen::Resume => with_models(
            acp::ResumeSessionResponse::new()
                .modes(modes)
                .config_options(config),
            options,
        ),
        Reopen::Fork => with_models(
            acp::ForkSessionResponse::new(id.to_string())
                .modes(modes)
                .config_options(config),
            options,
        ),
    }
}

/// A session answer with the old session-model extension's `models` field
/// beside `configOptions`.
fn with_models(
    response: impl serde::Serialize,
    options: &[SelectOption],
) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(response)?;
    if let (Value::Object(fields), Some(models)) = (&mut value, translate::session_models(options))
    {
        fields.insert("models".into(), models);
    }
    Ok(value)
}

/// `session/set_model`: the old session-model extension, not in the schema.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetModelRequest {
    session_id: String,
    model_id: String,
}

/// Params made acceptable where clients differ from the schema in ways
/// with one sensible reading; refused with a pointed message where not.
pub(super) fn tolerate(method: &str, mut params: Value) -> Result<Value, RpcError> {
    match method {
        // Version negotiation: whatever the client asks for (a string such
        // as "1", a version we do not know), the answer names the version
        // we speak and the client decides. Only a missing one is refused.
        "initialize" => {
            if let Some(version) = params.get_mut("protocolVersion")
                && version.as_u64().is_none_or(|v| v > u64::from(u16::MAX))
            {
                tracing::info!(requested = %version, "protocol version not understood; answering with ours");
                *version = Value::from(1);
            }
            Ok(params)
        }
        "session/prompt" if params.get("prompt").is_none() && params.get("content").is_some() => {
            Err(RpcError::invalid_params(
                "session/prompt: field `content` is not a prompt parameter; send the content blocks as `prompt` (`content` was an early draft's name)",
            ))
        }
        _ => Ok(params),
    }
}

/// A session's directory checked and the client's MCP servers read.
fn session_servers(
    method: &str,
    cwd: &Path,
    servers: &[acp::McpServer],
    relay: Option<&Relay>,
) -> Result<Vec<McpServerSpec>, RpcError> {
    check_cwd(cwd)?;
    servers
        .iter()
        .enumerate()
        .map(|(n, server)| {
            mcp_spec::server_spec(server, cwd, relay).map_err(|err| {
                RpcError::invalid_params(format!("{method}: field mcpServers[{n}]: {err}"))
            })
        })
        .collect()
}

/// A session actor's answer, or why there is none.
async fn session_answer<T>(
    answer: oneshot::Receiver<Result<T, SessionError>>,
) -> Result<T, RpcError> {
    match answer.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(session_error(err)),
        Err(_) => Err(RpcError::internal("the session stopped before answering")),
    }
}

pub fn initialize_response() -> acp::InitializeResponse {
    acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
        .agent_capabilities(
            acp::AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(
                    acp::PromptCapabilities::new()
                        .image(true)
                        .embedded_context(true),
                )
                .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(true))
                .session_capabilities(
                    acp::SessionCapabilities::new()
                        .list(acp::SessionListCapabilities::new())
                        .resume(acp::SessionResumeCapabilities::new())
                        .close(acp::SessionCloseCapabilities::new())
                        .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new())
                        .delete(acp::SessionDeleteCapabilities::new())
                        .system_prompt(super::system_prompt::capabilities()),
                ),
        )
        .agent_info(
            acp::Implementation::new("crucible-agent", env!("CARGO_PKG_VERSION")).title("Crucible"),
        )
        .auth_methods(Vec::new())
}

/// `response` with the sign-in methods `client` can run: the terminal
/// one only for a client that says it runs them (`auth.terminal`).
pub fn sign_in_for(
    response: acp::InitializeResponse,
    client: &ClientInfo,
) -> acp::InitializeResponse {
    if client.terminal_auth {
        response.auth_methods(super::auth::methods())
    } else {
        response
    }
}

/// `additionalDirectories`: each an absolute, existing directory (the
/// error names its index); duplicates of one another are dropped.
fn check_roots(roots: &[PathBuf]) -> Result<Vec<PathBuf>, RpcError> {
    let mut checked: Vec<PathBuf> = Vec::new();
    for (n, root) in roots.iter().enumerate() {
        check_cwd(root).map_err(|err| {
            let detail = err.message.trim_start_matches("cwd: ");
            RpcError::invalid_params(format!("additionalDirectories[{n}]: {detail}"))
        })?;
        if !checked.contains(root) {
            checked.push(root.clone());
        }
    }
    Ok(checked)
}

fn check_cwd(cwd: &Path) -> Result<(), RpcError> {
    if !cwd.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "cwd: `{}` is not an absolute path; send the project's absolute path",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(RpcError::invalid_params(format!(
            "cwd: `{}` is not an existing directory",
            cwd.display()
        )));
    }
    Ok(())
}

/// Sessions per `session/list` page.
const LIST_PAGE_SIZE: usize = 50;

fn store_error(err: crate::store::StoreError) -> RpcError {
    use crate::store::StoreError;
    match &err {
        StoreError::NotFound(id) => RpcError::new(
            RESOURCE_NOT_FOUND,
            format!(
                "Resource not found: no stored session `{id}`; session/list shows the stored ones"
            ),
        ),
        StoreError::Locked { .. } | StoreError::Archived(_) => {
            RpcError::new(INVALID_REQUEST, err.to_string())
        }
        StoreError::UnknownCheckpoint { .. } => RpcError::invalid_params(format!(
            "cursorId: {err}; send a cursor this agent announced in a cursor_update"
        )),
        StoreError::Corrupt { .. } | StoreError::NewerFormat { .. } | StoreError::Io { .. } => {
            RpcError::internal(err.to_string())
        }
    }
}

fn session_error(err: SessionError) -> RpcError {
    match &err {
        SessionError::Busy(_) => RpcError::new(INVALID_REQUEST, err.to_string()),
        SessionError::UnknownOption(..) | SessionError::UnknownValue { .. } => {
            RpcError::invalid_params(err.to_string())
        }
        SessionError::Provider(provider) => RpcError::new(INTERNAL_ERROR, err.to_string())
            .with_data(serde_json::json!({ "kind": "provider", "detail": provider.to_string() })),
        SessionError::Crashed(_) => RpcError::internal(err.to_string()),
    }
}

/// Parse `params` into `T`, naming the offending field on failure.
pub fn parse<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() {
        // `initialize` and friends have required fields; let serde name them.
        Value::Object(Default::default())
    } else {
        params
    };
    serde_path_to_error::deserialize(params).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." || path.is_empty() {
            RpcError::invalid_params(format!("{method}: {inner}"))
        } else {
            RpcError::invalid_params(format!("{method}: field `{path}`: {inner}"))
        }
    })
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
    use serde_json::json;

    #[test]
    fn param_errors_name_the_field() {
        let err =
            parse::<acp::NewSessionRequest>("session/new", json!({"mcpServers": []})).unwrap_err();
        assert_eq!(err.code, crate::transport::jsonrpc::INVALID_PARAMS);
        assert!(err.message.contains("cwd"), "{}", err.message);
        let err = parse::<acp::PromptRequest>(
            "session/prompt",
            json!({"sessionId":"s","prompt":[{"type":"text"}]}),
        )
        .unwrap_err();
        assert!(
            err.message.contains("prompt[0]") || err.message.contains("text"),
            "{}",
            err.message
        );
        let err = parse::<acp::InitializeRequest>("initialize", Value::Null).unwrap_err();
        assert!(err.message.contains("protocolVersion"), "{}", err.message);
    }

    #[test]
    fn initialize_advertises_only_what_works() {
        let value = serde_json::to_value(initialize_response()).unwrap();
        assert_eq!(value["protocolVersion"], 1);
        let caps = &value["agentCapabilities"];
        assert_eq!(caps["loadSession"], true);
        assert_eq!(caps["mcpCapabilities"]["http"], true);
        assert_eq!(caps["mcpCapabilities"]["sse"], true);
        assert!(caps["sessionCapabilities"]["close"].is_object());
        for capability in ["list", "resume", "close", "delete"] {
            assert!(
                caps["sessionCapabilities"][capability].is_object(),
                "{capability}"
            );
        }
        assert_eq!(value["agentInfo"]["name"], "crucible-agent");
    }

    use crate::config::Config;
    use crate::providers::Providers;
    use crate::session::manager::Defaults;
    use crate::transport::jsonrpc::parse_line;
    use std::sync::Arc;

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

    #[test]
    fn odd_but_readable_params_are_tolerated_and_the_rest_named() {
        let version = |v: Value| {
            tolerate("initialize", json!({ "protocolVersion": v })).unwrap()["protocolVersion"]
                .clone()
        };
        assert_eq!(version(json!(1)), 1);
        assert_eq!(
            version(json!(2)),
            2,
            "a number we read is left for the answer"
        );
        assert_eq!(version(json!("1")), 1);
        assert_eq!(version(json!("2025-06-18")), 1);
        assert_eq!(version(json!(100_000)), 1);
        // Missing stays missing: serde names the field.
        let params = tolerate("initialize", json!({})).unwrap();
        assert!(parse::<acp::InitializeRequest>("initialize", params).is_err());
        let err = tolerate(
            "session/prompt",
            json!({"sessionId": "s", "content": [{"type": "text", "text": "hi"}]}),
        )
        .unwrap_err();
        assert_eq!(err.code, crate::transport::jsonrpc::INVALID_PARAMS);
        assert!(err.message.contains("`content`"), "{}", err.message);
    }

    #[test]
    fn session_answers_carry_the_model_list_beside_the_config_options() {
        let options = vec![SelectOption {
            id: "model".into(),
            name: "Model".into(),
            description: String::new(),
            category: crate::client::OptionCategory::Model,
            current: "b".into(),
            values: ["a", "b"]
                .map(|id| crate::client::OptionValue {
                    id: id.into(),
                    name: id.into(),
                    description: None,
                })
                .to_vec(),
        }];
        let value = with_models(acp::NewSessionResponse::new("s1"), &options).unwrap();
        assert_eq!(value["sessionId"], "s1");
        assert_eq!(value["models"]["currentModelId"], "b");
        assert_eq!(
            value["models"]["availableModels"],
            json!([{"modelId": "a", "name": "a"}, {"modelId": "b", "name": "b"}])
        );
    }

    #[test]
    fn cwd_must_be_an_absolute_existing_directory() {
        assert!(check_cwd(Path::new("relative/dir")).is_err());
        assert!(check_cwd(Path::new("/definitely/not/a/dir")).is_err());
        assert!(check_cwd(&std::env::temp_dir()).is_ok());
    }
}
