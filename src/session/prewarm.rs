//! Warming a server's prompt cache before the first prompt. Right after
//! the client has the session, its fixed prefix (system prompt, tools, and
//! a loaded session's history) is sent with a one-token answer, so a local
//! server has read it by the time the user's first prompt comes and that
//! prompt pays only for its own tokens. The warm-up is invisible: no
//! updates, no journal entries, no usage. A prompt that comes while it runs
//! waits for it, since a second request would read the prefix again.

use futures::StreamExt;
use thiserror::Error;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::SessionActor;
use super::shared::TurnKind;
use crate::agent_loop::TurnInput;
use crate::context::budget;
use crate::providers::{ChatRequest, ProviderError};

/// A warm-up under way (or ended), which the first turn waits for.
pub(super) struct Warming {
    done: watch::Receiver<bool>,
    /// Stops the warm-up when the session (or the turn that waited) goes.
    _stop: DropGuard,
}

impl Warming {
    /// Until the warm-up has ended, or `cancel` fires.
    pub async fn wait(mut self, cancel: &CancellationToken) {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {}
            // An error means the warm-up's task is gone: nothing to wait for.
            _ = self.done.wait_for(|done| *done) => {}
        }
    }
}

impl SessionActor {
    /// Start warming the provider's prompt cache, where its settings ask
    /// for it (by default: local endpoints).
    pub(super) fn prewarm(&mut self) {
        let provider = &self.settings.current.provider;
        let wanted = (self.services.providers.config(provider)).is_some_and(|c| c.prewarms());
        // A prompt that came first has read the prefix already.
        if !wanted || self.conversation.prompted {
            return;
        }
        let Ok((turn, _)) = self.turn_context(TurnKind::Warmup) else {
            return;
        };
        let context = self.conversation.context.clone();
        let stop = CancellationToken::new();
        let cancel = stop.clone();
        let (done_tx, done) = watch::channel(false);
        let session = self.services.id.clone();
        tokio::spawn(async move {
            let input = turn.input(context, cancel.clone(), &|_| {}).await;
            let started = std::time::Instant::now();
            match warm(input, &cancel).await {
                Ok(()) => {
                    tracing::debug!(%session, elapsed = ?started.elapsed(), "prompt cache warmed");
                }
                Err(why) => tracing::debug!(%session, %why, "prompt cache not warmed"),
            }
            let _ = done_tx.send(true);
        });
        self.conversation.warming = Some(Warming {
            done,
            _stop: stop.drop_guard(),
        });
    }
}

/// Why a warm-up did not finish (only logged).
#[derive(Debug, Error)]
pub(super) enum WarmError {
    #[error("cancelled")]
    Cancelled,
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// Send the request the first turn would begin with, asking for one token.
pub(super) async fn warm(input: TurnInput, cancel: &CancellationToken) -> Result<(), WarmError> {
    if cancel.is_cancelled() {
        return Err(WarmError::Cancelled);
    }
    let tools = input.tools.definitions();
    let fixed = budget::fixed_chars(input.system.as_deref(), &tools);
    let budget = input.budget();
    let context = &input.context;
    // A history the first turn must compact would change before it is
    // sent: then only the fixed part is worth warming.
    let compact_at = (input.session.limits.context_settings).compact_in_turn_at(&budget);
    let fits = context.estimator.tokens(fixed + context.chars()) < compact_at;
    let messages = if fits { context.messages() } else { Vec::new() };
    let request = ChatRequest {
        max_output_tokens: Some(1),
        ..input.request(tools, messages)
    };
    let mut stream = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(WarmError::Cancelled),
        stream = input.session.model.provider.stream_chat(request) => stream?,
    };
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(WarmError::Cancelled),
            event = stream.next() => match event {
                None => return Ok(()),
                Some(Err(err)) => return Err(err.into()),
                Some(Ok(_)) => {}
            },
        }
    }
}
