//! Whether a tool call may run. Reads and searches change nothing and run
//! at once; anything that writes or executes asks the user through the
//! client (`session/request_permission`), and an "always" answer is kept as
//! a rule for the rest of the session. The session's other work goes on
//! while a question waits.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::agent_loop::{Permission, PermissionGate, ToolCallInfo};
use crate::modes::ModePolicy;
use crate::session::ClientSink;
use crate::tools::{Tool, ToolKind};

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    Ask,
}

/// A `[[permissions.rules]]` entry. Every field given must match; none given
/// matches every call.
#[derive(Debug, Clone)]
pub struct Rule {
    pub tool: Option<String>,
    pub kind: Option<ToolKind>,
    /// For `shell`: the command starts with this.
    pub command_prefix: Option<String>,
    /// Searched in the call's arguments as JSON text.
    pub pattern: Option<regex::Regex>,
    pub decision: Decision,
}

impl Rule {
    pub fn matches(&self, call: &ToolCallInfo, tool: &dyn Tool) -> bool {
        self.tool.as_deref().is_none_or(|name| name == tool.name())
            && self.kind.is_none_or(|kind| kind == tool.kind())
            && self.command_prefix.as_deref().is_none_or(|prefix| {
                call.raw_input["command"]
                    .as_str()
                    .is_some_and(|command| command.trim_start().starts_with(prefix))
            })
            && self
                .pattern
                .as_ref()
                .is_none_or(|pattern| pattern.is_match(&call.raw_input.to_string()))
    }
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

/// A session's permission rules: "always" answers, by tool name.
pub struct SessionPermissions {
    session_id: String,
    sink: Arc<dyn ClientSink>,
    /// From the config; checked after the user's own "always" answers.
    rules: Arc<Vec<Rule>>,
    remembered: Mutex<BTreeMap<String, bool>>,
    /// The session's mode; changed by the session actor, read by running turns.
    policy: Mutex<ModePolicy>,
}

impl SessionPermissions {
    pub fn new(
        session_id: String,
        sink: Arc<dyn ClientSink>,
        rules: Arc<Vec<Rule>>,
        policy: ModePolicy,
    ) -> Self {
        Self {
            session_id,
            sink,
            rules,
            remembered: Mutex::default(),
            policy: Mutex::new(policy),
        }
    }

    pub fn policy(&self) -> ModePolicy {
        *self
            .policy
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub fn set_policy(&self, policy: ModePolicy) {
        *self
            .policy
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = policy;
    }

    /// The "always" answers so far (true allows), to be saved with the session.
    pub fn remembered_rules(&self) -> BTreeMap<String, bool> {
        self.lock().clone()
    }

    /// Answers saved with a session that is loaded again.
    pub fn restore(&self, rules: BTreeMap<String, bool>) {
        self.lock().extend(rules);
    }

    fn remembered(&self, tool: &str) -> Option<bool> {
        self.lock().get(tool).copied()
    }

    fn remember(&self, tool: &str, allowed: bool) {
        self.lock().insert(tool.to_string(), allowed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        self.remembered
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

fn rejected(call: &ToolCallInfo) -> Permission {
    Permission::Reject(format!(
        "The user declined to let you run this ({}). Do not try it again another way; ask the user what they want instead.",
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
            let policy = self.policy();
            // Plan mode is absolute: no rule lets a change through.
            if policy == ModePolicy::ReadOnly && tool.mutates() {
                return Permission::Reject(format!(
                    "{} changes files or runs commands, which plan mode does not allow. Finish the plan and ask the user to switch to act mode.",
                    call.title
                ));
            }
            match self.remembered(tool.name()) {
                Some(false) => return rejected(call),
                Some(true) => return Permission::Allow,
                None => {}
            }
            let configured = self
                .rules
                .iter()
                .find(|rule| rule.matches(call, tool))
                .map(|rule| rule.decision);
            match (configured, policy) {
                (Some(Decision::Deny), _) => {
                    return Permission::Reject(format!(
                        "A permission rule in the user's configuration forbids this ({}). Do not try it another way.",
                        call.title
                    ));
                }
                (Some(Decision::Allow), _) => return Permission::Allow,
                (Some(Decision::Ask), _) => {}
                (None, _) if !tool.mutates() => return Permission::Allow,
                (None, ModePolicy::Auto) => return Permission::Allow,
                (None, _) => {}
            }
            match self.sink.request_permission(&self.session_id, call).await {
                Ok(PermissionChoice::AllowOnce) => Permission::Allow,
                Ok(PermissionChoice::AllowAlways) => {
                    self.remember(tool.name(), true);
                    Permission::Allow
                }
                Ok(PermissionChoice::RejectOnce) => rejected(call),
                Ok(PermissionChoice::RejectAlways) => {
                    self.remember(tool.name(), false);
                    rejected(call)
                }
                Ok(PermissionChoice::Cancelled) => Permission::Cancelled,
                Err(reason) => Permission::Reject(format!(
                    "This needs the user's permission, and the editor could not ask ({reason}). Tell the user what you wanted to do."
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Update;
    use crate::tools::{ToolContext, ToolRegistry};
    use serde_json::{Value, json};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A client that answers every question with `answer` and counts them.
    struct Client {
        answer: PermissionChoice,
        asked: AtomicUsize,
    }

    impl ClientSink for Client {
        fn send(&self, _: &str, _: Update) {}
        fn request_permission<'a>(
            &'a self,
            _: &'a str,
            _: &'a ToolCallInfo,
        ) -> BoxFuture<'a, Result<PermissionChoice, String>> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { Ok(self.answer) })
        }
        fn call<'a>(&'a self, _: &'a str, _: Value) -> BoxFuture<'a, Result<Value, (i32, String)>> {
            Box::pin(async { Err((-32601, "no".into())) })
        }
    }

    fn rule(tool: Option<&str>, prefix: Option<&str>, decision: Decision) -> Rule {
        Rule {
            tool: tool.map(str::to_string),
            kind: None,
            command_prefix: prefix.map(str::to_string),
            pattern: None,
            decision,
        }
    }

    async fn decide(
        policy: ModePolicy,
        rules: Vec<Rule>,
        answer: PermissionChoice,
        tool: &str,
        input: Value,
    ) -> (Permission, usize) {
        let client = Arc::new(Client {
            answer,
            asked: AtomicUsize::new(0),
        });
        let gate = SessionPermissions::new("s".into(), client.clone(), Arc::new(rules), policy);
        let registry = ToolRegistry::builtin();
        let tool = registry.get(tool).unwrap();
        let ctx = ToolContext::local(std::env::temp_dir());
        let call = ToolCallInfo {
            id: "c".into(),
            title: tool.title(&input),
            kind: tool.kind(),
            locations: tool.locations(&input, &ctx),
            raw_input: input,
        };
        let permission = gate.check(&call, &**tool).await;
        (permission, client.asked.load(Ordering::SeqCst))
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

    #[tokio::test]
    async fn always_answers_become_session_rules() {
        let client = Arc::new(Client {
            answer: PermissionChoice::AllowAlways,
            asked: AtomicUsize::new(0),
        });
        let gate =
            SessionPermissions::new("s".into(), client.clone(), Arc::default(), ModePolicy::Ask);
        let registry = ToolRegistry::builtin();
        let tool = registry.get("shell").unwrap();
        let call = ToolCallInfo {
            id: "c".into(),
            title: "Run ls".into(),
            kind: tool.kind(),
            locations: Vec::new(),
            raw_input: json!({"command": "ls"}),
        };
        for _ in 0..3 {
            assert_eq!(gate.check(&call, &**tool).await, Permission::Allow);
        }
        assert_eq!(client.asked.load(Ordering::SeqCst), 1);
    }
}
