//! A delegated agent never has more rights than its parent: its calls are
//! decided by its own rules and mode *and* by its parent's (recursively up
//! to the session the user started). What either refuses is refused; what
//! either would ask about is asked (through the parent's session); only
//! what both allow runs without a question.

use std::sync::Arc;

use super::{Permission, SessionPermissions};
use crate::events::ToolCallInfo;
use crate::tools::Tool;

impl SessionPermissions {
    /// Bound by `parent`'s decisions from now on.
    pub fn with_ceiling(mut self, parent: Arc<SessionPermissions>) -> Self {
        self.ceiling = Some(parent);
        self
    }

    /// The decision made without asking, under every ceiling; None to ask.
    pub(super) fn bounded(&self, call: &ToolCallInfo, tool: &dyn Tool) -> Option<Permission> {
        let own = self.decide(call, tool);
        match &self.ceiling {
            Some(parent) => stricter(parent.bounded(call, tool), own),
            None => own,
        }
    }
}

/// The stricter of two decisions: a refusal, else a question, else allowed.
fn stricter(parent: Option<Permission>, own: Option<Permission>) -> Option<Permission> {
    match (parent, own) {
        (Some(refused @ (Permission::Reject(_) | Permission::Cancelled)), _)
        | (_, Some(refused @ (Permission::Reject(_) | Permission::Cancelled))) => Some(refused),
        (Some(Permission::Allow), own) => own,
        (None, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::testing::RecordingClient;
    use crate::modes::ModePolicy;
    use crate::tools::ToolRegistry;
    use serde_json::json;

    fn gate(policy: ModePolicy) -> SessionPermissions {
        let client = Arc::new(RecordingClient::default());
        SessionPermissions::new("s".into(), client, Arc::default(), policy)
    }

    fn call(tool: &dyn Tool) -> ToolCallInfo {
        let input = json!({"command": "ls", "path": "a.txt", "content": "x"});
        super::super::tests::call_of(tool, input)
    }

    #[test]
    fn a_child_gets_no_more_than_its_parent_allows() {
        let registry = ToolRegistry::builtin();
        let shell = registry.get("shell").unwrap().as_ref();
        let read = registry.get("read_file").unwrap().as_ref();
        // An auto child under a plan parent: changes are refused.
        let child = gate(ModePolicy::Auto).with_ceiling(Arc::new(gate(ModePolicy::ReadOnly)));
        assert!(matches!(
            child.bounded(&call(shell), shell),
            Some(Permission::Reject(_))
        ));
        assert!(matches!(
            child.bounded(&call(read), read),
            Some(Permission::Allow)
        ));
        // An auto child under an ask parent: changes ask.
        let child = gate(ModePolicy::Auto).with_ceiling(Arc::new(gate(ModePolicy::Ask)));
        assert!(child.bounded(&call(shell), shell).is_none());
        // The parent's "always allow" lets the child's call through only
        // when the child allows it too.
        let parent = gate(ModePolicy::Ask);
        parent.restore([("shell".to_string(), true)].into());
        let child = gate(ModePolicy::Ask).with_ceiling(Arc::new(parent));
        assert!(child.bounded(&call(shell), shell).is_none());
        child.restore([("shell".to_string(), true)].into());
        assert!(matches!(
            child.bounded(&call(shell), shell),
            Some(Permission::Allow)
        ));
    }
}
