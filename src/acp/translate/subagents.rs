//! Delegated agents as ACP's unstable subagent sessions: the child
//! announced and followed on its parent's session (`subagent_update`), and
//! the task and answer as messages between the two (`session_message`).
//! The builders are `same_shape`'s, shared with v2; here is the state as
//! v1 has it.

use agent_client_protocol_schema::v1 as acp;

use super::stop_reason;
use crate::client::SubagentState;
use crate::events::StopReason;

/// A child's state as v1 has it (its idle reasons are v1's own).
pub(super) fn state_update(state: &SubagentState) -> acp::StateUpdate {
    match state {
        SubagentState::Running => acp::StateUpdate::Running(acp::RunningStateUpdate::new()),
        SubagentState::WaitingForUser => {
            acp::StateUpdate::RequiresAction(acp::RequiresActionStateUpdate::new())
        }
        SubagentState::Idle(reason) => {
            acp::StateUpdate::Idle(acp::IdleStateUpdate::new().stop_reason(idle_reason(*reason)))
        }
        SubagentState::Failed(why) => acp::StateUpdate::Idle(
            acp::IdleStateUpdate::new().stop_reason(acp::IdleStopReason::Error(
                acp::ErrorStopReason::new().error(acp::Error::internal_error().data(why.clone())),
            )),
        ),
    }
}

fn idle_reason(reason: StopReason) -> acp::IdleStopReason {
    match stop_reason(reason) {
        acp::StopReason::MaxTokens => acp::IdleStopReason::MaxTokens,
        acp::StopReason::MaxTurnRequests => acp::IdleStopReason::MaxTurnRequests,
        acp::StopReason::Refusal => acp::IdleStopReason::Refusal,
        acp::StopReason::Cancelled => acp::IdleStopReason::Cancelled,
        _ => acp::IdleStopReason::EndTurn,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::client::{SessionMessage, SubagentInfo, Update};

    fn wire(update: Update) -> Value {
        serde_json::to_value(super::super::session_updates(&update).pop()).unwrap()
    }

    fn child(state: Option<SubagentState>) -> Update {
        Update::Subagent(SubagentInfo {
            session_id: "child-1".into(),
            title: None,
            description: None,
            state,
            cwd: None,
        })
    }

    #[test]
    fn a_child_is_announced_with_its_title_task_and_place() {
        let announced = Update::Subagent(SubagentInfo {
            session_id: "child-1".into(),
            title: Some("explorer".into()),
            description: Some("Find alpha".into()),
            state: Some(SubagentState::Running),
            cwd: Some("/work".into()),
        });
        assert_eq!(
            wire(announced),
            json!({"sessionUpdate": "subagent_update", "sessionId": "child-1",
                "title": "explorer", "description": "Find alpha", "cwd": "/work",
                "state": {"state": "running"}})
        );
    }

    #[test]
    fn states_map_to_acp_snapshots() {
        let table = [
            (
                SubagentState::WaitingForUser,
                json!({"state": "requires_action"}),
            ),
            (
                SubagentState::Idle(StopReason::EndTurn),
                json!({"state": "idle", "stopReason": "end_turn"}),
            ),
            (
                SubagentState::Idle(StopReason::Cancelled),
                json!({"state": "idle", "stopReason": "cancelled"}),
            ),
            (
                SubagentState::Idle(StopReason::MaxTokens),
                json!({"state": "idle", "stopReason": "max_tokens"}),
            ),
        ];
        for (state, expected) in table {
            assert_eq!(wire(child(Some(state)))["state"], expected);
        }
        let failed = wire(child(Some(SubagentState::Failed("model broke".into()))));
        assert_eq!(failed["state"]["stopReason"], "error", "{failed}");
        assert_eq!(failed["state"]["error"]["data"], "model broke", "{failed}");
        // Only what changed is sent.
        assert_eq!(
            wire(child(None)),
            json!({"sessionUpdate": "subagent_update", "sessionId": "child-1"})
        );
    }

    #[test]
    fn a_task_is_a_message_from_parent_to_child() {
        let message = Update::SessionMessage(SessionMessage {
            message_id: "task-1".into(),
            sender: "parent".into(),
            recipient: "child-1".into(),
            text: "Find alpha".into(),
        });
        assert_eq!(
            wire(message),
            json!({"sessionUpdate": "session_message", "messageId": "task-1",
                "senderSessionId": "parent", "recipientSessionId": "child-1",
                "content": [{"type": "text", "text": "Find alpha"}]})
        );
    }
}
