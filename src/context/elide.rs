//! Old tool outputs in a compacted context become one-line stubs (the
//! tool, its arguments shortened, the output's size), so the turns kept
//! after a summary cost little in every later request, the next summary
//! request included. Which outputs go is chosen when the compaction is
//! made and recorded with it (by call id), so a stored session replays to
//! the same context.

use std::sync::Arc;

use super::{Entry, EntryKind, budget};
use crate::model::{Message, Part};

/// Outputs no longer than this stay: a stub would save nothing.
const KEEP_SHORT_CHARS: usize = 240;
/// Arguments shown in a stub, at most.
const STUB_ARGUMENT_CHARS: usize = 80;

/// Which tool outputs of the entries kept after a summary are stubbed:
/// every output of a turn before the latest one, and in the latest turn
/// those past `latest_max_chars` (it is the one the model works on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElidePolicy {
    pub latest_max_chars: usize,
}

impl ElidePolicy {
    /// The call ids whose outputs go, in `kept` (the entries after the
    /// summary, in order).
    pub fn choose(&self, kept: &[Entry]) -> Vec<String> {
        let latest = kept
            .iter()
            .rposition(|e| e.kind == EntryKind::User)
            .unwrap_or(0);
        let mut ids = Vec::new();
        for (index, entry) in kept.iter().enumerate() {
            let limit = if index > latest {
                self.latest_max_chars
            } else {
                KEEP_SHORT_CHARS
            };
            for message in &entry.messages {
                for part in &message.parts {
                    if let Part::ToolResult {
                        call_id, content, ..
                    } = part
                        && content.len() > limit
                        && !is_stub(content)
                    {
                        ids.push(call_id.clone());
                    }
                }
            }
        }
        ids
    }
}

/// Replace the outputs of the calls named in `ids` with their stubs; how
/// many were replaced.
pub fn apply(entries: &mut [Entry], ids: &[String]) -> usize {
    if ids.is_empty() {
        return 0;
    }
    let mut replaced = 0;
    for entry in entries {
        if entry.kind != EntryKind::ToolExchange && entry.kind != EntryKind::User {
            continue;
        }
        let calls: Vec<(String, String, String)> = (entry.messages.iter())
            .flat_map(|m| m.parts.iter())
            .filter_map(|part| match part {
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.clone(), name.clone(), arguments.clone())),
                _ => None,
            })
            .collect();
        for message in &mut entry.messages {
            let (stubbed, count) = stub_message(message, ids, &calls);
            if count > 0 {
                *message = Arc::new(stubbed);
                replaced += count;
            }
        }
        entry.chars = entry
            .messages
            .iter()
            .map(|m| budget::message_chars(m))
            .sum();
    }
    replaced
}

/// `message` with the outputs named in `ids` stubbed, and how many were.
fn stub_message(
    message: &Message,
    ids: &[String],
    calls: &[(String, String, String)],
) -> (Message, usize) {
    let mut count = 0;
    let parts = (message.parts.iter())
        .map(|part| match part {
            Part::ToolResult {
                call_id,
                content,
                is_error,
            } if ids.contains(call_id) && !is_stub(content) => {
                count += 1;
                let (name, arguments) = calls
                    .iter()
                    .find(|(id, _, _)| id == call_id)
                    .map_or(("tool", ""), |(_, name, arguments)| {
                        (name.as_str(), arguments.as_str())
                    });
                Part::ToolResult {
                    call_id: call_id.clone(),
                    content: stub(name, arguments, content.len()),
                    is_error: *is_error,
                }
            }
            other => other.clone(),
        })
        .collect();
    (
        Message {
            role: message.role,
            parts,
        },
        count,
    )
}

/// `[read_file {"path":"src/x.rs"} → 12,340 bytes, elided]`
pub fn stub(name: &str, arguments: &str, bytes: usize) -> String {
    let flat: String = arguments.split_whitespace().collect::<Vec<_>>().join(" ");
    let arguments = if flat.chars().count() > STUB_ARGUMENT_CHARS {
        let cut: String = flat.chars().take(STUB_ARGUMENT_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        flat
    };
    let sep = if arguments.is_empty() { "" } else { " " };
    format!(
        "[{name}{sep}{arguments} → {} bytes, elided]",
        thousands(bytes)
    )
}

fn is_stub(content: &str) -> bool {
    content.starts_with('[') && content.ends_with(" bytes, elided]")
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::ContextManager;
    use crate::model::Role;

    fn exchange(id: &str, name: &str, arguments: &str, output: &str) -> [Arc<Message>; 2] {
        [
            Arc::new(Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall {
                    id: id.into(),
                    name: name.into(),
                    arguments: arguments.into(),
                }],
            }),
            Arc::new(Message {
                role: Role::User,
                parts: vec![Part::ToolResult {
                    call_id: id.into(),
                    content: output.into(),
                    is_error: false,
                }],
            }),
        ]
    }

    #[test]
    fn a_stub_names_the_tool_its_arguments_and_the_size() {
        assert_eq!(
            stub("read_file", r#"{"path": "src/x.rs"}"#, 12_340),
            r#"[read_file {"path": "src/x.rs"} → 12,340 bytes, elided]"#
        );
        assert_eq!(stub("ls", "", 7), "[ls → 7 bytes, elided]");
        let long = stub(
            "grep",
            &format!(r#"{{"pattern":"{}"}}"#, "x".repeat(200)),
            1,
        );
        assert!(long.contains("…"), "{long}");
        assert!(long.chars().count() < 120, "{long}");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn outputs_of_earlier_turns_and_huge_ones_of_the_latest_turn_are_stubbed() {
        let big = "x".repeat(5_000);
        let mut messages = vec![Arc::new(Message::user_text("first"))];
        messages.extend(exchange("a", "read_file", r#"{"path":"a.rs"}"#, &big));
        messages.extend(exchange("s", "ls", "{}", "short"));
        messages.push(Arc::new(Message::assistant_text("read it")));
        messages.push(Arc::new(Message::user_text("latest")));
        messages.extend(exchange("b", "read_file", r#"{"path":"b.rs"}"#, &big));
        messages.extend(exchange(
            "h",
            "shell",
            r#"{"command":"cat"}"#,
            &"y".repeat(50_000),
        ));
        let context = ContextManager::from_messages(messages);
        let policy = ElidePolicy {
            latest_max_chars: 20_000,
        };
        let ids = policy.choose(context.entries());
        assert_eq!(ids, ["a", "h"]);

        let mut entries = context.entries().to_vec();
        assert_eq!(apply(&mut entries, &ids), 2);
        let after = ContextManager::from_messages(entries.iter().flat_map(|e| e.messages.clone()));
        let results: Vec<String> = (after.messages().iter())
            .flat_map(|m| m.parts.clone())
            .filter_map(|p| match p {
                Part::ToolResult { content, .. } => Some(content),
                _ => None,
            })
            .collect();
        assert_eq!(
            results,
            [
                r#"[read_file {"path":"a.rs"} → 5,000 bytes, elided]"#.to_string(),
                "short".into(),
                big,
                r#"[shell {"command":"cat"} → 50,000 bytes, elided]"#.into(),
            ]
        );
        // The sizes follow, and stubbing again changes nothing.
        assert!(entries.iter().map(|e| e.chars).sum::<u64>() < 6_000 + 200);
        assert_eq!(after.chars(), entries.iter().map(|e| e.chars).sum::<u64>());
        assert!(policy.choose(&entries).is_empty());
        assert_eq!(apply(&mut entries, &ids), 0);
    }
}
