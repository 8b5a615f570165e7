//! A stored session back in memory: `session/load` replays its history to
//! the client first, `session/resume` does not, and the unstable
//! `session/fork` resumes a copy under a new id (whole, or up to a cursor).

use std::path::PathBuf;

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use tokio::sync::oneshot;

use super::Router;
use super::answers::{store_error, with_models};
use super::params::{check_roots, session_servers};
use crate::acp::translate;
use crate::client::{ClientSink, SelectOption};
use crate::model::ClientPrompt;
use crate::session::SessionMsg;
use crate::transport::{Responder, RpcError};

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

/// What a reopen applies on top of the saved session: the client's system
/// prompt, and the initial config options in order.
type ReopenSettings = (Option<ClientPrompt>, Vec<(String, String)>);

impl Router {
    pub(super) fn load_session(&mut self, request: acp::LoadSessionRequest, responder: Responder) {
        let (id, cwd, roots) = (
            request.session_id,
            request.cwd,
            request.additional_directories,
        );
        let settings =
            self.reopen_settings(Reopen::Load, request.system_prompt, &request.config_options);
        let (prompt, initial) = match settings {
            Ok(settings) => settings,
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

    pub(super) fn resume_session(
        &mut self,
        request: acp::ResumeSessionRequest,
        responder: Responder,
    ) {
        let (id, cwd, roots) = (
            request.session_id,
            request.cwd,
            request.additional_directories,
        );
        let settings = self.reopen_settings(
            Reopen::Resume,
            request.system_prompt,
            &request.config_options,
        );
        let (prompt, initial) = match settings {
            Ok(settings) => settings,
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

    pub(super) fn fork_session(&mut self, request: acp::ForkSessionRequest, responder: Responder) {
        let settings =
            self.reopen_settings(Reopen::Fork, request.system_prompt, &request.config_options);
        let (prompt, initial) = match settings {
            Ok(settings) => settings,
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

    /// The client's system prompt and initial config options for a reopen,
    /// each checked as `session/new` checks them.
    fn reopen_settings(
        &self,
        how: Reopen,
        system_prompt: Option<acp::SystemPrompt>,
        config_options: &[acp::InitialSessionConfigOption],
    ) -> Result<ReopenSettings, RpcError> {
        Ok((
            self.client_prompt(how.method(), system_prompt)?,
            self.initial_options(how.method(), config_options)?,
        ))
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
