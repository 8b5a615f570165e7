//! A prompt's foreground through the actor: its id (saved, replayed under
//! the same), its answer at insertion, `State` from `Running` to `Idle`,
//! idempotent retries, and messages that steer the running turn.

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::StreamExt;
use tokio::sync::{Notify, mpsc};

use super::*;
use crate::client::{PromptOrigin, SessionState, UserPrompt};
use crate::model::{Message, Role};
use crate::providers::testing::TestModel;
use crate::providers::{EventStream, FinishReason, Provider, ProviderEvent};

type Script = Vec<ProviderEvent>;

fn answer(text: &str) -> Script {
    vec![
        ProviderEvent::TextDelta(text.into()),
        ProviderEvent::Finish(FinishReason::Stop),
    ]
}

/// A call of a tool the session does not have: its result (an error) is
/// there at once.
fn unknown_tool_call() -> Script {
    vec![
        ProviderEvent::ToolCallStart {
            index: 0,
            id: "c1".into(),
            name: "no_such_tool".into(),
        },
        ProviderEvent::ToolCallArgumentsDelta {
            index: 0,
            delta: "{}".into(),
        },
        ProviderEvent::ToolCallEnd { index: 0 },
        ProviderEvent::Finish(FinishReason::ToolCalls),
    ]
}

struct Model {
    provider: Arc<TestModel>,
    calls: mpsc::UnboundedReceiver<usize>,
}

/// A model that answers each call with the next script, after its gate
/// opens where it has one; each call is announced on `calls`.
fn model(scripts: Vec<(Option<Arc<Notify>>, Script)>) -> Model {
    let (tx, calls) = mpsc::unbounded_channel();
    let scripts = Mutex::new(VecDeque::from(scripts));
    let provider = TestModel::new(move |number| {
        let (gate, script) = scripts.lock().unwrap().pop_front().unwrap_or_default();
        let _ = tx.send(number);
        Box::pin(async move {
            if let Some(gate) = gate {
                gate.notified().await;
            }
            let stream: EventStream = futures::stream::iter(script.into_iter().map(Ok)).boxed();
            Ok(stream)
        })
    });
    Model {
        provider: Arc::new(provider),
        calls,
    }
}

impl Model {
    /// Waits for the model's `n`th call.
    async fn called(&mut self, n: usize) {
        while let Some(call) = tokio::time::timeout(Duration::from_secs(10), self.calls.recv())
            .await
            .expect("the model is called")
        {
            if call >= n {
                return;
            }
        }
    }
}

type Insertion = oneshot::Receiver<Result<Inserted, SessionError>>;

impl Fixture {
    fn submit(&self, text: &str, key: Option<&str>) -> Insertion {
        let (reply, answer) = InsertReply::channel();
        self.session.send(SessionMsg::Prompt(PromptSubmission {
            content: vec![Part::Text { text: text.into() }],
            request_cancel: CancellationToken::new(),
            idempotency_key: key.map(str::to_string),
            when_busy: WhenBusy::Steer,
            answer: PromptAnswer::AtInsertion(reply),
        }));
        answer
    }

    async fn idle(&self) -> Vec<Update> {
        self.updates_until(|updates| updates.iter().any(is_idle))
            .await
    }
}

fn is_idle(update: &Update) -> bool {
    matches!(update, Update::State(SessionState::Idle(_)))
}

async fn inserted(answer: Insertion) -> Result<String, SessionError> {
    tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("the prompt is answered")
        .expect("the session is alive")
        .map(|inserted| inserted.message_id)
}

/// The user messages shown, as (id, text, origin).
fn prompts(updates: &[Update]) -> Vec<(String, String, PromptOrigin)> {
    (updates.iter())
        .filter_map(|update| match update {
            Update::UserPrompt(UserPrompt {
                message_id,
                content,
                origin,
            }) => Some((
                message_id.clone(),
                Message {
                    role: Role::User,
                    parts: content.clone(),
                }
                .text(),
                *origin,
            )),
            _ => None,
        })
        .collect()
}

async fn served(model: &Model) -> Fixture {
    let provider = Arc::clone(&model.provider) as Arc<dyn Provider>;
    session_served(RecordingClient::default(), None, None, Some(provider)).await
}

#[tokio::test]
async fn a_prompt_answered_at_insertion_gets_its_id_and_the_turn_runs_from_running_to_idle() {
    let model = model(vec![(None, answer("hello"))]);
    let fixture = served(&model).await;
    let id = inserted(fixture.submit("hi", None)).await.unwrap();
    let updates = fixture.idle().await;
    assert_eq!(updates.first(), Some(&Update::State(SessionState::Running)));
    assert_eq!(
        updates.last(),
        Some(&Update::State(SessionState::Idle(StopReason::EndTurn)))
    );
    assert_eq!(prompts(&updates), [(id, "hi".into(), PromptOrigin::Live)]);
    assert_eq!(agent_text(&updates), "hello");
}

#[tokio::test]
async fn a_retry_with_a_key_already_taken_gets_the_first_id_and_inserts_nothing() {
    let model = model(vec![(None, answer("once"))]);
    let fixture = served(&model).await;
    let id = inserted(fixture.submit("hi", Some("k1"))).await.unwrap();
    fixture.idle().await;
    assert_eq!(
        inserted(fixture.submit("hi", Some("k1"))).await.unwrap(),
        id
    );
    assert_eq!(model.provider.seen.lock().unwrap().len(), 1);
    assert_eq!(prompts(&fixture.updates()).len(), 1, "not shown twice");
}

#[tokio::test]
async fn a_message_sent_during_a_tool_round_joins_before_the_next_request_and_replays_in_place() {
    let gate = Arc::new(Notify::new());
    let mut model = model(vec![
        (Some(Arc::clone(&gate)), unknown_tool_call()),
        (None, answer("done")),
    ]);
    let (fixture, store, _data) = {
        let data = tempfile::tempdir().unwrap();
        let store = crate::store::Store::new(data.path());
        let id = "s1".into();
        let metadata =
            crate::store::Metadata::new(&id, std::env::temp_dir(), "local", "test-model", "act");
        let recorder = crate::store::Recorder::start(store.create(&metadata).unwrap(), metadata);
        let provider = Arc::clone(&model.provider) as Arc<dyn Provider>;
        let fixture = session_served(
            RecordingClient::default(),
            None,
            Some(recorder),
            Some(provider),
        )
        .await;
        (fixture, store, data)
    };
    let first = inserted(fixture.submit("hi", None)).await.unwrap();
    model.called(1).await;
    let mut steering = fixture.submit("more", Some("k2"));
    tokio::task::yield_now().await;
    assert!(
        steering.try_recv().is_err(),
        "not in before the model answers"
    );
    gate.notify_one();
    let second = inserted(steering).await.unwrap();
    let updates = fixture.idle().await;
    assert_eq!(
        prompts(&updates),
        [
            (first.clone(), "hi".into(), PromptOrigin::Live),
            (second.clone(), "more".into(), PromptOrigin::Steered),
        ]
    );
    // The steered message is shown after the tool's result, before the answer.
    let at = |found: &dyn Fn(&Update) -> bool| updates.iter().position(found).unwrap();
    let tool_done = at(
        &|u| matches!(u, Update::Agent(AgentEvent::ToolCallUpdate(p)) if p.status == crate::events::ToolStatus::Failed),
    );
    let steered = at(&|u| matches!(u, Update::UserPrompt(p) if p.origin == PromptOrigin::Steered));
    let answer = at(&|u| matches!(u, Update::Agent(AgentEvent::AgentText(_))));
    assert!(tool_done < steered && steered < answer, "{updates:?}");
    assert_eq!(updates.iter().filter(|u| is_idle(u)).count(), 1);
    assert!(is_idle(updates.last().unwrap()));
    // The next request carries it after the tool result.
    {
        let seen = model.provider.seen.lock().unwrap();
        let messages = &seen[1].messages;
        let n = messages.len();
        assert!(matches!(messages[n - 2].parts[0], Part::ToolResult { .. }));
        assert_eq!(messages[n - 1].text(), "more");
    }
    fixture.session.close().await;
    // Saved where it went in: replayed there, under the same ids.
    let (_, events) = store.read(&"s1".into()).unwrap();
    let replay = crate::store::replay_from(&events);
    let replayed: Vec<(String, String, PromptOrigin)> = prompts(&replay);
    assert_eq!(
        replayed,
        [
            (first, "hi".into(), PromptOrigin::Replayed),
            (second.clone(), "more".into(), PromptOrigin::Replayed),
        ]
    );
    let at = |found: &dyn Fn(&Update) -> bool| replay.iter().position(found).unwrap();
    let tool = at(&|u| matches!(u, Update::Agent(AgentEvent::ToolCallUpdate(_))));
    let steered = at(&|u| matches!(u, Update::UserPrompt(p) if p.message_id == second));
    let answer = at(&|u| matches!(u, Update::Agent(AgentEvent::AgentText(_))));
    assert!(tool < steered && steered < answer, "{replay:?}");
    let context = crate::store::context_from(&events).context.messages();
    let texts: Vec<String> = context.iter().map(|m| m.text()).collect();
    assert_eq!(texts.last().map(String::as_str), Some("done"));
    assert_eq!(texts[texts.len() - 2], "more");
    // One turn, the steered message with it: `/rewind 1` takes it back whole.
    let restored = crate::store::context_from(&events).context;
    assert_eq!(restored.rewind_count(1).unwrap(), restored.entries().len());
    // Its key survives the session.
    assert_eq!(crate::store::keys_from(&events).get("k2"), Some(&second));
}

#[tokio::test]
async fn a_turn_that_ends_first_takes_the_waiting_messages_as_its_next_prompt_without_idle() {
    let gate = Arc::new(Notify::new());
    let mut model = model(vec![
        (Some(Arc::clone(&gate)), answer("first")),
        (None, answer("second")),
    ]);
    let fixture = served(&model).await;
    inserted(fixture.submit("hi", None)).await.unwrap();
    model.called(1).await;
    let one = fixture.submit("one", None);
    let two = fixture.submit("two", None);
    tokio::task::yield_now().await;
    gate.notify_one();
    let (one, two) = (inserted(one).await.unwrap(), inserted(two).await.unwrap());
    let updates = fixture.idle().await;
    assert_eq!(agent_text(&updates), "firstsecond");
    assert_eq!(updates.iter().filter(|u| is_idle(u)).count(), 1);
    assert!(is_idle(updates.last().unwrap()), "{updates:?}");
    let shown = prompts(&updates);
    assert_eq!(shown[1], (one, "one".into(), PromptOrigin::Live));
    assert_eq!(shown[2], (two, "two".into(), PromptOrigin::Steered));
    // Both went to the model together, in order, in one request.
    let seen = model.provider.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let texts: Vec<String> = seen[1].messages.iter().map(|m| m.text()).collect();
    assert_eq!(
        texts[texts.len() - 2..],
        ["one".to_string(), "two".to_string()]
    );
}

#[tokio::test]
async fn the_seventeenth_waiting_message_is_refused_and_a_cancel_refuses_the_rest_before_idle() {
    let gate = Arc::new(Notify::new());
    let mut model = model(vec![(Some(gate), answer("never"))]);
    let fixture = served(&model).await;
    inserted(fixture.submit("hi", None)).await.unwrap();
    model.called(1).await;
    let waiting: Vec<Insertion> = (0..16)
        .map(|n| fixture.submit(&format!("m{n}"), None))
        .collect();
    let refused = inserted(fixture.submit("m16", None)).await;
    assert!(
        matches!(refused, Err(SessionError::SteeringFull(_))),
        "{refused:?}"
    );
    fixture.session.send(SessionMsg::Cancel);
    let updates = fixture.idle().await;
    assert_eq!(
        updates.last(),
        Some(&Update::State(SessionState::Idle(StopReason::Cancelled)))
    );
    // Each was refused by the time the session was idle.
    for mut answer in waiting {
        let refused = answer.try_recv().expect("refused before idle");
        assert!(matches!(refused, Err(SessionError::SteeringCancelled)));
    }
    assert_eq!(prompts(&updates).len(), 1, "none went in");
}

#[tokio::test]
async fn a_prompt_that_refuses_when_busy_is_still_busy() {
    let gate = Arc::new(Notify::new());
    let mut model = model(vec![(Some(gate), answer("never"))]);
    let fixture = served(&model).await;
    inserted(fixture.submit("hi", None)).await.unwrap();
    model.called(1).await;
    let busy = answered(fixture.prompt("again")).await;
    assert!(matches!(busy, Err(SessionError::Busy(_))), "{busy:?}");
    fixture.session.send(SessionMsg::Cancel);
    fixture.idle().await;
}
