//! `[acp] unstable = [...]`: ACP features not yet in the stable spec, each
//! advertised and served only when named here.

use std::path::Path;

use super::error::{ConfigError, invalid};

/// The unstable ACP features the user turned on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unstable {
    /// `session/set_title`.
    pub set_title: bool,
    /// `session/status`.
    pub status: bool,
    /// `session/fork`.
    pub fork: bool,
    /// `providers/list`, `providers/set`, `providers/disable`.
    pub providers: bool,
    /// The turn's token usage in the `session/prompt` answer.
    pub usage: bool,
    /// The old session-model extension's `models` beside `configOptions`
    /// in session answers.
    pub models: bool,
    /// Delegated agents as sessions of their own (`subagent_update`,
    /// `session_message`), even for a client that does not say it takes them.
    pub subagents: bool,
    /// Session cursors (`cursor_update`, `session/fork` at a `cursorId`).
    pub cursors: bool,
    /// MCP servers the client serves over the ACP connection (`mcp/message`).
    pub mcp_over_acp: bool,
    /// `auth/status`.
    pub auth_status: bool,
    /// `session/archive`, `session/unarchive`, the `archived` list filter.
    pub archive: bool,
    /// `session/options`, and initial `configOptions` on session requests.
    pub options: bool,
    /// `prompt_suggestions_update`: the next prompt a turn's end makes
    /// likely, for clients that take them (`session.promptSuggestions`).
    pub prompt_suggestions: bool,
}

/// The names `[acp] unstable` takes.
const KNOWN: &[&str] = &[
    "archive",
    "auth_status",
    "cursors",
    "fork",
    "mcp_over_acp",
    "models",
    "options",
    "prompt_suggestions",
    "providers",
    "set_title",
    "status",
    "subagents",
    "usage",
];

pub(super) fn validate_unstable(
    written: Option<Vec<String>>,
    path: &Path,
) -> Result<Unstable, ConfigError> {
    let mut unstable = Unstable::default();
    for (n, name) in written.unwrap_or_default().iter().enumerate() {
        match name.as_str() {
            "set_title" => unstable.set_title = true,
            "status" => unstable.status = true,
            // Stable since ACP 1.20 (every client gets it); still accepted.
            "system_prompt" => {}
            "fork" => unstable.fork = true,
            "subagents" => unstable.subagents = true,
            "providers" => unstable.providers = true,
            "usage" => unstable.usage = true,
            "models" => unstable.models = true,
            "cursors" => unstable.cursors = true,
            "mcp_over_acp" => unstable.mcp_over_acp = true,
            "auth_status" => unstable.auth_status = true,
            "archive" => unstable.archive = true,
            "options" => unstable.options = true,
            "prompt_suggestions" => unstable.prompt_suggestions = true,
            other => {
                return Err(invalid(
                    path,
                    format!("acp.unstable[{n}]"),
                    format!("is `{other}`, not an unstable feature this agent has"),
                    format!("Use any of: {}.", KNOWN.join(", ")),
                ));
            }
        }
    }
    Ok(unstable)
}
