//! The context through the binary: auto-compaction at the threshold keeps
//! every request inside the window, and the `/context` stack commands show
//! and change what the model receives.

mod between_turns;

use crate::support::context::{
    SUMMARY, all_text, config_with, is_compaction, reported_tokens, talkative_model,
};
use crate::support::harness::{self, Agent, LlmServer, agent_text, thought_text, updates};

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
    // Never over the window; the answer's reserve (capped at a quarter of the window) kept free.
    for request in &chat {
        assert!(
            reported_tokens(request) <= window - 2048 + 100,
            "a request of ~{} tokens was sent to a {window}-token window",
            reported_tokens(request)
        );
    }
    // The request after the first compaction carries the summary and the latest question.
    let first = chat.iter().position(is_compaction).unwrap();
    let next = &chat[first + 1];
    assert!(all_text(next).contains(SUMMARY), "{}", all_text(next));
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
