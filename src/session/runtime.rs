//! The agent runtime (the seed's `AgentRuntime`): which delegated agents
//! run now, under which parent, and how each stands. A child is a session
//! like any other (its own actor, turn machinery and stored files); the
//! runtime only tracks it and holds what starting one needs (the store).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::agents::SubagentSettings;
use crate::model::SessionId;
use crate::providers::Usage;
use crate::store::Store;
use crate::util::lock;

/// How a delegated agent stands (the seed's `AgentState`, as the user
/// would ask about it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentState {
    /// Calling the model or running tools.
    Running,
    /// One of its calls waits for the user's answer.
    WaitingForPermission,
    /// Its turn is over; its answer is being handed back.
    Idle,
    /// It stopped with an error (or was cancelled); the parent's call fails.
    Failed(String),
    /// It answered.
    Done,
}

impl AgentState {
    /// A word for the summary the client is shown.
    pub fn label(&self) -> &str {
        match self {
            Self::Running => "running",
            Self::WaitingForPermission => "waiting for permission",
            Self::Idle => "finishing",
            Self::Failed(_) => "failed",
            Self::Done => "done",
        }
    }
}

/// One agent the runtime tracks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentEntry {
    pub session_id: SessionId,
    pub parent_id: SessionId,
    /// The agent card it runs.
    pub agent: String,
    pub state: AgentState,
}

/// Every delegated agent of the process, by session id. Entries leave
/// when their parent's call has the answer.
pub struct AgentRuntime {
    agents: Mutex<BTreeMap<SessionId, AgentEntry>>,
    /// Where children are saved, like every session; None keeps them in memory.
    pub(super) store: Option<Arc<Store>>,
    pub(super) settings: SubagentSettings,
}

impl AgentRuntime {
    pub fn new(store: Option<Arc<Store>>, settings: SubagentSettings) -> Self {
        Self {
            agents: Mutex::default(),
            store,
            settings,
        }
    }

    pub(super) fn started(&self, session_id: &SessionId, parent_id: &SessionId, agent: &str) {
        lock(&self.agents).insert(
            session_id.clone(),
            AgentEntry {
                session_id: session_id.clone(),
                parent_id: parent_id.clone(),
                agent: agent.to_string(),
                state: AgentState::Running,
            },
        );
    }

    pub(super) fn set_state(&self, session_id: &SessionId, state: AgentState) {
        if let Some(entry) = lock(&self.agents).get_mut(session_id) {
            tracing::debug!(session = %session_id, state = state.label(), "subagent state");
            entry.state = state;
        }
    }

    pub(super) fn finished(&self, session_id: &SessionId) {
        lock(&self.agents).remove(session_id);
    }

    pub fn state(&self, session_id: &SessionId) -> Option<AgentState> {
        lock(&self.agents)
            .get(session_id)
            .map(|entry| entry.state.clone())
    }

    /// The running children of `parent_id`.
    pub fn children_of(&self, parent_id: &SessionId) -> Vec<AgentEntry> {
        lock(&self.agents)
            .values()
            .filter(|entry| entry.parent_id == *parent_id)
            .cloned()
            .collect()
    }
}

/// A session's delegations in its current turn: how many started (against
/// `max_per_turn`) and the tokens they used (added to the turn's usage).
#[derive(Debug, Default)]
pub(super) struct TurnTally {
    inner: Mutex<(u32, Option<Usage>)>,
}

impl TurnTally {
    /// A new turn: nothing started yet.
    pub fn reset(&self) {
        *lock(&self.inner) = (0, None);
    }

    /// One more child, if fewer than `limit` started this turn.
    pub fn try_start(&self, limit: u32) -> bool {
        let mut inner = lock(&self.inner);
        if inner.0 >= limit {
            return false;
        }
        inner.0 += 1;
        true
    }

    pub fn add_usage(&self, usage: Usage) {
        let mut inner = lock(&self.inner);
        // Every count, the cache's too: the parent's report includes them.
        *inner.1.get_or_insert_with(Usage::default) += usage;
    }

    /// The children's tokens this turn, taken (the turn's report adds them).
    pub fn take_usage(&self) -> Option<Usage> {
        lock(&self.inner).1.take()
    }
}

/// `own` plus the children's tokens.
pub(super) fn with_children(own: Option<Usage>, children: Option<Usage>) -> Option<Usage> {
    match (own, children) {
        (Some(mut own), Some(children)) => {
            own += children;
            Some(own)
        }
        (own, children) => own.or(children),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_tracks_children_by_parent_until_they_finish() {
        let runtime = AgentRuntime::new(None, SubagentSettings::default());
        runtime.started(&"c1".into(), &"p".into(), "explorer");
        runtime.started(&"c2".into(), &"p".into(), "reviewer");
        runtime.started(&"c3".into(), &"other".into(), "explorer");
        runtime.set_state(&"c1".into(), AgentState::WaitingForPermission);
        assert_eq!(
            runtime.state(&"c1".into()),
            Some(AgentState::WaitingForPermission)
        );
        assert_eq!(runtime.children_of(&"p".into()).len(), 2);
        runtime.finished(&"c1".into());
        assert_eq!(runtime.state(&"c1".into()), None);
        assert_eq!(runtime.children_of(&"p".into()).len(), 1);
    }

    #[test]
    fn a_turn_starts_at_most_the_limit_and_adds_up_its_children_tokens() {
        let tally = TurnTally::default();
        assert!(tally.try_start(2) && tally.try_start(2));
        assert!(!tally.try_start(2));
        tally.add_usage(Usage {
            prompt_tokens: 10,
            completion_tokens: 1,
            ..Default::default()
        });
        tally.add_usage(Usage {
            prompt_tokens: 5,
            completion_tokens: 2,
            cached_prompt_tokens: 4,
            cache_written_prompt_tokens: 1,
        });
        let own = Some(Usage {
            prompt_tokens: 100,
            completion_tokens: 7,
            cached_prompt_tokens: 60,
            cache_written_prompt_tokens: 0,
        });
        assert_eq!(
            with_children(own, tally.take_usage()),
            Some(Usage {
                prompt_tokens: 115,
                completion_tokens: 10,
                cached_prompt_tokens: 64,
                cache_written_prompt_tokens: 1,
            })
        );
        assert_eq!(tally.take_usage(), None);
        tally.reset();
        assert!(tally.try_start(2));
    }
}
