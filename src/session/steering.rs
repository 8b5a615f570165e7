//! The running turn's steering inbox: prompts sent while it runs wait here
//! (at most [`MAX_PENDING`]) until the agent loop takes them at its safe
//! point. The actor pushes into it; the loop takes from it through the
//! [`SteeringInbox`] port; the senders hear as their messages go in.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{Inserted, PromptAnswer, PromptReply, SessionError};
use crate::agent_loop::{SteeredMessage, SteeringInbox};
use crate::client::{ClientSink, PromptOrigin, Update, UserPrompt};
use crate::model::{Message, Part, Role, SessionId};
use crate::util::lock;

/// How many messages may wait for the running turn.
pub(super) const MAX_PENDING: usize = 16;

/// A prompt the session took, with the id it is known by from now on.
pub(super) struct Pending {
    pub message_id: String,
    /// As it was sent, and as the user is shown it.
    pub content: Vec<Part>,
    /// What the model reads of it when it steers the running turn: a
    /// skill command expanded, as a prompt's is when its turn starts.
    /// None: the content as it is.
    pub steered_content: Option<Vec<Part>>,
    pub idempotency_key: Option<String>,
    /// Its request's token: a turn it starts is cancelled by it too.
    pub request_cancel: CancellationToken,
    pub answer: PromptAnswer,
}

impl Pending {
    /// The message is in the conversation: an answer at insertion goes
    /// now; an answer at the end is handed back, for the turn's end.
    pub fn inserted(self) -> Option<PromptReply> {
        match self.answer {
            PromptAnswer::AtEnd(reply) => Some(reply),
            PromptAnswer::AtInsertion(reply) => {
                reply.send(Ok(Inserted {
                    message_id: self.message_id,
                }));
                None
            }
        }
    }

    pub fn user_prompt(&self, origin: PromptOrigin) -> Update {
        Update::UserPrompt(UserPrompt {
            message_id: self.message_id.clone(),
            content: self.content.clone(),
            origin,
        })
    }
}

/// One turn's inbox.
pub(super) struct TurnInbox {
    /// Waiting for the loop's next safe point, in the order sent.
    pending: Mutex<VecDeque<Pending>>,
    /// Taken by the loop, until it says they are in.
    taken: Mutex<Vec<Pending>>,
    client: Arc<dyn ClientSink>,
    session_id: SessionId,
}

impl TurnInbox {
    pub fn new(client: Arc<dyn ClientSink>, session_id: SessionId) -> Self {
        Self {
            pending: Mutex::default(),
            taken: Mutex::default(),
            client,
            session_id,
        }
    }

    /// Adds a message for the running turn; refused (and handed back) when
    /// [`MAX_PENDING`] already wait.
    pub fn push(&self, message: Pending) -> Result<(), Box<Pending>> {
        let mut pending = lock(&self.pending);
        if pending.len() >= MAX_PENDING {
            return Err(Box::new(message));
        }
        pending.push_back(message);
        Ok(())
    }

    /// The request tokens of the messages still waiting.
    pub fn waiting_requests(&self) -> Vec<CancellationToken> {
        (lock(&self.pending).iter())
            .map(|pending| pending.request_cancel.clone())
            .collect()
    }

    /// The waiting messages whose request was cancelled (`$/cancel_request`),
    /// taken out of the inbox: they will not go in.
    pub fn withdraw_cancelled(&self) -> Vec<Pending> {
        let mut pending = lock(&self.pending);
        let (cancelled, left): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut *pending)
            .into_iter()
            .partition(|waiting| waiting.request_cancel.is_cancelled());
        *pending = left.into();
        cancelled
    }

    /// What the turn did not take, in order: the turn is over.
    pub fn drain(&self) -> Vec<Pending> {
        let mut left: Vec<Pending> = lock(&self.taken).drain(..).collect();
        left.extend(lock(&self.pending).drain(..));
        left
    }
}

impl SteeringInbox for TurnInbox {
    fn take(&self) -> Vec<SteeredMessage> {
        let taken: Vec<Pending> = lock(&self.pending).drain(..).collect();
        let messages = (taken.iter())
            .map(|pending| SteeredMessage {
                message_id: pending.message_id.clone(),
                message: Arc::new(Message {
                    role: Role::User,
                    parts: (pending.steered_content.clone())
                        .unwrap_or_else(|| pending.content.clone()),
                }),
                idempotency_key: pending.idempotency_key.clone(),
            })
            .collect();
        lock(&self.taken).extend(taken);
        messages
    }

    fn inserted(&self, messages: &[SteeredMessage]) {
        let inserted: Vec<Pending> = {
            let mut taken = lock(&self.taken);
            let (inserted, left) = std::mem::take(&mut *taken)
                .into_iter()
                .partition(|pending| messages.iter().any(|m| m.message_id == pending.message_id));
            *taken = left;
            inserted
        };
        for pending in &inserted {
            let update = pending.user_prompt(PromptOrigin::Steered);
            self.client.send(&self.session_id, update);
        }
        for pending in inserted {
            // A sender that waits for the turn's end was refused before it got here.
            drop(pending.inserted());
        }
    }
}

/// Tells a sender its message will not go in.
pub(super) fn reject(pending: Pending, err: SessionError) {
    pending.answer.refuse(err);
}
