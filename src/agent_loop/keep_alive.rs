//! While a tool runs, an update at least every [`EVERY`]: a client that
//! gives up on a turn after minutes without a line (Crucible's waits 5)
//! sees a quiet command is alive, and an editor shows how long it has run.
//! Here, in the loop that awaits every tool, so it holds for every tool on
//! every platform.

use std::time::Duration;

use tokio::time::Instant;

use crate::events::ToolContent;

/// The longest a running tool goes without an update.
pub const EVERY: Duration = Duration::from_secs(30);

/// The keep-alive of one running call.
pub(super) struct KeepAlive {
    every: Duration,
    since: Instant,
    next: Instant,
    /// What the tool last showed: kept, since an update replaces the content.
    shown: Vec<ToolContent>,
}

impl KeepAlive {
    pub(super) fn new(every: Duration) -> Self {
        let since = Instant::now();
        Self {
            every,
            since,
            next: since + every,
            shown: Vec::new(),
        }
    }

    /// Ready when an update is due.
    pub(super) async fn due(&self) {
        tokio::time::sleep_until(self.next).await;
    }

    /// The tool reported `content` itself: the next keep-alive is a period away.
    pub(super) fn shown(&mut self, content: &[ToolContent]) {
        self.shown = content.to_vec();
        self.next = Instant::now() + self.every;
    }

    /// The content of the update now due: what the tool showed last, and
    /// the time so far with its latest output line.
    pub(super) fn update(&mut self) -> Vec<ToolContent> {
        self.next = Instant::now() + self.every;
        let mut content = self.shown.clone();
        content.push(ToolContent::Text(status(
            self.since.elapsed(),
            latest_line(&self.shown),
        )));
        content
    }
}

/// "Still running (1 min 30 s so far; latest output: `…`)".
fn status(elapsed: Duration, latest: Option<&str>) -> String {
    let secs = elapsed.as_secs();
    let time = match (secs / 60, secs % 60) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s} s"),
    };
    match latest {
        Some(line) => format!("Still running ({time} so far; latest output: {line})"),
        None => format!("Still running ({time} so far)"),
    }
}

/// The last line with text of the last text the tool showed.
fn latest_line(shown: &[ToolContent]) -> Option<&str> {
    shown.iter().rev().find_map(|content| match content {
        ToolContent::Text(text) => text.lines().rev().map(str::trim).find(|l| !l.is_empty()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_says_the_time_and_the_latest_line() {
        let shown = [ToolContent::Text("Compiling a\nCompiling b\n\n".into())];
        for (secs, latest, expected) in [
            (30, None, "Still running (30 s so far)"),
            (60, None, "Still running (1 min so far)"),
            (
                95,
                latest_line(&shown),
                "Still running (1 min 35 s so far; latest output: Compiling b)",
            ),
        ] {
            assert_eq!(status(Duration::from_secs(secs), latest), expected);
        }
        assert_eq!(latest_line(&[]), None);
    }

    #[test]
    fn an_update_keeps_what_the_tool_showed_and_adds_the_status() {
        let mut keep = KeepAlive::new(EVERY);
        let first = keep.update();
        assert_eq!(first.len(), 1);
        assert!(
            matches!(&first[0], ToolContent::Text(t) if t.starts_with("Still running (0 s so far)"))
        );
        keep.shown(&[ToolContent::Text("line one\n".into())]);
        let content = keep.update();
        assert_eq!(content[0], ToolContent::Text("line one\n".into()));
        assert!(
            matches!(&content[1], ToolContent::Text(t) if t.ends_with("latest output: line one)")),
            "{content:?}"
        );
    }
}
