//! Compaction between turns: a turn that leaves the context past
//! `compact_between_turns` (70 % of the window by default) is followed by
//! the compaction and a warm-up of the compacted prefix before the next
//! prompt goes out; a prompt sent meanwhile waits, is told so once, and is
//! never lost; a compaction that fails or is cancelled changes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::context::{
    SUMMARY, all_text, config_with, is_compaction, reported_tokens, saved_compactions,
};
use crate::support::harness::{
    Agent, LlmServer, Recorded, Reply, Split, models_reply, openai_stream, thought_text,
};
use crate::support::wait::wait_until;

const WINDOW: u64 = 32_768;
const WAIT_NOTICE: &str = "Finishing the context compaction before your prompt";

/// A model that answers briefly, except the prompts starting with "fill":
/// its answer takes the context to about 76 % of the window (past the 70 %
/// of a compaction between turns, short of what would not fit), and
/// "grow": to about 55 %. Summaries come from `summary`.
fn model(summary: impl Fn() -> Reply + Send + Sync + 'static) -> impl Fn(&Recorded) -> Reply {
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        if is_compaction(request) {
            return summary();
        }
        let share = match request.last_user_text() {
            text if text.starts_with("fill") => Some(76),
            text if text.starts_with("grow") => Some(55),
            _ => None,
        };
        let text = if let Some(share) = share {
            let target = WINDOW * share / 100;
            let room = target.saturating_sub(reported_tokens(request));
            "lorem ipsum ".repeat((room * 4 / 12) as usize)
        } else {
            "A short answer.".to_string()
        };
        text_reply(&text, request)
    }
}

fn text_reply(text: &str, request: &Recorded) -> Reply {
    Reply::stream(
        openai_stream(
            &[json!({ "content": text })],
            "stop",
            (reported_tokens(request), 10),
        ),
        Split::Whole,
    )
}

fn summary_reply() -> Reply {
    Reply::stream(
        openai_stream(
            &[json!({ "content": format!("{SUMMARY}: questions were asked.") })],
            "stop",
            (100, 10),
        ),
        Split::Whole,
    )
}

/// Two short turns, then one that fills the context past the threshold.
async fn fill(agent: &mut Agent, session: &str) {
    for text in ["question 0", "question 1", "fill the context"] {
        let (_, response) = agent.prompt(session, text).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
}

fn messages(request: &Recorded) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_prompt_during_the_compaction_waits_for_it_and_its_warm_up_and_starts_with_that_prefix() {
    let gate = Arc::new(Notify::new());
    let held = Arc::clone(&gate);
    let server = LlmServer::start(model(move || summary_reply().gated(Arc::clone(&held)))).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), WINDOW, "")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    fill(&mut agent, &session).await;
    // The compaction starts after the turn, with no prompt asking for it.
    wait_until("the compaction request", || {
        server.chat_requests().iter().any(is_compaction)
    })
    .await;
    let id = agent.start_prompt(&session, "after the compaction").await;
    gate.notify_one();
    let (seen, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let thoughts = thought_text(&seen, &session);
    assert_eq!(thoughts.matches(WAIT_NOTICE).count(), 1, "{thoughts}");

    let chat = server.chat_requests();
    let compaction = chat.iter().find(|r| is_compaction(r)).unwrap();
    assert!(all_text(compaction).contains("question 0"));
    let next = chat.last().unwrap();
    assert_eq!(next.last_user_text(), "after the compaction");
    let warmups = server.warmups();
    assert_eq!(
        warmups.len(),
        2,
        "the start's warm-up and the compacted prefix's"
    );
    let warm = &warmups[1];
    // Compaction, then warm-up, then the prompt.
    assert!(compaction.arrived <= warm.arrived);
    assert!(warm.arrived <= next.arrived);
    // The prompt's request begins with exactly what was warmed.
    let (warmed, sent) = (messages(warm), messages(next));
    assert!(
        warmed.len() > 1 && sent.len() == warmed.len() + 1,
        "{sent:?}"
    );
    assert_eq!(sent[..warmed.len()], warmed[..]);
    assert_eq!(next.body["tools"], warm.body["tools"]);
    let text = all_text(next);
    assert!(text.contains(SUMMARY), "{text}");
    assert!(!text.contains("question 0"), "{text}");
    // The filling turn is far over an eighth of the window: it is the one
    // turn kept verbatim, and the turn before it is summarized too.
    assert!(text.contains("fill the context"), "{text}");
    assert!(!text.contains("question 1"), "{text}");
    // Saved: a load rebuilds the compacted context.
    agent
        .wait_saved(&session, "the compaction saved", |events| {
            events
                .iter()
                .any(|e| e["event"] == "context" && e["op"]["op"] == "compact")
        })
        .await;
}

#[tokio::test]
async fn a_turn_below_the_threshold_compacts_when_another_like_it_would_not_fit() {
    let server = LlmServer::start(model(summary_reply)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), WINDOW, "")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    // A short turn leaves the context far below 70 %: nothing to do.
    let (_, response) = agent.prompt(&session, "question 0").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // Then a turn that adds half the window: the context ends at about
    // 55 %, below 70 %, but the next turn of that size would not fit
    // (the limit is the window less the 4,096-token reserve, 87.5 %).
    let (_, response) = agent.prompt(&session, "grow the context").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let (_, response) = agent.prompt(&session, "after the big turn").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let chat = server.chat_requests();
    let compactions: Vec<_> = chat.iter().filter(|r| is_compaction(r)).collect();
    assert_eq!(compactions.len(), 1, "one compaction, after the big turn");
    let after = chat.last().unwrap();
    assert_eq!(after.last_user_text(), "after the big turn");
    assert!(compactions[0].arrived <= after.arrived);
    let text = all_text(after);
    assert!(text.contains(SUMMARY), "{text}");
    assert!(!text.contains("question 0"), "{text}");
}

#[tokio::test]
async fn a_failed_compaction_between_turns_leaves_the_context_and_the_store_as_they_were() {
    let server = LlmServer::start(model(|| {
        Reply::json(400, json!({"error": {"message": "no summaries today"}}))
    }))
    .await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), WINDOW, "")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    fill(&mut agent, &session).await;
    let (seen, response) = agent.prompt(&session, "after the failure").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        thought_text(&seen, &session).contains("the context is unchanged"),
        "{}",
        thought_text(&seen, &session)
    );
    let chat = server.chat_requests();
    let failed = chat
        .iter()
        .position(is_compaction)
        .expect("a compaction was tried");
    let next = chat[failed..]
        .iter()
        .find(|r| !is_compaction(r))
        .expect("the prompt went out");
    assert_eq!(next.last_user_text(), "after the failure");
    // The whole history, no summary.
    let text = all_text(next);
    assert!(
        text.contains("question 0") && text.contains("question 1"),
        "{text}"
    );
    assert!(!text.contains(SUMMARY), "{text}");
    assert_eq!(
        server.warmups().len(),
        1,
        "nothing compacted, nothing to warm"
    );
    agent.wait_saved_turns(&session, 4).await;
    assert_eq!(saved_compactions(&agent, &session), 0);
}

#[tokio::test]
async fn cancel_while_a_prompt_waits_stops_the_compaction_and_the_prompt_ends_cancelled() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let server = LlmServer::start(model(move || {
        // The first summary never comes; later ones fail.
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::stream(Vec::new(), Split::Whole).hanging()
        } else {
            Reply::json(400, json!({"error": {"message": "no"}}))
        }
    }))
    .await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), WINDOW, "")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    fill(&mut agent, &session).await;
    wait_until("the compaction request", || {
        server.chat_requests().iter().any(is_compaction)
    })
    .await;
    let id = agent.start_prompt(&session, "never mind").await;
    agent
        .wait_for(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .is_some_and(|text| text.contains(WAIT_NOTICE))
        })
        .await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    // No model call for the cancelled prompt.
    assert!(
        !(server.chat_requests().iter()).any(|r| r.last_user_text() == "never mind"),
        "the cancelled prompt went to the model"
    );
    // The context is as it was: the next prompt sends the whole history.
    let (_, response) = agent.prompt(&session, "and now").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let last = server
        .chat_requests()
        .into_iter()
        .rfind(|r| !is_compaction(r))
        .unwrap();
    assert_eq!(last.last_user_text(), "and now");
    let text = all_text(&last);
    assert!(text.contains("question 0"), "{text}");
    assert!(!text.contains(SUMMARY), "{text}");
    assert_eq!(saved_compactions(&agent, &session), 0);
}

#[tokio::test]
async fn closing_the_session_during_a_compaction_between_turns_ends_it_cleanly() {
    let server =
        LlmServer::start(model(|| Reply::stream(Vec::new(), Split::Whole).hanging())).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), WINDOW, "")).await;
    let session = agent.start_session().await;
    fill(&mut agent, &session).await;
    wait_until("the compaction request", || {
        server.chat_requests().iter().any(is_compaction)
    })
    .await;
    agent.close_stdin();
    assert!(agent.wait_exit().await.success());
    server.wait_disconnect().await;
    assert_eq!(saved_compactions(&agent, &session), 0);
}
