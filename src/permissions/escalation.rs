//! "Run outside the sandbox?": when the sandbox blocked a command, the user
//! may let it run once unconfined. A rule of the user's configuration that
//! allows the call answers without asking (in any mode); the user's
//! "always" answers for `shell` do not, since they were given for running
//! commands in the sandbox.

use futures::future::BoxFuture;

use super::patterns::Verdict;
use super::{Decision, RuleScope, SessionPermissions};
use crate::client::PermissionChoice;
use crate::events::ToolCallInfo;
use crate::tools::builtin::shell::{NOT_ESCALATED, ShellTool};
use crate::tools::sandbox::{Escalated, Escalation};
use crate::tools::{Tool, TypedTool};

/// Whether `tool` runs commands the sandbox confines.
pub(super) fn runs_commands(tool: &dyn Tool) -> bool {
    tool.name() == ShellTool::NAME
}

impl SessionPermissions {
    /// A rule in the configuration (not an "always" answer) allows `call`.
    fn allowed_by_rule(&self, call: &ToolCallInfo, tool: &dyn Tool) -> bool {
        let verdict = self
            .lists
            .evaluate(tool.name(), tool.kind(), &call.raw_input);
        match verdict {
            Verdict::Allow => true,
            Verdict::Deny(_) | Verdict::Ask => false,
            Verdict::NoMatch => matches!(
                self.decided(call, tool),
                Some((Decision::Allow, scope)) if scope != RuleScope::Session
            ),
        }
    }
}

impl Escalation for SessionPermissions {
    fn escalate<'a>(
        &'a self,
        call: &'a ToolCallInfo,
        blocked: &'a str,
    ) -> BoxFuture<'a, Escalated> {
        Box::pin(async move {
            if self.allowed_by_rule(call, &ShellTool) {
                return Escalated::Granted;
            }
            let mut asked = call.clone();
            asked.title = format!("Run outside the sandbox? {} — {blocked}", call.title);
            match self.sink.request_permission(&self.session_id, &asked).await {
                // "Always" is not remembered (nor written to a file): it
                // would let every later command out unasked, which the
                // sandbox option does plainly.
                Ok(
                    PermissionChoice::AllowOnce
                    | PermissionChoice::AllowAlways
                    | PermissionChoice::AllowInProject
                    | PermissionChoice::AllowEverywhere,
                ) => Escalated::Granted,
                Ok(PermissionChoice::RejectOnce | PermissionChoice::RejectAlways) => {
                    Escalated::Refused(format!(
                        "The user declined to run it outside the sandbox. {NOT_ESCALATED}"
                    ))
                }
                Ok(PermissionChoice::Cancelled) => Escalated::Cancelled,
                Err(reason) => Escalated::Refused(format!(
                    "The editor could not ask the user to run it outside the sandbox ({reason}). {NOT_ESCALATED}"
                )),
            }
        })
    }
}
