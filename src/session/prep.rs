//! What a turn (or a command that calls the model) needs, taken from the
//! actor's state at once, then completed in the turn's task: MCP tools once
//! the servers are up, the mode's and agent card's tool filters, the
//! context window and the layered system prompt over the tools offered.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{SessionActor, SessionError};

use crate::agent_loop::{Journal, JournalFn, TurnInput};
use crate::client::{ClientSink, Update};
use crate::context::{ContextManager, ContextSettings};
use crate::events::AgentEvent;
use crate::mcp::McpManager;
use crate::modes::ModePolicy;
use crate::permissions::PermissionGate;
use crate::prompt::{PromptLayers, PromptVars};
use crate::providers::{FALLBACK_CONTEXT_WINDOW, Provider, ProviderError, Providers};
use crate::tools::ToolContext;
use crate::tools::ToolRegistry;

pub(super) struct TurnPrep {
    provider: Arc<dyn Provider>,
    provider_name: String,
    model: String,
    providers: Arc<Providers>,
    mcp: tokio::sync::watch::Receiver<Option<McpManager>>,
    tell_failures: bool,
    tools: ToolRegistry,
    read_only: bool,
    /// The agent card's allow-list.
    allow: Option<Vec<String>>,
    layers: PromptLayers,
    cwd: PathBuf,
    mode: String,
}

pub(super) struct Ready {
    pub provider: Arc<dyn Provider>,
    pub model: String,
    pub system: String,
    pub tools: ToolRegistry,
    pub window: u64,
}

impl SessionActor {
    /// `tell_failures`: this is a turn, where MCP start failures are told once.
    pub(super) fn prepare(&mut self, tell_failures: bool) -> Result<TurnPrep, SessionError> {
        let Some(provider) = self.providers.get(&self.provider) else {
            return Err(SessionError::Provider(ProviderError::Setup {
                provider: self.provider.clone(),
                detail: "this provider is not configured".into(),
            }));
        };
        let card = self.active_card();
        let layers = PromptLayers::load(
            &self.cwd,
            &self.mode,
            card.map(|c| (c.name.as_str(), c.body.as_str())),
            self.user_prompt.as_deref(),
        );
        let allow = card.and_then(|c| c.tools.clone());
        let tell_failures = tell_failures && !std::mem::replace(&mut self.mcp_failures_told, true);
        Ok(TurnPrep {
            provider,
            provider_name: self.provider.clone(),
            model: self.model.clone(),
            providers: Arc::clone(&self.providers),
            mcp: self.mcp.clone(),
            tell_failures,
            tools: self.tools.clone(),
            read_only: self.permissions.policy() == ModePolicy::ReadOnly,
            allow,
            layers,
            cwd: self.cwd.clone(),
            mode: self.mode.clone(),
        })
    }
}

impl TurnPrep {
    pub(super) async fn resolve(
        mut self,
        cancel: &CancellationToken,
        emit: &(dyn Fn(AgentEvent) + Send + Sync),
    ) -> Ready {
        // MCP servers still starting (bounded by their start timeout).
        let manager = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            ready = self.mcp.wait_for(Option::is_some) => ready.ok().and_then(|m| m.clone()),
        };
        if let Some(manager) = manager {
            if self.tell_failures {
                for (_, reason) in manager.failures() {
                    emit(AgentEvent::Thought(format!("{reason}\n")));
                }
            }
            for tool in manager.tools() {
                self.tools.register(tool);
            }
        }
        let mut tools = self.tools;
        if self.read_only {
            tools = tools.filtered(|tool| !tool.mutates());
        }
        if let Some(allow) = &self.allow {
            tools = tools.filtered(|tool| allow.iter().any(|name| name == tool.name()));
        }
        // Asked once per model (Ollama: /api/show), then cached.
        let window = self
            .providers
            .context_window(&self.provider_name, &self.model);
        let window = tokio::select! {
            biased;
            _ = cancel.cancelled() => FALLBACK_CONTEXT_WINDOW,
            window = window => window,
        };
        let names: Vec<String> = tools.names().map(str::to_string).collect();
        let system = self.layers.render(&PromptVars {
            provider: &self.provider_name,
            model: &self.model,
            cwd: &self.cwd,
            mode: &self.mode,
            tools: &names,
        });
        Ready {
            provider: self.provider,
            model: self.model,
            system,
            tools,
            window,
        }
    }
}

/// What every turn task takes from its session besides the context: the
/// same for a prompt and for an MCP prompt command.
pub(super) struct TurnKit {
    context_settings: ContextSettings,
    tool_context: ToolContext,
    permissions: Arc<dyn PermissionGate>,
    max_turn_requests: u32,
    sink: Arc<dyn ClientSink>,
    session_id: String,
    pub journal: JournalFn,
}

/// What a turn journaled, kept for when its task dies without an outcome.
pub(super) type Journaled = Arc<std::sync::Mutex<Vec<Journal>>>;

impl TurnKit {
    /// The turn's events, sent to the client as the session's updates.
    pub fn emitter(&self) -> impl Fn(AgentEvent) + Send + Sync + 'static {
        let sink = Arc::clone(&self.sink);
        let session_id = self.session_id.clone();
        move |event: AgentEvent| sink.send(&session_id, Update::Agent(event))
    }

    pub fn input(
        self,
        ready: Ready,
        context: ContextManager,
        cancel: CancellationToken,
    ) -> TurnInput {
        TurnInput {
            provider: ready.provider,
            model: ready.model,
            system: Some(ready.system),
            context,
            context_window: ready.window,
            context_settings: self.context_settings,
            cancel,
            tools: ready.tools,
            tool_context: self.tool_context,
            permissions: self.permissions,
            max_turn_requests: self.max_turn_requests,
            journal: Some(self.journal),
        }
    }
}

impl SessionActor {
    /// The kit for a new turn. Its journal saves finished rounds and context
    /// operations at once, and keeps them for the session.
    pub(super) fn turn_kit(&self) -> (TurnKit, Journaled) {
        let journaled: Journaled = Arc::default();
        let recorder = self.recorder.clone();
        let kept = Arc::clone(&journaled);
        let journal: JournalFn = Arc::new(move |entry: Journal| {
            if let Some(recorder) = &recorder {
                match &entry {
                    Journal::Round(messages) => recorder.round(messages),
                    Journal::Op(op) => recorder.context_op(op),
                }
            }
            super::lock(&kept).push(entry);
        });
        let kit = TurnKit {
            context_settings: self.context_settings,
            tool_context: self.tool_context.clone(),
            permissions: Arc::clone(&self.permissions) as Arc<dyn PermissionGate>,
            max_turn_requests: self.max_turn_requests,
            sink: Arc::clone(&self.sink),
            session_id: self.id.clone(),
            journal,
        };
        (kit, journaled)
    }
}
