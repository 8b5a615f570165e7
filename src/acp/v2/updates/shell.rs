//! The built-in `shell` tool's output as a v2 agent-owned display terminal.
//! The tool shows its output while it runs as a text snapshot (the start
//! and end so far); here each snapshot becomes the bytes appended since
//! the last one (`terminal_output_chunk`), or a replacement
//! (`terminal_update` output) when the snapshot no longer starts with what
//! was shown. Its end gives the final output and the exit.

use agent_client_protocol_schema::v2;
use serde::Deserialize;

use crate::events::{ToolCallProgress, ToolContent, ToolStatus};

/// What the agent loop's keep-alive update starts with (its `status` in
/// agent_loop/keep_alive.rs): a status line, not output; it follows the
/// tool's own snapshot, or stands alone.
const KEEP_ALIVE: &str = "Still running (";

/// The shell tool's arguments, as far as the terminal shows them.
#[derive(Deserialize)]
struct ShellArgs {
    command: String,
}

/// The shell tool's raw output at its end.
#[derive(Deserialize)]
struct ShellResult {
    output: String,
    exit_code: Option<i64>,
    signal: Option<String>,
    /// What the sandbox blocked, and what came of it.
    sandbox: Option<String>,
}

/// One shell call's terminal.
#[derive(Debug)]
pub(super) struct ShellTerminal {
    id: String,
    command: Option<String>,
    created: bool,
    /// The output the client holds.
    shown: String,
}

impl ShellTerminal {
    /// The terminal of call `call_id`, running what `raw_input` names.
    pub(super) fn new(call_id: &str, raw_input: Option<&serde_json::Value>) -> Self {
        let command = raw_input
            .and_then(|input| ShellArgs::deserialize(input).ok())
            .map(|args| args.command);
        Self {
            id: format!("terminal-{call_id}"),
            command,
            created: false,
            shown: String::new(),
        }
    }

    /// The terminal updates for `progress`, and the call's content: the
    /// terminal first, then what is not output (a keep-alive's status, a
    /// sandbox note, an error).
    pub(super) fn progress(
        &mut self,
        progress: &ToolCallProgress,
        out: &mut Vec<v2::SessionUpdate>,
    ) -> Vec<ToolContent> {
        match progress.status {
            ToolStatus::InProgress => {
                let (output, rest) = split_output(&progress.content);
                self.create(out);
                if let Some(output) = output {
                    self.show(output, out);
                }
                rest
            }
            ToolStatus::Completed => {
                let result = progress
                    .raw_output
                    .as_ref()
                    .and_then(|raw| ShellResult::deserialize(raw).ok());
                self.create(out);
                let Some(result) = result else {
                    self.exited(v2::TerminalExitStatus::new(), out);
                    return progress.content.clone();
                };
                self.show(&result.output, out);
                let status = v2::TerminalExitStatus::new()
                    .exit_code(result.exit_code)
                    .signal(result.signal);
                self.exited(status, out);
                result.sandbox.map(ToolContent::Text).into_iter().collect()
            }
            ToolStatus::Failed => {
                // A call that never ran has no terminal: its error is all there is.
                if self.created {
                    self.exited(v2::TerminalExitStatus::new(), out);
                }
                progress.content.clone()
            }
        }
    }

    /// The call's content item for the terminal, once it exists.
    pub(super) fn reference(&self) -> Option<v2::ToolCallContent> {
        self.created
            .then(|| v2::ToolCallContent::Terminal(v2::Terminal::new(self.id.clone())))
    }

    fn create(&mut self, out: &mut Vec<v2::SessionUpdate>) {
        if self.created {
            return;
        }
        self.created = true;
        let mut update = v2::TerminalUpdate::new(self.id.clone());
        if let Some(command) = &self.command {
            update = update.command(command.clone());
        }
        out.push(v2::SessionUpdate::TerminalUpdate(update));
    }

    /// Brings the client's copy of the output to `output`.
    fn show(&mut self, output: &str, out: &mut Vec<v2::SessionUpdate>) {
        match output.strip_prefix(self.shown.as_str()) {
            Some("") => {}
            Some(more) => out.push(v2::SessionUpdate::TerminalOutputChunk(
                v2::TerminalOutputChunk::new(self.id.clone(), base64(more.as_bytes())),
            )),
            None => out.push(v2::SessionUpdate::TerminalUpdate(
                v2::TerminalUpdate::new(self.id.clone())
                    .output(v2::TerminalOutput::new(base64(output.as_bytes()))),
            )),
        }
        self.shown = output.to_string();
    }

    fn exited(&mut self, status: v2::TerminalExitStatus, out: &mut Vec<v2::SessionUpdate>) {
        self.shown = String::new();
        out.push(v2::SessionUpdate::TerminalUpdate(
            v2::TerminalUpdate::new(self.id.clone()).exit_status(status),
        ));
    }
}

/// A running call's snapshot of its output (its first text, unless that is
/// a keep-alive's status), and the rest of its content. A v1 editor
/// terminal has no v2 equivalent: it is left out.
fn split_output(content: &[ToolContent]) -> (Option<&str>, Vec<ToolContent>) {
    let mut output = None;
    let mut rest = Vec::new();
    for (at, item) in content.iter().enumerate() {
        match item {
            ToolContent::Text(text) if at == 0 && !text.starts_with(KEEP_ALIVE) => {
                output = Some(text.as_str());
            }
            ToolContent::Terminal { .. } => {}
            other => rest.push(other.clone()),
        }
    }
    (output, rest)
}

/// RFC 4648 base64 with padding, as v2 carries terminal bytes.
pub(super) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                text.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                text.push('=');
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_rfc_4648_has_it() {
        let table = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (bytes, text) in table {
            assert_eq!(base64(bytes.as_bytes()), text, "{bytes}");
        }
        assert_eq!(base64(&[0xff, 0xfe]), "//4=");
    }
}
