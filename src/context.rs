//! The conversation as a stack of entries (seed 000 ContextManager, seed 001
//! context stack): user turns, assistant answers, tool call + result pairs
//! and summaries, each with a token estimate. Everything that changes the
//! stack apart from new messages is a [`ContextOp`], plain data a session
//! store can log and replay on top of [`ContextManager::from_messages`].

pub mod budget;
pub mod compact;
pub mod elide;
pub mod rewind;
pub mod spend;

use std::fmt::Write as _;
use std::sync::Arc;

use thiserror::Error;

use crate::model::{Message, Part, Role};
pub use budget::{ContextBudget, TokenEstimator};

/// Marks the user message that carries a compaction summary, so a stack
/// rebuilt from stored messages knows it for what it is.
pub const SUMMARY_PREFIX: &str =
    "[Summary of the earlier conversation, written when the context was compacted]";

/// How a session budgets its context (`[context]` in the config).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextSettings {
    /// Tokens kept free for the answer (capped at a quarter of the window).
    pub reserve_tokens: u64,
    /// Share of the window past which older turns are summarized.
    pub compaction_threshold: f64,
    /// Turns kept verbatim when compacting.
    pub keep_recent_turns: usize,
    /// Share of the window past which a prompt turn that ends starts a
    /// compaction in the background, before the next prompt needs it;
    /// None turns that off (`compact_between_turns = 0`).
    pub compact_between_turns: Option<f64>,
}

impl Default for ContextSettings {
    fn default() -> Self {
        Self {
            reserve_tokens: budget::DEFAULT_RESERVE_TOKENS,
            compaction_threshold: budget::DEFAULT_COMPACTION_THRESHOLD,
            keep_recent_turns: DEFAULT_KEEP_RECENT_TURNS,
            compact_between_turns: Some(DEFAULT_COMPACT_BETWEEN_TURNS),
        }
    }
}

impl ContextSettings {
    pub fn budget(&self, window: u64) -> ContextBudget {
        ContextBudget::new(window, self.reserve_tokens, self.compaction_threshold)
    }

    /// Past this, a request is compacted inside the turn before it is
    /// sent. With compaction between turns on, only a request that would
    /// not fit at all is (the one between turns comes first); without
    /// it, past `compaction_threshold`.
    pub fn compact_in_turn_at(&self, budget: &ContextBudget) -> u64 {
        match self.compact_between_turns {
            Some(_) => budget.limit(),
            None => budget.compact_at(),
        }
    }
}

/// The share of the window past which a compaction starts between turns,
/// unless the config says otherwise.
pub const DEFAULT_COMPACT_BETWEEN_TURNS: f64 = 0.7;

/// Turns a compaction keeps verbatim unless the config says otherwise.
pub const DEFAULT_KEEP_RECENT_TURNS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    User,
    Assistant,
    /// An assistant message with tool calls and the message with their
    /// results: one entry, so they are never separated.
    ToolExchange,
    Summary,
}

impl EntryKind {
    pub fn label(self) -> &'static str {
        match self {
            EntryKind::User => "user",
            EntryKind::Assistant => "assistant",
            EntryKind::ToolExchange => "tools",
            EntryKind::Summary => "summary",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub kind: EntryKind,
    pub messages: Vec<Arc<Message>>,
    /// Raw size (chars), turned into tokens by the estimator.
    pub chars: u64,
    /// A user prompt's turn number (1, 2, …, counted over the session's
    /// whole life, so the same stored prompts always get the same
    /// numbers); 0 for every other entry.
    pub turn: u64,
}

impl Entry {
    fn new(kind: EntryKind, message: Arc<Message>) -> Self {
        let chars = budget::message_chars(&message);
        Self {
            kind,
            messages: vec![message],
            chars,
            turn: 0,
        }
    }

    fn add(&mut self, message: Arc<Message>) {
        self.chars += budget::message_chars(&message);
        self.messages.push(message);
    }

    /// A one-line preview for `/context`.
    pub fn preview(&self, width: usize) -> String {
        let mut text = String::new();
        for message in &self.messages {
            for part in &message.parts {
                let piece = match part {
                    Part::Text { text } => text.as_str(),
                    Part::ToolCall { name, .. } => name.as_str(),
                    Part::ToolResult { content, .. } => content.as_str(),
                    Part::Image { .. } => "[image]",
                    _ => continue,
                };
                if !text.is_empty() {
                    text.push_str(" · ");
                }
                text.push_str(piece);
            }
        }
        let text = text.strip_prefix(SUMMARY_PREFIX).unwrap_or(&text);
        let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if flat.chars().count() > width {
            let cut: String = flat.chars().take(width.saturating_sub(1)).collect();
            format!("{cut}…")
        } else {
            flat
        }
    }

    /// Whether the entry still waits for its tool results.
    fn open_calls(&self) -> bool {
        self.kind == EntryKind::ToolExchange && self.messages.len() == 1
    }
}

/// A named copy of the stack, restored by rollback (copies share messages).
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub name: String,
    pub entries: Vec<Entry>,
}

/// A change to the stack other than a new message. Plain data: a store can
/// record these beside the messages and replay them in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ContextOp {
    /// Replace the first `entries` entries with one summary, and the
    /// outputs of the calls `elided` (in the entries kept) with stubs.
    Compact {
        entries: usize,
        summary: String,
        /// Absent from compactions stored before stubs existed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        elided: Vec<String>,
    },
    /// Remove `count` entries from `start` (whole turns or tool exchanges).
    Drop {
        start: usize,
        count: usize,
    },
    Checkpoint {
        name: String,
    },
    Rollback {
        name: String,
    },
    /// Remove the last `count` entries.
    Pop {
        count: usize,
    },
    /// Empty the stack; checkpoints stay.
    Reset,
}

#[derive(Debug, Error, PartialEq)]
pub enum ContextError {
    #[error("no checkpoint named `{name}`; {known}")]
    UnknownCheckpoint { name: String, known: String },
    #[error("the context has {have} entries; cannot {what} {asked}")]
    OutOfRange {
        what: &'static str,
        asked: usize,
        have: usize,
    },
    #[error("a checkpoint needs a name, e.g. `/context checkpoint before-refactor`")]
    EmptyName,
    #[error("the context holds {have} user turns; cannot rewind {asked}")]
    NotEnoughTurns { asked: usize, have: usize },
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextManager {
    entries: Vec<Entry>,
    checkpoints: Vec<Checkpoint>,
    pub estimator: TokenEstimator,
    /// User prompts pushed so far: the last one's turn number.
    turns: u64,
}

impl ContextManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuild a stack from stored messages (in order).
    pub fn from_messages<I: IntoIterator<Item = Arc<Message>>>(messages: I) -> Self {
        let mut context = Self::new();
        for message in messages {
            context.push(message);
        }
        context
    }

    /// Add a message where it belongs: tool results join their calls.
    pub fn push(&mut self, message: Arc<Message>) {
        let has_calls = message
            .parts
            .iter()
            .any(|p| matches!(p, Part::ToolCall { .. }));
        let has_results = message
            .parts
            .iter()
            .any(|p| matches!(p, Part::ToolResult { .. }));
        match message.role {
            Role::User if has_results => match self.entries.last_mut() {
                Some(entry) if entry.open_calls() => entry.add(message),
                // Results without calls: kept, but as their own entry.
                _ => self.entries.push(Entry::new(EntryKind::User, message)),
            },
            Role::User => {
                let summary = message.text().starts_with(SUMMARY_PREFIX);
                let mut entry = Entry::new(EntryKind::User, message);
                if summary {
                    entry.kind = EntryKind::Summary;
                } else {
                    self.turns += 1;
                    entry.turn = self.turns;
                }
                self.entries.push(entry);
            }
            Role::Assistant if has_calls => self
                .entries
                .push(Entry::new(EntryKind::ToolExchange, message)),
            Role::Assistant => self.entries.push(Entry::new(EntryKind::Assistant, message)),
        }
    }

    /// A user message that joined the running turn (steering): an entry
    /// of its own, but no turn of its own (`turn` 0), so `/rewind` counts
    /// and takes back the turn it joined, whose number its files carry.
    pub fn push_steered(&mut self, message: Arc<Message>) {
        self.entries.push(Entry::new(EntryKind::User, message));
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn checkpoints(&self) -> &[Checkpoint] {
        &self.checkpoints
    }

    /// The number of the latest user prompt pushed (0 before the first);
    /// it only grows, whatever is removed.
    pub fn last_turn(&self) -> u64 {
        self.turns
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The messages to send, in order.
    pub fn messages(&self) -> Vec<Arc<Message>> {
        self.entries
            .iter()
            .flat_map(|entry| entry.messages.iter().cloned())
            .collect()
    }

    pub fn entry_tokens(&self, entry: &Entry) -> u64 {
        self.estimator.tokens(entry.chars)
    }

    /// Raw size of all entries.
    pub fn chars(&self) -> u64 {
        self.entries.iter().map(|e| e.chars).sum()
    }

    /// Estimated tokens of the conversation (without system prompt and tools).
    pub fn tokens(&self) -> u64 {
        self.estimator.tokens(self.chars())
    }

    /// Where each turn starts: at a user message or a summary. Entries
    /// before the first (an assistant greeting…) belong to the first turn.
    pub fn turn_starts(&self) -> Vec<usize> {
        let mut starts: Vec<usize> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e.kind, EntryKind::User | EntryKind::Summary))
            .map(|(i, _)| i)
            .collect();
        if !self.entries.is_empty() && starts.first() != Some(&0) {
            starts.insert(0, 0);
        }
        starts
    }

    /// The tokens of the latest user turn: its prompt and all that
    /// followed it.
    pub fn latest_turn_tokens(&self) -> u64 {
        let chars = self.entries[self.latest_turn()..]
            .iter()
            .map(|e| e.chars)
            .sum();
        self.estimator.tokens(chars)
    }

    /// Where the latest user turn starts (never dropped nor summarized).
    fn latest_turn(&self) -> usize {
        self.entries
            .iter()
            .rposition(|e| e.kind == EntryKind::User)
            .unwrap_or(self.entries.len())
    }

    /// How many leading entries to summarize so that the last
    /// `keep_recent` turns stay verbatim; `None` when there is nothing
    /// worth summarizing (no whole turn, or only an existing summary).
    pub fn compactable(&self, keep_recent: usize) -> Option<usize> {
        let starts = self.turn_starts();
        let latest = self.latest_turn();
        let keep_from = starts
            .len()
            .checked_sub(keep_recent.max(1))
            .and_then(|i| starts.get(i).copied())
            .unwrap_or(0)
            .min(latest);
        let worth = self.entries[..keep_from]
            .iter()
            .any(|e| e.kind != EntryKind::Summary);
        (keep_from > 0 && worth).then_some(keep_from)
    }

    /// The drops that bring the conversation to at most `room` tokens:
    /// oldest whole turns first, then tool exchanges of the latest turn
    /// (oldest first); the latest user message always stays. Returns the
    /// operations (apply them in order) and whether the result fits.
    pub fn plan_drops(&self, room: u64) -> (Vec<ContextOp>, bool) {
        let fits = |chars: u64| self.estimator.tokens(chars) <= room;
        let mut ops = Vec::new();
        let mut chars = self.chars();
        if fits(chars) {
            return (ops, true);
        }
        let latest = self.latest_turn();
        let mut whole = 0;
        for &next in self.turn_starts().iter().skip(1).filter(|&&s| s <= latest) {
            if fits(chars) {
                break;
            }
            chars -= self.entries[whole..next]
                .iter()
                .map(|e| e.chars)
                .sum::<u64>();
            whole = next;
        }
        if whole > 0 {
            ops.push(ContextOp::Drop {
                start: 0,
                count: whole,
            });
        }
        // Still too big: the latest turn's oldest tool exchanges go next.
        let mut count = 0;
        for entry in self.entries.get(latest + 1..).unwrap_or_default() {
            if fits(chars) || entry.kind != EntryKind::ToolExchange {
                break;
            }
            chars -= entry.chars;
            count += 1;
        }
        if count > 0 {
            ops.push(ContextOp::Drop {
                start: latest - whole + 1,
                count,
            });
        }
        (ops, fits(chars))
    }

    /// Apply an operation; the answer is a short report for the user.
    pub fn apply(&mut self, op: &ContextOp) -> Result<String, ContextError> {
        match op {
            ContextOp::Compact {
                entries,
                summary,
                elided,
            } => self.summarized(*entries, summary, elided),
            ContextOp::Drop { start, count } => {
                let end = start.saturating_add(*count);
                if end > self.entries.len() {
                    return Err(self.range("drop", end));
                }
                let tokens: u64 = self.entries[*start..end]
                    .iter()
                    .map(|e| self.entry_tokens(e))
                    .sum();
                self.entries.drain(*start..end);
                Ok(format!("Dropped {count} entries (~{tokens} tokens)."))
            }
            ContextOp::Checkpoint { name } => {
                let name = name.trim();
                if name.is_empty() {
                    return Err(ContextError::EmptyName);
                }
                let checkpoint = Checkpoint {
                    name: name.to_string(),
                    entries: self.entries.clone(),
                };
                // A name names one point: checkpointing again moves it.
                self.checkpoints.retain(|c| c.name != name);
                self.checkpoints.push(checkpoint);
                Ok(format!(
                    "Checkpoint `{name}` saved at {} entries (~{} tokens).",
                    self.entries.len(),
                    self.tokens()
                ))
            }
            ContextOp::Rollback { name } => {
                let Some(checkpoint) = self.checkpoints.iter().find(|c| c.name == *name) else {
                    return Err(ContextError::UnknownCheckpoint {
                        name: name.clone(),
                        known: self.checkpoint_names(),
                    });
                };
                let removed = self.entries.len();
                self.entries = checkpoint.entries.clone();
                Ok(format!(
                    "Rolled back to checkpoint `{name}`: {} entries (~{} tokens), was {removed} entries.",
                    self.entries.len(),
                    self.tokens()
                ))
            }
            ContextOp::Pop { count } => {
                if *count > self.entries.len() {
                    return Err(self.range("pop", *count));
                }
                let start = self.entries.len() - count;
                let tokens: u64 = self.entries[start..]
                    .iter()
                    .map(|e| self.entry_tokens(e))
                    .sum();
                self.entries.truncate(start);
                Ok(format!(
                    "Removed the last {count} entries (~{tokens} tokens); {} remain.",
                    self.entries.len()
                ))
            }
            ContextOp::Reset => {
                let count = self.entries.len();
                self.entries.clear();
                Ok(format!(
                    "Context reset: {count} entries removed. Checkpoints are kept."
                ))
            }
        }
    }

    /// The first `count` entries replaced with `summary`, and the outputs
    /// of the calls `elided` in the entries after it with stubs.
    fn summarized(
        &mut self,
        count: usize,
        summary: &str,
        elided: &[String],
    ) -> Result<String, ContextError> {
        if count > self.entries.len() {
            return Err(self.range("summarize", count));
        }
        let tokens_before: u64 = self.entries[..count]
            .iter()
            .map(|e| self.entry_tokens(e))
            .sum();
        let message = Arc::new(Message::user_text(format!(
            "{SUMMARY_PREFIX}\n\n{}",
            summary.trim()
        )));
        let entry = Entry::new(EntryKind::Summary, message);
        let tokens_after = self.entry_tokens(&entry);
        self.entries.splice(..count, [entry]);
        let stubbed = elide::apply(&mut self.entries[1..], elided);
        let stubs = match stubbed {
            0 => String::new(),
            1 => " 1 older tool output is now a one-line stub.".to_string(),
            n => format!(" {n} older tool outputs are now one-line stubs."),
        };
        Ok(format!(
            "Summarized {count} entries (~{tokens_before} tokens) into one summary (~{tokens_after} tokens).{stubs}"
        ))
    }

    fn range(&self, what: &'static str, asked: usize) -> ContextError {
        ContextError::OutOfRange {
            what,
            asked,
            have: self.entries.len(),
        }
    }

    fn checkpoint_names(&self) -> String {
        if self.checkpoints.is_empty() {
            "there are no checkpoints yet (make one with `/context checkpoint NAME`)".into()
        } else {
            format!(
                "checkpoints: {}",
                self.checkpoints
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    }

    /// The `/context` listing. `fixed` is the system prompt and tools.
    pub fn report(&self, fixed: u64, budget: &ContextBudget) -> String {
        let used = fixed + self.tokens();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Context: {used} / {limit} tokens ({percent}% of the budget; window {window}, {reserve} reserved for the answer, compaction at {compact})",
            limit = budget.limit(),
            percent = used * 100 / budget.limit().max(1),
            window = budget.window,
            reserve = budget.reserve,
            compact = budget.compact_at(),
        );
        let _ = writeln!(
            out,
            "System prompt and tools: {fixed} tokens. Conversation: {} tokens in {} entries. Estimate drift: ×{:.2} ({} reports).",
            self.tokens(),
            self.entries.len(),
            self.estimator.drift,
            self.estimator.observations,
        );
        if !self.entries.is_empty() {
            out.push('\n');
        }
        for (i, entry) in self.entries.iter().enumerate() {
            let _ = writeln!(
                out,
                "{:>3}. {:<9} {:>6} tok  {}",
                i + 1,
                entry.kind.label(),
                self.entry_tokens(entry),
                entry.preview(60)
            );
        }
        if self.checkpoints.is_empty() {
            out.push_str("\nCheckpoints: none.");
        } else {
            out.push_str("\nCheckpoints:");
            for checkpoint in &self.checkpoints {
                let _ = write!(
                    out,
                    "\n- {} ({} entries)",
                    checkpoint.name,
                    checkpoint.entries.len()
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Arc<Message> {
        Arc::new(Message::user_text(text))
    }

    fn answer(text: &str) -> Arc<Message> {
        Arc::new(Message::assistant_text(text))
    }

    fn call(id: &str) -> Arc<Message> {
        Arc::new(Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall {
                id: id.into(),
                name: "read".into(),
                arguments: "{}".into(),
            }],
        })
    }

    fn result(id: &str, content: &str) -> Arc<Message> {
        Arc::new(Message {
            role: Role::User,
            parts: vec![Part::ToolResult {
                call_id: id.into(),
                content: content.into(),
                is_error: false,
            }],
        })
    }

    fn kinds(context: &ContextManager) -> Vec<&'static str> {
        context.entries().iter().map(|e| e.kind.label()).collect()
    }

    /// Every tool call in the messages is followed by its result and
    /// every result follows its call.
    fn paired(messages: &[Arc<Message>]) -> bool {
        let mut open: Vec<String> = Vec::new();
        for message in messages {
            for part in &message.parts {
                match part {
                    Part::ToolResult { call_id, .. } => {
                        let Some(pos) = open.iter().position(|id| id == call_id) else {
                            return false;
                        };
                        open.remove(pos);
                    }
                    Part::ToolCall { id, .. } => {
                        if !open.is_empty() {
                            return false;
                        }
                        open.push(id.clone());
                    }
                    _ => {}
                }
            }
            if message.role == Role::Assistant && !open.is_empty() {
                // results must come in the very next message
                continue;
            }
        }
        open.is_empty()
    }

    #[test]
    fn with_compaction_between_turns_a_turn_compacts_only_what_would_not_fit() {
        let on = ContextSettings::default();
        let budget = on.budget(32_768);
        assert_eq!(on.compact_between_turns, Some(0.7));
        assert_eq!(on.compact_in_turn_at(&budget), budget.limit());
        let off = ContextSettings {
            compact_between_turns: None,
            ..on
        };
        assert_eq!(off.compact_in_turn_at(&budget), budget.compact_at());
        assert!(budget.compact_at() < budget.limit());
    }

    #[test]
    fn messages_group_into_entries() {
        let context = ContextManager::from_messages([
            user("hi"),
            answer("hello"),
            user("read it"),
            call("a"),
            result("a", "text"),
            answer("done"),
            user(&format!("{SUMMARY_PREFIX}\n\nearlier")),
        ]);
        assert_eq!(
            kinds(&context),
            ["user", "assistant", "user", "tools", "assistant", "summary"]
        );
        assert_eq!(context.messages().len(), 7);
        assert_eq!(context.turn_starts(), vec![0, 2, 5]);
    }

    #[test]
    fn stack_operations_report_and_change_the_stack() {
        let mut context = ContextManager::from_messages([user("a"), answer("b"), user("c")]);
        let cases: Vec<(ContextOp, Result<Vec<&str>, ()>)> = vec![
            (
                ContextOp::Checkpoint { name: "one".into() },
                Ok(vec!["user", "assistant", "user"]),
            ),
            (ContextOp::Pop { count: 2 }, Ok(vec!["user"])),
            (ContextOp::Pop { count: 5 }, Err(())),
            (
                ContextOp::Rollback {
                    name: "nope".into(),
                },
                Err(()),
            ),
            (ContextOp::Checkpoint { name: " ".into() }, Err(())),
            (
                ContextOp::Rollback { name: "one".into() },
                Ok(vec!["user", "assistant", "user"]),
            ),
            (
                ContextOp::Compact {
                    entries: 2,
                    summary: "they said a and b".into(),
                    elided: Vec::new(),
                },
                Ok(vec!["summary", "user"]),
            ),
            (ContextOp::Drop { start: 0, count: 1 }, Ok(vec!["user"])),
            (ContextOp::Reset, Ok(vec![])),
            // A checkpoint made before the compaction still restores the turns.
            (
                ContextOp::Rollback { name: "one".into() },
                Ok(vec!["user", "assistant", "user"]),
            ),
        ];
        for (op, expected) in cases {
            let outcome = context.apply(&op);
            match expected {
                Ok(kinds_after) => {
                    assert!(outcome.is_ok(), "{op:?}: {outcome:?}");
                    assert_eq!(kinds(&context), kinds_after, "{op:?}");
                }
                Err(()) => assert!(outcome.is_err(), "{op:?} should fail"),
            }
        }
        assert_eq!(context.checkpoints().len(), 1);
    }

    #[test]
    fn compaction_keeps_recent_turns_and_the_latest_user_message() {
        let mut messages = Vec::new();
        for n in 0..4 {
            messages.push(user(&format!("q{n}")));
            messages.push(call(&format!("c{n}")));
            messages.push(result(&format!("c{n}"), "out"));
            messages.push(answer("a"));
        }
        messages.push(user("latest"));
        let context = ContextManager::from_messages(messages);
        // 5 turns; keeping 2 summarizes the first 3 (12 entries... 3 turns × 3 entries).
        assert_eq!(context.compactable(2), Some(9));
        assert_eq!(context.compactable(1), Some(12));
        assert_eq!(context.compactable(9), None);
        let mut only_latest = ContextManager::from_messages([user("just one")]);
        assert_eq!(only_latest.compactable(1), None);
        only_latest
            .apply(&ContextOp::Compact {
                entries: 0,
                summary: "x".into(),
                elided: Vec::new(),
            })
            .unwrap();
        // A lone summary before the latest turn is not worth summarizing again.
        assert_eq!(only_latest.compactable(1), None);
    }

    #[test]
    fn drops_take_whole_turns_and_never_the_latest_user_message() {
        let big = "x".repeat(4000);
        let context = ContextManager::from_messages([
            user(&big),
            answer("ok"),
            user("second"),
            call("a"),
            result("a", &big),
            answer("ok"),
            user("latest"),
            call("b"),
            result("b", &big),
            call("c"),
            result("c", "small"),
        ]);
        let (ops, fits) = context.plan_drops(500);
        assert!(fits);
        assert_eq!(
            ops,
            vec![
                ContextOp::Drop { start: 0, count: 5 },
                ContextOp::Drop { start: 1, count: 1 },
            ]
        );
        let mut after = context;
        for op in &ops {
            after.apply(op).unwrap();
        }
        assert_eq!(kinds(&after), ["user", "tools"]);
        assert_eq!(after.messages()[0].text(), "latest");
        // Nothing can make it fit: the user message stays and it says so.
        let (_, fits) = ContextManager::from_messages([user(&big)]).plan_drops(10);
        assert!(!fits);
    }

    /// Random conversations, random budgets: whatever is dropped or
    /// summarized, no tool call loses its result and the latest user
    /// message survives.
    #[test]
    fn no_operation_orphans_a_tool_result() {
        let mut rng = fastrand::Rng::with_seed(6);
        for _ in 0..300 {
            let mut messages = Vec::new();
            let turns = rng.usize(1..8);
            for turn in 0..turns {
                messages.push(user(&"u".repeat(rng.usize(1..800))));
                for n in 0..rng.usize(0..4) {
                    let id = format!("{turn}-{n}");
                    messages.push(call(&id));
                    messages.push(result(&id, &"r".repeat(rng.usize(1..3000))));
                }
                if turn + 1 < turns || rng.bool() {
                    messages.push(answer(&"a".repeat(rng.usize(1..500))));
                }
            }
            let latest = messages
                .iter()
                .rfind(|m| m.role == Role::User && !m.text().is_empty())
                .cloned()
                .unwrap();
            let context = ContextManager::from_messages(messages);
            assert!(paired(&context.messages()));

            let mut dropped = context.clone();
            let (ops, _) = context.plan_drops(rng.u64(0..3000));
            for op in &ops {
                dropped.apply(op).unwrap();
            }
            assert!(paired(&dropped.messages()), "{ops:?}");
            assert!(dropped.messages().iter().any(|m| Arc::ptr_eq(m, &latest)));

            let mut compacted = context.clone();
            if let Some(entries) = compacted.compactable(rng.usize(1..4)) {
                compacted
                    .apply(&ContextOp::Compact {
                        entries,
                        summary: "s".into(),
                        elided: Vec::new(),
                    })
                    .unwrap();
            }
            assert!(paired(&compacted.messages()));
            assert!(compacted.messages().iter().any(|m| Arc::ptr_eq(m, &latest)));
        }
    }

    #[test]
    fn report_lists_entries_tokens_and_checkpoints() {
        let mut context = ContextManager::from_messages([user("hello there"), answer("hi")]);
        context
            .apply(&ContextOp::Checkpoint {
                name: "start".into(),
            })
            .unwrap();
        let budget = ContextBudget::new(8192, 4096, 0.8);
        let report = context.report(100, &budget);
        let used = 100 + context.tokens();
        assert!(
            report.contains(&format!("Context: {used} / 6144 tokens")),
            "{report}"
        );
        assert!(report.contains("window 8192"), "{report}");
        assert!(report.contains("1. user"), "{report}");
        assert!(report.contains("hello there"), "{report}");
        assert!(report.contains("- start (2 entries)"), "{report}");
    }
}
