//! The session's one way to its store: every call to the recorder is made
//! here, in the actor, and nowhere else. What the client is shown is
//! recorded by the recorded client (`Recorder::wrap`), the same way for
//! every sender; the conversation (prompts, rounds, context operations,
//! turn ends) and the settings are recorded by the calls below.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;

use super::SessionActor;
use super::shared::{Journaled, TurnKind};

use crate::agent_loop::{Journal, JournalFn, TurnOutcome};
use crate::client::{ClientSink, Update};
use crate::model::Message;
use crate::permissions::SessionPermissions;
use crate::store::{self, Recorder};
use crate::tools::PlanError;
use crate::util::lock;

/// The client as the session uses it: with a recorder, everything it is
/// shown is also saved, in the same order.
pub(super) fn recorded_client(
    recorder: Option<&Recorder>,
    client: Arc<dyn ClientSink>,
) -> Arc<dyn ClientSink> {
    match recorder {
        Some(recorder) => recorder.wrap(client),
        None => client,
    }
}

/// The Markdown plan `write_plan` keeps: `plan.md` in the session's store
/// directory (written by its writer, read again by a load), or in memory
/// only for a session that is not saved (no path then).
pub(super) struct SessionPlan {
    recorder: Option<Recorder>,
    /// Whether there is a plan now (a `/clear` removes it only then).
    exists: AtomicBool,
}

impl SessionPlan {
    pub fn new(recorder: Option<&Recorder>) -> Self {
        Self {
            exists: AtomicBool::new(recorder.is_some_and(Recorder::has_plan)),
            recorder: recorder.cloned(),
        }
    }

    /// Removes the plan, if there is one: true then. The file goes in
    /// the writer's order, so a plan written after this one stays.
    fn take(&self) -> bool {
        if !self.exists.swap(false, Ordering::SeqCst) {
            return false;
        }
        if let Some(recorder) = &self.recorder {
            recorder.discard_plan();
        }
        true
    }
}

impl crate::tools::PlanKeeper for SessionPlan {
    fn save(&self, markdown: String) -> BoxFuture<'_, Result<Option<PathBuf>, PlanError>> {
        Box::pin(async move {
            let path = match &self.recorder {
                Some(recorder) => Some(
                    recorder
                        .save_plan(markdown)
                        .await
                        .map_err(|err| PlanError::Store(Box::new(err)))?,
                ),
                None => None,
            };
            self.exists.store(true, Ordering::SeqCst);
            Ok(path)
        })
    }

    fn remove(&self) -> BoxFuture<'_, Result<(), PlanError>> {
        Box::pin(async move {
            if let Some(recorder) = &self.recorder {
                recorder
                    .remove_plan()
                    .await
                    .map_err(|err| PlanError::Store(Box::new(err)))?;
            }
            self.exists.store(false, Ordering::SeqCst);
            Ok(())
        })
    }
}

/// The user's "always" answers come back with the session and are saved
/// as they are given; a delegated agent's also hold for its parent (the
/// user gave them in the parent's session).
pub(super) fn remembered_permissions(
    recorder: Option<&Recorder>,
    permissions: &SessionPermissions,
    parent: Option<Arc<SessionPermissions>>,
) {
    if let Some(recorder) = recorder {
        permissions.restore(recorder.metadata().permissions);
    }
    if recorder.is_none() && parent.is_none() {
        return;
    }
    let recorder = recorder.cloned();
    permissions.on_remember(move |rules| {
        if let Some(parent) = &parent {
            parent.adopt(rules.clone());
        }
        if let Some(recorder) = &recorder {
            recorder.permissions_remembered(rules);
        }
    });
}

/// A problem saving the session, for the user (a notice, or a thought for
/// clients that take no notices): every such problem is told this way.
pub(super) fn saving_notice(title: &str, detail: String) -> crate::events::Notice {
    let detail = detail.trim().to_string();
    crate::events::Notice {
        severity: crate::events::Severity::Warning,
        title: title.into(),
        thought: format!("{detail}\n"),
        detail: Some(detail),
    }
}

/// What the user is told when writing the saved session fails mid-session.
pub(super) fn write_failure_notice(why: &str) -> crate::events::Notice {
    saving_notice(
        "This session is not being saved",
        format!(
            "Saving this session failed: {why}. The conversation goes on, but what happens from here will not survive a restart until saving works again (free some disk space, or check that the data directory is writable)."
        ),
    )
}

/// A loaded session's turn that a crash cut short ends here, with what the
/// user saw of it, so the next load rebuilds this same context.
pub(super) fn end_cut_short_turn(recorder: &Recorder, seen: String) {
    if !seen.is_empty() {
        recorder.round(&[Arc::new(Message::assistant_text(seen))]);
    }
    recorder.turn_end(None);
}

impl SessionActor {
    /// `/clear` (and `/context reset`): the conversation starts over, and
    /// the plans made in it go: the Markdown one (`plan_removed` for
    /// clients that take plans; others were never shown it as a plan) and
    /// the todo list (emptied as the `todo` tool empties it: `plan_removed`
    /// for clients that take plans, an empty `plan` for the others).
    pub(super) fn remove_plan(&mut self) {
        use crate::events::AgentEvent;
        if self.services.plan.take() {
            self.send(Update::Agent(AgentEvent::PlanDocument(None)));
        }
        if !self.services.tool_context.take_todos().is_empty() {
            self.send(Update::Agent(AgentEvent::Plan(Vec::new())));
        }
    }

    /// A turn's journal: each finished round and context operation is saved
    /// at once (a crash loses only the round in flight) and kept in `kept`.
    pub(super) fn journal(&self, kept: Journaled) -> JournalFn {
        let recorder = self.services.recorder.clone();
        Arc::new(move |entry: Journal| {
            if let Some(recorder) = &recorder {
                match &entry {
                    Journal::Round(messages) => recorder.round(messages),
                    Journal::Op(op) => recorder.context_op(op),
                    Journal::Steered(steered) => recorder.steered(
                        &steered.message,
                        &store::PromptIds {
                            message_id: steered.message_id.clone(),
                            idempotency_key: steered.idempotency_key.clone(),
                        },
                    ),
                }
            }
            lock(&kept).push(entry);
        })
    }

    /// Save the prompt just added to the history; the first one names the session.
    /// A title the client gave: saved, and told like a generated one.
    pub(super) fn retitle(&mut self, title: String) -> String {
        let updated_at = match self.services.recorder.as_ref() {
            Some(recorder) => recorder.retitle(&title).updated_at,
            None => crate::util::now_rfc3339(),
        };
        self.send(Update::SessionInfo {
            title: Some(title.clone()),
            updated_at,
        });
        title
    }

    pub(super) fn record_prompt(&mut self, ids: &store::PromptIds) {
        let last = self
            .conversation
            .context
            .entries()
            .last()
            .and_then(|e| e.messages.last());
        let (Some(recorder), Some(message)) = (self.services.recorder.as_ref(), last) else {
            return;
        };
        if let Some(store::Titled { title, updated_at }) = recorder.prompt_with_id(message, ids) {
            self.send(Update::SessionInfo {
                title: Some(title),
                updated_at,
            });
        }
    }

    /// A turn's rounds and operations are already saved (the journal); its
    /// end is saved with what the estimator learned. A command's
    /// operations are saved now.
    pub(super) fn record_turn(&self, outcome: &TurnOutcome, kind: TurnKind) {
        let Some(recorder) = self.services.recorder.as_ref() else {
            return;
        };
        if kind == TurnKind::Command {
            for op in &outcome.context_ops {
                recorder.context_op(op);
            }
        } else {
            let spent = crate::context::spend::Totals {
                turn_tokens: self.conversation.last_turn_tokens,
                session_tokens: self.services.tokens.total(),
                session_cost: self.services.spending.add(0.0),
            };
            recorder.turn_end_spent(Some(outcome.context.estimator), spent);
        }
    }

    /// A context operation made outside any turn (a compaction between turns).
    pub(super) fn record_context_op(&self, op: &crate::context::ContextOp) {
        if let Some(recorder) = &self.services.recorder {
            recorder.context_op(op);
        }
    }

    /// A turn whose task died: what it journaled is saved already; it ends.
    /// A turn that panicked: marked in the store, then ended.
    pub(super) fn record_crashed_turn(&self, detail: &str) {
        if let Some(recorder) = &self.services.recorder {
            recorder.crashed(detail);
            recorder.turn_end(None);
        }
    }

    /// Saves what differs from the stored settings: one record of each change.
    pub(super) fn record_settings(&self) {
        let Some(recorder) = self.services.recorder.as_ref() else {
            return;
        };
        let current = &self.settings.current;
        recorder.settings(store::Settings {
            mode: &current.mode,
            provider: &current.provider,
            model: &current.model,
            agent: current.agent.as_deref(),
            thought_level: current.thought_level.as_str(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::PlanKeeper;

    #[tokio::test]
    async fn a_session_that_is_not_saved_keeps_its_plan_in_memory_without_a_path() {
        let plan = SessionPlan::new(None);
        assert!(!plan.take(), "no plan yet");
        assert!(matches!(plan.save("# Plan".into()).await, Ok(None)));
        assert!(plan.take());
        assert!(!plan.take(), "removed once");
        plan.save("# Plan".into()).await.unwrap();
        plan.remove().await.unwrap();
        assert!(!plan.take());
    }

    #[tokio::test]
    async fn a_saved_session_keeps_its_plan_in_its_directory_and_knows_it_on_open() {
        let data = tempfile::tempdir().unwrap();
        let store = crate::store::Store::new(data.path());
        let metadata =
            crate::store::Metadata::new(&"s".into(), PathBuf::from("/p"), "prov", "model", "act");
        let recorder = Recorder::start(store.create(&metadata).unwrap(), metadata);
        let plan = SessionPlan::new(Some(&recorder));
        let path = plan.save("# Plan\n".into()).await.unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Plan\n");
        recorder.close().await;
        let (open, metadata, _) = store.open(&"s".into()).unwrap();
        let recorder = Recorder::start(open, metadata);
        let reopened = SessionPlan::new(Some(&recorder));
        assert!(reopened.take());
        recorder.close().await;
        assert!(!path.exists());
    }
}
