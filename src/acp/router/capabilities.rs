//! What each side can do: the client's `initialize` read into a
//! [`ClientInfo`], this agent's answer (the unstable features the config
//! turned on included), and sign-in (`authenticate`, unstable `auth/status`).

use agent_client_protocol_schema::v1 as acp;

use serde::Deserialize;

use super::Router;
use crate::acp::auth;
use crate::acp::request::Reply;
use crate::providers::lenient::Lenient;

/// What the client said about itself in `initialize`.
#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub read_text_file: bool,
    pub write_text_file: bool,
    pub terminal: bool,
    pub notices: bool,
    pub compaction: bool,
    pub elicitation: bool,
    /// Takes delegated agents as sessions (`subagents`).
    pub subagents: bool,
    /// Takes plans by id (`plan`: `plan_update`, `plan_removed`).
    pub plans: bool,
    /// Takes `cursor_update` (unstable `session.cursors`).
    pub cursors: bool,
    /// Takes `prompt_suggestions_update` (unstable `session.promptSuggestions`).
    pub prompt_suggestions: bool,
    /// Can run a `terminal` sign-in method: `auth.terminal`, or the
    /// `_meta` flag `"terminal-auth": true` that clients before ACP 1.20
    /// (and the ACP registry's validator) send instead.
    pub terminal_auth: bool,
    pub name: Option<String>,
}

/// The `_meta` flag clients before ACP 1.20 send for a terminal sign-in.
#[derive(serde::Deserialize)]
struct LegacyMeta {
    #[serde(rename = "terminal-auth", default)]
    terminal_auth: Lenient<bool>,
}

impl LegacyMeta {
    fn says_terminal_auth(meta: Option<&acp::Meta>) -> bool {
        meta.and_then(|meta| LegacyMeta::deserialize(&serde_json::Value::Object(meta.clone())).ok())
            .and_then(|legacy| legacy.terminal_auth.into_option())
            .unwrap_or(false)
    }
}

impl ClientInfo {
    /// What `initialize` tells about the client (logged: it is the first
    /// thing to look at when a client misbehaves).
    pub fn from_request(request: &acp::InitializeRequest) -> Self {
        let caps = &request.client_capabilities;
        let info = Self {
            read_text_file: caps.fs.read_text_file,
            write_text_file: caps.fs.write_text_file,
            terminal: caps.terminal,
            notices: caps.session.as_ref().is_some_and(|s| s.notices.is_some()),
            compaction: caps
                .session
                .as_ref()
                .is_some_and(|s| s.compaction.is_some()),
            elicitation: (caps.elicitation.as_ref())
                .is_some_and(acp::ElicitationCapabilities::supports_form),
            subagents: caps.subagents.is_some(),
            plans: caps.plan.is_some(),
            cursors: caps.session.as_ref().is_some_and(|s| s.cursors.is_some()),
            prompt_suggestions: (caps.session.as_ref())
                .is_some_and(|s| s.prompt_suggestions.is_some()),
            terminal_auth: caps.auth.terminal || LegacyMeta::says_terminal_auth(caps.meta.as_ref()),
            name: request.client_info.as_ref().map(|info| info.name.clone()),
        };
        tracing::info!(client = ?info, requested = %request.protocol_version, "client initialized");
        info
    }

    /// Whether the client takes notifications between a request and its
    /// answer. Clients that name themselves (`clientInfo`: Zed, acpx, the
    /// SDKs) do; Crucible's own client sends none and reads the next line
    /// after a request as its answer, so updates made outside a turn wait
    /// for its next turn.
    pub(super) fn interleaves(&self) -> bool {
        self.name.is_some()
    }

    /// Crucible's own client: it sends no `clientInfo` (one that names
    /// itself `crucible` is the same client, later).
    fn is_crucible(&self) -> bool {
        self.name.as_deref().is_none_or(|name| name == "crucible")
    }
}

/// The fields outside the stable v1 schema a client gets. The one rule:
/// Crucible's client reads them and gets them all; any other client gets
/// each only when `[acp] unstable` names it, never without asking (the
/// protocol's conformance kit flags unknown fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// The old session-model extension's `models` beside `configOptions`
    /// in the session/new, load, resume and fork answers (`models`).
    pub models: bool,
    /// The turn's token totals as `usage` in the `session/prompt` answer
    /// (`usage`).
    pub usage: bool,
}

impl Extras {
    pub fn for_client(client: Option<&ClientInfo>, unstable: crate::config::Unstable) -> Self {
        let crucible = client.is_some_and(ClientInfo::is_crucible);
        Self {
            models: crucible || unstable.models,
            usage: crucible || unstable.usage,
        }
    }
}

impl Router {
    /// What this client gets beyond the stable schema (see [`Extras`]).
    pub(in crate::acp) fn extras(&self) -> Extras {
        Extras::for_client(self.client.as_ref(), self.sessions.unstable())
    }

    pub(in crate::acp) fn sign_in(&mut self, method_id: &str, reply: Reply<()>) {
        let (providers, _) = self.sessions.providers();
        reply.send(auth::authenticate(method_id, &auth::state(&providers)));
    }

    pub(in crate::acp) fn auth_status(&mut self, reply: Reply<auth::Status>) {
        let (providers, _) = self.sessions.providers();
        reply.send(Ok(auth::status(&providers)));
    }
}

pub fn initialize_response() -> acp::InitializeResponse {
    acp::InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
        .agent_capabilities(
            acp::AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(
                    acp::PromptCapabilities::new()
                        .image(true)
                        .embedded_context(true),
                )
                .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(true))
                .session_capabilities(
                    acp::SessionCapabilities::new()
                        .list(acp::SessionListCapabilities::new())
                        .resume(acp::SessionResumeCapabilities::new())
                        .close(acp::SessionCloseCapabilities::new())
                        .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new())
                        .delete(acp::SessionDeleteCapabilities::new())
                        .system_prompt(crate::acp::system_prompt::v1_capabilities()),
                ),
        )
        .agent_info(
            acp::Implementation::new("crucible-agent", env!("CARGO_PKG_VERSION")).title("Crucible"),
        )
        .auth_methods(Vec::new())
}

/// What this agent offers, the unstable features the config turned on included.
pub fn initialize_response_with(unstable: crate::config::Unstable) -> acp::InitializeResponse {
    let mut response = initialize_response();
    let sessions = &mut response.agent_capabilities.session_capabilities;
    if unstable.set_title {
        sessions.title = Some(acp::SessionTitleCapabilities::new());
    }
    if unstable.status {
        sessions.status = Some(acp::SessionStatusCapabilities::new());
    }
    if unstable.options {
        sessions.options = Some(acp::SessionOptionsCapabilities::new());
    }
    if unstable.fork {
        sessions.fork = Some(acp::SessionForkCapabilities::new());
    }
    if unstable.providers {
        response.agent_capabilities.providers = Some(acp::ProvidersCapabilities::new());
    }
    if unstable.archive {
        sessions.archive = Some(acp::SessionArchiveCapabilities::new());
    }
    if unstable.mcp_over_acp {
        response.agent_capabilities.mcp_capabilities.acp = true;
    }
    if unstable.auth_status {
        response.agent_capabilities.auth.status = Some(acp::AuthStatusCapabilities::new());
    }
    response
}

/// `response` with the sign-in methods `client` can run: the terminal
/// one only for a client that says it runs them (`auth.terminal`).
pub fn sign_in_for(
    response: acp::InitializeResponse,
    client: &ClientInfo,
) -> acp::InitializeResponse {
    if client.terminal_auth {
        response.auth_methods(crate::acp::auth::methods())
    } else {
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extras_go_to_crucibles_client_and_to_others_only_when_named() {
        let named = |name: Option<&str>| ClientInfo {
            name: name.map(str::to_string),
            ..ClientInfo::default()
        };
        let none = crate::config::Unstable::default();
        let all = Extras {
            models: true,
            usage: true,
        };
        let table = [
            (Some(named(None)), none, all),
            (Some(named(Some("crucible"))), none, all),
            (Some(named(Some("zed"))), none, Extras::default()),
            (None, none, Extras::default()),
            (
                Some(named(Some("zed"))),
                crate::config::Unstable {
                    usage: true,
                    ..none
                },
                Extras {
                    usage: true,
                    models: false,
                },
            ),
            (
                Some(named(Some("zed"))),
                crate::config::Unstable {
                    models: true,
                    ..none
                },
                Extras {
                    usage: false,
                    models: true,
                },
            ),
        ];
        for (client, unstable, expected) in table {
            assert_eq!(
                Extras::for_client(client.as_ref(), unstable),
                expected,
                "{client:?} {unstable:?}"
            );
        }
    }

    #[test]
    fn initialize_advertises_only_what_works() {
        let value = serde_json::to_value(initialize_response()).unwrap();
        assert_eq!(value["protocolVersion"], 1);
        let caps = &value["agentCapabilities"];
        assert_eq!(caps["loadSession"], true);
        assert_eq!(caps["mcpCapabilities"]["http"], true);
        assert_eq!(caps["mcpCapabilities"]["sse"], true);
        assert!(caps["sessionCapabilities"]["close"].is_object());
        for capability in ["list", "resume", "close", "delete"] {
            assert!(
                caps["sessionCapabilities"][capability].is_object(),
                "{capability}"
            );
        }
        assert_eq!(value["agentInfo"]["name"], "crucible-agent");
    }
}
