//! A stored session back in memory: `session/load` replays its history to
//! the client first, `session/resume` does not, and the unstable
//! `session/fork` resumes a copy under a new id (whole, or up to a cursor).

use std::path::PathBuf;

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use tokio::sync::oneshot;

use super::Router;
use super::answers::{store_error, with_models};
use super::capabilities::Extras;
use super::params::{check_roots, session_servers};
use crate::acp::translate;
use crate::client::{SelectOption, SessionState, Update};
use crate::model::{ClientPrompt, SessionId};
use crate::session::manager::Replay;
use crate::session::{InitialOption, OpenRequest, SessionMsg};
use crate::transport::{Responder, RpcError};

/// How a stored session comes back: `session/load` replays its history to
/// the client first, `session/resume` does not; `session/fork` (unstable)
/// resumes a copy under a new id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reopen {
    Load,
    Resume,
    /// ACP v2's `session/resume` with `replayFrom: {type: "start"}`: a
    /// load by another name.
    ResumeReplaying,
    Fork,
}

impl Reopen {
    fn method(self) -> &'static str {
        match self {
            Reopen::Load => "session/load",
            Reopen::Resume | Reopen::ResumeReplaying => "session/resume",
            Reopen::Fork => "session/fork",
        }
    }
}

/// How `session/new`'s answer is written (v1 or v2), from the new
/// session's id and options.
pub type NewAnswer = fn(&str, &[SelectOption], Extras) -> serde_json::Result<Value>;

/// How a reopen's answer is written (v1 or v2), from how it reopened, the
/// session's id and its options.
pub type ReopenAnswer = fn(Reopen, &str, &[SelectOption], Extras) -> serde_json::Result<Value>;

/// What a reopen applies on top of the saved session: the client's system
/// prompt, and the initial config options in order.
struct ClientChoices {
    client_prompt: Option<ClientPrompt>,
    initial_options: Vec<InitialOption>,
}

/// Which stored session a reopen brings back: a fork's source, cut at a
/// cursor's checkpoint when `at` names one.
struct Target {
    id: SessionId,
    at: Option<String>,
}

/// Where the reopened session works, as the request gives it (checked by
/// [`Router::reopen`]).
struct Place<'a> {
    cwd: PathBuf,
    additional_directories: Vec<PathBuf>,
    mcp_servers: &'a [acp::McpServer],
}

impl Router {
    pub(super) fn load_session(&mut self, request: acp::LoadSessionRequest, responder: Responder) {
        let choices =
            self.client_choices(Reopen::Load, request.system_prompt, &request.config_options);
        let choices = match choices {
            Ok(choices) => choices,
            Err(err) => return responder.respond(Err(err)),
        };
        let target = Target {
            id: SessionId::from(request.session_id.0.clone()),
            at: None,
        };
        let place = Place {
            cwd: request.cwd,
            additional_directories: request.additional_directories,
            mcp_servers: &request.mcp_servers,
        };
        self.reopen(Reopen::Load, target, place, choices, (reopened, responder));
    }

    pub(in crate::acp) fn resume_session(
        &mut self,
        request: acp::ResumeSessionRequest,
        responder: Responder,
    ) {
        self.resume_as(request, Reopen::Resume, reopened, responder);
    }

    /// `session/resume` in either version: `how` says whether the history
    /// is replayed first, `answer` writes the answer.
    pub(in crate::acp) fn resume_as(
        &mut self,
        request: acp::ResumeSessionRequest,
        how: Reopen,
        answer: ReopenAnswer,
        responder: Responder,
    ) {
        let choices = self.client_choices(how, request.system_prompt, &request.config_options);
        let choices = match choices {
            Ok(choices) => choices,
            Err(err) => return responder.respond(Err(err)),
        };
        let target = Target {
            id: SessionId::from(request.session_id.0.clone()),
            at: None,
        };
        let place = Place {
            cwd: request.cwd,
            additional_directories: request.additional_directories,
            mcp_servers: &request.mcp_servers,
        };
        self.reopen(how, target, place, choices, (answer, responder));
    }

    pub(in crate::acp) fn fork_session(
        &mut self,
        request: acp::ForkSessionRequest,
        responder: Responder,
    ) {
        self.fork_as(request, reopened, responder);
    }

    /// `session/fork` in either version: `answer` writes the answer.
    pub(in crate::acp) fn fork_as(
        &mut self,
        request: acp::ForkSessionRequest,
        answer: ReopenAnswer,
        responder: Responder,
    ) {
        let choices =
            self.client_choices(Reopen::Fork, request.system_prompt, &request.config_options);
        let choices = match choices {
            Ok(choices) => choices,
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
        let target = Target {
            id: SessionId::from(request.session_id.0.clone()),
            at,
        };
        let place = Place {
            cwd: request.cwd,
            additional_directories: request.additional_directories,
            mcp_servers: &request.mcp_servers,
        };
        self.reopen(Reopen::Fork, target, place, choices, (answer, responder));
    }

    /// The client's system prompt and initial config options for a reopen,
    /// each checked as `session/new` checks them.
    fn client_choices(
        &self,
        how: Reopen,
        system_prompt: Option<acp::SystemPrompt>,
        config_options: &[acp::InitialSessionConfigOption],
    ) -> Result<ClientChoices, RpcError> {
        Ok(ClientChoices {
            client_prompt: self.client_prompt(how.method(), system_prompt)?,
            initial_options: self.initial_options(how.method(), config_options)?,
        })
    }

    /// `session/load`, `session/resume` and `session/fork`: the session back in memory; a
    /// load's replay goes out before the answer, and the session speaks
    /// only after it.
    fn reopen(
        &mut self,
        how: Reopen,
        target: Target,
        place: Place,
        choices: ClientChoices,
        (answer, responder): (ReopenAnswer, Responder),
    ) {
        let relay = self.acp_relay();
        let checked = session_servers(how.method(), &place.cwd, place.mcp_servers, relay.as_ref())
            .and_then(|servers| Ok((servers, check_roots(&place.additional_directories)?)));
        let (mcp_servers, additional_directories) = match checked {
            Ok(checked) => checked,
            Err(err) => return responder.respond(Err(err)),
        };
        let request = OpenRequest {
            cwd: place.cwd,
            additional_directories,
            client: self.abilities(),
            mcp_servers,
            client_prompt: choices.client_prompt,
            initial_options: choices.initial_options,
        };
        let delivery = self.delivery();
        let loaded = match how {
            Reopen::Fork => self.sessions.fork(&target.id, target.at, request),
            Reopen::Load | Reopen::ResumeReplaying => self
                .sessions
                .load(&target.id, request, Replay::Conversation)
                .map(|(tx, loading)| (target.id, tx, loading)),
            Reopen::Resume => self
                .sessions
                .load(&target.id, request, Replay::Nothing)
                .map(|(tx, loading)| (target.id, tx, loading)),
        };
        let (id, tx, loading) = match loaded {
            Ok(loaded) => loaded,
            Err(err) => return responder.respond(Err(store_error(err))),
        };
        // Asked now, so the session answers it before any prompt sent after this request.
        let (reply, options) = oneshot::channel();
        let _ = tx.send(SessionMsg::Options { reply });
        let client = self.replay.clone();
        let extras = self.extras();
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
                client.send(&id, update);
            }
            // v2 (v1 has neither): the replay's end, then the state the
            // session resumes in, both before the answer.
            if how == Reopen::ResumeReplaying {
                client.send(&id, Update::ReplayComplete);
            }
            if matches!(how, Reopen::Resume | Reopen::ResumeReplaying) {
                client.send(&id, Update::State(SessionState::Ready));
            }
            match answer(how, id.as_str(), &options, extras) {
                Ok(value) => responder.respond(Ok(value)),
                Err(err) => responder.respond(Err(RpcError::internal(err.to_string()))),
            }
            let _ = tx.send(SessionMsg::Started { delivery });
        });
    }
}

/// The answer to a load or a resume: where the session's settings stand.
fn reopened(
    how: Reopen,
    id: &str,
    options: &[SelectOption],
    extras: Extras,
) -> serde_json::Result<Value> {
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
            extras,
        ),
        Reopen::Resume | Reopen::ResumeReplaying => with_models(
            acp::ResumeSessionResponse::new()
                .modes(modes)
                .config_options(config),
            options,
            extras,
        ),
        Reopen::Fork => with_models(
            acp::ForkSessionResponse::new(id.to_string())
                .modes(modes)
                .config_options(config),
            options,
            extras,
        ),
    }
}
