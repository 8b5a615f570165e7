//! Compaction between turns, before it is needed: a prompt turn that ends
//! with the context past `[context] compact_between_turns` of the window
//! starts a compaction in the background while the user reads, then warms
//! the compacted prefix (where the provider is warmed at all). The actor
//! stays responsive, and no prompt waits for work it does not need: one
//! that comes while the summary is written and still fits the context as
//! it is (with room for its answer) puts the compaction off (its request
//! is dropped, so a local server frees the slot) and runs at once on the
//! prefix the server has cached; the compaction runs again after its
//! turn. Only a prompt that does not fit waits for the summary, and is
//! told so once. A prompt never waits for the warm-up: it reads the
//! prefix itself. A compaction that fails or is cancelled (`session/cancel`
//! while a prompt waits, or the session closing) leaves the context and
//! the store as they were.

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
pub(super) const WAIT_NOTICE: &str = "Finishing the context compaction before your prompt: the context has no room for it until then…";
/// What a client without compaction updates is told of a compaction put
/// off for a prompt that fits without it.
const PUT_OFF: &str =
    "Compaction put off until after this turn: the context still has room for your prompt.";

/// A background compaction (and warm-up) under way, and the prompts that
/// wait for it.
pub(super) struct Background {
    cancel: CancellationToken,
    /// The warm-up's: cancelled (alone) once a prompt waits, which reads
    /// the prefix itself.
    warm_cancel: CancellationToken,
    steps: mpsc::UnboundedReceiver<Step>,
    /// Aborted if the session goes without waiting for it.
    _task: AbortOnDropHandle<()>,
    /// Prompts that came meanwhile, in order.
    waiting: Vec<PromptSubmission>,
    /// The tokens a prompt may add to the context as it is and still be
    /// sent without compacting (with room for its answer); known once the
    /// summary is asked for, and until it has ended.
    room: Option<u64>,
    /// A summary is being written (not the threshold checked, nor the
    /// warm-up after it).
    compacting: bool,
    /// The waiting prompt has been told why it waits.
    told: bool,
    /// Cancelled for the waiting prompts, which fit without it: they go
    /// when it has ended, and it runs again after their turn.
    put_off: bool,
}

/// What the background task reports to the actor.
pub(super) enum Step {
    /// An update for the client, sent as the actor sends its own.
    Show(AgentEvent),
    /// The summary is about to be asked for: the tokens a prompt may add
    /// to the context as it is without needing it.
    Summarizing { room: u64 },
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
        let warm_cancel = cancel.child_token();
        let (tx, steps) = mpsc::unbounded_channel();
        let job = Job {
            share,
            warm,
            cancel: cancel.clone(),
            warm_cancel: warm_cancel.clone(),
            tx,
        };
        let task = tokio::spawn(async move {
            let input = turn.input(context, job.cancel.clone(), &|_| {}).await;
            job.run(input).await;
        });
        self.conversation.background = Some(Background {
            cancel,
            warm_cancel,
            steps,
            _task: AbortOnDropHandle::new(task),
            waiting: Vec::new(),
            room: None,
            compacting: false,
            told: false,
            put_off: false,
        });
    }

    /// A prompt that comes while the background work runs is held until
    /// it has ended, or until it is cancelled for the prompt (see
    /// [`Self::go_if_not_needed`]); with none running it is handed back
    /// to be taken now.
    pub(super) fn hold_prompt(&mut self, submission: PromptSubmission) -> Option<PromptSubmission> {
        let Some(background) = self.conversation.background.as_mut() else {
            return Some(submission);
        };
        background.waiting.push(submission);
        // The prompt's request is open: the client takes updates now.
        self.begin_turn();
        self.go_if_not_needed();
        self.tell_waiting();
        None
    }

    /// The waiting prompts do not wait for what they do not need: never
    /// for the warm-up (a prompt reads the prefix itself), and not for the
    /// summary when they fit the context as it is; then the compaction is
    /// cancelled (its request dropped) and runs again after their turn.
    /// A built-in command waits for all of it, as it acts on the context.
    fn go_if_not_needed(&mut self) {
        let estimator = self.conversation.context.estimator;
        let Some(background) = self.conversation.background.as_mut() else {
            return;
        };
        let commands = (background.waiting.iter())
            .any(|waiting| crate::commands::from_parts(&waiting.content).is_some());
        if background.waiting.is_empty() || commands || background.cancel.is_cancelled() {
            return;
        }
        background.warm_cancel.cancel();
        let tokens: u64 = (background.waiting.iter())
            .map(|waiting| estimator.tokens(prompt_chars(&waiting.content)))
            .sum();
        if background.room.is_some_and(|room| tokens <= room) {
            tracing::debug!(tokens, room = ?background.room, "compaction put off for a prompt that fits");
            background.put_off = true;
            background.cancel.cancel();
        }
    }

    /// `session/cancel` while a prompt waits: the compaction stops (the
    /// context stays as it was) and the prompt ends cancelled.
    pub(super) fn cancel_between_turns(&mut self) {
        if let Some(background) = self.conversation.background.as_mut()
            && !background.waiting.is_empty()
        {
            background.put_off = false;
            background.cancel.cancel();
        }
    }

    /// One step of the background work, as the actor's loop receives it.
    pub(super) fn between_turns_step(&mut self, step: Step, running: &mut Option<RunningTurn>) {
        match step {
            Step::Show(mut event) => {
                if let Some(background) = self.conversation.background.as_mut() {
                    match &mut event {
                        AgentEvent::Compaction(Compaction::Started { .. }) => {
                            background.compacting = true;
                        }
                        AgentEvent::Compaction(Compaction::Ended {
                            outcome, thought, ..
                        }) => {
                            // Only the warm-up is left, which no prompt waits for.
                            background.compacting = false;
                            background.room = None;
                            if background.put_off && *outcome == CompactionOutcome::Cancelled {
                                *thought = Some(format!("{PUT_OFF}\n"));
                            }
                        }
                        _ => {}
                    }
                }
                self.send(Update::Agent(event));
                self.tell_waiting();
            }
            Step::Summarizing { room } => {
                if let Some(background) = self.conversation.background.as_mut() {
                    background.room = Some(room);
                }
                self.go_if_not_needed();
            }
            Step::Compacted(op) => match self.conversation.context.apply(&op) {
                Ok(_) => self.record_context_op(&op),
                Err(err) => tracing::warn!(%err, "a compaction between turns does not apply"),
            },
            Step::RequestCancelled => {
                if let Some(background) = self.conversation.background.as_mut() {
                    background.put_off = false;
                    background.cancel.cancel();
                }
            }
            Step::Done => self.between_turns_done(running),
        }
    }

    /// The session closes: the background work stops, what it finished is
    /// kept, and the prompts that waited end cancelled.
    pub(super) async fn end_between_turns(&mut self, running: &mut Option<RunningTurn>) {
        let Some(background) = self.conversation.background.as_mut() else {
            return;
        };
        background.put_off = false;
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
    /// order (ended at once when it was cancelled for them, not when it
    /// was put off for them).
    fn between_turns_done(&mut self, running: &mut Option<RunningTurn>) {
        let Some(background) = self.conversation.background.take() else {
            return;
        };
        let cancelled = background.cancel.is_cancelled() && !background.put_off;
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
        if background.told
            || background.put_off
            || !background.compacting
            || background.waiting.is_empty()
        {
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
    /// A child of `cancel`: also cancelled once a prompt waits.
    warm_cancel: CancellationToken,
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
        // A prompt that fits below this is sent without compacting in its
        // turn, with the answer's reserve kept free.
        let in_turn = (input.session.limits.context_settings).compact_in_turn_at(&budget);
        let room = in_turn.saturating_sub(used);
        let _ = self.tx.send(Step::Summarizing { room });
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
        // A prompt that waited goes now: it reads the prefix itself.
        if completed && self.warm && !self.warm_cancel.is_cancelled() {
            input.context = context;
            if let Err(why) = super::prewarm::warm(input, &self.warm_cancel).await {
                tracing::debug!(%why, "the compacted prefix was not warmed");
            }
        }
    }
}

/// A prompt's size in estimate units, as it will go into the context.
fn prompt_chars(content: &[crate::model::Part]) -> u64 {
    budget::message_chars(&crate::model::Message {
        role: crate::model::Role::User,
        parts: content.to_vec(),
    })
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
