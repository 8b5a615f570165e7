//! Whether a tool call may run (seed 003 section 5). Reads and searches
//! change nothing and run at once; anything that writes or executes asks the
//! user through the client (`session/request_permission`), unless a rule
//! decides first. In order (README, "Permissions"):
//! 1. plan mode refuses anything that changes something;
//! 2. Crucible's `[permissions]` lists ([`patterns`], the user scope): deny,
//!    then ask, then allow;
//! 3. [`Rule`]s by scope: `user` rules (the user's own overrides in the
//!    config), `session` rules (the user's "always" answers), `agent` rules
//!    (for one agent card) and `global` rules (the config's default); within
//!    a scope higher `priority` first, then in the order written; the first
//!    match wins;
//! 4. the lists' `default`, when it is allow or deny;
//! 5. the mode. The session's other work goes on while a question waits.

mod always;
mod ceiling;
mod command_line;
mod escalation;
pub mod patterns;
mod reads;
pub mod remembered;
mod repeat;
mod rules;
mod trust;

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::client::{ClientSink, PermissionChoice};
use crate::events::ToolCallInfo;
use crate::model::SessionId;
use crate::modes::ModePolicy;
use crate::tools::Tool;
use crate::tools::sandbox::SessionSandbox;
use crate::tools::sensitive::SensitiveFiles;
use crate::util::lock;
use always::{Always, RememberFn};
use patterns::{PatternLists, Verdict};
pub use reads::{DeclaredReads, KILN_READS, KILN_SERVER};
pub use remembered::{Persist, RevokeError, RuleFiles};
pub use rules::{Decision, Rule, RuleOrigin, RuleScope, first_match};
pub use trust::TrustedRules;

/// Whether a tool call may run: the session's mode, rules and the user's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    Allow,
    /// Not run; the reason is what the model reads.
    Reject(String),
    /// The user cancelled the turn while being asked.
    Cancelled,
}

/// Whether a turn goes on after its model repeated a call (the loop guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repeat {
    GoOn,
    /// Go on, and do not ask again this turn.
    GoOnAlways,
    /// The turn ends; why, for the user and the model.
    Stop(String),
    /// The user cancelled the turn while being asked.
    Cancelled,
}

/// The seam between the loop and the session's permission rules.
pub trait PermissionGate: Send + Sync {
    fn check<'a>(&'a self, call: &'a ToolCallInfo, tool: &'a dyn Tool)
    -> BoxFuture<'a, Permission>;

    /// The model made `call` `times` times in a row with the same
    /// arguments: whether the turn goes on. Without a user to ask, it stops.
    fn confirm_repeat<'a>(&'a self, _call: &'a ToolCallInfo, _times: u32) -> BoxFuture<'a, Repeat> {
        Box::pin(async { Repeat::Stop("nobody can be asked whether to go on".into()) })
    }
}

/// Lets everything through: for turns without a user to ask (tests, plan-free runs).
pub struct AllowAll;

impl PermissionGate for AllowAll {
    fn check<'a>(&'a self, _: &'a ToolCallInfo, _: &'a dyn Tool) -> BoxFuture<'a, Permission> {
        Box::pin(async { Permission::Allow })
    }
}

/// A session's permission rules: the config's, and the user's "always"
/// answers as session rules.
pub struct SessionPermissions {
    session_id: SessionId,
    sink: Arc<dyn ClientSink>,
    /// From the config (global, user and agent scopes).
    rules: Arc<Vec<Rule>>,
    /// Crucible's `[permissions]` lists (or the ACP profile's).
    lists: Arc<PatternLists>,
    /// "Always" answers, newest first.
    session_rules: Mutex<Vec<Rule>>,
    /// Where "in this project" and "everywhere" answers are written.
    rule_files: Mutex<Option<RuleFiles>>,
    /// The rules read from those files (and written since), in file order.
    file_rules: Mutex<Vec<Rule>>,
    /// Why a rules file is not used (shown by `/permissions`).
    file_problems: Mutex<Vec<String>>,
    /// The agent (card) the session runs, for agent-scoped rules.
    agent: Mutex<Option<String>>,
    /// The session's mode; changed by the session actor, read by running turns.
    /// Files whose reads ask first (`[sensitive_files]`).
    sensitive_files: Arc<SensitiveFiles>,
    policy: Mutex<ModePolicy>,
    /// Where commands run: without it (no Landlock), auto asks before each.
    sandbox: Option<Arc<SessionSandbox>>,
    /// Told the "always" answers each time one is given, so they are saved
    /// at once, not when the turn ends.
    on_remember: std::sync::OnceLock<RememberFn>,
    /// A delegated agent's parent: nothing runs here that it would refuse
    /// or ask about (see `ceiling.rs`).
    ceiling: Option<Arc<SessionPermissions>>,
}

impl SessionPermissions {
    pub fn new(
        session_id: SessionId,
        sink: Arc<dyn ClientSink>,
        rules: Arc<Vec<Rule>>,
        policy: ModePolicy,
    ) -> Self {
        Self {
            session_id,
            sink,
            rules,
            lists: Arc::default(),
            sensitive_files: Arc::default(),
            session_rules: Mutex::default(),
            rule_files: Mutex::default(),
            file_rules: Mutex::default(),
            file_problems: Mutex::default(),
            agent: Mutex::default(),
            policy: Mutex::new(policy),
            sandbox: None,
            on_remember: std::sync::OnceLock::new(),
            ceiling: None,
        }
    }

    /// Check Crucible's `[permissions]` lists too.
    pub fn with_lists(mut self, lists: Arc<PatternLists>) -> Self {
        self.lists = lists;
        self
    }

    /// Reads of these files ask first (the default list otherwise).
    pub fn with_sensitive_files(mut self, files: Arc<SensitiveFiles>) -> Self {
        self.sensitive_files = files;
        self
    }

    /// Commands run in this sandbox: when it is wanted but missing, auto
    /// mode asks before each command rather than run it unconfined.
    pub fn with_sandbox(mut self, sandbox: Arc<SessionSandbox>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Whether the mode lets `tool` run without asking: auto does, except
    /// a command that would run unconfined although the sandbox is wanted.
    fn mode_allows(&self, policy: ModePolicy, tool: &dyn Tool) -> bool {
        policy == ModePolicy::Auto
            && !(escalation::runs_commands(tool)
                && self
                    .sandbox
                    .as_ref()
                    .is_some_and(|sandbox| sandbox.wanted_but_unavailable()))
    }

    /// The session's agent card, for agent-scoped rules; changed by the
    /// actor when the card switches, read by running turns.
    pub fn set_agent(&self, agent: Option<String>) {
        *lock(&self.agent) = agent;
    }

    pub fn policy(&self) -> ModePolicy {
        *lock(&self.policy)
    }

    pub fn set_policy(&self, policy: ModePolicy) {
        *lock(&self.policy) = policy;
    }

    /// The decision and scope of the first matching rule.
    fn decided(&self, call: &ToolCallInfo, tool: &dyn Tool) -> Option<(Decision, RuleScope)> {
        let session = self.lock_session_rules().clone();
        let files = lock(&self.file_rules).clone();
        let agent = lock(&self.agent).clone();
        // This session's answers, then the remembered ones, then the config's.
        first_match(
            session.iter().chain(files.iter()).chain(self.rules.iter()),
            agent.as_deref(),
            call,
            tool,
        )
        .map(|rule| (rule.decision, rule.scope.clone()))
    }

    /// The decision made without asking the user, or None to ask.
    fn decide(&self, call: &ToolCallInfo, tool: &dyn Tool) -> Option<Permission> {
        let policy = self.policy();
        // Plan mode is absolute: no rule lets a change through.
        if policy == ModePolicy::ReadOnly && tool.mutates() {
            return Some(Permission::Reject(format!(
                "{} changes files or runs commands, which plan mode does not allow. Finish the plan and ask the user to switch to act mode.",
                call.title
            )));
        }
        // A file that usually holds secrets is read only when the user says
        // so (or in auto mode), whatever allows reads in general; a rule
        // that forbids the read still does.
        if !tool.mutates() && policy != ModePolicy::Auto && self.sensitive_location(call).is_some()
        {
            return match self.decided(call, tool) {
                Some((Decision::Deny, RuleScope::Session)) => Some(rejected(call)),
                Some((Decision::Deny, _)) => Some(forbidden(call, None)),
                // The user's own "always allow".
                Some((Decision::Allow, RuleScope::Session)) => Some(Permission::Allow),
                _ => None,
            };
        }
        let verdict = self
            .lists
            .evaluate(tool.name(), tool.kind(), &call.raw_input);
        match verdict {
            Verdict::Deny(rule) => return Some(forbidden(call, Some(&rule))),
            Verdict::Allow => return Some(Permission::Allow),
            // As in Crucible, an ask pattern leaves the call to the user's
            // "always" answers and the mode (auto runs it); no config rule
            // and no read-only exemption lets it through.
            Verdict::Ask => {
                let answer = self.session_answer(tool.name());
                return match answer.or_else(|| self.remembered_answer(call, tool)) {
                    Some(Decision::Allow) => Some(Permission::Allow),
                    Some(Decision::Deny) => Some(rejected(call)),
                    _ if self.mode_allows(policy, tool) => Some(Permission::Allow),
                    _ => None,
                };
            }
            Verdict::NoMatch => {}
        }
        match self.decided(call, tool) {
            // The user's own "always reject".
            Some((Decision::Deny, RuleScope::Session)) => return Some(rejected(call)),
            Some((Decision::Deny, _)) => return Some(forbidden(call, None)),
            Some((Decision::Allow, _)) => return Some(Permission::Allow),
            Some((Decision::Ask, _)) => return None,
            None => {}
        }
        match self.lists.default {
            Decision::Allow => Some(Permission::Allow),
            Decision::Deny => Some(Permission::Reject(format!(
                "The user's permission settings deny anything no rule allows, and no rule allows this ({}). Do not try it another way; tell the user what you wanted to do.",
                call.title
            ))),
            Decision::Ask if !tool.mutates() || self.mode_allows(policy, tool) => {
                Some(Permission::Allow)
            }
            Decision::Ask => None,
        }
    }

    /// The first place of the call that is a sensitive file, and why.
    fn sensitive_location<'c>(&'c self, call: &'c ToolCallInfo) -> Option<(&'c Path, &'c str)> {
        call.locations.iter().find_map(|location| {
            let pattern = self.sensitive_files.matching(&location.path)?;
            Some((location.path.as_path(), pattern))
        })
    }
}

fn rejected(call: &ToolCallInfo) -> Permission {
    Permission::Reject(format!(
        "The user declined to let you run this ({}). Do not try it again another way; ask the user what they want instead.",
        call.title
    ))
}

/// Refused by a rule in the config (`rule`: a `[permissions]` pattern).
fn forbidden(call: &ToolCallInfo, rule: Option<&str>) -> Permission {
    let rule = rule
        .map(|rule| format!("; rule `{rule}`"))
        .unwrap_or_default();
    Permission::Reject(format!(
        "A permission rule in the user's configuration forbids this ({}{rule}). Do not try it another way.",
        call.title
    ))
}

impl PermissionGate for SessionPermissions {
    fn check<'a>(
        &'a self,
        call: &'a ToolCallInfo,
        tool: &'a dyn Tool,
    ) -> BoxFuture<'a, Permission> {
        Box::pin(async move {
            if let Some(decided) = self.bounded(call, tool) {
                return decided;
            }
            // The question says why a read asks.
            let mut asked = call.clone();
            if !tool.mutates()
                && let Some((path, pattern)) = self.sensitive_location(call)
            {
                asked.title = format!(
                    "{} — {} may hold secrets (sensitive file: `{pattern}`)",
                    call.title,
                    path.display()
                );
            }
            match self.sink.request_permission(&self.session_id, &asked).await {
                Ok(PermissionChoice::AllowOnce) => Permission::Allow,
                Ok(PermissionChoice::AllowAlways) => {
                    self.answered_always(tool.name(), Always::Allow);
                    Permission::Allow
                }
                Ok(PermissionChoice::AllowInProject) => {
                    self.persist(Persist::Project, call, tool);
                    Permission::Allow
                }
                Ok(PermissionChoice::AllowEverywhere) => {
                    self.persist(Persist::Everywhere, call, tool);
                    Permission::Allow
                }
                Ok(PermissionChoice::RejectOnce) => rejected(call),
                Ok(PermissionChoice::RejectAlways) => {
                    self.answered_always(tool.name(), Always::Reject);
                    rejected(call)
                }
                Ok(PermissionChoice::Cancelled) => Permission::Cancelled,
                Err(reason) => Permission::Reject(format!(
                    "This needs the user's permission, and the editor could not ask ({reason}). Tell the user what you wanted to do."
                )),
            }
        })
    }

    fn confirm_repeat<'a>(&'a self, call: &'a ToolCallInfo, times: u32) -> BoxFuture<'a, Repeat> {
        Box::pin(self.ask_to_repeat(call, times))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::testing::RecordingClient;
    use crate::events::ToolKind;
    use crate::tools::{ToolContext, ToolRegistry};
    use serde_json::{Value, json};

    pub(super) fn rule(tool: Option<&str>, prefix: Option<&str>, decision: Decision) -> Rule {
        Rule {
            tool: tool.map(str::to_string),
            command_prefixes: prefix.map(str::to_string).into_iter().collect(),
            decision,
            ..Rule::default()
        }
    }

    pub(super) fn call_of(tool: &dyn Tool, input: Value) -> ToolCallInfo {
        ToolCallInfo {
            id: "c".into(),
            name: "shell".into(),
            title: tool.title(&input),
            kind: tool.kind(),
            locations: Vec::new(),
            raw_input: input,
        }
    }

    async fn decide(
        policy: ModePolicy,
        rules: Vec<Rule>,
        answer: PermissionChoice,
        tool: &str,
        input: Value,
    ) -> (Permission, usize) {
        let lists = PatternLists::default();
        decide_with(policy, rules, lists, answer, tool, input).await
    }

    async fn decide_with(
        policy: ModePolicy,
        rules: Vec<Rule>,
        lists: PatternLists,
        answer: PermissionChoice,
        tool: &str,
        input: Value,
    ) -> (Permission, usize) {
        let client = Arc::new(RecordingClient::answering(answer));
        let gate = SessionPermissions::new("s".into(), client.clone(), Arc::new(rules), policy)
            .with_lists(Arc::new(lists));
        let registry = ToolRegistry::builtin();
        let tool = registry.get(tool).unwrap();
        let ctx = ToolContext::local(std::env::temp_dir());
        let call = ToolCallInfo {
            id: "c".into(),
            name: "shell".into(),
            title: tool.title(&input),
            kind: tool.kind(),
            locations: tool.locations(&input, &ctx),
            raw_input: input,
        };
        let permission = gate.check(&call, &**tool).await;
        (permission, client.asked("request_permission"))
    }

    #[tokio::test]
    async fn sensitive_reads_ask_except_in_auto_and_deny_rules_still_deny() {
        use PermissionChoice::AllowOnce;
        let dotenv = json!({"path": ".env"});
        let allow_reads = vec![Rule {
            kind: Some(ToolKind::Read),
            decision: Decision::Allow,
            ..Rule::default()
        }];
        let deny_reads = vec![Rule {
            kind: Some(ToolKind::Read),
            decision: Decision::Deny,
            ..Rule::default()
        }];
        let asked = |(permission, asked): (Permission, usize)| {
            (matches!(permission, Permission::Allow), asked)
        };
        let ask = ModePolicy::Ask;
        let read = |rules: Vec<Rule>, policy: ModePolicy, input: &Value| {
            decide(policy, rules, AllowOnce, "read_file", input.clone())
        };
        assert_eq!(asked(read(Vec::new(), ask, &dotenv).await), (true, 1));
        // A rule allowing reads does not spare the question…
        assert_eq!(asked(read(allow_reads, ask, &dotenv).await), (true, 1));
        // …one forbidding them still forbids.
        assert_eq!(asked(read(deny_reads, ask, &dotenv).await), (false, 0));
        assert_eq!(
            asked(read(Vec::new(), ModePolicy::Auto, &dotenv).await),
            (true, 0)
        );
        let plain = json!({"path": "a.txt"});
        assert_eq!(asked(read(Vec::new(), ask, &plain).await), (true, 0));
    }

    #[tokio::test]
    async fn modes_rules_and_answers_decide_in_order() {
        use ModePolicy::{Ask, Auto, ReadOnly};
        use PermissionChoice::*;
        let shell = |command: &str| json!({ "command": command });
        let read = json!({"path": "a.txt"});
        // (policy, rules, user's answer, tool, input, expect allowed, expect asked)
        type Row = (
            ModePolicy,
            Vec<Rule>,
            PermissionChoice,
            &'static str,
            Value,
            bool,
            usize,
        );
        let table: Vec<Row> = vec![
            (Ask, vec![], AllowOnce, "read_file", read.clone(), true, 0),
            (Ask, vec![], AllowOnce, "shell", shell("ls"), true, 1),
            (Ask, vec![], RejectOnce, "shell", shell("ls"), false, 1),
            (Auto, vec![], RejectOnce, "shell", shell("ls"), true, 0),
            (ReadOnly, vec![], AllowOnce, "shell", shell("ls"), false, 0),
            (
                ReadOnly,
                vec![rule(None, None, Decision::Allow)],
                AllowOnce,
                "shell",
                shell("ls"),
                false,
                0,
            ),
            (
                Ask,
                vec![rule(Some("shell"), Some("cargo "), Decision::Allow)],
                RejectOnce,
                "shell",
                shell("cargo test"),
                true,
                0,
            ),
            (
                Ask,
                vec![rule(Some("shell"), Some("cargo "), Decision::Allow)],
                RejectOnce,
                "shell",
                shell("rm -rf x"),
                false,
                1,
            ),
            (
                Auto,
                vec![rule(Some("shell"), Some("rm "), Decision::Deny)],
                AllowOnce,
                "shell",
                shell("rm -rf x"),
                false,
                0,
            ),
            (
                Auto,
                vec![rule(Some("shell"), None, Decision::Ask)],
                AllowOnce,
                "shell",
                shell("ls"),
                true,
                1,
            ),
            (
                Ask,
                vec![rule(Some("read_file"), None, Decision::Deny)],
                AllowOnce,
                "read_file",
                read.clone(),
                false,
                0,
            ),
            (
                Ask,
                vec![
                    rule(None, None, Decision::Deny),
                    rule(None, None, Decision::Allow),
                ],
                AllowOnce,
                "shell",
                shell("ls"),
                false,
                0,
            ),
        ];
        for (n, (policy, rules, answer, tool, input, allowed, asked)) in
            table.into_iter().enumerate()
        {
            let (permission, times) = decide(policy, rules, answer, tool, input).await;
            assert_eq!(
                permission == Permission::Allow,
                allowed,
                "row {n}: {permission:?}"
            );
            assert_eq!(times, asked, "row {n}");
        }
    }

    pub(super) fn lists(
        default: Decision,
        allow: &[&str],
        deny: &[&str],
        ask: &[&str],
    ) -> PatternLists {
        let compile = |texts: &[&str]| {
            texts
                .iter()
                .map(|text| patterns::PatternRule::parse(text).unwrap())
                .collect()
        };
        PatternLists {
            default,
            allow: compile(allow),
            deny: compile(deny),
            ask: compile(ask),
        }
    }

    #[tokio::test]
    async fn crucible_lists_sit_before_rules_and_default_before_the_mode() {
        use Decision::{Allow, Ask, Deny};
        use ModePolicy::{Auto, ReadOnly};
        let act = ModePolicy::Ask;
        let shell = |command: &str| json!({ "command": command });
        let read = json!({"path": "a.txt"});
        let allow_all = || vec![rule(None, None, Allow)];
        let deny_shell = || vec![rule(Some("shell"), None, Deny)];
        // (mode, rules, lists, tool, input, expect allowed, expect asked);
        // the user answers "allow once" whenever asked.
        type Row = (
            ModePolicy,
            Vec<Rule>,
            PatternLists,
            &'static str,
            Value,
            bool,
            usize,
        );
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            // A deny pattern is absolute: over a config rule and auto mode.
            (Auto, allow_all(), lists(Ask, &[], &["bash:rm *"], &[]), "shell", shell("rm -rf x"), false, 0),
            // An allow pattern runs without asking, over a rule's deny.
            (act, deny_shell(), lists(Ask, &["bash:cargo *"], &[], &[]), "shell", shell("cargo test"), true, 0),
            // An ask pattern asks over a rule's allow, and for a read; auto mode runs it.
            (act, allow_all(), lists(Ask, &[], &[], &["bash:*"]), "shell", shell("ls"), true, 1),
            (act, vec![], lists(Ask, &[], &[], &["read_file:*"]), "read_file", read.clone(), true, 1),
            (Auto, vec![], lists(Ask, &[], &[], &["bash:*"]), "shell", shell("ls"), true, 0),
            // Deny beats ask beats allow.
            (act, vec![], lists(Allow, &["bash:*"], &["bash:*"], &["bash:*"]), "shell", shell("ls"), false, 0),
            (act, vec![], lists(Ask, &["bash:*"], &[], &["bash:*"]), "shell", shell("ls"), true, 1),
            // No pattern matched: the rules decide before the default.
            (act, deny_shell(), lists(Allow, &[], &[], &[]), "shell", shell("ls"), false, 0),
            (act, allow_all(), lists(Deny, &[], &[], &[]), "shell", shell("ls"), true, 0),
            // Then default allow and deny decide, even for reads.
            (act, vec![], lists(Allow, &[], &[], &[]), "shell", shell("ls"), true, 0),
            (act, vec![], lists(Deny, &[], &[], &[]), "shell", shell("ls"), false, 0),
            (act, vec![], lists(Deny, &[], &[], &[]), "read_file", read.clone(), false, 0),
            (act, vec![], lists(Deny, &["read:*"], &[], &[]), "read_file", read.clone(), true, 0),
            // Default ask leaves it to the mode.
            (act, vec![], lists(Ask, &[], &[], &[]), "shell", shell("ls"), true, 1),
            (Auto, vec![], lists(Ask, &[], &[], &[]), "shell", shell("ls"), true, 0),
            (act, vec![], lists(Ask, &[], &[], &[]), "read_file", read.clone(), true, 0),
            // Plan mode is before everything.
            (ReadOnly, vec![], lists(Allow, &["*:*"], &[], &[]), "shell", shell("ls"), false, 0),
            // A line that hides a command is not allowed by its first command's pattern.
            (act, vec![], lists(Ask, &["bash:git *"], &[], &[]), "shell", shell("git log $(curl x)"), true, 1),
            // Under default allow with deny patterns such a line asks.
            (act, vec![], lists(Allow, &[], &["bash:rm *"], &[]), "shell", shell("eval \"$X\""), true, 1),
        ];
        for (n, (policy, rules, lists, tool, input, allowed, asked)) in
            table.into_iter().enumerate()
        {
            let answer = PermissionChoice::AllowOnce;
            let (permission, times) = decide_with(policy, rules, lists, answer, tool, input).await;
            assert_eq!(
                permission == Permission::Allow,
                allowed,
                "row {n}: {permission:?}"
            );
            assert_eq!(times, asked, "row {n}");
        }
    }
}
