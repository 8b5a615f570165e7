//! Session cursors (ACP unstable `cursors`), for clients that take them:
//! the context stack's checkpoints, named for the editor. A turn saves one
//! after the user's prompt and one after the answer, like
//! `/context checkpoint` (recorded in the history, so a fork at one keeps
//! the history up to it: see `Store::fork`). Each is announced anchored on
//! something the client was shown (a message, a tool call or a compaction):
//! the prompt's just before the first thing the answer shows (the client
//! holds no id of its own prompt in ACP v1), the answer's just after the
//! last. The answer's text and thoughts carry message ids for that. A
//! load's replay announces the saved turns' cursors again the same way
//! ([`replay`]), so a client can fork at an old message after a restart.

use std::sync::Arc;

use crate::client::{CursorUse, Shown, Update};
use crate::context::ContextOp;
use crate::events::{AgentEvent, Compaction};
use crate::store::{self, StoredEvent};
use crate::util::lock;

const PREFIX: &str = "cursor-";

/// A new cursor's id, which is also its checkpoint's name; never reused.
pub(super) fn new_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{PREFIX}{}", &id[..ID_DIGITS])
}

/// Hex digits after the prefix.
const ID_DIGITS: usize = 12;

/// Whether a checkpoint's name is a cursor's (one [`new_id`] made), not
/// one the user named with `/context checkpoint`.
fn is_cursor(name: &str) -> bool {
    name.strip_prefix(PREFIX).is_some_and(|digits| {
        digits.len() == ID_DIGITS && digits.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// The checkpoint that a cursor named `id` stands for.
pub(super) fn checkpoint(id: &str) -> ContextOp {
    ContextOp::Checkpoint {
        name: id.to_string(),
    }
}

/// One turn's cursors, shared by its emitter and its end.
pub(super) type Shared = Arc<std::sync::Mutex<TurnCursors>>;

#[derive(Debug)]
pub(super) struct TurnCursors {
    /// The prompt's cursor, until announced.
    prompt: Option<String>,
    /// The last thing shown.
    last: Option<Shown>,
    /// The message being streamed: a thought?, its id.
    message: Option<(bool, String)>,
    /// Tells this turn's message ids from other turns'.
    tag: String,
    next: u64,
    fork: bool,
}

impl TurnCursors {
    pub fn new(prompt: String, uses: CursorUse) -> Self {
        Self {
            tag: prompt.trim_start_matches(PREFIX).to_string(),
            prompt: Some(prompt),
            last: None,
            message: None,
            next: 0,
            fork: uses.fork,
        }
    }

    pub fn shared(self) -> Shared {
        Arc::new(std::sync::Mutex::new(self))
    }

    /// What goes to the client for `update`: the prompt's cursor first when
    /// this is the first thing the answer shows, then the update (text and
    /// thoughts tagged with their message's id).
    pub fn observe(&mut self, update: Update) -> Vec<Update> {
        let Update::Agent(event) = update else {
            return vec![update];
        };
        let shown = match &event {
            AgentEvent::AgentText(_) | AgentEvent::Thought(_) => {
                let thought = matches!(event, AgentEvent::Thought(_));
                let id = match &self.message {
                    Some((kind, id)) if *kind == thought => id.clone(),
                    _ => {
                        self.next += 1;
                        let id = format!("msg-{}-{}", self.tag, self.next);
                        self.message = Some((thought, id.clone()));
                        id
                    }
                };
                if thought {
                    Shown::AgentThought(id)
                } else {
                    Shown::AgentMessage(id)
                }
            }
            AgentEvent::ToolCall(call) => {
                self.message = None;
                Shown::ToolCall(call.id.clone())
            }
            // Shown as such only to clients that take compaction updates.
            AgentEvent::Compaction(
                Compaction::Started { id, .. }
                | Compaction::SummaryChunk { id, .. }
                | Compaction::Ended { id, .. },
            ) => {
                self.message = None;
                Shown::Compaction(id.clone())
            }
            _ => return vec![Update::Agent(event)],
        };
        let mut out = Vec::new();
        if let Some(prompt) = self.prompt.take() {
            out.push(self.cursor(prompt, shown.clone(), Side::Before));
        }
        out.push(match &shown {
            Shown::AgentMessage(id) | Shown::AgentThought(id) => Update::Tagged {
                message_id: id.clone(),
                event,
            },
            Shown::ToolCall(_) | Shown::Compaction(_) => Update::Agent(event),
        });
        self.last = Some(shown);
        out
    }

    /// The answer's cursor `id`, just after the last thing the turn showed;
    /// None when it showed nothing (its checkpoint stays, unannounced).
    pub fn answer(&mut self, id: String) -> Option<Update> {
        let last = self.last.clone()?;
        Some(self.cursor(id, last, Side::After))
    }

    fn cursor(&self, id: String, at: Shown, side: Side) -> Update {
        Update::Cursor(crate::client::Cursor {
            id,
            at,
            after: side == Side::After,
            fork: self.fork,
        })
    }
}

/// Which side of what the client was shown a cursor stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The prompt's: before the turn's first update.
    Before,
    /// The answer's: after the turn's last update.
    After,
}

/// The answer's cursor at the end of a turn: its checkpoint journaled (so
/// it is saved before the turn's answer) and applied to the turn's
/// context, then announced.
pub(super) fn end_of_turn(
    cursors: &Shared,
    context: &mut crate::context::ContextManager,
    journal: &crate::agent_loop::JournalFn,
) -> Option<Update> {
    let id = new_id();
    let op = checkpoint(&id);
    if let Err(err) = context.apply(&op) {
        tracing::warn!(%err, "the answer's cursor was not saved");
        return None;
    }
    journal(crate::agent_loop::Journal::Op(op));
    lock(cursors).answer(id)
}

/// A load's replay for a client that takes cursors: the history's updates
/// (as [`store::replay_from`] gives them) with the cursors its turns saved
/// announced where a live turn announces them, from the turn's two
/// checkpoints: the first (the prompt's) before the first thing its answer
/// shows, the second (the answer's) after the last; the answer's text and
/// thoughts carry the message ids they anchor on. Turns saved without
/// cursors replay as they are, and a turn that showed nothing announces
/// none, as live.
pub(super) fn replay(events: &[StoredEvent], uses: CursorUse) -> Vec<Update> {
    let mut out = Vec::new();
    let mut turn: Option<TurnCursors> = None;
    // The events not replayed yet: from `start` to the one at hand.
    let mut start = 0;
    // The prompts before `start`, so each keeps the id it has in the whole.
    let mut prompts = 0;
    let flush = |events: &[StoredEvent],
                 prompts: &mut usize,
                 turn: &mut Option<TurnCursors>,
                 out: &mut Vec<Update>| {
        let before = *prompts;
        *prompts += (events.iter())
            .filter(|event| matches!(event, StoredEvent::UserPrompt { .. }))
            .count();
        for update in store::replay_part(events, before) {
            match turn {
                Some(cursors) => out.extend(cursors.observe(update)),
                None => out.push(update),
            }
        }
    };
    for (n, event) in events.iter().enumerate() {
        match event {
            // A new turn: its prompt is replayed with what follows.
            StoredEvent::UserPrompt { .. } => {
                flush(&events[start..n], &mut prompts, &mut turn, &mut out);
                (turn, start) = (None, n);
            }
            StoredEvent::TurnEnd { .. } => {
                flush(&events[start..n], &mut prompts, &mut turn, &mut out);
                (turn, start) = (None, n + 1);
            }
            _ => {
                let Some(name) = event.checkpoint().filter(|name| is_cursor(name)) else {
                    continue;
                };
                flush(&events[start..n], &mut prompts, &mut turn, &mut out);
                start = n + 1;
                match &mut turn {
                    None => turn = Some(TurnCursors::new(name.to_string(), uses)),
                    Some(cursors) => out.extend(cursors.answer(name.to_string())),
                }
            }
        }
    }
    flush(&events[start..], &mut prompts, &mut turn, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ToolCallInfo;

    fn text(t: &str) -> Update {
        Update::Agent(AgentEvent::AgentText(t.into()))
    }

    #[test]
    fn the_prompts_cursor_comes_before_the_first_thing_shown_and_messages_get_ids() {
        let mut cursors = TurnCursors::new("cursor-abc".into(), CursorUse { fork: true });
        let first = cursors.observe(Update::Agent(AgentEvent::Thought("hm".into())));
        let Update::Cursor(prompt) = &first[0] else {
            panic!("{first:?}")
        };
        assert_eq!(prompt.id, "cursor-abc");
        assert_eq!(prompt.at, Shown::AgentThought("msg-abc-1".into()));
        assert!(!prompt.after && prompt.fork);
        let a = cursors.observe(text("a"));
        let b = cursors.observe(text("b"));
        assert_eq!(a.len(), 1, "the prompt's cursor is told once");
        let id = |u: &[Update]| match &u[0] {
            Update::Tagged { message_id, .. } => message_id.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(id(&a), "msg-abc-2");
        assert_eq!(
            id(&b),
            "msg-abc-2",
            "one message until something else comes"
        );
        let call = ToolCallInfo {
            id: "call_1".into(),
            name: "read".into(),
            title: "Read".into(),
            kind: crate::events::ToolKind::Read,
            raw_input: serde_json::Value::Null,
            locations: Vec::new(),
        };
        cursors.observe(Update::Agent(AgentEvent::ToolCall(call)));
        assert_eq!(id(&cursors.observe(text("c"))), "msg-abc-3");
        let Some(Update::Cursor(answer)) = cursors.answer("cursor-def".into()) else {
            panic!()
        };
        assert_eq!(answer.at, Shown::AgentMessage("msg-abc-3".into()));
        assert!(answer.after);
    }

    #[test]
    fn a_compaction_shown_as_such_anchors_a_cursor() {
        let mut cursors = TurnCursors::new("cursor-c".into(), CursorUse::default());
        let started = Update::Agent(AgentEvent::Compaction(Compaction::Started {
            id: "compaction-1".into(),
            thought: None,
        }));
        let out = cursors.observe(started.clone());
        assert_eq!(out.len(), 2);
        assert!(
            matches!(&out[0], Update::Cursor(c) if c.at == Shown::Compaction("compaction-1".into())),
            "{out:?}"
        );
        assert_eq!(out[1], started);
    }

    /// A history as the store writes it, one event a line.
    fn history(lines: &[serde_json::Value]) -> Vec<StoredEvent> {
        (lines.iter())
            .map(|line| serde_json::from_value(line.clone()).unwrap())
            .collect()
    }

    #[test]
    fn a_replay_announces_each_saved_turns_cursors_where_the_turn_did() {
        use serde_json::json;
        let prompt = |text: &str| {
            json!({"event": "user_prompt", "at": "2026-11-25T00:00:00Z",
                "message": {"role": "user", "parts": [{"type": "text", "text": text}]}})
        };
        let shown = |kind: &str, text: &str| json!({"event": "update", "update": {"kind": kind, "text": text}});
        let checkpoint =
            |name: &str| json!({"event": "context", "op": {"op": "checkpoint", "name": name}});
        let end = json!({"event": "turn_end"});
        let events = history(&[
            // A turn with cursors: a thought, then two chunks of one message.
            prompt("one"),
            checkpoint("cursor-aaaaaaaaaaaa"),
            shown("thought", "hm"),
            shown("agent_text", "a"),
            shown("agent_text", "b"),
            checkpoint("cursor-bbbbbbbbbbbb"),
            end.clone(),
            // One saved without cursors, with the user's own checkpoint.
            prompt("two"),
            checkpoint("mine"),
            shown("agent_text", "c"),
            end.clone(),
            // One with cursors that showed nothing.
            prompt("three"),
            checkpoint("cursor-cccccccccccc"),
            checkpoint("cursor-dddddddddddd"),
            end,
        ]);
        let replayed = replay(&events, CursorUse { fork: true });
        let cursor = |id: &str, at: Shown, after: bool| {
            Update::Cursor(crate::client::Cursor {
                id: id.into(),
                at,
                after,
                fork: true,
            })
        };
        let mut n = 0;
        let mut user = |text: &str| {
            n += 1;
            Update::UserPrompt(crate::client::UserPrompt {
                message_id: format!("prompt-{}", n - 1),
                content: vec![crate::model::Part::Text { text: text.into() }],
                origin: crate::client::PromptOrigin::Replayed,
            })
        };
        let tagged = |id: &str, event: AgentEvent| Update::Tagged {
            message_id: id.into(),
            event,
        };
        assert_eq!(
            replayed,
            [
                user("one"),
                cursor(
                    "cursor-aaaaaaaaaaaa",
                    Shown::AgentThought("msg-aaaaaaaaaaaa-1".into()),
                    false
                ),
                tagged("msg-aaaaaaaaaaaa-1", AgentEvent::Thought("hm".into())),
                tagged("msg-aaaaaaaaaaaa-2", AgentEvent::AgentText("ab".into())),
                cursor(
                    "cursor-bbbbbbbbbbbb",
                    Shown::AgentMessage("msg-aaaaaaaaaaaa-2".into()),
                    true
                ),
                user("two"),
                Update::Agent(AgentEvent::AgentText("c".into())),
                user("three"),
            ]
        );
        // The same history without cursors: as before.
        assert_eq!(
            store::replay_from(&events).len(),
            6,
            "{:?}",
            store::replay_from(&events)
        );
    }

    #[test]
    fn a_turn_that_showed_nothing_announces_nothing() {
        let mut cursors = TurnCursors::new("cursor-x".into(), CursorUse::default());
        let usage = Update::Agent(AgentEvent::Usage {
            used: 1,
            size: 10,
            cost: None,
        });
        assert_eq!(cursors.observe(usage).len(), 1);
        assert_eq!(cursors.answer("cursor-y".into()), None);
    }
}
