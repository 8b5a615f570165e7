//! The loop guard: a model that makes the same call with the same arguments
//! again and again (small local models do, for ever) is stopped after
//! `[agent] repeated_call_limit` calls in a row. The user is asked whether
//! to go on where the session asks before acting (`act`); elsewhere, or when
//! the client cannot ask, the turn ends. Either way the model reads why.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::ToolCallInfo;
use crate::permissions::{PermissionGate, Repeat};
use crate::tools::ToolError;
pub use crate::tools::repeats::LoopGuardSettings;

/// One turn's watch over the calls its model makes.
#[derive(Debug)]
pub struct LoopGuard {
    limit: Option<u32>,
    /// The last call: its tool and arguments, and how many times in a row.
    last: Option<(String, Value)>,
    repeats: u32,
    /// Why the turn ends after this round, for the user.
    stop: Option<String>,
}

impl LoopGuard {
    pub fn new(settings: LoopGuardSettings) -> Self {
        Self {
            limit: settings.limit,
            last: None,
            repeats: 0,
            stop: None,
        }
    }

    /// Counts a call; the number of identical calls in a row when this one
    /// reaches the limit.
    fn observe(&mut self, name: &str, arguments: &Value) -> Option<u32> {
        let same = matches!(&self.last, Some((n, a)) if n == name && a == arguments);
        if same {
            self.repeats += 1;
        } else {
            self.last = Some((name.to_string(), arguments.clone()));
            self.repeats = 1;
        }
        let limit = self.limit?;
        (self.repeats >= limit).then_some(self.repeats)
    }

    /// Whether `call` may go on to its permission check: None when it may,
    /// else the error the model reads instead of a result. `arguments` is
    /// None for a call that cannot run anyway (unknown tool, bad arguments),
    /// which breaks a run of identical calls.
    pub async fn admit(
        &mut self,
        call: &ToolCallInfo,
        arguments: Option<&Value>,
        gate: &dyn PermissionGate,
        cancel: &CancellationToken,
    ) -> Option<ToolError> {
        let Some(arguments) = arguments else {
            self.last = None;
            self.repeats = 0;
            return None;
        };
        if self.stop.is_some() {
            return Some(ToolError::Failed(
                "Not run: the turn is stopping (see the call before this one).".into(),
            ));
        }
        let times = self.observe(&call.name, arguments)?;
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => Repeat::Cancelled,
            answer = gate.confirm_repeat(call, times) => answer,
        };
        let why = match answer {
            Repeat::GoOn => {
                // Asked again after as many more.
                self.repeats = 0;
                return None;
            }
            Repeat::GoOnAlways => {
                self.limit = None;
                return None;
            }
            Repeat::Cancelled => {
                cancel.cancel();
                return Some(ToolError::Cancelled);
            }
            Repeat::Stop(why) => why,
        };
        self.stop = Some(format!(
            "\n\nStopped: the model called `{}` with the same arguments {times} times in a row ({why}). Send another prompt to go on; `[agent] repeated_call_limit` sets how many identical calls stop a turn (0: never).\n",
            call.name
        ));
        Some(ToolError::Failed(format!(
            "Not run: `{}` was called {times} times in a row with exactly the same arguments, and its result would not change. The turn was stopped ({why}). Do not repeat the call: use the results you already have, try something different, or tell the user what is blocking you.",
            call.name
        )))
    }

    /// The message that ends the turn, once the guard stopped it.
    pub fn stopped(&self) -> Option<&str> {
        self.stop.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ToolKind;
    use crate::permissions::AllowAll;
    use serde_json::json;

    fn call(name: &str) -> ToolCallInfo {
        ToolCallInfo {
            id: "call-1".into(),
            name: name.into(),
            title: name.into(),
            kind: ToolKind::Read,
            raw_input: Value::Null,
            locations: Vec::new(),
        }
    }

    #[tokio::test]
    async fn only_identical_calls_in_a_row_count() {
        let cancel = CancellationToken::new();
        let mut guard = LoopGuard::new(LoopGuardSettings::default());
        let read = call("read_file");
        let a = json!({"path": "a"});
        let b = json!({"path": "b"});
        // A different argument, a different tool, or a call that cannot run
        // each start the count again.
        for (name, arguments) in [
            ("read_file", Some(&a)),
            ("read_file", Some(&a)),
            ("read_file", Some(&b)),
            ("read_file", Some(&b)),
            ("list_dir", Some(&b)),
            ("read_file", Some(&b)),
            ("read_file", Some(&b)),
            ("read_file", None),
            ("read_file", Some(&b)),
            ("read_file", Some(&b)),
        ] {
            let refused = guard
                .admit(&call(name), arguments, &AllowAll, &cancel)
                .await;
            assert!(refused.is_none(), "{name} {arguments:?}");
        }
        // The third in a row: AllowAll cannot ask, so the turn stops.
        let refused = guard.admit(&read, Some(&b), &AllowAll, &cancel).await;
        let message = refused.expect("stopped").to_string();
        assert!(message.contains("3 times in a row"), "{message}");
        assert!(message.contains("Do not repeat"), "{message}");
        let stopped = guard.stopped().expect("stops the turn");
        assert!(stopped.contains("repeated_call_limit"), "{stopped}");
        // Later calls of the same answer do not run either.
        assert!(
            guard
                .admit(&read, Some(&a), &AllowAll, &cancel)
                .await
                .is_some()
        );
    }

    #[tokio::test]
    async fn turned_off_it_never_stops() {
        let cancel = CancellationToken::new();
        let mut guard = LoopGuard::new(LoopGuardSettings { limit: None });
        let a = json!({"path": "a"});
        for _ in 0..50 {
            let refused = guard
                .admit(&call("read_file"), Some(&a), &AllowAll, &cancel)
                .await;
            assert!(refused.is_none());
        }
        assert!(guard.stopped().is_none());
    }
}
