//! Waiting for what a test means (a file written, a request seen), not for
//! a guessed time: a condition polled until it holds, failing the test at a
//! deadline ([`PATIENCE`]).

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::harness::{Agent, PATIENCE};

/// How often a condition is looked at again.
const POLL: Duration = Duration::from_millis(10);

/// Returns once `holds` is true; fails the test, naming `what` it waited
/// for, when it is still false after [`PATIENCE`].
pub async fn wait_until(what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = Instant::now() + *PATIENCE;
    while !holds() {
        assert!(
            Instant::now() < deadline,
            "waited {:?} for {what}",
            *PATIENCE
        );
        tokio::time::sleep(POLL).await;
    }
}

impl Agent {
    /// The events the writer has saved in `session`'s history so far, in
    /// order (a line still being written is left out).
    pub fn saved_events(&self, session: &str) -> Vec<Value> {
        let path = self.session_dir(session).join("history.jsonl");
        let Ok(history) = std::fs::read_to_string(path) else {
            return Vec::new();
        };
        history
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// `session`'s metadata as the writer saved it (Null before it has).
    pub fn saved_metadata(&self, session: &str) -> Value {
        std::fs::read(self.session_dir(session).join("metadata.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null)
    }

    /// Waits until `session`'s saved history satisfies `holds`.
    pub async fn wait_saved(&self, session: &str, what: &str, holds: impl Fn(&[Value]) -> bool) {
        wait_until(what, || holds(&self.saved_events(session))).await;
    }

    /// Waits until the writer has saved the end of `turns` turns of
    /// `session` (with everything they added before it).
    pub async fn wait_saved_turns(&self, session: &str, turns: usize) {
        let what = format!("{turns} turn ends saved in {session}'s history");
        self.wait_saved(session, &what, |events| {
            events.iter().filter(|e| e["event"] == "turn_end").count() >= turns
        })
        .await;
    }

    /// Waits until `session`'s saved metadata satisfies `holds`.
    pub async fn wait_saved_metadata(
        &self,
        session: &str,
        what: &str,
        holds: impl Fn(&Value) -> bool,
    ) {
        wait_until(what, || holds(&self.saved_metadata(session))).await;
    }
}

/// The agent's text the history saved after its last user prompt.
pub fn saved_text_of_last_turn(events: &[Value]) -> String {
    let last_prompt = events
        .iter()
        .rposition(|e| e["event"] == "user_prompt")
        .map_or(0, |at| at + 1);
    events[last_prompt..]
        .iter()
        .filter(|e| e["event"] == "update" && e["update"]["kind"] == "agent_text")
        .filter_map(|e| e["update"]["text"].as_str())
        .collect()
}
