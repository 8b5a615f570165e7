//! The context through the binary: auto-compaction at the threshold keeps
//! every request inside the window, and the `/context` stack commands show
//! and change what the model receives.

mod between_turns;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::support::context::{
    SUMMARY, all_text, config_with, is_compaction, reported_tokens, talkative_model,
};
use crate::support::harness::{
    self, Agent, LlmServer, Recorded, Reply, Split, agent_text, openai_stream, thought_text,
    updates,
};
use crate::support::wait::wait_until;

#[tokio::test]
async fn a_long_conversation_is_compacted_at_the_threshold_and_every_request_fits() {
    let window = 8192;
    let server = LlmServer::start(talkative_model(1600)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), window, "")).await;
    let session = agent.start_session().await;
    let mut thoughts = String::new();
    for n in 0..10 {
        let question = format!("Question {n}: {}", "why ".repeat(300));
        let (seen, response) = agent.prompt(&session, &question).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        thoughts.push_str(&thought_text(&seen, &session));
        // usage_update reports the window as its size.
        let usage = updates(&seen, &session, "usage_update");
        assert_eq!(usage.last().unwrap()["size"], window);
    }
    let chat: Vec<_> = server
        .chat_requests()
        .into_iter()
        .filter(|r| !r.path.ends_with("/models"))
        .collect();
    let compactions = chat.iter().filter(|r| is_compaction(r)).count();
    assert!(compactions >= 1, "no compaction in {} requests", chat.len());
    assert!(thoughts.contains("summarizing"), "{thoughts}");
    // Never over the window: a turn's request keeps the answer's reserve
    // (capped at a quarter of the window) free, a summary request room for
    // the summary it asks for.
    for request in &chat {
        let answer = match request.body["max_tokens"].as_u64() {
            Some(summary) if is_compaction(request) => summary,
            _ => 2048,
        };
        assert!(
            reported_tokens(request) + answer <= window + 100,
            "a request of ~{} tokens, asking for {answer}, was sent to a {window}-token window",
            reported_tokens(request)
        );
    }
    // The first request with the summary carries the latest question too.
    // (Prompts sent back to back can put a compaction off while they fit.)
    let first = chat.iter().position(is_compaction).unwrap();
    let next = (chat.iter())
        .find(|r| !is_compaction(r) && all_text(r).contains(SUMMARY))
        .expect("a request with the summary");
    assert!(next.last_user_text().starts_with("Question"));
    let sizes: Vec<(bool, u64)> = chat
        .iter()
        .map(|r| (is_compaction(r), reported_tokens(r)))
        .collect();
    // Compacted below the threshold (80 % of the window), with the tools' JSON as slack.
    assert!(reported_tokens(next) <= 6554 + 150, "{sizes:?}");
    // Not every turn: only once the threshold is reached.
    assert!(first >= 3, "{sizes:?}");
}

#[tokio::test]
async fn context_commands_show_checkpoint_roll_back_pop_and_reset() {
    let server = LlmServer::start(talkative_model(40)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    let session = agent.start_session().await;
    agent.prompt(&session, "first question").await;
    agent.prompt(&session, "second question").await;
    let before = server.chat_requests().len();

    let (seen, response) = agent.prompt(&session, "/context").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let report = agent_text(&seen, &session);
    assert!(report.contains("in 4 entries"), "{report}");
    assert!(report.contains("1. user"), "{report}");
    assert!(report.contains("first question"), "{report}");
    assert!(report.contains("4. assistant"), "{report}");
    assert!(report.contains("window 32768"), "{report}");
    assert!(report.contains("Checkpoints: none."), "{report}");
    let usage = updates(&seen, &session, "usage_update");
    assert_eq!(usage.last().unwrap()["size"], 32_768);
    assert!(usage.last().unwrap()["used"].as_u64().unwrap() > 0);

    let (seen, _) = agent
        .prompt(&session, "/context checkpoint two-turns")
        .await;
    assert!(agent_text(&seen, &session).contains("Checkpoint `two-turns` saved at 4 entries"));
    agent.prompt(&session, "third question").await;
    let (seen, _) = agent.prompt(&session, "/context rollback two-turns").await;
    assert!(
        agent_text(&seen, &session).contains("Rolled back to checkpoint `two-turns`: 4 entries"),
        "{}",
        agent_text(&seen, &session)
    );
    let (seen, _) = agent.prompt(&session, "/context").await;
    let report = agent_text(&seen, &session);
    assert!(report.contains("in 4 entries"), "{report}");
    assert!(!report.contains("third question"), "{report}");
    assert!(report.contains("- two-turns (4 entries)"), "{report}");

    let (seen, _) = agent.prompt(&session, "/context pop 2").await;
    assert!(agent_text(&seen, &session).contains("Removed the last 2 entries"));
    agent.prompt(&session, "after pop").await;
    let last = server.chat_requests().last().cloned().unwrap();
    let messages = last.body["messages"].as_array().unwrap();
    // system, first question, its answer, the new question
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(!all_text(&last).contains("second question"));

    let (seen, _) = agent.prompt(&session, "/context reset").await;
    assert!(agent_text(&seen, &session).contains("Context reset"));
    agent.prompt(&session, "fresh start").await;
    let last = server.chat_requests().last().cloned().unwrap();
    assert_eq!(last.body["messages"].as_array().unwrap().len(), 2);

    let (seen, _) = agent.prompt(&session, "/context rollback nowhere").await;
    assert!(agent_text(&seen, &session).contains("no checkpoint named `nowhere`"));
    let (seen, _) = agent.prompt(&session, "/context pop lots").await;
    assert!(agent_text(&seen, &session).contains("positive number"));

    // Six commands above called no model; only the five questions did.
    let chat_calls = server.chat_requests().len() - before;
    assert_eq!(chat_calls, 3, "commands must not call the model");
}

#[tokio::test]
async fn compact_summarizes_with_the_focus_and_the_summary_is_sent_next() {
    let server = LlmServer::start(talkative_model(40)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    let session = agent.start_session().await;
    for n in 0..3 {
        agent.prompt(&session, &format!("question {n}")).await;
    }
    let (seen, response) = agent.prompt(&session, "/compact keep the API names").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let report = agent_text(&seen, &session);
    assert!(report.contains("Summarized 2 entries"), "{report}");
    let compaction = server.chat_requests().last().cloned().unwrap();
    assert!(is_compaction(&compaction));
    assert!(all_text(&compaction).contains("keep the API names"));
    assert!(all_text(&compaction).contains("question 0"));

    let (seen, _) = agent.prompt(&session, "/context").await;
    let report = agent_text(&seen, &session);
    assert!(report.contains("1. summary"), "{report}");
    assert!(report.contains(SUMMARY), "{report}");

    agent.prompt(&session, "next").await;
    let last = server.chat_requests().last().cloned().unwrap();
    let text = all_text(&last);
    assert!(text.contains(SUMMARY), "{text}");
    assert!(!text.contains("question 0"), "{text}");
    assert!(
        text.contains("question 1") && text.contains("question 2"),
        "{text}"
    );

    // Too little left to compact: said so, nothing sent.
    let fresh = agent.new_session().await;
    let before = server.chat_requests().len();
    let (seen, _) = agent.prompt(&fresh, "/context summarize").await;
    assert!(agent_text(&seen, &fresh).contains("Nothing to compact"));
    assert_eq!(server.chat_requests().len(), before);
}

#[tokio::test]
async fn a_failed_compaction_leaves_the_context_as_it_was() {
    let server = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return harness::models_reply(&["test-model"]);
        }
        if is_compaction(request) {
            return harness::Reply::json(
                400,
                serde_json::json!({"error": {"message": "no summaries today"}}),
            );
        }
        talkative_model(20)(request)
    })
    .await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    let session = agent.start_session().await;
    for n in 0..3 {
        agent.prompt(&session, &format!("question {n}")).await;
    }
    let (seen, response) = agent.prompt(&session, "/compact").await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(agent_text(&seen, &session).contains("the context is unchanged"));
    let (seen, _) = agent.prompt(&session, "/context").await;
    let report = agent_text(&seen, &session);
    assert!(report.contains("in 6 entries"), "{report}");
    assert!(!report.contains("summary"), "{report}");
}

/// A model that reads `notesN.txt` before answering "question N", and
/// answers the n-th compaction request with "SUMMARY… number n".
fn reading_model() -> impl Fn(&Recorded) -> Reply {
    let summaries = Arc::new(AtomicUsize::new(0));
    move |request| {
        if request.path.ends_with("/models") {
            return harness::models_reply(&["test-model"]);
        }
        let messages = request.body["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        let (delta, finish) = if is_compaction(request) {
            let n = summaries.fetch_add(1, Ordering::SeqCst) + 1;
            (json!({"content": format!("{SUMMARY} number {n}")}), "stop")
        } else if last["role"] == "user" {
            let question = last["content"].as_str().unwrap_or_default();
            let n = question.trim_start_matches("question ");
            let arguments = json!({"path": format!("notes{n}.txt")}).to_string();
            let call = json!({"index": 0, "id": format!("call_{}", messages.len()), "type": "function",
                "function": {"name": "read_file", "arguments": arguments}});
            (json!({"tool_calls": [call]}), "tool_calls")
        } else {
            (json!({"content": "Read it."}), "stop")
        };
        Reply::stream(openai_stream(&[delta], finish, (100, 10)), Split::Whole)
    }
}

/// The messages of a request as JSON text, one string each.
fn message_texts(request: &Recorded) -> Vec<String> {
    (request.body["messages"].as_array().unwrap().iter())
        .map(Value::to_string)
        .collect()
}

#[tokio::test]
async fn compaction_continues_the_cached_conversation_and_folds_into_one_summary() {
    let server = LlmServer::start(reading_model()).await;
    let config = config_with(&server.base_url(), 32_768, "");
    let mut agent = Agent::spawn(&config).await;
    for n in 0..5 {
        let text = format!("content-{n} ").repeat(100);
        std::fs::write(agent.cwd().join(format!("notes{n}.txt")), text).unwrap();
    }
    let session = agent.start_session().await;
    for n in 0..3 {
        let (_, response) = agent.prompt(&session, &format!("question {n}")).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let (seen, _) = agent.prompt(&session, "/compact").await;
    assert!(agent_text(&seen, &session).contains("Summarized"));
    let chat = server.chat_requests();
    let (first, before) = (&chat[chat.len() - 1], &chat[chat.len() - 2]);
    assert!(is_compaction(first) && !is_compaction(before));
    // The last request, unchanged, then its answer and the instruction.
    for key in ["tools", "model"] {
        assert_eq!(first.body[key], before.body[key], "`{key}` changed");
    }
    let (asked, summarizing) = (message_texts(before), message_texts(first));
    assert_eq!(summarizing[..asked.len()], asked[..]);
    assert_eq!(summarizing.len(), asked.len() + 2);
    assert!(all_text(first).contains("content-0"));

    for n in 3..5 {
        agent.prompt(&session, &format!("question {n}")).await;
    }
    let (seen, _) = agent.prompt(&session, "/compact").await;
    assert!(agent_text(&seen, &session).contains("Summarized"));
    let second = server.chat_requests().last().cloned().unwrap();
    assert!(is_compaction(&second));
    let text = all_text(&second);
    // The earlier summary, not the turns it replaced; the output of a
    // turn kept then (but not the latest) as its stub.
    assert!(text.contains(&format!("{SUMMARY} number 1")), "{text}");
    assert!(
        !text.contains("question 0") && !text.contains("content-0"),
        "{text}"
    );
    assert!(!text.contains("content-1"), "{text}");
    assert!(
        text.contains(r#"[read_file {\"path\":\"notes1.txt\"} → 1,000 bytes, elided]"#)
            || text.contains(r#"[read_file {"path":"notes1.txt"} → "#),
        "{text}"
    );
    assert!(text.contains("Your previous summary"), "{text}");

    // One summary, the new one; a restart rebuilds the same context.
    let (seen, _) = agent.prompt(&session, "/context").await;
    let report = agent_text(&seen, &session);
    assert_eq!(report.matches(" summary ").count(), 1, "{report}");
    assert!(
        report.contains("number 2") && !report.contains("number 1"),
        "{report}"
    );
    agent
        .wait_saved(&session, "two compactions", |events| {
            (events.iter())
                .filter(|e| e["event"] == "context" && e["op"]["op"] == "compact")
                .count()
                >= 2
        })
        .await;
    agent.kill().await;
    let mut again = Agent::spawn_sharing(&config, &agent).await;
    again.initialize().await;
    let (_, response) = again.load(&session, agent.cwd()).await;
    assert!(response.get("result").is_some(), "{response}");
    let (seen, _) = again.prompt(&session, "/context").await;
    assert_eq!(agent_text(&seen, &session), report);
}

#[tokio::test]
async fn a_cancelled_compaction_leaves_the_context_and_the_store_unchanged() {
    let server = LlmServer::start(|request| {
        if request.path.ends_with("/models") {
            return harness::models_reply(&["test-model"]);
        }
        if is_compaction(request) {
            return Reply::stream(harness::stream_head(&["SUMM"]), Split::Whole).hanging();
        }
        talkative_model(20)(request)
    })
    .await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), 32_768, "")).await;
    let session = agent.start_session().await;
    for n in 0..3 {
        agent.prompt(&session, &format!("question {n}")).await;
    }
    let (seen, _) = agent.prompt(&session, "/context").await;
    let before = agent_text(&seen, &session);
    let history = agent.saved_events(&session).len();
    let id = agent.start_prompt(&session, "/compact").await;
    wait_until("the summary request", || {
        server.chat_requests().iter().any(is_compaction)
    })
    .await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let (seen, _) = agent.prompt(&session, "/context").await;
    assert_eq!(agent_text(&seen, &session), before);
    let stored = agent.saved_events(&session);
    assert!(
        !stored[history..].iter().any(|e| e["event"] == "context"),
        "{stored:?}"
    );
}
