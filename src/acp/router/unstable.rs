//! The unstable ACP methods, each served only when `[acp] unstable` names
//! it (the dispatch in [`super::Router`] checks), and what the
//! `initialize` answer says of them.

use agent_client_protocol_schema::v1 as acp;
use tokio::sync::oneshot;

use super::{Reopen, Router, initialize_response, translate};
use crate::session::SessionMsg;
use crate::transport::{Responder, RpcError};

impl Router {
    pub(super) fn fork_session(&mut self, request: acp::ForkSessionRequest, responder: Responder) {
        let prompt = self
            .client_prompt(Reopen::Fork.method(), request.system_prompt)
            .and_then(|prompt| {
                let initial =
                    self.initial_options(Reopen::Fork.method(), &request.config_options)?;
                Ok((prompt, initial))
            });
        let (prompt, initial) = match prompt {
            Ok(prompt) => prompt,
            Err(err) => return responder.respond(Err(err)),
        };
        let at = match request.cursor_id {
            Some(cursor) if self.sessions.unstable().cursors => Some(cursor.0.to_string()),
            Some(_) => {
                return responder.respond(Err(RpcError::invalid_params(
                    "session/fork: field `cursorId`: this agent announces no cursors (`[acp] unstable` does not name `cursors`); fork the whole session without it",
                )));
            }
            None => None,
        };
        let roots = (request.cwd, request.additional_directories);
        let servers = (request.mcp_servers.as_slice(), prompt, initial);
        self.reopen(
            Reopen::Fork,
            (&request.session_id.0, at),
            roots,
            servers,
            responder,
        );
    }

    /// `session/options`: what `session/new` (or, for an open session,
    /// `session/load`) would answer in `modes` and `configOptions`. A
    /// probe session computes it, so the two cannot drift apart; it saves
    /// nothing, starts no MCP server, is not listed and never speaks.
    pub(super) fn session_options(
        &mut self,
        request: acp::SessionOptionsRequest,
        responder: Responder,
    ) {
        let checked = super::check_cwd(&request.cwd)
            .and_then(|()| super::check_roots(&request.additional_directories));
        let roots = match checked {
            Ok(roots) => roots,
            Err(err) => return responder.respond(Err(prefixed("session/options", err))),
        };
        let (reply, options) = oneshot::channel();
        let probe = match &request.session_id {
            Some(id) => match self.sessions.get(&id.0) {
                Some(session) => {
                    session.send(SessionMsg::Options { reply });
                    None
                }
                None => return self.options_of_closed(id.0.to_string(), responder),
            },
            None => {
                let probe = self.sessions.probe(request.cwd, roots, self.abilities());
                probe.send(SessionMsg::Options { reply });
                Some(probe)
            }
        };
        tokio::spawn(async move {
            let answer = match options.await {
                Ok(options) => Ok(acp::SessionOptionsResponse::new()
                    .modes(translate::mode_state(&options))
                    .config_options(translate::config_options(&options))),
                Err(_) => Err(RpcError::internal("the options probe stopped at once")),
            };
            // Its mailbox closed, the probe ends.
            drop(probe);
            responder.respond_with(answer);
        });
    }

    /// `session/options` for a session not open here: unknown (-32002), or
    /// saved but not answered for (its settings are read only by a load).
    fn options_of_closed(&self, id: String, responder: Responder) {
        let store = self.sessions.store();
        tokio::spawn(async move {
            let saved = is_saved(store, id.clone()).await;
            responder.respond(Err(if saved {
                RpcError::invalid_params(format!(
                    "session/options: field `sessionId`: session `{id}` is saved but not open here; load or resume it first (its answer has its options), or leave `sessionId` out to ask for a new session's"
                ))
            } else {
                RpcError::session_not_found(&id)
            }));
        });
    }

    /// A session request's initial `configOptions` as (option, value) pairs,
    /// in order, when `[acp] unstable` names `options`. Without it they are
    /// ignored, as before this agent knew them (the client should not send
    /// them to an agent that does not advertise `sessionCapabilities.options`).
    /// Boolean values are skipped: every option here is a select.
    pub(super) fn initial_options(
        &self,
        method: &str,
        given: &[acp::InitialSessionConfigOption],
    ) -> Result<Vec<(String, String)>, RpcError> {
        if !self.sessions.unstable().options {
            return Ok(Vec::new());
        }
        let mut seen: Vec<&str> = Vec::new();
        let mut options = Vec::new();
        for (n, option) in given.iter().enumerate() {
            let id = &*option.config_id.0;
            if seen.contains(&id) {
                return Err(RpcError::invalid_params(format!(
                    "{method}: field `configOptions[{n}]`: option `{id}` is given twice; give each option once"
                )));
            }
            seen.push(id);
            if let Some(value) = option.value.as_value_id() {
                options.push((id.to_string(), value.0.to_string()));
            }
        }
        Ok(options)
    }

    pub(super) fn auth_status(&mut self, _: acp::AuthStatusRequest, responder: Responder) {
        let (providers, _) = self.sessions.providers();
        responder.respond_with(Ok(crate::acp::auth::status(&providers)));
    }

    /// `session/archive`: closed here first (as `session/close` would),
    /// then marked in its metadata; its files stay.
    pub(super) fn archive_session(
        &mut self,
        request: acp::ArchiveSessionRequest,
        responder: Responder,
    ) {
        let id = request.session_id.0.to_string();
        let open = self.sessions.remove(&id);
        let store = self.sessions.store();
        tokio::spawn(async move {
            if let Some(session) = open {
                super::manager::close(session).await;
            }
            let answer = mark_archived(store, id, true)
                .await
                .map(|()| acp::ArchiveSessionResponse::new());
            responder.respond_with(answer);
        });
    }

    /// `session/unarchive`: the mark gone, the session lists and loads again.
    pub(super) fn unarchive_session(
        &mut self,
        request: acp::UnarchiveSessionRequest,
        responder: Responder,
    ) {
        let id = request.session_id.0.to_string();
        let store = self.sessions.store();
        tokio::spawn(async move {
            let answer = mark_archived(store, id, false)
                .await
                .map(|()| acp::UnarchiveSessionResponse::new());
            responder.respond_with(answer);
        });
    }

    pub(super) fn set_title(&mut self, request: acp::SetSessionTitleRequest, responder: Responder) {
        let Some(session) = self.sessions.get(&request.session_id.0) else {
            return responder.respond(Err(RpcError::session_not_found(&request.session_id.0)));
        };
        let title = request.title.trim().to_string();
        if title.is_empty() {
            return responder.respond(Err(RpcError::invalid_params(
                "session/set_title: field `title` is empty; send the title to show",
            )));
        }
        let (reply, answer) = oneshot::channel();
        session.send(SessionMsg::SetTitle { title, reply });
        tokio::spawn(async move {
            let answer = match answer.await {
                Ok(title) => Ok(acp::SetSessionTitleResponse::new(title)),
                Err(_) => Err(RpcError::internal("the session stopped before answering")),
            };
            responder.respond_with(answer);
        });
    }

    /// Open here, saved on disk, or unknown.
    pub(super) fn session_status(
        &mut self,
        request: acp::SessionStatusRequest,
        responder: Responder,
    ) {
        let id = request.session_id.0.to_string();
        if self.sessions.get(&id).is_some() {
            return responder.respond_with(Ok(acp::SessionStatusResponse::new(
                acp::SessionStatus::Open,
            )));
        }
        let store = self.sessions.store();
        tokio::spawn(async move {
            let saved = is_saved(store, id.clone()).await;
            let answer = if saved {
                Ok(acp::SessionStatusResponse::new(acp::SessionStatus::Saved))
            } else {
                Err(RpcError::session_not_found(&id))
            };
            responder.respond_with(answer);
        });
    }
}

async fn mark_archived(
    store: Option<std::sync::Arc<crate::store::Store>>,
    id: String,
    archived: bool,
) -> Result<(), RpcError> {
    let Some(store) = store else {
        return Err(RpcError::session_not_found(&id));
    };
    let marked = tokio::task::spawn_blocking(move || store.set_archived(&id, archived)).await;
    match marked {
        Ok(marked) => marked.map_err(super::store_error),
        Err(err) => Err(RpcError::internal(err.to_string())),
    }
}

/// What this agent offers, the unstable features the config turned on included.
pub fn initialize_response_with(unstable: crate::config::Unstable) -> acp::InitializeResponse {
    let mut response = initialize_response();
    let sessions = &mut response.agent_capabilities.session_capabilities;
    if unstable.set_title {
        sessions.title = Some(acp::SessionTitleCapabilities::new());
    }
    if unstable.status {
        sessions.status = Some(acp::SessionStatusCapabilities::new());
    }
    if unstable.options {
        sessions.options = Some(acp::SessionOptionsCapabilities::new());
    }
    if unstable.fork {
        sessions.fork = Some(acp::SessionForkCapabilities::new());
    }
    if unstable.providers {
        response.agent_capabilities.providers = Some(acp::ProvidersCapabilities::new());
    }
    if unstable.archive {
        sessions.archive = Some(acp::SessionArchiveCapabilities::new());
    }
    if unstable.mcp_over_acp {
        response.agent_capabilities.mcp_capabilities.acp = true;
    }
    if unstable.auth_status {
        response.agent_capabilities.auth.status = Some(acp::AuthStatusCapabilities::new());
    }
    response
}

/// A cwd or root error as the method's own.
fn prefixed(method: &str, err: RpcError) -> RpcError {
    RpcError::invalid_params(format!("{method}: {}", err.message))
}

/// Whether the store holds a session `id` (its metadata reads), off the
/// async threads.
async fn is_saved(store: Option<std::sync::Arc<crate::store::Store>>, id: String) -> bool {
    match store {
        Some(store) => tokio::task::spawn_blocking(move || store.metadata(&id).is_ok())
            .await
            .unwrap_or(false),
        None => false,
    }
}
