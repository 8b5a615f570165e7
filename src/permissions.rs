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
use crate::tools::Tool;

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
    remembered: Mutex<BTreeMap<String, bool>>,
    /// The session's mode; changed by the session actor, read by running turns.
    policy: Mutex<ModePolicy>,
}

impl SessionPermissions {
    pub fn new(session_id: String, sink: Arc<dyn ClientSink>, policy: ModePolicy) -> Self {
        Self {
            session_id,
            sink,
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
            if !tool.mutates() {
                return Permission::Allow;
            }
            let policy = self.policy();
            if policy == ModePolicy::ReadOnly {
                return Permission::Reject(format!(
                    "{} changes files or runs commands, which plan mode does not allow. Finish the plan and ask the user to switch to act mode.",
                    call.title
                ));
            }
            match (self.remembered(tool.name()), policy) {
                (Some(false), _) => return rejected(call),
                (Some(true), _) | (None, ModePolicy::Auto) => return Permission::Allow,
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
