//! The loop guard's question: the model made the same call several times
//! in a row, and the user (where the mode asks) says whether the turn goes on.

use super::{Repeat, SessionPermissions};
use crate::client::PermissionChoice;
use crate::events::ToolCallInfo;
use crate::modes::ModePolicy;

impl SessionPermissions {
    /// The loop guard's question: asked where the mode asks before acting;
    /// in `auto` (and read-only modes) nobody is waiting to answer, so the
    /// turn ends.
    pub(super) async fn ask_to_repeat(&self, call: &ToolCallInfo, times: u32) -> Repeat {
        let policy = self.policy();
        if policy != ModePolicy::Ask {
            return Repeat::Stop(format!(
                "the session's mode ({}) does not ask the user, so the turn ends",
                policy.as_str()
            ));
        }
        let mut asked = call.clone();
        asked.title = format!(
            "{} — the model made this same call {times} times in a row. Let it go on?",
            call.title
        );
        match self.sink.request_permission(&self.session_id, &asked).await {
            Ok(PermissionChoice::AllowOnce) => Repeat::GoOn,
            Ok(
                PermissionChoice::AllowAlways
                | PermissionChoice::AllowInProject
                | PermissionChoice::AllowEverywhere,
            ) => Repeat::GoOnAlways,
            Ok(PermissionChoice::RejectOnce | PermissionChoice::RejectAlways) => {
                Repeat::Stop("the user said to stop".into())
            }
            Ok(PermissionChoice::Cancelled) => Repeat::Cancelled,
            Err(reason) => Repeat::Stop(format!(
                "the editor could not ask the user whether to go on: {reason}"
            )),
        }
    }
}
