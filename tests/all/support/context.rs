//! Helpers for the context, command and prompt tests: a scripted model
//! that reports believable prompt-token counts and answers compaction
//! requests with a recognizable summary.

use serde_json::{Value, json};

use super::harness::{Agent, Recorded, Reply, Split, models_reply, openai_stream};

pub const SUMMARY: &str = "SUMMARY-OF-EARLIER-TURNS";

/// The system prompt of a chat request (OpenAI wire).
pub fn system_text(request: &Recorded) -> String {
    request.body["messages"][0]
        .as_object()
        .filter(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The names of the tools a chat request offers.
pub fn tool_names(request: &Recorded) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// How the agent's compaction instruction begins.
pub const COMPACTION_MARK: &str = "[Compaction request]";

/// Whether a request is the agent asking for a compaction summary: its
/// last message is the instruction (a user message).
pub fn is_compaction(request: &Recorded) -> bool {
    let last = request.body["messages"].as_array().and_then(|m| m.last());
    last.is_some_and(|m| {
        m["role"] == "user"
            && (m["content"].as_str()).is_some_and(|text| text.starts_with(COMPACTION_MARK))
    })
}

/// Tokens the fake server reports for a request: its body, chars/4.
pub fn reported_tokens(request: &Recorded) -> u64 {
    (request.body.to_string().len() / 4) as u64
}

/// All message texts of a request, joined.
pub fn all_text(request: &Recorded) -> String {
    request.body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .map(|m| match &m["content"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// A model that answers with `answer_chars` characters of text (the
/// summary for compaction requests) and reports the body size as prompt tokens.
pub fn talkative_model(answer_chars: usize) -> impl Fn(&Recorded) -> Reply {
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model", "other-model"]);
        }
        let text = if is_compaction(request) {
            format!("{SUMMARY}: the user asked questions and got long answers.")
        } else {
            let mut text = String::from("Answer: ");
            while text.len() < answer_chars {
                text.push_str("lorem ipsum ");
            }
            text
        };
        Reply::stream(
            openai_stream(
                &[json!({ "content": text })],
                "stop",
                (reported_tokens(request), 10),
            ),
            Split::Whole,
        )
    }
}

/// Config for a server with a given window and extra TOML.
pub fn config_with(base_url: &str, window: u64, extra: &str) -> String {
    format!(
        "[chat]\ndefault_provider = \"local\"\n\n[llm.providers.local]\ntype = \"openai\"\nendpoint = \"{base_url}\"\ndefault_model = \"test-model\"\ncontext_window = {window}\nretry_base_delay_ms = 20\n\n{extra}\n"
    )
}

/// The compactions saved in `session`'s history.
pub fn saved_compactions(agent: &Agent, session: &str) -> usize {
    agent
        .saved_events(session)
        .iter()
        .filter(|e| e["event"] == "context" && e["op"]["op"] == "compact")
        .count()
}
