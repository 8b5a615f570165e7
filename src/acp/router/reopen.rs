//! A stored session back in memory: `session/load` replays its history to
//! the client first, `session/resume` does not, and the unstable
//! `session/fork` resumes a copy under a new id (whole, or up to a cursor).

use agent_client_protocol_schema::v1::AGENT_METHOD_NAMES as NAMES;
use tokio::sync::oneshot;

use super::Router;
use super::answers::store_error;
use crate::acp::request::{Opened, Place, Reopen, Reply, SessionId};
use crate::client::{SessionState, Update};
use crate::session::SessionMsg;
use crate::session::manager::Replay;
use crate::transport::RpcError;

impl Reopen {
    fn method(self) -> &'static str {
        match self {
            Reopen::Load => NAMES.session_load,
            Reopen::Resume | Reopen::ResumeReplaying => NAMES.session_resume,
            Reopen::Fork => NAMES.session_fork,
        }
    }
}

impl Router {
    /// `session/load`, `session/resume` and `session/fork`: the session back in memory; a
    /// load's replay goes out before the answer, and the session speaks
    /// only after it.
    pub(super) fn reopen(
        &mut self,
        how: Reopen,
        target: SessionId,
        at: Option<String>,
        place: Place,
        reply: Reply<Opened>,
    ) {
        if at.is_some() && !self.sessions.unstable().cursors {
            return reply.fail(RpcError::invalid_params(format!(
                "{}: field `cursorId`: this agent announces no cursors (`[acp] unstable` does not name `cursors`); fork the whole session without it",
                how.method()
            )));
        }
        let reopened = (how != Reopen::Fork).then_some(&target);
        if let Err(err) = self.room_for(reopened) {
            return reply.fail(err);
        }
        let request = match self.open_request(how.method(), place) {
            Ok(request) => request,
            Err(err) => return reply.fail(err),
        };
        let delivery = self.delivery();
        let loaded = match how {
            Reopen::Fork => self.sessions.fork(&target, at, request),
            Reopen::Load | Reopen::ResumeReplaying => self
                .sessions
                .load(&target, request, Replay::Conversation)
                .map(|(tx, loading)| (target.clone(), tx, loading)),
            Reopen::Resume => self
                .sessions
                .load(&target, request, Replay::Nothing)
                .map(|(tx, loading)| (target.clone(), tx, loading)),
        };
        let (id, tx, loading) = match loaded {
            Ok(loaded) => loaded,
            Err(err) => return reply.fail(store_error(err)),
        };
        // Asked now, so the session answers it before any prompt sent after this request.
        let (state_reply, state) = oneshot::channel();
        let _ = tx.send(SessionMsg::State { reply: state_reply });
        let (options_reply, options) = oneshot::channel();
        let _ = tx.send(SessionMsg::Options {
            reply: options_reply,
        });
        let client = self.replay.clone();
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
                Err(err) => return reply.fail(store_error(err)),
            };
            let Ok(options) = options.await else {
                return reply.fail(RpcError::internal("the session stopped at once"));
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
            // A resume mid-turn (another connection's, `serve`) says so.
            if matches!(how, Reopen::Resume | Reopen::ResumeReplaying) {
                let now = state.await.unwrap_or(SessionState::Ready);
                client.send(&id, Update::State(now));
            }
            reply.send(Ok(Opened { id, options }));
            let _ = tx.send(SessionMsg::Started { delivery });
        });
    }
}
