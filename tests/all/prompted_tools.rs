//! Models without native tool support still get tools: described in the
//! system prompt (`tool_calling = "prompted"`), or switched to that after
//! the server refuses tools (`auto`), and their calls read from their text.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, config_for, error_message, models_reply,
    openai_stream, text_stream, thought_text,
};

/// What a model that knows only the prompt's convention says: a call to
/// `write_file` in text, then, once the result is back, a closing line.
fn text_caller(request: &Recorded) -> Reply {
    let answered = request.body["messages"].as_array().is_some_and(|messages| {
        // The system prompt names the tag too: only the conversation counts.
        messages.iter().filter(|m| m["role"] != "system").any(|m| {
            m["content"]
                .as_str()
                .unwrap_or("")
                .contains("<tool_response>")
        })
    });
    if answered {
        return Reply::stream(text_stream(&["Written."]), Split::Every(13));
    }
    let call = "I will write it.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"out.txt\", \"content\": \"hello\"}}\n</tool_call>";
    Reply::stream(
        openai_stream(&[json!({ "content": call })], "stop", (40, 20)),
        Split::Every(9),
    )
}

/// `[agent] default_mode = "auto"`: the written file needs no question.
fn auto(config: String) -> String {
    format!("{config}\n[agent]\ndefault_mode = \"auto\"\n")
}

fn system_of(request: &Recorded) -> String {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    messages
        .iter()
        .find(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn without_system(request: &Recorded) -> Vec<Value> {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    messages
        .into_iter()
        .filter(|m| m["role"] != "system")
        .collect()
}

#[tokio::test]
async fn a_server_that_refuses_tools_gets_the_same_request_without_them_and_the_text_call_runs() {
    let server = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return models_reply(&["tiny"]);
        }
        if request.body.get("tools").is_some() {
            return Reply::json(
                400,
                json!({"error": {"message": "registry.ollama.ai/library/tiny:latest does not support tools", "type": "invalid_request_error"}}),
            );
        }
        text_caller(request)
    })
    .await;
    let mut agent = Agent::spawn(&auto(config_for(&server, "tiny"))).await;
    let session = agent.start_session().await;
    let (seen, response) = agent.prompt(&session, "write hello to out.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let told = thought_text(&seen, &session);
    assert!(told.contains("prompted"), "{told}");
    assert!(told.contains("does not support tools"), "{told}");
    assert_eq!(
        std::fs::read_to_string(agent.cwd().join("out.txt"))
            .ok()
            .as_deref(),
        Some("hello")
    );
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 3, "refused, retried, answered");
    // The retry is the same request, its tools moved into the system prompt.
    assert!(requests[1].body.get("tools").is_none());
    assert_eq!(without_system(&requests[0]), without_system(&requests[1]));
    let system = system_of(&requests[1]);
    assert!(system.starts_with(&system_of(&requests[0])), "{system}");
    assert!(
        system.contains("<tools>") && system.contains("\"write_file\""),
        "{system}"
    );
    // The call and its result go back as text, in the same convention.
    let last = without_system(&requests[2]);
    let said: Vec<&str> = last.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(said.iter().any(|t| t.contains("<tool_call>")), "{said:?}");
    assert!(
        said.iter().any(|t| t.contains("<tool_response>")),
        "{said:?}"
    );
    assert!(last.iter().all(|m| m["role"] != "tool"), "{last:?}");
    // A second turn is prompted from its first request: no second refusal.
    let (seen, _) = agent.prompt(&session, "again").await;
    assert!(!thought_text(&seen, &session).contains("does not support tools"));
    let requests = server.chat_requests();
    assert!(requests[3].body.get("tools").is_none());
}

#[tokio::test]
async fn prompted_in_the_config_sends_no_tools_and_the_same_system_prompt_every_time() {
    let server = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return models_reply(&["tiny"]);
        }
        text_caller(request)
    })
    .await;
    let config = format!(
        "{}tool_calling = \"prompted\"\n",
        config_for(&server, "tiny")
    );
    let mut agent = Agent::spawn(&auto(config)).await;
    let session = agent.start_session().await;
    // Before the prompt: a prompt that came first would make it unneeded.
    let warmed = server.wait_warmups(1).await;
    let (_, response) = agent.prompt(&session, "write hello to out.txt").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(agent.cwd().join("out.txt").exists());
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(request.body.get("tools").is_none(), "{}", request.body);
        assert!(
            request.body.get("tool_choice").is_none(),
            "{}",
            request.body
        );
    }
    // A stable prefix for the server's prompt cache, the warm-up's included.
    assert_eq!(system_of(&requests[0]), system_of(&requests[1]));
    assert!(warmed[0].body.get("tools").is_none(), "{}", warmed[0].body);
    assert_eq!(system_of(&warmed[0]), system_of(&requests[0]));
    assert!(system_of(&requests[0]).contains("<tool_call>"));
}

#[tokio::test]
async fn a_model_table_overrides_its_provider() {
    let seen: Arc<Mutex<Vec<bool>>> = Arc::default();
    let log = Arc::clone(&seen);
    let server = LlmServer::start(move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["big"]);
        }
        log.lock()
            .unwrap()
            .push(request.body.get("tools").is_some());
        Reply::stream(text_stream(&["hi"]), Split::Whole)
    })
    .await;
    let config = format!(
        "{}tool_calling = \"prompted\"\n[llm.providers.local.models.\"big\"]\ntool_calling = \"native\"\n",
        config_for(&server, "big")
    );
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    agent.prompt(&session, "hello").await;
    assert_eq!(*seen.lock().unwrap(), vec![true]);
}

#[tokio::test]
async fn a_native_model_that_is_refused_reports_the_refusal() {
    let server = LlmServer::chat(|_request| {
        Reply::json(
            400,
            json!({"error": "registry.ollama.ai/library/tiny:latest does not support tools"}),
        )
    })
    .await;
    let config = format!("{}tool_calling = \"native\"\n", config_for(&server, "tiny"));
    let mut agent = Agent::spawn(&config).await;
    let session = agent.start_session().await;
    let (_, response) = agent.prompt(&session, "hello").await;
    let message = error_message(&response);
    assert!(message.contains("does not support tools"), "{message}");
    assert_eq!(server.chat_requests().len(), 1);
}
