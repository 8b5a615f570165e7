//! `sessions list|show|delete`: the store, for people and scripts.

use std::io::Write;
use std::path::Path;

use super::CliError;
use crate::client::Update;
use crate::events::{AgentEvent, ToolStatus};
use crate::model::{Part, SessionId};
use crate::store::{self, Store};

/// How a listing or a session is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// For people: a table, a transcript.
    Text,
    /// For scripts: the store's own JSON.
    Json,
}

pub fn list(
    store: &Store,
    cwd: Option<&Path>,
    output: Output,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut sessions = store.list();
    if let Some(cwd) = cwd {
        sessions.retain(|s| s.cwd == cwd);
    }
    if output == Output::Json {
        serde_json::to_writer_pretty(&mut *out, &sessions).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(());
    }
    if sessions.is_empty() {
        writeln!(out, "no sessions in {}", store.dir().display())?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<36}  {:<24}  {:<8}  TITLE / CWD",
        "ID", "UPDATED", "MODE"
    )?;
    for (depth, session) in as_tree(&sessions) {
        let indent = "  ".repeat(depth);
        let agent = match (&session.parent_id, &session.agent) {
            (Some(_), Some(agent)) => format!("[{agent}] "),
            _ => String::new(),
        };
        writeln!(
            out,
            "{indent}{:<36}  {:<24}  {:<8}  {agent}{}\n{indent}{:<72}  {}",
            session.id,
            session.updated_at,
            session.mode,
            session.title.as_deref().unwrap_or("(untitled)"),
            "",
            session.cwd.display()
        )?;
    }
    Ok(())
}

/// Sessions in list order, each followed by the sessions it delegated to
/// (indented one level deeper); a child whose parent is gone is a root.
fn as_tree(sessions: &[store::Metadata]) -> Vec<(usize, &store::Metadata)> {
    let listed = |id: &SessionId| sessions.iter().any(|s| s.id == *id);
    let mut out = Vec::new();
    let mut stack: Vec<(usize, &store::Metadata)> = sessions
        .iter()
        .rev()
        .filter(|s| !s.parent_id.as_ref().is_some_and(listed))
        .map(|s| (0, s))
        .collect();
    while let Some((depth, session)) = stack.pop() {
        out.push((depth, session));
        let children = sessions
            .iter()
            .rev()
            .filter(|s| s.parent_id.as_ref() == Some(&session.id));
        // A cycle (hand-edited files) must not loop forever.
        if depth < 16 {
            stack.extend(children.map(|child| (depth + 1, child)));
        }
    }
    out
}

pub fn show(store: &Store, id: &str, output: Output, out: &mut dyn Write) -> Result<(), CliError> {
    let (metadata, events) = store.read(&SessionId::from(id))?;
    if output == Output::Json {
        let value = serde_json::json!({ "metadata": metadata, "events": events });
        serde_json::to_writer_pretty(&mut *out, &value).map_err(std::io::Error::other)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "session  {}", metadata.id)?;
    writeln!(
        out,
        "title    {}",
        metadata.title.as_deref().unwrap_or("(untitled)")
    )?;
    writeln!(out, "cwd      {}", metadata.cwd.display())?;
    writeln!(out, "created  {}", metadata.created_at)?;
    writeln!(out, "updated  {}", metadata.updated_at)?;
    writeln!(out, "model    {} / {}", metadata.provider, metadata.model)?;
    writeln!(out, "mode     {}", metadata.mode)?;
    if let Some(agent) = &metadata.agent {
        writeln!(out, "agent    {agent}")?;
    }
    if let Some(parent) = &metadata.parent_id {
        writeln!(out, "parent   {parent}")?;
    }
    if let Some(call) = &metadata.parent_tool_call_id {
        writeln!(out, "by call  {call}")?;
    }
    for child in &metadata.children {
        writeln!(out, "child    {child}")?;
    }
    for (tool, allowed) in &metadata.permissions {
        let answer = if *allowed {
            "always allow"
        } else {
            "always reject"
        };
        writeln!(out, "rule     {answer} {tool}")?;
    }
    writeln!(out)?;
    for update in store::replay_from(&events) {
        match update {
            Update::UserPrompt(prompt) => {
                for part in prompt.content {
                    match part {
                        Part::Text { text } => writeln!(out, "> {text}")?,
                        Part::Image { mime_type, .. } => writeln!(out, "> [image {mime_type}]")?,
                        _ => {}
                    }
                }
            }
            Update::Agent(AgentEvent::AgentText(text)) => writeln!(out, "{text}")?,
            Update::Agent(AgentEvent::Thought(text)) => writeln!(out, "(thinking) {text}")?,
            Update::Agent(AgentEvent::ToolCall(call)) => writeln!(out, "[tool] {}", call.title)?,
            Update::Agent(AgentEvent::ToolCallUpdate(progress)) => match progress.status {
                ToolStatus::Completed => writeln!(out, "[tool] done")?,
                ToolStatus::Failed => writeln!(out, "[tool] failed")?,
                ToolStatus::InProgress => {}
            },
            Update::Agent(AgentEvent::Plan(entries)) => {
                writeln!(out, "[plan] {} entries", entries.len())?;
            }
            _ => {}
        }
    }
    Ok(())
}

pub fn delete(store: &Store, id: &str, out: &mut dyn Write) -> Result<(), CliError> {
    store.delete(&SessionId::from(id))?;
    writeln!(out, "deleted session {id}")?;
    Ok(())
}
