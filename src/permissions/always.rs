//! The user's "always" answers: each a session rule for the tool (newest
//! first, one per tool), reported the moment it is given so the session
//! saves it at once, and restored when the session is loaded again.

use std::collections::BTreeMap;
use std::sync::MutexGuard;

use super::{Decision, Rule, RuleOrigin, RuleScope, SessionPermissions};

/// An "always" answer: what every later call of the tool gets without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Always {
    Allow,
    Reject,
}

/// Told the "always" answers each time one is given.
pub(super) type RememberFn = Box<dyn Fn(BTreeMap<String, bool>) + Send + Sync>;

impl SessionPermissions {
    /// Call `notify` with every "always" answer whenever the user gives one.
    pub fn on_remember(&self, notify: impl Fn(BTreeMap<String, bool>) + Send + Sync + 'static) {
        if self.on_remember.set(Box::new(notify)).is_err() {
            tracing::warn!(session = %self.session_id, "permission answers already have a listener");
        }
    }

    /// Answers the user gave with "always" elsewhere (a delegated agent's
    /// questions), remembered and reported as if given here.
    pub fn adopt(&self, rules: BTreeMap<String, bool>) {
        self.restore(rules);
        if let Some(notify) = self.on_remember.get() {
            notify(self.remembered_rules());
        }
    }

    /// An answer the user gave with "always": remembered and reported.
    pub(super) fn answered_always(&self, tool: &str, answer: Always) {
        self.remember(tool, answer);
        if let Some(notify) = self.on_remember.get() {
            notify(self.remembered_rules());
        }
    }

    /// The "always" answers so far (true allows), to be saved with the session.
    pub fn remembered_rules(&self) -> BTreeMap<String, bool> {
        self.lock_session_rules()
            .iter()
            .filter_map(|rule| {
                let allowed = match rule.decision {
                    Decision::Allow => true,
                    Decision::Deny => false,
                    Decision::Ask => return None,
                };
                Some((rule.tool.clone()?, allowed))
            })
            .collect()
    }

    /// Answers saved with a session that is loaded again (as session rules).
    pub fn restore(&self, rules: BTreeMap<String, bool>) {
        for (tool, allowed) in rules {
            // Saved as true (allow) or false (reject).
            let answer = if allowed {
                Always::Allow
            } else {
                Always::Reject
            };
            self.remember(&tool, answer);
        }
    }

    /// An "always" answer: a session rule for the tool, newest first.
    fn remember(&self, tool: &str, answer: Always) {
        let decision = match answer {
            Always::Allow => Decision::Allow,
            Always::Reject => Decision::Deny,
        };
        let mut rules = self.lock_session_rules();
        rules.retain(|rule| rule.tool.as_deref() != Some(tool));
        rules.insert(
            0,
            Rule {
                origin: RuleOrigin::Session,
                ..Rule::for_tool(RuleScope::Session, tool, decision)
            },
        );
    }

    /// The user's "always" answer for `tool` in this session, if any.
    pub(super) fn session_answer(&self, tool: &str) -> Option<Decision> {
        self.lock_session_rules()
            .iter()
            .find(|rule| rule.tool.as_deref() == Some(tool))
            .map(|rule| rule.decision)
    }

    pub(super) fn lock_session_rules(&self) -> MutexGuard<'_, Vec<Rule>> {
        crate::util::lock(&self.session_rules)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use crate::client::PermissionChoice;
    use crate::client::testing::RecordingClient;
    use crate::events::ToolCallInfo;
    use crate::modes::ModePolicy;
    use crate::permissions::tests::{call_of, lists};
    use crate::permissions::{Decision, Permission, PermissionGate, SessionPermissions};
    use crate::tools::ToolRegistry;

    #[tokio::test]
    async fn an_always_answer_settles_an_ask_pattern() {
        let client = Arc::new(RecordingClient::answering(PermissionChoice::AllowAlways));
        let gate =
            SessionPermissions::new("s".into(), client.clone(), Arc::default(), ModePolicy::Ask)
                .with_lists(Arc::new(lists(Decision::Ask, &[], &[], &["bash:*"])));
        let registry = ToolRegistry::builtin();
        let tool = registry.get("shell").unwrap();
        let call = call_of(&**tool, json!({"command": "ls"}));
        for _ in 0..3 {
            assert_eq!(gate.check(&call, &**tool).await, Permission::Allow);
        }
        assert_eq!(client.asked("request_permission"), 1);
    }

    #[tokio::test]
    async fn always_answers_become_session_rules() {
        let client = Arc::new(RecordingClient::answering(PermissionChoice::AllowAlways));
        let gate =
            SessionPermissions::new("s".into(), client.clone(), Arc::default(), ModePolicy::Ask);
        let registry = ToolRegistry::builtin();
        let tool = registry.get("shell").unwrap();
        let call = ToolCallInfo {
            id: "c".into(),
            name: "shell".into(),
            title: "Run ls".into(),
            kind: tool.kind(),
            locations: Vec::new(),
            raw_input: json!({"command": "ls"}),
        };
        // Reported the moment it is given, so the session saves it at once.
        let reported = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&reported);
        gate.on_remember(move |rules| sink.lock().unwrap().push(rules));
        for _ in 0..3 {
            assert_eq!(gate.check(&call, &**tool).await, Permission::Allow);
        }
        assert_eq!(client.asked("request_permission"), 1);
        let reported = reported.lock().unwrap();
        assert_eq!(reported.len(), 1);
        assert_eq!(reported[0].get("shell"), Some(&true));
    }
}
