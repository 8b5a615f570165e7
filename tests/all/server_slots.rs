//! A session keeps its llama.cpp server slot: against a server that
//! answers like llama-server (`Server: llama.cpp`, `/props` with
//! `total_slots`), every request of one session (its warm-up, turns and
//! compaction) names the same `id_slot`, and two sessions get different
//! ones. A server that is not llama.cpp is never asked for its slots and
//! its requests carry no `id_slot` at all; `pin_slots = false` sends none
//! either.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Method, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use crate::support::context::{SUMMARY, is_compaction};
use crate::support::harness::{Agent, Recorded, openai_stream};
use crate::support::wait::wait_until;

/// What the fake server was sent, in order: method, path and the body's
/// raw text.
type Log = Arc<Mutex<Vec<(Method, String, String)>>>;

/// How the fake server presents itself.
#[derive(Clone, Copy, PartialEq)]
enum Server {
    /// llama-server with `-np 2`.
    LlamaCpp,
    /// Any other OpenAI-compatible server: no `Server` header, no `/props`.
    Other,
}

struct FakeServer {
    base_url: String,
    log: Log,
}

impl FakeServer {
    async fn start(kind: Server) -> Self {
        let log = Log::default();
        let app = axum::Router::new()
            .fallback(answer)
            .with_state((kind, Arc::clone(&log)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            log,
        }
    }

    fn config(&self, extra: &str) -> String {
        format!(
            "[chat]\ndefault_provider = \"local\"\n\n[llm.providers.local]\ntype = \"openai\"\nendpoint = \"{}\"\ndefault_model = \"test-model\"\n{extra}",
            self.base_url
        )
    }

    fn log(&self) -> Vec<(Method, String, String)> {
        self.log.lock().unwrap().clone()
    }

    /// The chat requests' raw bodies, in order.
    fn chat_bodies(&self) -> Vec<String> {
        (self.log().into_iter())
            .filter(|(_, path, _)| path.ends_with("/chat/completions"))
            .map(|(_, _, body)| body)
            .collect()
    }

    fn warm_ups(&self) -> Vec<Value> {
        (self.chat_bodies().iter())
            .map(|body| serde_json::from_str::<Value>(body).unwrap())
            .filter(|body| body["max_tokens"] == 1)
            .collect()
    }

    /// How many times a path ending in `suffix` was asked for.
    fn asked(&self, suffix: &str) -> usize {
        let log = self.log();
        log.iter()
            .filter(|(_, path, _)| path.ends_with(suffix))
            .count()
    }
}

async fn answer(
    State((kind, log)): State<(Server, Log)>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let text = String::from_utf8_lossy(&body).to_string();
    log.lock()
        .unwrap()
        .push((method.clone(), path.clone(), text.clone()));
    let (status, content_type, body) = match (kind, path.as_str()) {
        (_, "/v1/models") => (
            200,
            "application/json",
            json!({"object": "list", "data": [{"id": "test-model", "owned_by": "llamacpp", "meta": {"n_ctx": 32768}}]}).to_string().into_bytes(),
        ),
        (Server::LlamaCpp, "/props") => (
            200,
            "application/json",
            json!({"total_slots": 2, "model_alias": "test-model"})
                .to_string()
                .into_bytes(),
        ),
        (_, "/v1/chat/completions") => {
            let request: Value = serde_json::from_str(&text).unwrap_or_default();
            let recorded = Recorded {
                method: method.to_string(),
                path: path.clone(),
                headers: Vec::new(),
                body: request,
                arrived: std::time::Instant::now(),
            };
            let answer = if is_compaction(&recorded) {
                format!("{SUMMARY}: questions were asked.")
            } else {
                "an answer".to_string()
            };
            let stream = openai_stream(&[json!({ "content": answer })], "stop", (100, 5));
            (200, "text/event-stream", stream)
        }
        _ => (404, "text/plain", b"not found".to_vec()),
    };
    let mut response = Response::builder()
        .status(status)
        .header("content-type", content_type);
    if kind == Server::LlamaCpp {
        response = response.header("server", "llama.cpp");
    }
    response.body(Body::from(body)).unwrap()
}

/// The `id_slot` of a request's raw body (None when it has none).
fn slot_of(body: &str) -> Option<u64> {
    serde_json::from_str::<Value>(body).unwrap()["id_slot"].as_u64()
}

#[tokio::test]
async fn each_session_keeps_its_own_slot_for_its_warm_up_turns_and_compaction() {
    let server = FakeServer::start(Server::LlamaCpp).await;
    let mut agent = Agent::spawn(&server.config("")).await;
    let first = agent.start_session().await;
    wait_until("the first session's warm-up", || {
        server.warm_ups().len() == 1
    })
    .await;
    for text in ["alpha one", "alpha two", "/compact"] {
        let (_, response) = agent.prompt(&first, text).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let ours = server.chat_bodies();
    assert!(
        ours.iter()
            .any(|body| body.contains("[Compaction request]")),
        "no compaction: {ours:?}"
    );
    let second = agent.new_session().await;
    wait_until("the second session's warm-up", || {
        server.warm_ups().len() == 2
    })
    .await;
    let (_, response) = agent.prompt(&second, "beta one").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let all = server.chat_bodies();
    // The first session's: warm-up, two turns, the compaction.
    let first_slots: Vec<Option<u64>> = all[..ours.len()].iter().map(|b| slot_of(b)).collect();
    // The second's: its warm-up and its turn.
    let second_slots: Vec<Option<u64>> = all[ours.len()..].iter().map(|b| slot_of(b)).collect();
    assert!(first_slots.len() >= 4, "{all:?}");
    assert!(second_slots.len() >= 2, "{all:?}");
    let slot = first_slots[0];
    assert!(matches!(slot, Some(0 | 1)), "{first_slots:?}");
    assert!(first_slots.iter().all(|s| *s == slot), "{first_slots:?}");
    let other = second_slots[0];
    assert!(matches!(other, Some(0 | 1)), "{second_slots:?}");
    assert!(second_slots.iter().all(|s| *s == other), "{second_slots:?}");
    assert_ne!(slot, other, "the two sessions share a slot");
    assert_eq!(server.asked("/props"), 1, "the slots are asked for once");
}

#[tokio::test]
async fn a_server_that_is_not_llama_cpp_or_pin_slots_false_gets_no_slot() {
    for (kind, extra) in [
        (Server::Other, ""),
        (Server::LlamaCpp, "pin_slots = false\n"),
    ] {
        let server = FakeServer::start(kind).await;
        let mut agent = Agent::spawn(&server.config(extra)).await;
        let session = agent.start_session().await;
        wait_until("the warm-up", || server.warm_ups().len() == 1).await;
        for text in ["one", "two"] {
            let (_, response) = agent.prompt(&session, text).await;
            assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        }
        let bodies = server.chat_bodies();
        assert!(bodies.len() >= 3, "{bodies:?}");
        for body in &bodies {
            assert!(!body.contains("id_slot"), "{extra}: {body}");
        }
        assert_eq!(
            server.asked("/props") + server.asked("/slots"),
            0,
            "{extra}"
        );
    }
}
