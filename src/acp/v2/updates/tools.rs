//! Tool calls as v2 upserts: the first `tool_call_update` for an id creates
//! the call (title, kind, `pending`, raw input, locations), later ones send
//! only what changed. A call's content is replaced whole when it changed,
//! or appended to (`tool_call_content_chunk`) when the new content only
//! adds items to what the client holds. Diffs go as v2 diffs (structured
//! changes and a Git patch); the `shell` tool shows a display terminal.

use std::collections::HashMap;

use agent_client_protocol_schema::v2;

use super::patch::git_patch;
use super::shell::ShellTerminal;
use super::{image_block, location, text_block, tool_kind};
use crate::events::{Location, ToolCallInfo, ToolCallProgress, ToolContent, ToolStatus};
use crate::tools::TypedTool;
use crate::tools::builtin::shell::ShellTool;

/// The built-in tool whose output is shown as a terminal.
const SHELL: &str = ShellTool::NAME;

/// The tool calls of one session the client was told of.
#[derive(Debug, Default)]
pub(super) struct ToolCalls {
    calls: HashMap<String, Call>,
}

#[derive(Debug)]
struct Call {
    /// The content the client holds while the call runs, to append to it.
    shown: Vec<v2::ToolCallContent>,
    terminal: Option<ShellTerminal>,
}

impl Call {
    fn new(terminal: Option<ShellTerminal>) -> Self {
        Self {
            shown: Vec::new(),
            terminal,
        }
    }

    /// Puts `content` on `update` when it replaces what the client holds,
    /// or gives the chunks that append to it; nothing when it is the same
    /// (or empty: a report without content leaves it as it was).
    fn show(
        &mut self,
        id: &str,
        content: Vec<v2::ToolCallContent>,
        update: v2::ToolCallUpdate,
    ) -> (v2::ToolCallUpdate, Vec<v2::SessionUpdate>) {
        if content.is_empty() || content == self.shown {
            return (update, Vec::new());
        }
        if !self.shown.is_empty() && content.starts_with(&self.shown) {
            let chunks = content[self.shown.len()..]
                .iter()
                .map(|item| {
                    v2::SessionUpdate::ToolCallContentChunk(v2::ToolCallContentChunk::new(
                        id.to_string(),
                        item.clone(),
                    ))
                })
                .collect();
            self.shown = content;
            return (update, chunks);
        }
        self.shown = content.clone();
        (update.content(content), Vec::new())
    }
}

impl ToolCalls {
    /// The model asked for a tool: the call is created, pending.
    pub(super) fn call(&mut self, info: &ToolCallInfo) -> Vec<v2::SessionUpdate> {
        self.calls.entry(info.id.clone()).or_insert_with(|| {
            Call::new(
                (info.name == SHELL).then(|| ShellTerminal::new(&info.id, Some(&info.raw_input))),
            )
        });
        vec![v2::SessionUpdate::ToolCallUpdate(created(info))]
    }

    /// A call started, reported, finished or failed: its terminal's
    /// updates first, then the call's own, then what is appended to it.
    pub(super) fn progress(&mut self, progress: &ToolCallProgress) -> Vec<v2::SessionUpdate> {
        let first = !self.calls.contains_key(&progress.id);
        let call = self.calls.entry(progress.id.clone()).or_insert_with(|| {
            Call::new((progress.name == SHELL).then(|| ShellTerminal::new(&progress.id, None)))
        });
        let mut update =
            v2::ToolCallUpdate::new(progress.id.clone()).status(match progress.status {
                ToolStatus::InProgress => v2::ToolCallStatus::InProgress,
                ToolStatus::Completed => v2::ToolCallStatus::Completed,
                ToolStatus::Failed => v2::ToolCallStatus::Failed,
            });
        // A call first heard of here (its creation was not seen) still
        // gets a title.
        if first && !progress.name.is_empty() {
            update = update
                .name(progress.name.clone())
                .title(progress.name.clone());
        }
        if !progress.locations.is_empty() {
            update = update.locations(locations(&progress.locations));
        }
        if let Some(raw) = &progress.raw_output {
            update = update.raw_output(raw.clone());
        }
        let mut out = Vec::new();
        let content: Vec<v2::ToolCallContent> = match &mut call.terminal {
            Some(terminal) => {
                let rest = terminal.progress(progress, &mut out);
                terminal
                    .reference()
                    .into_iter()
                    .chain(rest.iter().filter_map(tool_content))
                    .collect()
            }
            None => progress.content.iter().filter_map(tool_content).collect(),
        };
        let (update, appended) = call.show(&progress.id, content, update);
        out.push(v2::SessionUpdate::ToolCallUpdate(update));
        out.extend(appended);
        if progress.status != ToolStatus::InProgress {
            // Nothing is appended to an ended call: later content replaces.
            call.shown = Vec::new();
        }
        out
    }
}

/// The upsert that creates `info`'s call, pending.
pub(super) fn created(info: &ToolCallInfo) -> v2::ToolCallUpdate {
    let mut update = v2::ToolCallUpdate::new(info.id.clone())
        .title(info.title.clone())
        .kind(tool_kind(info.kind))
        .status(v2::ToolCallStatus::Pending)
        .raw_input(info.raw_input.clone());
    if !info.name.is_empty() {
        update = update.name(info.name.clone());
    }
    if !info.locations.is_empty() {
        update = update.locations(locations(&info.locations));
    }
    update
}

fn locations(locations: &[Location]) -> Vec<v2::ToolCallLocation> {
    locations.iter().map(location).collect()
}

/// An item of a call's content in v2; None for a v1 editor terminal, which
/// v2 does not have (the shell's output has a display terminal instead).
fn tool_content(content: &ToolContent) -> Option<v2::ToolCallContent> {
    Some(match content {
        ToolContent::Text(text) => v2::ToolCallContent::from(text_block(text)),
        ToolContent::Image { mime_type, data } => {
            v2::ToolCallContent::from(image_block(mime_type, data))
        }
        ToolContent::Diff {
            path,
            old_text,
            new_text,
        } => {
            let change = match old_text {
                None => v2::DiffChange::add(path.clone()),
                Some(_) => v2::DiffChange::modify(path.clone()),
            };
            let diff = v2::Diff::new(vec![change.file_type(v2::DiffFileType::Text)]);
            let patch = git_patch(&path.display().to_string(), old_text.as_deref(), new_text);
            v2::ToolCallContent::Diff(match patch {
                Some(text) => diff.with_patch(v2::DiffPatch::new(text)),
                None => diff,
            })
        }
        ToolContent::Terminal { .. } => return None,
        ToolContent::Session { session_id } => {
            v2::ToolCallContent::Session(v2::SessionReference::new(session_id.clone()))
        }
    })
}
