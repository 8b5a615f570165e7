//! Steering through the loop: messages sent while a slow tool runs go in
//! after its result, before the next model request, all together, in order.

use std::collections::VecDeque;

use tokio::sync::Notify;

use super::*;
use crate::tools::{ToolFuture, ToolOutput};

/// A model that answers each call with the next script (with nothing once
/// they run out).
fn steps(scripts: Vec<Vec<Result<ProviderEvent, ProviderError>>>) -> Arc<TestModel> {
    let scripts = Mutex::new(VecDeque::from(scripts));
    Arc::new(TestModel::new(move |_| {
        let script = scripts.lock().unwrap().pop_front().unwrap_or_default();
        Box::pin(async move { Ok(futures::stream::iter(script).boxed()) })
    }))
}

/// A tool that runs until the test lets it end.
struct Slow {
    started: Arc<Notify>,
    release: Arc<Notify>,
}

impl Tool for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> &str {
        "waits"
    }
    fn parameters(&self) -> Value {
        serde_json::json!({"type": "object", "properties": {}})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }
    fn title(&self, _: &Value) -> String {
        "Slow".into()
    }
    fn locations(&self, _: &Value, _: &ToolContext) -> Vec<crate::events::Location> {
        Vec::new()
    }
    fn mutates(&self) -> bool {
        false
    }
    fn call<'a>(&'a self, _: Value, _: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            self.started.notify_one();
            self.release.notified().await;
            Ok(ToolOutput::text("slow result"))
        })
    }
}

/// An inbox the test fills; what it is told goes in `log`.
struct Inbox {
    pending: Mutex<Vec<SteeredMessage>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl SteeringInbox for Inbox {
    fn take(&self) -> Vec<SteeredMessage> {
        std::mem::take(&mut *self.pending.lock().unwrap())
    }
    fn inserted(&self, messages: &[SteeredMessage]) {
        let mut log = self.log.lock().unwrap();
        log.extend(
            messages
                .iter()
                .map(|m| format!("inserted {}", m.message_id)),
        );
    }
}

fn steered(id: &str, text: &str) -> SteeredMessage {
    SteeredMessage {
        message_id: id.into(),
        message: Arc::new(Message::user_text(text)),
        idempotency_key: None,
    }
}

fn answer(text: &str) -> Vec<Result<ProviderEvent, ProviderError>> {
    vec![
        Ok(ProviderEvent::TextDelta(text.into())),
        Ok(ProviderEvent::Finish(FinishReason::Stop)),
    ]
}

#[tokio::test]
async fn messages_sent_during_a_slow_tool_join_after_its_result_before_the_next_request() {
    let provider = steps(vec![super::tool_call("c1", "slow", "{}"), answer("done")]);
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let log = Arc::new(Mutex::new(Vec::new()));
    let inbox = Arc::new(Inbox {
        pending: Mutex::default(),
        log: Arc::clone(&log),
    });
    let journal = Arc::new(Mutex::new(Vec::new()));
    let mut input = super::input(super::scripted(Vec::new(), false), CancellationToken::new());
    input.session.model.provider = provider.clone();
    input.tools = ToolRegistry::new();
    input.tools.register(Arc::new(Slow {
        started: Arc::clone(&started),
        release: Arc::clone(&release),
    }));
    input.steering = Some(inbox.clone());
    let kept = Arc::clone(&journal);
    input.journal = Some(Arc::new(move |entry| kept.lock().unwrap().push(entry)));
    let emitted = Arc::clone(&log);
    let turn = tokio::spawn(async move {
        run_turn(input, &move |event| {
            let line = match event {
                AgentEvent::AgentText(text) => format!("text {text}"),
                AgentEvent::ToolCallUpdate(p) if p.status == ToolStatus::Completed => {
                    "tool completed".into()
                }
                _ => return,
            };
            emitted.lock().unwrap().push(line);
        })
        .await
    });
    started.notified().await;
    inbox
        .pending
        .lock()
        .unwrap()
        .extend([steered("m1", "one"), steered("m2", "two")]);
    assert!(log.lock().unwrap().is_empty(), "nothing goes in mid-tool");
    release.notify_one();
    let outcome = turn.await.unwrap();
    assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
    assert_eq!(
        *log.lock().unwrap(),
        ["tool completed", "inserted m1", "inserted m2", "text done"]
    );
    let seen = provider.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].messages.len(),
        1,
        "the first request had no steering"
    );
    let last: Vec<&Message> = seen[1]
        .messages
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|m| &**m)
        .collect();
    assert!(
        matches!(last[0].parts[0], Part::ToolResult { .. }),
        "{last:?}"
    );
    assert_eq!((last[1].role, last[1].text()), (Role::User, "one".into()));
    assert_eq!((last[2].role, last[2].text()), (Role::User, "two".into()));
    // Journaled in place, so a store rebuilds the same context.
    let kinds: Vec<String> = (journal.lock().unwrap().iter())
        .map(|entry| match entry {
            Journal::Round(messages) => format!("round {}", messages.len()),
            Journal::Op(_) => "op".into(),
            Journal::Steered(steered) => format!("steered {}", steered.message_id),
        })
        .collect();
    assert_eq!(kinds, ["round 2", "steered m1", "steered m2", "round 1"]);
}

#[tokio::test]
async fn a_turn_that_ends_first_leaves_its_messages_waiting() {
    let provider = steps(vec![answer("done")]);
    let inbox = Arc::new(Inbox {
        pending: Mutex::default(),
        log: Arc::default(),
    });
    let mut input = super::input(super::scripted(Vec::new(), false), CancellationToken::new());
    input.session.model.provider = provider;
    input.steering = Some(inbox.clone());
    // Sent as the model answers: the loop has no later safe point.
    let outcome = run_turn(input, &|event| {
        if matches!(event, AgentEvent::AgentText(_)) {
            inbox.pending.lock().unwrap().push(steered("m1", "late"));
        }
    })
    .await;
    assert_eq!(outcome.result.unwrap(), StopReason::EndTurn);
    assert_eq!(
        inbox.pending.lock().unwrap().len(),
        1,
        "left for the session"
    );
}
