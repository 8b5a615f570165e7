//! The steering port: user messages sent while a turn runs join it at its
//! safe point, after the round's tool results are in the context and
//! before the next model request. The loop knows only [`SteeringInbox`];
//! the session keeps the inbox and tells the senders.

use std::sync::Arc;

use super::{Journal, TurnInput, TurnState, journal};
use crate::model::Message;

/// A user message that joins the running turn.
#[derive(Debug, Clone, PartialEq)]
pub struct SteeredMessage {
    /// The id its sender is answered with, saved with it.
    pub message_id: String,
    pub message: Arc<Message>,
    /// The sender's idempotency key, saved with it.
    pub idempotency_key: Option<String>,
}

/// Where messages for the running turn wait.
pub trait SteeringInbox: Send + Sync {
    /// Every message waiting, in the order sent: the loop's from now on.
    fn take(&self) -> Vec<SteeredMessage>;
    /// These messages are in the context and journaled: their senders hear so.
    fn inserted(&self, messages: &[SteeredMessage]);
}

impl TurnState {
    /// The safe point: every message waiting goes into the context, in
    /// order, for the next request, journaled like any round.
    pub(super) fn take_steered(&mut self, input: &TurnInput) {
        let Some(inbox) = &input.steering else {
            return;
        };
        let messages = inbox.take();
        if messages.is_empty() {
            return;
        }
        for steered in &messages {
            self.context.push_steered(Arc::clone(&steered.message));
            self.new_messages.push(Arc::clone(&steered.message));
            journal(input, Journal::Steered(steered.clone()));
        }
        inbox.inserted(&messages);
    }
}
