//! A prompt's way through the session's foreground: taken (a new turn, or
//! a steering message for the running one, or a retry already taken),
//! started with its id and `Update::UserPrompt`, and ended with
//! `Update::State`: `Running` when a turn starts, `Idle` after everything
//! else it showed, unless messages left waiting start the next turn at once.

use super::steering::{Pending, reject};
use super::turn::RunningTurn;
use super::{
    Inserted, PromptAnswer, PromptReply, PromptSubmission, SessionActor, SessionError, TurnEnd,
    WhenBusy,
};
use crate::client::{PromptOrigin, SessionState, Update};
use crate::events::{AgentEvent, Notice, Severity, StopReason};
use crate::store::PromptIds;
use tokio_util::sync::CancellationToken;

impl SessionActor {
    /// A prompt: a retry answered with its first id, a steering message
    /// for the running turn, or a new turn.
    pub(super) fn take_prompt(
        &mut self,
        submission: PromptSubmission,
        running: &mut Option<RunningTurn>,
    ) {
        let PromptSubmission {
            content,
            request_cancel,
            idempotency_key,
            when_busy,
            answer,
        } = submission;
        if let Some(key) = &idempotency_key
            && let Some(message_id) = self.conversation.keys.get(key)
        {
            match answer {
                PromptAnswer::AtInsertion(reply) => {
                    let message_id = message_id.clone();
                    reply.send(Ok(Inserted { message_id }));
                }
                PromptAnswer::AtEnd(reply) => {
                    let _ = reply.send(Err(SessionError::Duplicate(key.clone())));
                }
            }
            return;
        }
        let pending = Pending {
            message_id: uuid::Uuid::new_v4().to_string(),
            content,
            steered_content: None,
            idempotency_key,
            request_cancel,
            answer,
        };
        match running {
            Some(turn) => self.steer(pending, when_busy, turn),
            None => {
                self.begin_turn();
                self.send(Update::State(SessionState::Running));
                *running = self.start_prompt(vec![pending]);
            }
        }
    }

    /// A prompt while a turn runs: into its inbox, if it steers.
    fn steer(&mut self, mut pending: Pending, when_busy: WhenBusy, turn: &RunningTurn) {
        // A sender that waits for the turn's end cannot share another's;
        // a built-in command acts on the session, not in the conversation.
        let at_end = matches!(pending.answer, PromptAnswer::AtEnd(_));
        let command = crate::commands::from_parts(&pending.content).is_some();
        if when_busy == WhenBusy::Refuse || at_end || command {
            reject(pending, SessionError::Busy(self.services.id.clone()));
            return;
        }
        // The model reads a skill command expanded, as in a prompt.
        self.refresh_skills();
        pending.steered_content = Some(self.expand_skill_command(pending.content.clone()));
        let (key, message_id) = (pending.idempotency_key.clone(), pending.message_id.clone());
        match turn.started.inbox.push(pending) {
            Ok(()) => {
                if let Some(key) = key {
                    self.conversation.keys.insert(key, message_id);
                }
            }
            Err(refused) => reject(
                *refused,
                SessionError::SteeringFull(self.services.id.clone()),
            ),
        }
    }

    /// Starts a turn (the session is `Running` already) with the first of
    /// `prompts` as its prompt; the others wait in its inbox, which the
    /// loop takes before its first request. A prompt that cannot start is
    /// refused and the next one tried; none left: the session is idle.
    pub(super) fn start_prompt(&mut self, prompts: Vec<Pending>) -> Option<RunningTurn> {
        let mut prompts = prompts.into_iter();
        while let Some(first) = prompts.next() {
            self.withdraw_suggestions();
            // Told before the turn's task starts, so it comes before what the turn shows.
            self.send(first.user_prompt(PromptOrigin::Live));
            let ids = PromptIds {
                message_id: first.message_id.clone(),
                idempotency_key: first.idempotency_key.clone(),
            };
            // A child of the request's token: `$/cancel_request` and
            // `session/cancel` both stop it.
            let cancel = first.request_cancel.child_token();
            match self.start_turn(first.content.clone(), cancel.clone(), &ids) {
                Ok(started) => {
                    if let Some(key) = ids.idempotency_key {
                        self.conversation.keys.insert(key, ids.message_id);
                    }
                    for rest in prompts {
                        if let Err(refused) = started.inbox.push(rest) {
                            let err = SessionError::SteeringFull(self.services.id.clone());
                            reject(*refused, err);
                        }
                    }
                    return Some(RunningTurn {
                        cancel,
                        reply: first.inserted(),
                        started,
                    });
                }
                Err(err) => reject(first, err),
            }
        }
        self.send(Update::State(SessionState::Idle(StopReason::EndTurn)));
        self.conversation.in_turn = false;
        None
    }

    /// A turn ended with `result`. Messages still waiting start the next
    /// turn at once (the session stays `Running`), unless it was
    /// cancelled: then each is refused before the session is `Idle`.
    pub(super) fn turn_ended(
        &mut self,
        turn: RunningTurn,
        result: Result<TurnEnd, SessionError>,
    ) -> Option<RunningTurn> {
        let RunningTurn {
            cancel,
            reply,
            started,
        } = turn;
        let waiting = started.inbox.drain();
        let stop = match &result {
            Ok(end) => end.stop,
            Err(_) => StopReason::EndTurn,
        };
        let cancelled = cancel.is_cancelled() || stop == StopReason::Cancelled;
        let result = self.tell_failure(result, reply.as_ref());
        let next = if cancelled {
            for pending in waiting {
                reject(pending, SessionError::SteeringCancelled);
            }
            None
        } else if waiting.is_empty() {
            None
        } else {
            self.start_prompt(waiting)
        };
        match next {
            Some(next) => {
                answer(reply, result);
                Some(next)
            }
            None if self.conversation.in_turn => {
                self.send(Update::State(SessionState::Idle(if cancelled {
                    StopReason::Cancelled
                } else {
                    stop
                })));
                self.conversation.in_turn = false;
                answer(reply, result);
                None
            }
            // The next prompts could not start: idle already.
            None => {
                answer(reply, result);
                None
            }
        }
    }

    /// A failed turn whose sender was answered when its message went in
    /// has no answer left to carry the error: the user is told by a notice.
    fn tell_failure(
        &mut self,
        result: Result<TurnEnd, SessionError>,
        reply: Option<&PromptReply>,
    ) -> Result<TurnEnd, SessionError> {
        if let (Err(err), None) = (&result, reply) {
            let text = err.to_string();
            self.send(Update::Agent(AgentEvent::Notice(Notice {
                severity: Severity::Error,
                title: "The turn failed".into(),
                detail: Some(text.clone()),
                thought: format!("{text}\n"),
            })));
        }
        result
    }
}

fn answer(reply: Option<PromptReply>, result: Result<TurnEnd, SessionError>) {
    if let Some(reply) = reply {
        let _ = reply.send(result);
    }
}

/// The request tokens of the messages waiting in the running turn's inbox.
pub(super) fn steered_requests(running: Option<&RunningTurn>) -> Vec<CancellationToken> {
    running.map_or_else(Vec::new, |turn| turn.started.inbox.waiting_requests())
}

impl SessionActor {
    /// Waiting messages whose request was cancelled leave the inbox,
    /// refused (-32800), with their idempotency keys: a retry may send them.
    pub(super) fn withdraw_steered(&mut self, running: Option<&RunningTurn>) {
        let Some(turn) = running else { return };
        for pending in turn.started.inbox.withdraw_cancelled() {
            let id = pending.message_id.clone();
            self.conversation
                .keys
                .retain(|_, message_id| *message_id != id);
            reject(pending, SessionError::RequestCancelled);
        }
    }
}
