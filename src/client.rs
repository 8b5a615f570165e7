//! The client port: what the agent asks of the editor (show an update, ask
//! for a permission, files, terminals) in the agent's own terms. The ACP
//! adapter implements it over JSON-RPC; tests record it. Everything below
//! the adapter talks to the editor only through this port.

use futures::future::BoxFuture;

use crate::events::{AgentEvent, ToolCallInfo};
use crate::model::Part;

/// Everything a session sends to its client. The seam that keeps session
/// logic free of stdio: the transport implements it, tests record it.
pub trait ClientSink: Send + Sync {
    fn send(&self, session_id: &str, update: Update);
    /// Ask the user whether `call` may run. `Err` says why the client could not ask.
    fn request_permission<'a>(
        &'a self,
        session_id: &'a str,
        call: &'a ToolCallInfo,
    ) -> BoxFuture<'a, Result<PermissionChoice, String>>;
    /// Any other request to the client (`fs/*`, `terminal/*`); an error is
    /// the client's code and message.
    fn call<'a>(
        &'a self,
        method: &'a str,
        params: serde_json::Value,
    ) -> BoxFuture<'a, Result<serde_json::Value, (i32, String)>>;
}

#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    Agent(AgentEvent),
    ConfigOptions(Vec<SelectOption>),
    /// The session's mode changed (ACP `current_mode_update`).
    CurrentMode(String),
    /// The slash commands the session offers (ACP `available_commands_update`).
    AvailableCommands(Vec<CommandInfo>),
    /// Part of a user prompt, shown again when a session is loaded.
    UserMessage(Part),
    /// The session's title or last activity changed (ACP `session_info_update`).
    SessionInfo {
        title: Option<String>,
        updated_at: String,
    },
}

/// A session setting the client can change (a select, in ACP terms).
#[derive(Debug, Clone, PartialEq)]
pub struct SelectOption {
    pub id: String,
    pub name: String,
    pub description: String,
    pub category: OptionCategory,
    pub current: String,
    pub values: Vec<OptionValue>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OptionValue {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionCategory {
    Model,
    Provider,
    Mode,
    Agent,
}

pub const MODEL_OPTION: &str = "model";
pub const AGENT_OPTION: &str = "agent";
pub const PROVIDER_OPTION: &str = "provider";
pub const MODE_OPTION: &str = "mode";

/// The client capabilities tools can use instead of the local machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientAbilities {
    pub read_text_file: bool,
    pub write_text_file: bool,
    pub terminal: bool,
}

/// The user's answer to one permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionChoice {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    /// The client cancelled the question (the user cancelled the turn).
    Cancelled,
}

impl PermissionChoice {
    /// The option ids offered to the client, in the order shown.
    pub const OFFERED: [(PermissionChoice, &'static str, &'static str); 4] = [
        (PermissionChoice::AllowOnce, "allow_once", "Allow"),
        (
            PermissionChoice::AllowAlways,
            "allow_always",
            "Always allow",
        ),
        (PermissionChoice::RejectOnce, "reject_once", "Reject"),
        (
            PermissionChoice::RejectAlways,
            "reject_always",
            "Always reject",
        ),
    ];

    pub fn from_option_id(id: &str) -> Option<Self> {
        Self::OFFERED
            .iter()
            .find(|(_, option, _)| *option == id)
            .map(|(choice, _, _)| *choice)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    /// Shown by clients for the text after the name.
    pub hint: Option<String>,
}
