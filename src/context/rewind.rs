//! The files beside the conversation: what the agent's file tools changed,
//! turn by turn, and the rewinds that took them back. Plain data, like
//! [`super::ContextOp`]: a store records it and rebuilds it on load.
//! File contents are named by their SHA-256 (hex); the contents themselves
//! live in the session's blob store.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{ContextError, ContextManager, Entry, EntryKind};
use crate::model::Part;

/// One write of a file by the agent, in user turn `turn`.
#[derive(Debug, Clone, PartialEq)]
pub struct FileChange {
    pub turn: u64,
    pub path: PathBuf,
    /// What the file held before (its hash); None: it did not exist.
    pub before: Option<String>,
    /// Whether that content was kept (a file past the size cap is not).
    pub before_kept: bool,
    /// The hash of what the agent wrote.
    pub after: String,
}

/// A file a rewind wrote back.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredFile {
    pub path: PathBuf,
    /// What the rewind put there; None: it removed the file.
    pub restored: Option<String>,
    /// What the file held just before the rewind (kept for its undo);
    /// None: it did not exist.
    pub replaced: Option<String>,
}

/// A rewind (or a rollback with files), recorded so it can be undone.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewind {
    pub id: u64,
    /// The checkpoint saved just before it: its undo rolls back to it.
    pub checkpoint: String,
    /// The user turns it took back.
    pub turns: Vec<u64>,
    pub files: Vec<RestoredFile>,
    /// The latest turn number when it ran: undo only while no prompt came since.
    pub at_turn: u64,
}

/// What to do to one file: put `restore` back where the agent (or a
/// rewind) last wrote `expected`.
#[derive(Debug, Clone, PartialEq)]
pub struct FileStep {
    pub path: PathBuf,
    /// The content to put back; None: remove the file.
    pub restore: Option<String>,
    /// Whether that content is available (false: too large to have been kept).
    pub kept: bool,
    /// What the file should hold now (None: it should not exist); anything
    /// else means the user changed it since.
    pub expected: Option<String>,
}

/// The session's file changes and rewinds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileHistory {
    changes: Vec<FileChange>,
    rewinds: Vec<Rewind>,
    undone: Vec<u64>,
}

impl FileHistory {
    pub fn changed(&mut self, change: FileChange) {
        self.changes.push(change);
    }

    pub fn rewound(&mut self, rewind: Rewind) {
        self.rewinds.push(rewind);
    }

    pub fn undone(&mut self, id: u64) {
        self.undone.push(id);
    }

    pub fn changes(&self) -> &[FileChange] {
        &self.changes
    }

    /// The id the next rewind takes.
    pub fn next_id(&self) -> u64 {
        self.rewinds.iter().map(|r| r.id).max().unwrap_or(0) + 1
    }

    /// The latest rewind, unless it was undone already.
    pub fn last_rewind(&self) -> Option<&Rewind> {
        self.rewinds
            .last()
            .filter(|rewind| !self.undone.contains(&rewind.id))
    }

    /// What taking back `turns` does to the files, by path: each goes back
    /// to what it held before the first change of those turns, and should
    /// hold what the last change wrote.
    pub fn plan(&self, turns: &[u64]) -> Vec<FileStep> {
        let mut steps: BTreeMap<&PathBuf, FileStep> = BTreeMap::new();
        for change in self.changes.iter().filter(|c| turns.contains(&c.turn)) {
            steps
                .entry(&change.path)
                .and_modify(|step| step.expected = Some(change.after.clone()))
                .or_insert_with(|| FileStep {
                    path: change.path.clone(),
                    restore: change.before.clone(),
                    kept: change.before.is_none() || change.before_kept,
                    expected: Some(change.after.clone()),
                });
        }
        steps.into_values().collect()
    }
}

impl Rewind {
    /// What undoing it does to the files: each gets back what the rewind replaced.
    pub fn undo_plan(&self) -> Vec<FileStep> {
        self.files
            .iter()
            .map(|file| FileStep {
                path: file.path.clone(),
                restore: file.replaced.clone(),
                kept: true,
                expected: file.restored.clone(),
            })
            .collect()
    }
}

/// What a rewind or rollback takes out of the conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Removed {
    /// The user turns (numbers) among the removed entries.
    pub turns: Vec<u64>,
    /// The first removed user prompt's text, shortened.
    pub first_prompt: Option<String>,
    /// The shell commands the removed turns ran, in order.
    pub commands: Vec<String>,
}

/// What goes when `current` becomes `after`: the entries past their
/// common beginning. `shell`: the name of the tool that runs commands,
/// whose `command` argument is listed.
pub fn removed(current: &[Entry], after: &[Entry], shell: &str) -> Removed {
    let common = current
        .iter()
        .zip(after)
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = Removed::default();
    for entry in &current[common..] {
        if entry.kind == EntryKind::User && entry.turn > 0 {
            out.turns.push(entry.turn);
            if out.first_prompt.is_none() {
                out.first_prompt = Some(entry.preview(60));
            }
        }
        for message in &entry.messages {
            for part in &message.parts {
                if let Part::ToolCall {
                    name, arguments, ..
                } = part
                    && name == shell
                {
                    let command = serde_json::from_str::<serde_json::Value>(arguments)
                        .ok()
                        .and_then(|args| args["command"].as_str().map(str::to_string))
                        .unwrap_or_else(|| arguments.clone());
                    out.commands.push(command);
                }
            }
        }
    }
    out
}

impl ContextManager {
    /// How many entries to pop to go back to before the `n`-th last user
    /// turn (the latest is 1).
    pub fn rewind_count(&self, n: usize) -> Result<usize, ContextError> {
        let starts: Vec<usize> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == EntryKind::User && e.turn > 0)
            .map(|(i, _)| i)
            .collect();
        match starts.len().checked_sub(n).map(|i| starts[i]) {
            Some(start) if n > 0 => Ok(self.entries.len() - start),
            _ => Err(ContextError::NotEnoughTurns {
                asked: n,
                have: starts.len(),
            }),
        }
    }

    /// The entries `/context rollback NAME` would leave.
    pub fn checkpoint_entries(&self, name: &str) -> Option<&[Entry]> {
        self.checkpoints
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.entries.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, Role};
    use std::sync::Arc;

    fn change(turn: u64, path: &str, before: Option<&str>, after: &str) -> FileChange {
        FileChange {
            turn,
            path: path.into(),
            before: before.map(str::to_string),
            before_kept: true,
            after: after.into(),
        }
    }

    #[test]
    fn a_plan_restores_what_came_before_the_first_change_and_expects_the_last() {
        let mut history = FileHistory::default();
        history.changed(change(1, "a", None, "a1"));
        history.changed(change(2, "a", Some("a1"), "a2"));
        history.changed(change(3, "a", Some("a2"), "a3"));
        history.changed(change(3, "b", Some("b0"), "b1"));
        let plan = history.plan(&[2, 3]);
        assert_eq!(plan.len(), 2);
        assert_eq!(plan[0].restore.as_deref(), Some("a1"));
        assert_eq!(plan[0].expected.as_deref(), Some("a3"));
        assert_eq!(plan[1].restore.as_deref(), Some("b0"));
        // A file the agent created goes away.
        let plan = history.plan(&[1]);
        assert_eq!(plan[0].restore, None);
        assert!(plan[0].kept);
    }

    #[test]
    fn rewinds_are_counted_in_user_turns_and_list_the_commands() {
        let call = Arc::new(Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall {
                id: "c".into(),
                name: "shell".into(),
                arguments: r#"{"command":"make clean"}"#.into(),
            }],
        });
        let result = Arc::new(Message {
            role: Role::User,
            parts: vec![Part::ToolResult {
                call_id: "c".into(),
                content: "ok".into(),
                is_error: false,
            }],
        });
        let context = ContextManager::from_messages([
            Arc::new(Message::user_text("one")),
            Arc::new(Message::assistant_text("a")),
            Arc::new(Message::user_text("two")),
            call,
            result,
            Arc::new(Message::assistant_text("b")),
        ]);
        assert_eq!(context.last_turn(), 2);
        assert_eq!(context.rewind_count(1), Ok(3));
        assert_eq!(context.rewind_count(2), Ok(5));
        assert!(context.rewind_count(3).is_err());
        let entries = context.entries();
        let gone = removed(entries, &entries[..2], "shell");
        assert_eq!(gone.turns, [2]);
        assert_eq!(gone.commands, ["make clean"]);
        assert_eq!(gone.first_prompt.as_deref(), Some("two"));
    }
}
