//! A running call's reports to the editor, sent before the call ends.

use crate::events::ToolContent;

/// How a running call shows what it is doing before it finishes (an ACP
/// `tool_call_update` with status `in_progress` and this content). A
/// channel, so the agent loop emits the updates in order with the rest of
/// the turn; reports outside a call go nowhere.
#[derive(Clone, Default)]
pub struct Progress(Option<tokio::sync::mpsc::UnboundedSender<Vec<ToolContent>>>);

impl Progress {
    /// A hook and the receiving end the agent loop reads.
    pub fn channel() -> (Self, tokio::sync::mpsc::UnboundedReceiver<Vec<ToolContent>>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (Self(Some(tx)), rx)
    }

    /// Whether anyone sees the reports.
    pub fn is_live(&self) -> bool {
        self.0.is_some()
    }

    /// Replaces the call's shown content.
    pub fn report(&self, content: Vec<ToolContent>) {
        if let Some(tx) = &self.0 {
            // The call has finished when nobody listens; nothing to show then.
            let _ = tx.send(content);
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(live)"
        } else {
            "Progress(none)"
        })
    }
}
