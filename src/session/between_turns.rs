//! Compaction between turns, before it is needed: a prompt turn that ends
//! with the context past `[context] compact_between_turns` of the window
//! starts a compaction in the background while the user reads, then warms
//! the compacted prefix (where the provider is warmed at all). The actor
//! stays responsive; a prompt that comes meanwhile is held until what is
//! left has ended, and is told so once. A compaction that fails or is
//! cancelled (`session/cancel` while a prompt waits, or the session
//! closing) leaves the context and the store as they were.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::shared::TurnKind;
use super::turn::RunningTurn;
use super::{PromptSubmission, SessionActor};
use crate::agent_loop::{TurnInput, compaction_id};
use crate::client::Update;
use crate::context::budget;
use crate::context::compact::{self, CompactError};
use crate::context::{ContextManager, ContextOp};
use crate::events::{AgentEvent, Compaction, CompactionOutcome, Notice, Severity};

/// What a prompt that waits for the background compaction is told.
pub(super) const WAIT_NOTICE: &str = "Finishing the context compaction before your prompt…";

/// A background compaction (and warm-up) under way, and the prompts that
/// wait for it.
pub(super) struct Background {
    cancel: CancellationToken,
    steps: mpsc::UnboundedReceiver<Step>,
    /// Aborted if the session goes without waiting for it.
    _task: AbortOnDropHandle<()>,
    /// Prompts that came meanwhile, in order.
    waiting: Vec<PromptSubmission>,
    /// A summary is being written (not only the threshold checked).
    compacting: bool,
    /// The waiting prompt has been told why it waits.
    told: bool,
}

/// What the background task reports to the actor.
pub(super) enum Step {
    /// An update for the client, sent as the actor sends its own.
    Show(AgentEvent),
    /// The compaction is made: the actor applies it to its context and saves it.
    Compacted(ContextOp),
    /// A waiting prompt's request was cancelled (`$/cancel_request`).
    RequestCancelled,
    /// The task has ended (its channel closed).
    Done,
}

/// The next step of the background work; never, when there is none.
pub(super) async fn next(background: &mut Option<Background>) -> Step {
    let Some(background) = background else {
        return std::future::pending().await;
    };
    // Once cancelled, the waiting prompts' requests are no longer watched.
    let watched = (!background.cancel.is_cancelled())
        .then_some(&background.waiting)
        .into_iter()
        .flatten()
        .map(|waiting| &waiting.request_cancel);
    tokio::select! {
        step = background.steps.recv() => step.unwrap_or(Step::Done),
        () = crate::util::any_cancelled(watched) => Step::RequestCancelled,
    }
}

impl SessionActor {
    /// After a prompt turn: start compacting in the background, where it
    /// is on and the context may need it (the task checks the threshold).
    /// Delegated agents' sessions do not: their turn is their whole life.
    pub(super) fn after_turn(&mut self, kind: TurnKind) {
        let Some(share) = self.services.defaults.context.compact_between_turns else {
            return;
        };
        if kind != TurnKind::Prompt
            || self.services.depth > 0
            || self.conversation.background.is_some()
        {
            return;
        }
        let provider = &self.settings.current.provider;
        let warm = (self.services.providers.config(provider)).is_some_and(|c| c.prewarms());
        let Ok((turn, _)) = self.turn_context(TurnKind::Warmup) else {
            return;
        };
        let context = self.conversation.context.clone();
        let cancel = CancellationToken::new();
        let (tx, steps) = mpsc::unbounded_channel();
        let job = Job {
            share,
            warm,
            cancel: cancel.clone(),
            tx,
        };
        let task = tokio::spawn(async move {
            let input = turn.input(context, job.cancel.clone(), &|_| {}).await;
            job.run(input).await;
        });
        self.conversation.background = Some(Background {
            cancel,
            steps,
            _task: AbortOnDropHandle::new(task),
            waiting: Vec::new(),
            compacting: false,
            told: false,
        });
    }

    /// A prompt that comes while the background work runs waits for it;
    /// any other is handed back to be taken now.
    pub(super) fn hold_prompt(&mut self, submission: PromptSubmission) -> Option<PromptSubmission> {
        let Some(background) = self.conversation.background.as_mut() else {
            return Some(submission);
        };
        background.waiting.push(submission);
        // The prompt's request is open: the client takes updates now.
        self.begin_turn();
        self.tell_waiting();
        None
    }

    /// `session/cancel` while a prompt waits: the compaction stops (the
    /// context stays as it was) and the prompt ends cancelled.
    pub(super) fn cancel_between_turns(&mut self) {
        if let Some(background) = &self.conversation.background
            && !background.waiting.is_empty()
        {
            background.cancel.cancel();
        }
    }

    /// One step of the background work, as the actor's loop receives it.
    pub(super) fn between_turns_step(&mut self, step: Step, running: &mut Option<RunningTurn>) {
        match step {
            Step::Show(event) => {
                if matches!(event, AgentEvent::Compaction(Compaction::Started { .. }))
                    && let Some(background) = self.conversation.background.as_mut()
                {
                    background.compacting = true;
                }
                self.send(Update::Agent(event));
                self.tell_waiting();
            }
            Step::Compacted(op) => match self.conversation.context.apply(&op) {
                Ok(_) => self.record_context_op(&op),
                Err(err) => tracing::warn!(%err, "a compaction between turns does not apply"),
            },
            Step::RequestCancelled => {
                if let Some(background) = &self.conversation.background {
                    background.cancel.cancel();
                }
            }
            Step::Done => self.between_turns_done(running),
        }
    }

    /// The session closes: the background work stops, what it finished is
    /// kept, and the prompts that waited end cancelled.
    pub(super) async fn end_between_turns(&mut self, running: &mut Option<RunningTurn>) {
        let Some(background) = &self.conversation.background else {
            return;
        };
        background.cancel.cancel();
        loop {
            match next(&mut self.conversation.background).await {
                Step::Done => break,
                step => self.between_turns_step(step, running),
            }
        }
        self.between_turns_done(running);
    }

    /// The background work has ended: the prompts that waited start, in
    /// order (ended at once when it was cancelled for them).
    fn between_turns_done(&mut self, running: &mut Option<RunningTurn>) {
        let Some(background) = self.conversation.background.take() else {
            return;
        };
        let cancelled = background.cancel.is_cancelled();
        for submission in background.waiting {
            self.take_prompt(submission, running);
            if cancelled && let Some(turn) = running.as_ref() {
                turn.cancel.cancel();
            }
        }
    }

    /// Tells the waiting prompt, once, that a compaction holds it.
    fn tell_waiting(&mut self) {
        let Some(background) = self.conversation.background.as_mut() else {
            return;
        };
        if background.told || !background.compacting || background.waiting.is_empty() {
            return;
        }
        background.told = true;
        self.send(Update::Agent(AgentEvent::Notice(Notice {
            severity: Severity::Info,
            title: WAIT_NOTICE.into(),
            detail: None,
            thought: format!("{WAIT_NOTICE}\n"),
        })));
    }
}

/// The background task's work and where it reports.
struct Job {
    /// `compact_between_turns`: the share of the window past which it compacts.
    share: f64,
    /// Whether the provider's prompt cache is warmed.
    warm: bool,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Step>,
}

impl Job {
    /// Compact when the context is past the share, then warm the new prefix.
    async fn run(self, mut input: TurnInput) {
        let budget = input.budget();
        let fixed_chars = budget::fixed_chars(input.system.as_deref(), &input.tools.definitions());
        let context = &input.context;
        let used = context.estimator.tokens(fixed_chars) + context.tokens();
        // Also before a next turn the size of this one would not fit (it
        // would compact inside the turn, the user waiting), or would leave
        // a summary request no room to carry the whole conversation.
        let latest = context.latest_turn_tokens();
        let whole = compact::whole_summary_limit(&budget, &context.estimator);
        let at = ((budget.window as f64 * self.share) as u64)
            .min(budget.limit().saturating_sub(latest))
            .min(whole.saturating_sub(latest));
        let keep = input.session.limits.context_settings.keep_recent_turns;
        if used <= at || self.cancel.is_cancelled() {
            return;
        }
        let Some(entries) = compact::compactable(context, keep, budget.window) else {
            return;
        };
        let id = compaction_id();
        let show = |event| {
            let _ = self.tx.send(Step::Show(event));
        };
        show(AgentEvent::Compaction(Compaction::Started {
            id: id.clone(),
            thought: Some(format!(
                "Context at ~{used} of {} tokens (compaction between turns at {at}): summarizing {entries} earlier entries before the next prompt…\n",
                budget.window
            )),
        }));
        let on_text = |text: &str| {
            show(AgentEvent::Compaction(Compaction::SummaryChunk {
                id: id.clone(),
                text: text.to_string(),
            }));
        };
        let mut context = input.context.clone();
        let compacted = summarize(&mut context, entries, &input, &on_text, &self.cancel).await;
        let (outcome, thought) = match compacted {
            Ok(compact::Compacted { op, report }) => {
                let _ = self.tx.send(Step::Compacted(op));
                (CompactionOutcome::Completed, Some(format!("{report}\n")))
            }
            Err(CompactError::Cancelled) => (CompactionOutcome::Cancelled, None),
            Err(err) => (
                CompactionOutcome::Failed(err.to_string()),
                Some(format!("{err}\n")),
            ),
        };
        let completed = outcome == CompactionOutcome::Completed;
        show(AgentEvent::Compaction(Compaction::Ended {
            id,
            outcome,
            thought,
        }));
        if completed && self.warm {
            input.context = context;
            if let Err(why) = super::prewarm::warm(input, &self.cancel).await {
                tracing::debug!(%why, "the compacted prefix was not warmed");
            }
        }
    }
}

/// The one call to the compaction routine, on the turn's model and window.
async fn summarize(
    context: &mut ContextManager,
    entries: usize,
    input: &TurnInput,
    on_text: &(dyn Fn(&str) + Send + Sync),
    cancel: &CancellationToken,
) -> Result<compact::Compacted, CompactError> {
    let wanted = compact::SummaryWanted {
        focus: None,
        on_text,
    };
    // The summary continues the request the session's turns send (and the
    // warm-up sent), so the server's cache serves all but the instruction.
    let prefix = input.request_prefix();
    let last = compact::LastRequest {
        provider: &*input.session.model.provider,
        request: &prefix,
    };
    let budget = input.budget();
    compact::compact(context, entries, last, wanted, &budget, cancel).await
}
