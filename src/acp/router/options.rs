//! What a client reads and sets on a session: its modes and config options
//! (`session/set_config_option`, `session/set_mode`, the old
//! `session/set_model`), the unstable `session/options` (what a session
//! would have) and initial `configOptions`, and the unstable
//! `session/set_title`.

use agent_client_protocol_schema::v1 as acp;
use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::Router;
use super::answers::{session_answer, store_error};
use super::params::{check_cwd, check_roots, prefixed};
use crate::acp::translate;
use crate::client::SelectOption;
use crate::model::SessionId;
use crate::session::{InitialOption, SessionHandle, SessionMsg};
use crate::transport::{Responder, RpcError};

impl Router {
    pub(super) fn set_config_option(
        &mut self,
        request: acp::SetSessionConfigOptionRequest,
        responder: Responder,
    ) {
        let value = request.value.as_value_id().map(|value| value.0.to_string());
        let option = request.config_id.0.to_string();
        let id = SessionId::from(request.session_id.0.clone());
        self.set_option(&id, option, value, responder, |options| {
            acp::SetSessionConfigOptionResponse::new(translate::config_options(options))
        });
    }

    /// `session/set_config_option` in either version: `value` is None for
    /// a boolean (no option here takes one); `answer` writes the session's
    /// options as the version has them.
    pub(in crate::acp) fn set_option<A: serde::Serialize + Send + 'static>(
        &mut self,
        session_id: &SessionId,
        option: String,
        value: Option<String>,
        responder: Responder,
        answer: fn(&[SelectOption]) -> A,
    ) {
        let Some(session) = self.sessions.get(session_id) else {
            return responder.respond(Err(self.not_running(session_id)));
        };
        let Some(value) = value else {
            return responder.respond(Err(RpcError::invalid_params(format!(
                "value: option `{option}` takes one of its listed value ids, not a boolean"
            ))));
        };
        let (reply, options) = oneshot::channel();
        session.send(SessionMsg::SetOption {
            id: option,
            value,
            reply,
        });
        tokio::spawn(async move {
            let options = session_answer(options).await;
            responder.respond_with(options.map(|options| answer(&options)));
        });
    }

    pub(super) fn set_mode(&mut self, request: acp::SetSessionModeRequest, responder: Responder) {
        let id = SessionId::from(request.session_id.0.clone());
        let Some(session) = self.sessions.get(&id) else {
            return responder.respond(Err(self.not_running(&id)));
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

    pub(super) fn set_model(&mut self, request: SetModelRequest, responder: Responder) {
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

    /// `session/options`: what `session/new` (or, with a `sessionId`,
    /// `session/load`) would answer in `modes` and `configOptions`. An open
    /// session answers for itself; otherwise a probe session computes it
    /// (from the saved settings for a saved session), so the answers cannot
    /// drift apart. A probe saves nothing, starts no MCP server, is not
    /// listed and never speaks.
    pub(in crate::acp) fn session_options(
        &mut self,
        request: acp::SessionOptionsRequest,
        responder: Responder,
    ) {
        let checked =
            check_cwd(&request.cwd).and_then(|()| check_roots(&request.additional_directories));
        let roots = match checked {
            Ok(roots) => roots,
            Err(err) => return responder.respond(Err(prefixed("session/options", err))),
        };
        let (reply, options) = oneshot::channel();
        let probe: BoxFuture<'static, Result<Option<SessionHandle>, RpcError>> =
            match request.session_id.map(|id| SessionId::from(id.0)) {
                Some(id) => match self.sessions.get(&id) {
                    Some(session) => {
                        session.send(SessionMsg::Options { reply });
                        Box::pin(async { Ok(None) })
                    }
                    None => {
                        let probing =
                            self.sessions
                                .probe_stored(&id, request.cwd, roots, self.abilities());
                        Box::pin(async move {
                            let probe = probing.await.map_err(store_error)?;
                            probe.send(SessionMsg::Options { reply });
                            Ok(Some(probe))
                        })
                    }
                },
                None => {
                    let probe = self.sessions.probe(request.cwd, roots, self.abilities());
                    probe.send(SessionMsg::Options { reply });
                    Box::pin(async { Ok(Some(probe)) })
                }
            };
        tokio::spawn(async move {
            let probe = match probe.await {
                Ok(probe) => probe,
                Err(err) => return responder.respond(Err(err)),
            };
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

    /// A session request's initial `configOptions` as (option, value) pairs,
    /// in order, when `[acp] unstable` names `options`. Without it they are
    /// ignored, as before this agent knew them (the client should not send
    /// them to an agent that does not advertise `sessionCapabilities.options`).
    /// Boolean values are skipped: every option here is a select.
    pub(in crate::acp) fn initial_options(
        &self,
        method: &str,
        given: &[acp::InitialSessionConfigOption],
    ) -> Result<Vec<InitialOption>, RpcError> {
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
                options.push(InitialOption {
                    option: id.to_string(),
                    value: value.0.to_string(),
                });
            }
        }
        Ok(options)
    }

    pub(in crate::acp) fn set_title(
        &mut self,
        request: acp::SetSessionTitleRequest,
        responder: Responder,
    ) {
        let id = SessionId::from(request.session_id.0.clone());
        let Some(session) = self.sessions.get(&id) else {
            return responder.respond(Err(RpcError::session_not_found(id.as_str())));
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
}

/// `session/set_model`: the old session-model extension, not in the schema.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SetModelRequest {
    session_id: SessionId,
    model_id: String,
}
