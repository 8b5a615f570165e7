//! Cursors (ACP unstable `cursor_update`) and the message ids they are
//! anchored on. The cursor itself is built by `same_shape`, shared with v2.

use agent_client_protocol_schema::v1 as acp;

use crate::client::Update;
use crate::events::AgentEvent;

/// A message chunk with its message's id; other events as they are.
pub(super) fn tagged(message_id: &str, event: &AgentEvent) -> Vec<acp::SessionUpdate> {
    let updates = super::session_updates(&Update::Agent(event.clone()));
    updates
        .into_iter()
        .map(|update| with_message_id(message_id, update))
        .collect()
}

fn with_message_id(message_id: &str, update: acp::SessionUpdate) -> acp::SessionUpdate {
    match update {
        acp::SessionUpdate::AgentMessageChunk(chunk) => acp::SessionUpdate::AgentMessageChunk(
            chunk.message_id(acp::MessageId::new(message_id.to_string())),
        ),
        acp::SessionUpdate::AgentThoughtChunk(chunk) => acp::SessionUpdate::AgentThoughtChunk(
            chunk.message_id(acp::MessageId::new(message_id.to_string())),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::super::cursor_update;
    use super::*;
    use crate::client::{Cursor, Shown};
    use serde_json::json;

    #[test]
    fn cursors_and_tagged_chunks_on_the_wire() {
        let table = [
            (
                cursor_update(&Cursor {
                    id: "cursor-1".into(),
                    at: Shown::AgentMessage("msg-1".into()),
                    after: true,
                    fork: true,
                }),
                json!({"sessionUpdate": "cursor_update", "cursorId": "cursor-1",
                    "capabilities": {"fork": {}},
                    "anchor": {"type": "agent_message", "messageId": "msg-1", "position": "after"}}),
            ),
            (
                cursor_update(&Cursor {
                    id: "cursor-2".into(),
                    at: Shown::ToolCall("call_1".into()),
                    after: false,
                    fork: false,
                }),
                json!({"sessionUpdate": "cursor_update", "cursorId": "cursor-2",
                    "capabilities": {},
                    "anchor": {"type": "tool_call", "toolCallId": "call_1", "position": "before"}}),
            ),
            (
                cursor_update(&Cursor {
                    id: "cursor-3".into(),
                    at: Shown::Compaction("compaction-1".into()),
                    after: true,
                    fork: false,
                }),
                json!({"sessionUpdate": "cursor_update", "cursorId": "cursor-3",
                    "capabilities": {},
                    "anchor": {"type": "compaction", "compactionId": "compaction-1", "position": "after"}}),
            ),
            (
                tagged("msg-2", &AgentEvent::Thought("hm".into())).remove(0),
                json!({"sessionUpdate": "agent_thought_chunk", "messageId": "msg-2",
                    "content": {"type": "text", "text": "hm"}}),
            ),
        ];
        for (update, wire) in table {
            assert_eq!(serde_json::to_value(&update).unwrap(), wire);
        }
    }
}
