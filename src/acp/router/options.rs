//! What a client reads and sets on a session: its modes and config options
//! (`session/set_config_option`, `session/set_mode`, the old
//! `session/set_model`), the unstable `session/options` (what a session
//! would have) and initial `configOptions`, and the unstable
//! `session/set_title`.

use agent_client_protocol_schema::v1::AGENT_METHOD_NAMES as NAMES;
use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::Router;
use super::answers::{session_answer, store_error};
use super::params::{check_cwd, check_roots, prefixed};
use crate::acp::request::{Choice, Reply, SessionId};
use crate::client::SelectOption;
use crate::session::{InitialOption, SessionHandle, SessionMsg};
use crate::transport::RpcError;

impl Router {
    pub(in crate::acp) fn set_option(
        &mut self,
        session_id: &SessionId,
        option: String,
        value: Option<String>,
        reply: Reply<Vec<SelectOption>>,
    ) {
        let Some(session) = self.sessions.get(session_id) else {
            return reply.fail(self.not_running(session_id));
        };
        let Some(value) = value else {
            return reply.fail(RpcError::invalid_params(format!(
                "value: option `{option}` takes one of its listed value ids, not a boolean"
            )));
        };
        let (options_reply, options) = oneshot::channel();
        session.send(SessionMsg::SetOption {
            id: option,
            value,
            reply: options_reply,
        });
        tokio::spawn(async move {
            reply.send(session_answer(options).await);
        });
    }

    pub(super) fn set_mode(&mut self, session_id: &SessionId, mode: String, reply: Reply<()>) {
        let Some(session) = self.sessions.get(session_id) else {
            return reply.fail(self.not_running(session_id));
        };
        let (done, answer) = oneshot::channel();
        session.send(SessionMsg::SetMode { mode, reply: done });
        tokio::spawn(async move {
            reply.send(session_answer(answer).await);
        });
    }

    pub(super) fn set_model(&mut self, session_id: &SessionId, model: String, reply: Reply<()>) {
        let Some(session) = self.sessions.get(session_id) else {
            return reply.fail(self.not_running(session_id));
        };
        let (done, answer) = oneshot::channel();
        session.send(SessionMsg::SetModel { model, reply: done });
        tokio::spawn(async move {
            reply.send(session_answer(answer).await);
        });
    }

    pub(in crate::acp) fn session_options(
        &mut self,
        session_id: Option<SessionId>,
        cwd: std::path::PathBuf,
        additional_directories: &[std::path::PathBuf],
        reply: Reply<Vec<SelectOption>>,
    ) {
        let checked = check_cwd(&cwd).and_then(|()| check_roots(additional_directories));
        let roots = match checked {
            Ok(roots) => roots,
            Err(err) => return reply.fail(prefixed(NAMES.session_options, err)),
        };
        let (options_reply, options) = oneshot::channel();
        let probe: BoxFuture<'static, Result<Option<SessionHandle>, RpcError>> = match &session_id {
            Some(id) => match self.sessions.get(id) {
                Some(session) => {
                    session.send(SessionMsg::Options {
                        reply: options_reply,
                    });
                    Box::pin(async { Ok(None) })
                }
                None => {
                    let probing = self.sessions.probe_stored(id, cwd, roots, self.abilities());
                    Box::pin(async move {
                        let probe = probing.await.map_err(store_error)?;
                        probe.send(SessionMsg::Options {
                            reply: options_reply,
                        });
                        Ok(Some(probe))
                    })
                }
            },
            None => {
                let probe = self.sessions.probe(cwd, roots, self.abilities());
                probe.send(SessionMsg::Options {
                    reply: options_reply,
                });
                Box::pin(async { Ok(Some(probe)) })
            }
        };
        tokio::spawn(async move {
            let probe = match probe.await {
                Ok(probe) => probe,
                Err(err) => return reply.fail(err),
            };
            let answer = options
                .await
                .map_err(|_| RpcError::internal("the options probe stopped at once"));
            drop(probe);
            reply.send(answer);
        });
    }

    /// The initial config options, when `[acp] unstable` names `options`:
    /// each once, in order; a value of another kind is skipped.
    pub(in crate::acp) fn initial_options(
        &self,
        method: &str,
        given: Vec<Choice>,
    ) -> Result<Vec<InitialOption>, RpcError> {
        if !self.sessions.unstable().options {
            return Ok(Vec::new());
        }
        let mut seen: Vec<String> = Vec::new();
        let mut options = Vec::new();
        for (n, choice) in given.into_iter().enumerate() {
            if seen.contains(&choice.option) {
                return Err(RpcError::invalid_params(format!(
                    "{method}: field `configOptions[{n}]`: option `{}` is given twice; give each option once",
                    choice.option
                )));
            }
            seen.push(choice.option.clone());
            if let Some(value) = choice.value {
                options.push(InitialOption {
                    option: choice.option,
                    value,
                });
            }
        }
        Ok(options)
    }

    pub(in crate::acp) fn set_title(
        &mut self,
        session_id: &SessionId,
        title: &str,
        reply: Reply<String>,
    ) {
        let Some(session) = self.sessions.get(session_id) else {
            return reply.fail(RpcError::session_not_found(session_id.as_str()));
        };
        let title = title.trim().to_string();
        if title.is_empty() {
            return reply.fail(RpcError::invalid_params(
                "field `title` is empty; send the title to show",
            ));
        }
        let (done, answer) = oneshot::channel();
        session.send(SessionMsg::SetTitle { title, reply: done });
        tokio::spawn(async move {
            reply.send(
                answer
                    .await
                    .map_err(|_| RpcError::internal("the session stopped before answering")),
            );
        });
    }
}
