//! The unstable ACP methods, each served only when `[acp] unstable` names
//! it (the dispatch in [`super::Router`] checks), and what the
//! `initialize` answer says of them.

use agent_client_protocol_schema::v1 as acp;
use tokio::sync::oneshot;

use super::{Reopen, Router, initialize_response};
use crate::session::SessionMsg;
use crate::transport::{Responder, RpcError};

impl Router {
    pub(super) fn fork_session(&mut self, request: acp::ForkSessionRequest, responder: Responder) {
        let prompt = match self.client_prompt(Reopen::Fork.method(), request.system_prompt) {
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
        let servers = (request.mcp_servers.as_slice(), prompt);
        self.reopen(
            Reopen::Fork,
            (&request.session_id.0, at),
            roots,
            servers,
            responder,
        );
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
            let saved = match store {
                Some(store) => {
                    let id = id.clone();
                    tokio::task::spawn_blocking(move || store.metadata(&id).is_ok())
                        .await
                        .unwrap_or(false)
                }
                None => false,
            };
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
