//! Going on with the next provider of the chain when the turn's provider
//! keeps failing (retries exhausted, a rate limit past `max_wait_secs`, an
//! outage). The conversation is provider-neutral (each wire format renders
//! it, as after a manual switch), so the same context goes to the next one.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::TurnInput;
use crate::events::{AgentEvent, Notice, Severity};
use crate::providers::fallback::FallbackTarget;
use crate::providers::pricing::CostMeter;
use crate::providers::reasoning::known_to_reason;
use crate::providers::{FALLBACK_CONTEXT_WINDOW, Provider, ProviderError, Providers, Reasoning};

/// The meter for a model's calls, where its price is known.
pub type CostFor = Arc<dyn Fn(&str) -> Option<CostMeter> + Send + Sync>;

/// What a turn may fall back on.
pub struct Fallback {
    pub providers: Arc<Providers>,
    /// Still to try, in order.
    pub chain: VecDeque<FallbackTarget>,
    /// The session's reasoning effort, for the models that reason.
    pub thought_level: Reasoning,
    pub cost_for: CostFor,
}

/// The provider and model a turn moved to; the session adopts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switched {
    pub provider: String,
    pub model: String,
}

/// The next usable provider of the chain after `err`, told to the user;
/// None when the chain is spent (or the error is the request's own fault,
/// which another provider would not cure), or the turn is cancelled.
pub async fn next(
    fallback: &mut Fallback,
    from: &dyn Provider,
    err: &ProviderError,
    cancel: &CancellationToken,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Option<Next> {
    if matches!(err, ProviderError::ContextOverflow { .. }) {
        return None;
    }
    while let Some(target) = fallback.chain.pop_front() {
        if cancel.is_cancelled() {
            return None;
        }
        let (Some(provider), Some(settings)) = (
            fallback.providers.get(&target.provider),
            fallback.providers.config(&target.provider),
        ) else {
            continue;
        };
        let model = target.model_of(&settings);
        let window = tokio::select! {
            biased;
            _ = cancel.cancelled() => FALLBACK_CONTEXT_WINDOW,
            window = fallback.providers.context_window(&target.provider, &model) => window,
        };
        let thought = format!(
            "Provider `{}` failed: {err}\nContinuing this turn with `{}` (model `{model}`); the session stays on it (switch back in the provider selector).\n",
            from.name(),
            target.provider
        );
        emit(AgentEvent::Notice(Notice {
            severity: Severity::Warning,
            title: format!(
                "Provider `{}` failed; continuing with `{}`",
                from.name(),
                target.provider
            ),
            detail: Some(thought.trim().to_string()),
            thought,
        }));
        tracing::warn!(from = from.name(), to = %target, %err, "falling back");
        return Some(Next {
            reasoning: known_to_reason(&model).then_some(fallback.thought_level),
            cost: (fallback.cost_for)(&model),
            switched: Switched {
                provider: target.provider.clone(),
                model,
            },
            provider,
            window,
        });
    }
    None
}

/// Move the turn to the next provider of its fallback chain, if one is left.
pub(super) async fn fall_back(
    input: &mut TurnInput,
    err: &ProviderError,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Option<Switched> {
    let chain = input.session.model.fallback.as_mut()?;
    let next = next(
        chain,
        &*input.session.model.provider,
        err,
        &input.cancel,
        emit,
    )
    .await?;
    input.session.model.provider = next.provider;
    input.session.model.name = next.switched.model.clone();
    input.context_window = next.window;
    input.session.model.reasoning = next.reasoning;
    input.session.model.cost = next.cost;
    Some(next.switched)
}

/// Where the turn goes on.
pub struct Next {
    pub provider: Arc<dyn Provider>,
    pub switched: Switched,
    pub window: u64,
    pub reasoning: Option<Reasoning>,
    pub cost: Option<CostMeter>,
}
