//! The ids of the messages v2 requires on every chunk. The agent's messages
//! and thoughts are named after the user message they answer and their
//! place in its turn, so a replay through a fresh translation (which sees
//! the same user messages, chunks and tool calls in the same order) names
//! them the same. Only what the store keeps may move the count: text,
//! thoughts, tool calls and user messages; live-only updates (usage,
//! notices, state) never do.

/// What agent messages are named after before the first user message.
const BEFORE_ANY_PROMPT: &str = "session";

/// Which stream a chunk belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    Message,
    Thought,
}

/// The message chunks are appended to, and what names the next one.
#[derive(Debug)]
pub(super) struct MessageIds {
    /// The id of the user message the agent is answering.
    turn: String,
    /// The agent's messages and thoughts in this turn so far.
    count: u32,
    /// The agent message or thought chunks go to now.
    open: Option<(Stream, String)>,
}

impl MessageIds {
    pub(super) fn new() -> Self {
        Self {
            turn: BEFORE_ANY_PROMPT.to_string(),
            count: 0,
            open: None,
        }
    }

    /// A user message with its own id: what follows answers it.
    pub(super) fn user_message(&mut self, message_id: &str) {
        self.turn = message_id.to_string();
        self.count = 0;
        self.open = None;
    }

    /// The id of a chunk of `stream`: the open message's while chunks of
    /// the same stream follow each other, else a new one.
    pub(super) fn chunk(&mut self, stream: Stream) -> String {
        if let Some((open, id)) = &self.open
            && *open == stream
        {
            return id.clone();
        }
        self.count += 1;
        let letter = match stream {
            Stream::Message => 'm',
            Stream::Thought => 't',
        };
        let id = format!("{}:{letter}{}", self.turn, self.count);
        self.open = Some((stream, id.clone()));
        id
    }

    /// Something the store keeps came between (a tool call): the next
    /// chunk starts a new message.
    pub(super) fn boundary(&mut self) {
        self.open = None;
    }
}
