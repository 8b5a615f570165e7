//! Streamable HTTP: `initialize` answered in its POST with the connection
//! id, everything else 202 with its answer on a stream, as the RFD routes it.

use serde_json::json;

use crate::support::harness::{LlmServer, Reply, Split, config_for, text_stream};
use crate::support::remote::{HttpClient, Server};

#[tokio::test]
async fn a_prompt_over_http_streams_its_updates_and_answer_on_the_session_stream() {
    let model =
        LlmServer::chat(|_| Reply::stream(text_stream(&["Hello ", "remote"]), Split::Whole)).await;
    let server = Server::start(&config_for(&model, "test-model")).await;
    let (mut client, init) = HttpClient::connect(&server.url, 1).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(client.connection.len(), 32, "128 random bits as hex");
    let session = client.new_session(&server.work()).await;
    let mut stream = client.session_stream(&session).await;
    let id = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    let (updates, answer) = stream.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let text: String = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Hello remote");
    assert!(
        updates
            .iter()
            .all(|u| u["params"]["sessionId"] == session.as_str()),
        "only this session's messages on its stream"
    );
}
