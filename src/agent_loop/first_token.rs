//! The wait for a model's first token, told to the client so a long prompt
//! read by a local model does not look like a dead agent.

use std::time::Duration;

use crate::events::AgentEvent;

/// The wait for a model call's first token, and the notices sent during it.
pub(super) struct FirstTokenWait {
    every: Option<Duration>,
    since: tokio::time::Instant,
    next: Option<tokio::time::Instant>,
}

impl FirstTokenWait {
    pub(super) fn new(every: Option<Duration>) -> Self {
        let since = tokio::time::Instant::now();
        Self {
            every,
            since,
            next: every.map(|every| since + every),
        }
    }

    /// Ready when the next notice is due; never once the first token came.
    pub(super) async fn next_notice(&self) {
        match self.next {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// The notice now due; the one after it is due a period later.
    pub(super) fn notice(&mut self) -> AgentEvent {
        if let (Some(next), Some(every)) = (self.next.as_mut(), self.every) {
            *next += every;
        }
        let waited = self.since.elapsed().as_secs();
        AgentEvent::Thought(format!(
            "Still waiting for the model's first token ({waited} s so far; a local model can take minutes to read a long prompt).\n"
        ))
    }

    pub(super) fn done(&mut self) {
        self.next = None;
    }
}
