//! The session actor against a recording client: what the editor would be
//! shown and answered, without stdio. The model is a local server that
//! accepts connections and never answers, so a turn runs until cancelled.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::client::testing::RecordingClient;
use crate::client::{ClientSink, MODEL_OPTION, PROVIDER_OPTION};
use crate::config::{Config, Overrides};
use crate::events::AgentEvent;
use crate::providers::Providers;

/// A model server that takes requests and never answers them.
async fn silent_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    format!("http://{address}/v1")
}

struct Fixture {
    client: Arc<RecordingClient>,
    session: SessionHandle,
}

async fn session() -> Fixture {
    session_with(RecordingClient::default(), None).await
}

async fn session_with(client: RecordingClient, save_failure: Option<String>) -> Fixture {
    session_from(client, save_failure, None).await
}

/// A session saved in a fresh store: the fixture, the store, and the
/// data dir that holds it.
async fn session_saved(
    client: RecordingClient,
    save_failure: Option<String>,
) -> (Fixture, crate::store::Store, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let store = crate::store::Store::new(data.path());
    let id = "s1".into();
    let metadata =
        crate::store::Metadata::new(&id, std::env::temp_dir(), "local", "test-model", "act");
    let open = store.create(&metadata).unwrap();
    let recorder = crate::store::Recorder::start(open, metadata);
    (
        session_from(client, save_failure, Some(recorder)).await,
        store,
        data,
    )
}

async fn session_from(
    client: RecordingClient,
    save_failure: Option<String>,
    recorder: Option<crate::store::Recorder>,
) -> Fixture {
    session_served(client, save_failure, recorder, None).await
}

/// A session whose provider `local` is `served`, where given.
async fn session_served(
    client: RecordingClient,
    save_failure: Option<String>,
    recorder: Option<crate::store::Recorder>,
    served: Option<Arc<dyn crate::providers::Provider>>,
) -> Fixture {
    let endpoint = silent_server().await;
    let text = format!(
        "[chat]\ndefault_provider = \"local\"\n\n[llm.providers.local]\ntype = \"openai\"\nendpoint = \"{endpoint}\"\ndefault_model = \"test-model\"\ncontext_window = 32768\n\n[llm.providers.other]\ntype = \"openai\"\nendpoint = \"{endpoint}\"\ndefault_model = \"other-default\"\ncontext_window = 32768\n"
    );
    let config = Config::from_toml(
        &text,
        Path::new("test.toml"),
        &|_| None,
        &Overrides::default(),
    )
    .unwrap();
    let client = Arc::new(client);
    let defaults = Defaults::from_config(&config).unwrap();
    let start = SessionStart {
        id: "s1".into(),
        cwd: std::env::temp_dir(),
        additional_directories: Vec::new(),
        client: ClientAbilities::default(),
        mcp_servers: Vec::new(),
        settings: Settings {
            provider: "local".into(),
            model: "test-model".into(),
            mode: "act".into(),
            agent: None,
            thought_level: Default::default(),
        },
        agent_restored: false,
        history: ContextManager::new(),
        files: Default::default(),
        spent: Default::default(),
        todos: Vec::new(),
        recorder,
        save_failure,
        lineage: None,
        notices: Vec::new(),
        client_prompt: None,
        idempotency_keys: Default::default(),
    };
    let providers = Arc::new(Providers::new(config.providers));
    if let Some(served) = served {
        providers.serve_with("local", served);
    }
    let shared = Shared {
        runtime: Arc::new(runtime::AgentRuntime::new(None, defaults.subagents)),
        defaults: Arc::new(defaults),
        providers,
        client: Arc::clone(&client) as Arc<dyn ClientSink>,
        attachments: None,
    };
    Fixture {
        client,
        session: spawn(start, shared),
    }
}

impl Fixture {
    async fn set_option(&self, id: &str, value: &str) -> Result<Vec<SelectOption>, SessionError> {
        self.ask(|reply| SessionMsg::SetOption {
            id: id.into(),
            value: value.into(),
            reply,
        })
        .await
    }

    /// What the client was shown of this session.
    fn updates(&self) -> Vec<Update> {
        self.client
            .updates()
            .into_iter()
            .map(|(session, update)| {
                assert_eq!(session, "s1");
                update
            })
            .collect()
    }

    async fn ask<T>(&self, msg: impl FnOnce(oneshot::Sender<T>) -> SessionMsg) -> T {
        let (reply, answer) = oneshot::channel();
        assert!(self.session.send(msg(reply)));
        tokio::time::timeout(Duration::from_secs(10), answer)
            .await
            .expect("the session answers")
            .expect("the session is alive")
    }

    fn prompt(&self, text: &str) -> oneshot::Receiver<Result<TurnEnd, SessionError>> {
        let (reply, answer) = oneshot::channel();
        self.session
            .send(SessionMsg::Prompt(PromptSubmission::answered_at_end(
                vec![Part::Text { text: text.into() }],
                CancellationToken::new(),
                reply,
            )));
        answer
    }

    /// The updates sent so far, once `done` holds for them.
    async fn updates_until(&self, done: impl Fn(&[Update]) -> bool) -> Vec<Update> {
        for _ in 0..200 {
            let updates = self.updates();
            if done(&updates) {
                return updates;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not seen: {:?}", self.updates());
    }
}

fn agent_text(updates: &[Update]) -> String {
    updates
        .iter()
        .filter_map(|update| match update {
            Update::Agent(AgentEvent::AgentText(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

async fn answered(
    answer: oneshot::Receiver<Result<TurnEnd, SessionError>>,
) -> Result<StopReason, SessionError> {
    tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("the prompt is answered")
        .expect("the session is alive")
        .map(|end| end.stop)
}

#[tokio::test]
async fn a_mode_change_is_shown_then_offered_in_the_options() {
    let fixture = session().await;
    fixture.session.send(SessionMsg::Started {
        delivery: Delivery::Interleaved,
    });
    fixture.updates_until(|updates| !updates.is_empty()).await;
    fixture.client.clear();
    let options = fixture.set_option(MODE_OPTION, "plan").await.unwrap();
    let mode = options.iter().find(|o| o.id == MODE_OPTION).unwrap();
    assert_eq!(mode.current, "plan");
    let updates = fixture.updates();
    assert_eq!(updates[0], Update::CurrentMode("plan".into()));
    assert!(
        matches!(&updates[1], Update::ConfigOptions(options) if options.iter().any(|o| o.id == MODE_OPTION && o.current == "plan"))
    );
    // The same mode again changes nothing and tells nothing.
    fixture
        .ask(|reply| SessionMsg::SetMode {
            mode: "plan".into(),
            reply,
        })
        .await
        .unwrap();
    assert_eq!(fixture.updates().len(), 2);
}

#[tokio::test]
async fn a_client_that_reads_one_line_per_request_hears_of_changes_in_its_next_turn() {
    let fixture = session().await;
    fixture.session.send(SessionMsg::Started {
        delivery: Delivery::InTurns,
    });
    // Crucible's habit: re-apply a mode (by its own name) and a model.
    for mode in ["normal", "plan"] {
        let mode = mode.to_string();
        fixture
            .ask(|reply| SessionMsg::SetMode { mode, reply })
            .await
            .unwrap();
    }
    fixture
        .ask(|reply| SessionMsg::SetModel {
            model: "unlisted-model".into(),
            reply,
        })
        .await
        .unwrap();
    assert!(fixture.updates().is_empty(), "{:?}", fixture.updates());
    // The next turn starts with where things stand: one update of each kind.
    answered(fixture.prompt("/help")).await.unwrap();
    let updates = fixture.updates();
    let modes: Vec<_> = updates
        .iter()
        .filter(|u| matches!(u, Update::CurrentMode(_)))
        .collect();
    assert_eq!(modes, [&Update::CurrentMode("plan".into())]);
    let options: Vec<_> = updates
        .iter()
        .filter_map(|u| match u {
            Update::ConfigOptions(options) => Some(options),
            _ => None,
        })
        .collect();
    assert_eq!(options.len(), 1, "{updates:?}");
    let model = options[0].iter().find(|o| o.id == MODEL_OPTION).unwrap();
    assert_eq!(model.current, "unlisted-model");
    assert!(
        updates
            .iter()
            .any(|u| matches!(u, Update::AvailableCommands(_)))
    );
    // The turn's own answer comes after them (then its end, which v1 does not show).
    assert_eq!(
        updates.last(),
        Some(&Update::State(crate::client::SessionState::Idle(
            StopReason::EndTurn
        )))
    );
    assert!(
        matches!(updates.iter().rev().nth(1), Some(Update::Agent(_))),
        "{updates:?}"
    );
}

#[tokio::test]
async fn unknown_options_and_values_name_the_choices() {
    let fixture = session().await;
    let err = fixture.set_option("colour", "red").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown config option `colour`; this session has: model, mode, provider, agent, sandbox"
    );
    let err = fixture
        .set_option(PROVIDER_OPTION, "nowhere")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`nowhere` is not a value of option `provider`; choose one of: local, other"
    );
}

#[tokio::test]
async fn a_new_provider_brings_its_default_model() {
    let fixture = session().await;
    let options = fixture.set_option(PROVIDER_OPTION, "other").await.unwrap();
    let current = |id: &str| {
        options
            .iter()
            .find(|o| o.id == id)
            .map(|o| o.current.clone())
            .unwrap()
    };
    assert_eq!(current(PROVIDER_OPTION), "other");
    assert_eq!(current(MODEL_OPTION), "other-default");
}

#[tokio::test]
async fn commands_are_advertised_once_the_client_has_the_session() {
    let fixture = session().await;
    // Before `Started` nothing is sent, even when the commands change.
    fixture.session.send(SessionMsg::CommandsChanged);
    fixture.ask(|reply| SessionMsg::Options { reply }).await;
    assert!(fixture.updates().is_empty());
    fixture.session.send(SessionMsg::Started {
        delivery: Delivery::Interleaved,
    });
    let updates = fixture.updates_until(|updates| !updates.is_empty()).await;
    let Update::AvailableCommands(commands) = &updates[0] else {
        panic!("{updates:?}");
    };
    assert!(commands.iter().any(|c| c.name == "compact"));
    // The same list is not sent twice.
    fixture.session.send(SessionMsg::CommandsChanged);
    fixture.ask(|reply| SessionMsg::Options { reply }).await;
    let advertised = fixture
        .updates()
        .iter()
        .filter(|u| matches!(u, Update::AvailableCommands(_)))
        .count();
    assert_eq!(advertised, 1);
}

#[tokio::test]
async fn a_slash_command_answers_without_the_model_and_ends_the_turn() {
    let fixture = session().await;
    let reason = answered(fixture.prompt("/mode auto")).await.unwrap();
    assert_eq!(reason, StopReason::EndTurn);
    let updates = fixture.updates();
    assert!(updates.contains(&Update::CurrentMode("auto".into())));
    assert!(agent_text(&updates).contains("mode is now `auto`"));
}

#[tokio::test]
async fn a_second_prompt_is_busy_and_cancel_ends_the_first() {
    let fixture = session().await;
    let first = fixture.prompt("hello");
    let second = answered(fixture.prompt("again")).await;
    assert!(matches!(second, Err(SessionError::Busy(_))), "{second:?}");
    fixture.session.send(SessionMsg::Cancel);
    assert_eq!(answered(first).await.unwrap(), StopReason::Cancelled);
    // The session goes on: the next prompt is taken (and cancelled too).
    let third = fixture.prompt("once more");
    fixture.session.send(SessionMsg::Cancel);
    assert_eq!(answered(third).await.unwrap(), StopReason::Cancelled);
}

#[tokio::test]
async fn closing_answers_the_running_turn_first() {
    let fixture = session().await;
    let turn = fixture.prompt("hello");
    fixture.ask(|reply| SessionMsg::Close { reply }).await;
    assert_eq!(answered(turn).await.unwrap(), StopReason::Cancelled);
}

#[tokio::test]
async fn a_panic_in_a_turn_answers_that_prompt_with_an_error_and_the_session_lives_on() {
    let client = RecordingClient::panicking_on("PANIC-MARKER");
    let fixture = session_with(client, Some("PANIC-MARKER: not saved".into())).await;
    let answer = tokio::time::timeout(Duration::from_secs(10), fixture.prompt("hi"))
        .await
        .expect("the prompt is answered")
        .expect("by the session");
    match answer {
        Err(SessionError::Crashed(detail)) => assert!(detail.contains("panic"), "{detail}"),
        other => panic!("{other:?}"),
    }
    // The session still takes requests.
    let options = fixture.set_option(PROVIDER_OPTION, "other").await;
    assert!(options.is_ok(), "{options:?}");
}

/// The stored session after its writer has finished: its metadata and
/// whether its history holds a crash.
fn stored(store: &crate::store::Store) -> (crate::store::Metadata, bool) {
    let read = || {
        let (metadata, events) = store.read(&"s1".into()).unwrap();
        let crashed = events
            .iter()
            .any(|event| matches!(event, crate::store::StoredEvent::Crashed { .. }));
        (metadata, crashed)
    };
    for _ in 0..200 {
        let (metadata, crashed) = read();
        if metadata.broken.is_some() && crashed {
            return (metadata, crashed);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    read()
}

#[tokio::test]
async fn a_panic_in_a_turn_is_marked_in_the_store() {
    let client = RecordingClient::panicking_on("PANIC-MARKER");
    let (fixture, store, _data) =
        session_saved(client, Some("PANIC-MARKER: not saved".into())).await;
    let answer = tokio::time::timeout(Duration::from_secs(10), fixture.prompt("hi"))
        .await
        .expect("the prompt is answered")
        .expect("by the session");
    assert!(
        matches!(answer, Err(SessionError::Crashed(_))),
        "{answer:?}"
    );
    let (metadata, crashed) = stored(&store);
    let broken = metadata.broken.expect("marked broken");
    assert!(broken.detail.starts_with("a panic: a bug"), "{broken:?}");
    assert!(crashed, "the history holds the crash");
}

#[tokio::test]
async fn a_panic_in_the_session_itself_stops_it_alone_and_is_marked_in_the_store() {
    let client = RecordingClient::panicking_when(
        |update| matches!(update, Update::CurrentMode(mode) if mode == "plan"),
    );
    let (fixture, store, _data) = session_saved(client, None).await;
    fixture.session.send(SessionMsg::Started {
        delivery: Delivery::Interleaved,
    });
    let (reply, answer) = oneshot::channel();
    assert!(fixture.session.send(SessionMsg::SetMode {
        mode: "plan".into(),
        reply,
    }));
    let answer = tokio::time::timeout(Duration::from_secs(10), answer)
        .await
        .expect("the waiter hears at once");
    assert!(
        answer.is_err(),
        "the reply was dropped, not sent: {answer:?}"
    );
    // The actor is gone; its mailbox is closed.
    for _ in 0..200 {
        if fixture.session.tx.is_closed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(fixture.session.tx.is_closed());
    let (metadata, crashed) = stored(&store);
    let broken = metadata.broken.expect("marked broken");
    assert!(broken.detail.contains("a bug"), "{broken:?}");
    assert!(crashed, "the history holds the crash");
}

mod steering;
