//! Making a request fit the model's window before it is sent: compaction
//! past the threshold, then dropping the oldest turns.

use super::{Journal, TurnInput, compaction_id, journal};
use crate::context::compact::{self, CompactError};
use crate::context::{ContextBudget, ContextManager, ContextOp};
use crate::events::{AgentEvent, Compaction, CompactionOutcome};
use crate::providers::ProviderError;

/// Make the next request fit: past the compaction threshold, summarize
/// older turns; past the budget even so, drop the oldest whole turns and
/// tell the user. A request that cannot fit is not sent.
pub(super) async fn fit(
    context: &mut ContextManager,
    ops: &mut Vec<ContextOp>,
    input: &TurnInput,
    fixed_chars: u64,
    budget: &ContextBudget,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> Result<(), ProviderError> {
    let fixed = context.estimator.tokens(fixed_chars);
    let used = fixed + context.tokens();
    let settings = &input.session.limits.context_settings;
    // With compaction between turns on, only a request that would not fit at all.
    let compact_at = settings.compact_in_turn_at(budget);
    if used <= compact_at {
        return Ok(());
    }
    let keep = settings.keep_recent_turns;
    if let Some(entries) = compact::compactable(context, keep, budget.window) {
        let id = compaction_id();
        emit(AgentEvent::Compaction(Compaction::Started {
            id: id.clone(),
            thought: Some(format!(
                "Context at ~{used} of {} tokens (compaction at {}): summarizing {entries} earlier entries…\n",
                budget.window, compact_at
            )),
        }));
        let on_text = |text: &str| {
            emit(AgentEvent::Compaction(Compaction::SummaryChunk {
                id: id.clone(),
                text: text.to_string(),
            }));
        };
        let wanted = compact::SummaryWanted {
            focus: None,
            on_text: &on_text,
        };
        // The request as the turn sends it, which the summary continues.
        let last = input.request_prefix();
        let last = compact::LastRequest {
            provider: &*input.session.model.provider,
            request: &last,
        };
        let compacted =
            compact::compact(context, entries, last, wanted, budget, &input.cancel).await;
        let ended = |outcome, thought| {
            emit(AgentEvent::Compaction(Compaction::Ended {
                id: id.clone(),
                outcome,
                thought,
            }));
        };
        match compacted {
            Ok(compact::Compacted { op, report }) => {
                ended(CompactionOutcome::Completed, Some(format!("{report}\n")));
                journal(input, Journal::Op(op.clone()));
                ops.push(op);
            }
            // The call that follows sees the cancel and sends nothing.
            Err(CompactError::Cancelled) => {
                ended(CompactionOutcome::Cancelled, None);
                return Ok(());
            }
            Err(CompactError::Apply(err)) => {
                tracing::warn!(%err, "compaction could not be applied");
                ended(CompactionOutcome::Failed(err.to_string()), None);
            }
            Err(err) => ended(
                CompactionOutcome::Failed(err.to_string()),
                Some(format!("{err}\n")),
            ),
        }
    }
    let room = budget.limit().saturating_sub(fixed);
    let fits = drop_oldest(context, ops, input, room, budget.window, emit);
    if fits {
        Ok(())
    } else {
        Err(ProviderError::ContextOverflow {
            needed: fixed + context.tokens(),
            limit: budget.limit(),
            window: budget.window,
        })
    }
}

/// Drop the oldest whole turns until the context fits `room` tokens, and
/// tell the user; whether it fits now.
fn drop_oldest(
    context: &mut ContextManager,
    ops: &mut Vec<ContextOp>,
    input: &TurnInput,
    room: u64,
    window: u64,
    emit: &(dyn Fn(AgentEvent) + Send + Sync),
) -> bool {
    let (drops, fits) = context.plan_drops(room);
    if !drops.is_empty() {
        let before = context.entries().len();
        for op in drops {
            if let Err(err) = context.apply(&op) {
                tracing::warn!(%err, "drop could not be applied");
                continue;
            }
            journal(input, Journal::Op(op.clone()));
            ops.push(op);
        }
        emit(AgentEvent::AgentText(format!(
            "\n[Context full: dropped the {} oldest entries to fit the {}-token window. `/context` shows what remains.]\n",
            before - context.entries().len(),
            window
        )));
    }
    fits
}
