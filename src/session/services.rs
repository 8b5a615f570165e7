//! What a session works with for its whole life and never replaces: the
//! shared defaults, providers, the client, the recorder, the agent cards,
//! the MCP servers, the tools and the permission gate.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::runtime::{AgentRuntime, TurnTally};
use super::shared::{Defaults, Shared};
use super::subagents::Lineage;
use super::{SessionMsg, SessionStart, prompts, record};

use crate::agents::{AgentCard, ToolPolicy};
use crate::client::{ClientAbilities, ClientSink};
use crate::mcp::{McpManager, McpServerSpec};
use crate::model::SessionId;
use crate::modes::ModePolicy;
use crate::permissions::patterns::our_tool_name;
use crate::permissions::{Decision, Rule, RuleScope, SessionPermissions};
use crate::providers::Providers;
use crate::providers::pricing::Spending;
use crate::store::Recorder;
use crate::tools::sandbox::{Escalation, SessionSandbox, Support};
use crate::tools::{ClientFs, ClientTerminal, DelegateTool, LocalFs, ToolContext, ToolRegistry};

pub(super) struct Services {
    pub id: SessionId,
    pub cwd: PathBuf,
    /// What the client offers and shows (files, terminals, notices…).
    pub abilities: ClientAbilities,
    /// The config's session defaults, shared by every session.
    pub defaults: Arc<Defaults>,
    pub providers: Arc<Providers>,
    /// Everything shown to the client goes through here (and is recorded first).
    pub client: Arc<dyn ClientSink>,
    /// Where the session is saved; None keeps it in memory only.
    pub recorder: Option<Recorder>,
    /// Why the session is not saved, until the first turn tells it.
    pub save_failure: Option<String>,
    /// Every agent card, loaded when the session starts.
    pub agents: Vec<AgentCard>,
    /// The session's MCP servers, once started (a delegated agent's are
    /// its parent's).
    pub mcp: watch::Receiver<Option<McpManager>>,
    /// Whether the servers stop with this session: not a delegated
    /// agent's, which only borrows its parent's.
    pub owns_mcp: bool,
    pub tools: ToolRegistry,
    /// Shared by every turn: the todo list lives here.
    pub tool_context: ToolContext,
    /// What the file tools replaced, for rewinds.
    pub files: Arc<super::rewind::SessionFiles>,
    /// The Markdown plan `write_plan` keeps (also in `tool_context`).
    pub plan: Arc<record::SessionPlan>,
    pub permissions: Arc<SessionPermissions>,
    pub mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
    pub runtime: Arc<AgentRuntime>,
    /// Where the session is attached (`serve`); see [`Shared::attachments`].
    pub attachments: Option<Arc<super::attachments::Attachments>>,
    /// How many levels below a session the client started (0 for one).
    pub depth: u32,
    /// The current turn's delegations.
    pub tally: Arc<TurnTally>,
    /// What the session's model calls cost so far (where they are priced).
    pub spending: Spending,
    /// The tokens the session's model calls used so far.
    pub tokens: crate::context::spend::TokenTally,
    /// The skills of the user's and the project's folders, re-read when they change.
    pub skills: Arc<crate::skills::Catalog>,
    /// The client's `systemPrompt`, the system prompt's last layer.
    pub client_prompt: Option<crate::model::ClientPrompt>,
}

impl Services {
    /// Every directory the session's tools may reach: `cwd` first, then the
    /// client's additional directories.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.tool_context.allowed_roots()
    }

    pub fn start(
        start: &mut SessionStart,
        shared: Shared,
        mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
    ) -> Self {
        let recorder = start.recorder.take();
        let port = match &shared.attachments {
            Some(attachments) => attachments.port(&start.id),
            None => Arc::clone(&shared.client),
        };
        let client = record::recorded_client(recorder.as_ref(), port);
        let agents = agent_cards(&shared, &start.cwd);
        let lineage = start.lineage.take();
        let sandbox = match &lineage {
            // A child works in its parent's sandbox and asks through it.
            Some(lineage) => Arc::clone(&lineage.sandbox),
            None => Arc::new(SessionSandbox::new(
                shared.defaults.sandbox.clone(),
                Support::probe(),
            )),
        };
        let permissions = permissions(
            &start.id,
            &start.settings.mode,
            &shared.defaults,
            &agents,
            &client,
            lineage.as_ref(),
            &sandbox,
        );
        apply_rule_files(start, &shared, &permissions, lineage.as_ref());
        if lineage.is_none() {
            let escalation: Arc<dyn Escalation> = permissions.clone();
            sandbox.set_escalation(Arc::downgrade(&escalation));
        }
        let parent_permissions = lineage.as_ref().map(|l| Arc::clone(&l.ceiling));
        record::remembered_permissions(recorder.as_ref(), &permissions, parent_permissions);
        let files = Arc::new(super::rewind::SessionFiles::new(
            recorder.as_ref(),
            std::mem::take(&mut start.files),
        ));
        let plan = Arc::new(record::SessionPlan::new(recorder.as_ref()));
        let mut tool_context = tool_context(&start.id, &start.cwd, start.client, &client);
        equip(&mut tool_context, start, &shared.defaults, sandbox);
        tool_context.journal = Some(Arc::clone(&files) as Arc<dyn crate::tools::FileJournal>);
        tool_context.plan = Some(Arc::clone(&plan) as Arc<dyn crate::tools::PlanKeeper>);
        let depth = lineage.as_ref().map_or(0, |lineage| lineage.depth);
        let mut parent_mcp = None;
        if let Some(lineage) = lineage {
            tool_context.fs = lineage.fs;
            tool_context.shell = lineage.shell;
            parent_mcp = Some(lineage.mcp);
        }
        let tools = tools(&agents, depth, &shared.runtime);
        let owns_mcp = parent_mcp.is_none();
        let mcp = parent_mcp.unwrap_or_else(|| {
            let servers = confined(std::mem::take(&mut start.mcp_servers), &tool_context);
            start_mcp(servers, &shared.defaults, mailbox.clone())
        });
        let skill_folders =
            crate::skills::folders(&start.cwd, shared.defaults.agent_cards.kiln.as_deref());
        Self {
            id: start.id.clone(),
            cwd: start.cwd.clone(),
            abilities: start.client,
            defaults: shared.defaults,
            providers: shared.providers,
            client,
            recorder,
            save_failure: start.save_failure.take(),
            agents,
            mcp,
            owns_mcp,
            tools,
            tool_context,
            files,
            plan,
            permissions,
            mailbox,
            runtime: shared.runtime,
            attachments: shared.attachments,
            depth,
            tally: Arc::default(),
            spending: {
                let spending = Spending::default();
                spending.add(start.spent.session_cost);
                spending
            },
            tokens: crate::context::spend::TokenTally::starting_at(start.spent.session_tokens),
            client_prompt: start.client_prompt.take(),
            skills: Arc::new(crate::skills::Catalog::new(skill_folders)),
        }
    }
}

/// Every agent card, its tools named as this agent names them.
fn agent_cards(shared: &Shared, cwd: &Path) -> Vec<AgentCard> {
    let providers = Arc::clone(&shared.providers);
    let is_provider = move |name: &str| providers.get(name).is_some();
    let mut agents = crate::agents::load_all(&shared.defaults.agent_cards, cwd, &is_provider);
    for card in &mut agents {
        card.rename_tools(&our_tool_name);
    }
    agents
}

/// The project's permission rules files; a session the client started
/// tells why untrusted ones were not applied.
fn apply_rule_files(
    start: &mut SessionStart,
    shared: &Shared,
    permissions: &SessionPermissions,
    lineage: Option<&Lineage>,
) {
    let trust = (shared.runtime.store.as_ref())
        .map(|store| crate::permissions::TrustedRules::in_dir(store.data_dir()));
    let loaded = super::rule_files::load(&start.cwd, trust);
    if lineage.is_none()
        && let Some(untrusted) = loaded.untrusted
    {
        start.notices.push(record::saving_notice(
            "Project permission rules not applied",
            untrusted,
        ));
    }
    permissions.set_rule_files(loaded.files, loaded.rules, loaded.problems);
}

/// The tools' reach and rules: every root, the loaded todo list, the
/// config's environment and sensitive files, the session's sandbox.
fn equip(
    tool_context: &mut ToolContext,
    start: &mut SessionStart,
    defaults: &Defaults,
    sandbox: Arc<SessionSandbox>,
) {
    // The file tools (and the shell's sandbox) confine to every root.
    tool_context
        .roots
        .extend(start.additional_directories.iter().cloned());
    // A loaded session's list, as the `todo` tool left it.
    tool_context.set_todos(std::mem::take(&mut start.todos));
    tool_context.settings.environment = Arc::clone(&defaults.shell_environment);
    tool_context.settings.sensitive_files = Arc::clone(&defaults.sensitive_files);
    tool_context.sandbox = sandbox;
}

/// The built-in tools, and `delegate` while delegation may go deeper.
fn tools(agents: &[AgentCard], depth: u32, runtime: &AgentRuntime) -> ToolRegistry {
    let mut tools = ToolRegistry::builtin();
    if depth < runtime.settings.max_depth {
        let cards = agents
            .iter()
            .map(|c| (c.name.as_str(), c.description.as_str()));
        tools.register(Arc::new(DelegateTool::new(cards)));
    }
    tools
}

/// MCP servers that opt in are confined like the session's commands.
fn confined(mut servers: Vec<McpServerSpec>, tool_context: &ToolContext) -> Vec<McpServerSpec> {
    for spec in &mut servers {
        let confinement = (tool_context.sandbox).confinement(&tool_context.allowed_roots(), &[]);
        spec.confine(confinement, tool_context.sandbox.unavailable_reason());
    }
    servers
}

/// The mode's policy, the config's rules and lists, the cards' tool
/// policies (as agent-scoped rules) and the user's answers.
fn permissions(
    id: &SessionId,
    mode: &str,
    defaults: &Defaults,
    agents: &[AgentCard],
    client: &Arc<dyn ClientSink>,
    lineage: Option<&Lineage>,
    sandbox: &Arc<SessionSandbox>,
) -> Arc<SessionPermissions> {
    let policy = defaults
        .modes
        .find(mode)
        .map(|mode| mode.policy)
        .unwrap_or(ModePolicy::Ask);
    let card_rules = agents.iter().flat_map(|card| {
        card.tool_policies.iter().map(|(tool, policy)| {
            let decision = match policy {
                ToolPolicy::Allow => Decision::Allow,
                ToolPolicy::Ask => Decision::Ask,
                ToolPolicy::Deny => Decision::Deny,
            };
            let scope = RuleScope::Agent(card.name.clone());
            Rule::for_tool(scope, tool.clone(), decision)
        })
    });
    let rules = defaults.rules.iter().cloned().chain(card_rules).collect();
    let mut gate = SessionPermissions::new(id.clone(), Arc::clone(client), Arc::new(rules), policy)
        .with_lists(Arc::clone(&defaults.permission_lists))
        .with_sensitive_files(Arc::clone(&defaults.sensitive_files))
        .with_sandbox(Arc::clone(sandbox));
    if let Some(lineage) = lineage {
        // The parent's "always" answers hold for its children too.
        gate.restore(lineage.ceiling.remembered_rules());
        gate = gate.with_ceiling(Arc::clone(&lineage.ceiling));
    }
    Arc::new(gate)
}

/// Files and commands go through the editor where it offers them.
fn tool_context(
    id: &SessionId,
    cwd: &std::path::Path,
    abilities: ClientAbilities,
    client: &Arc<dyn ClientSink>,
) -> ToolContext {
    let mut tool_context = ToolContext::local(cwd.to_path_buf());
    if abilities.read_text_file || abilities.write_text_file {
        tool_context.fs = Arc::new(ClientFs {
            session_id: id.clone(),
            sink: Arc::clone(client),
            read: abilities.read_text_file,
            write: abilities.write_text_file,
            local: LocalFs::default(),
        });
    }
    if abilities.ask_user {
        tool_context.asker = Some(crate::tools::Asker {
            session_id: id.clone(),
            sink: Arc::clone(client),
        });
    }
    if abilities.terminal {
        tool_context.shell = Arc::new(ClientTerminal {
            session_id: id.clone(),
            sink: Arc::clone(client),
        });
    }
    tool_context
}

/// MCP servers start at once, beside the session: `session/new` is
/// answered without waiting, and the first prompt waits for them.
fn start_mcp(
    specs: Vec<McpServerSpec>,
    defaults: &Defaults,
    mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
) -> watch::Receiver<Option<McpManager>> {
    let (mcp_ready, mcp) = watch::channel(None);
    if specs.is_empty() {
        let _ = mcp_ready.send(Some(McpManager::new()));
        return mcp;
    }
    let options = defaults.mcp_options.clone();
    tokio::spawn(async move {
        let manager = McpManager::start(specs, options).await;
        for (server, reason) in manager.failures() {
            tracing::warn!(%server, %reason, "MCP server failed to start");
        }
        let changes = manager.changes();
        let _ = mcp_ready.send(Some(manager));
        // Their prompts are slash commands.
        prompts::forward_changes(changes, mailbox);
    });
    mcp
}
