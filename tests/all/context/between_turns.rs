//! Compaction between turns: a turn that leaves the context past
//! `compact_between_turns` (70 % of the window by default) is followed by
//! the compaction and a warm-up of the compacted prefix before the next
//! prompt. A prompt sent meanwhile that still fits the context goes at
//! once (the compaction's request is dropped, and it runs again after the
//! turn); one that does not fit waits, is told so once, and is never lost;
//! a prompt during the warm-up goes at once; a compaction that fails or is
//! cancelled changes nothing.

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
const PUT_OFF: &str = "Compaction put off until after this turn";

/// A model that answers briefly, except the prompts starting with "fill":
/// its answer takes the context to about 76 % of the window (past the 70 %
/// of a compaction between turns, short of what would not fit), "grow":
/// to about 55 %, and "reach N": to about N %. Summaries come from
/// `summary`.
fn model(summary: impl Fn() -> Reply + Send + Sync + 'static) -> impl Fn(&Recorded) -> Reply {
    move |request| {
        if request.path.ends_with("/models") {
            return models_reply(&["test-model"]);
        }
        if is_compaction(request) {
            return summary();
        }
        let text = request.last_user_text();
        let reach = (text.strip_prefix("reach "))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|share| share.parse().ok());
        let share = match text {
            text if text.starts_with("fill") => Some(76),
            text if text.starts_with("grow") => Some(55),
            _ => reach,
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

/// A short turn, then two that take the context to about 40 % and 76 % of
/// the window: past the threshold, and a compaction (which keeps only the
/// latest turn, a third of the window) leaves room for a big prompt.
async fn fill_in_two(agent: &mut Agent, session: &str) {
    for text in ["question 0", "reach 40 percent", "reach 76 percent"] {
        let (_, response) = agent.prompt(session, text).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
}

/// A prompt of about a fifth of the window: after [`fill_in_two`] it does
/// not fit the context (the limit is the window less the 4,096-token
/// answer reserve, 87.5 %) until the context is compacted.
fn big_prompt(first: &str) -> String {
    format!("{first} {}", "word ".repeat((WINDOW / 5 * 4 / 5) as usize))
}

fn compactions(server: &LlmServer) -> Vec<Recorded> {
    (server.chat_requests().into_iter())
        .filter(is_compaction)
        .collect()
}

fn notice_of(text: &'static str) -> impl Fn(&Value) -> bool {
    move |message| {
        message["params"]["update"]["content"]["text"]
            .as_str()
            .is_some_and(|said| said.contains(text))
    }
}

fn messages(request: &Recorded) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_prompt_with_room_left_goes_at_once_and_the_compaction_runs_after_its_turn() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let server = LlmServer::start(model(move || {
        // The first summary is held open for as long as the agent keeps
        // asking; the later ones come at once.
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::stream(Vec::new(), Split::Whole).hanging()
        } else {
            summary_reply()
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
    // The context (76 %) still has room for a short prompt and its answer:
    // it is answered although the compaction never would be.
    let (seen, response) = agent.prompt(&session, "while it compacts").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let thoughts = thought_text(&seen, &session);
    assert!(!thoughts.contains(WAIT_NOTICE), "{thoughts}");
    assert!(thoughts.contains(PUT_OFF), "{thoughts}");
    // The compaction's request was dropped (a local server frees the slot).
    server.wait_disconnect().await;
    // The prompt went out on the context as it was, whole.
    let chat = server.chat_requests();
    let first = chat.iter().find(|r| is_compaction(r)).unwrap();
    let prompt = (chat.iter())
        .find(|r| r.last_user_text() == "while it compacts")
        .expect("the prompt went out");
    assert!(first.arrived <= prompt.arrived);
    let text = all_text(prompt);
    assert!(text.contains("question 0"), "{text}");
    assert!(!text.contains(SUMMARY), "{text}");
    // The compaction runs again after the turn, with the turn in it.
    wait_until("a second compaction request", || {
        compactions(&server).len() >= 2
    })
    .await;
    let again = &compactions(&server)[1];
    assert!(prompt.arrived <= again.arrived);
    assert!(all_text(again).contains("while it compacts"));
    agent
        .wait_saved(&session, "the compaction saved", |events| {
            events
                .iter()
                .any(|e| e["event"] == "context" && e["op"]["op"] == "compact")
        })
        .await;
    let (_, response) = agent.prompt(&session, "after it").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let last = (server.chat_requests().into_iter())
        .find(|r| r.last_user_text() == "after it")
        .expect("the prompt went out");
    assert!(all_text(&last).contains(SUMMARY), "{}", all_text(&last));
    assert_eq!(saved_compactions(&agent, &session), 1);
}

#[tokio::test]
async fn a_prompt_that_does_not_fit_waits_for_the_compaction_is_told_and_starts_on_the_summary() {
    let gate = Arc::new(Notify::new());
    let held = Arc::clone(&gate);
    let server = LlmServer::start(model(move || summary_reply().gated(Arc::clone(&held)))).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), WINDOW, "")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    fill_in_two(&mut agent, &session).await;
    // The compaction starts after the turn, with no prompt asking for it.
    wait_until("the compaction request", || {
        server.chat_requests().iter().any(is_compaction)
    })
    .await;
    let prompt = big_prompt("too big to fit");
    let id = agent.start_prompt(&session, &prompt).await;
    // It waits, and is told why, before the summary comes.
    agent.wait_for(notice_of(WAIT_NOTICE)).await;
    assert!(
        !(server.chat_requests().iter()).any(|r| r.last_user_text() == prompt),
        "the prompt went out before the compaction"
    );
    gate.notify_one();
    let (seen, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let thoughts = thought_text(&seen, &session);
    assert!(!thoughts.contains(WAIT_NOTICE), "told twice: {thoughts}");

    let chat = server.chat_requests();
    let compaction = chat.iter().find(|r| is_compaction(r)).unwrap();
    assert!(all_text(compaction).contains("question 0"));
    let next = (chat.iter())
        .find(|r| r.last_user_text() == prompt)
        .expect("the prompt went out");
    assert!(compaction.arrived <= next.arrived);
    // No warm-up for the compacted prefix: the prompt read it itself.
    assert_eq!(server.warmups().len(), 1, "only the start's warm-up");
    let text = all_text(next);
    assert!(text.contains(SUMMARY), "{text}");
    assert!(!text.contains("question 0"), "{text}");
    // The latest turn is over an eighth of the window: it is the one turn
    // kept verbatim, and the turn before it is summarized too.
    assert!(text.contains("reach 76"), "{text}");
    assert!(!text.contains("reach 40"), "{text}");
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
async fn a_prompt_during_the_warm_up_of_the_compacted_prefix_goes_at_once() {
    let server = LlmServer::start(model(summary_reply)).await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), WINDOW, "")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    // Later warm-ups are never answered.
    let _held = server.hold_warmups();
    fill(&mut agent, &session).await;
    let warmups = server.wait_warmups(2).await;
    let (seen, response) = agent.prompt(&session, "during the warm-up").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let thoughts = thought_text(&seen, &session);
    assert!(!thoughts.contains(WAIT_NOTICE), "{thoughts}");
    // (The turn kept verbatim is most of the window: another compaction
    // may follow this turn.)
    let next = (server.chat_requests().into_iter())
        .find(|r| r.last_user_text() == "during the warm-up")
        .expect("the prompt went out");
    assert!(warmups[1].arrived <= next.arrived);
    // On the compacted context, which the warm-up was for.
    let (warmed, sent) = (messages(&warmups[1]), messages(&next));
    assert_eq!(sent[..warmed.len()], warmed[..]);
    let text = all_text(&next);
    assert!(text.contains(SUMMARY), "{text}");
    assert!(!text.contains("question 0"), "{text}");
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
    // (A prompt sent sooner would fit without it and put it off.)
    agent
        .wait_saved(&session, "the compaction saved", |events| {
            events
                .iter()
                .any(|e| e["event"] == "context" && e["op"]["op"] == "compact")
        })
        .await;
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
    // Told as it fails, between turns (a prompt sent sooner would fit
    // without it and put it off).
    agent.wait_for(notice_of("the context is unchanged")).await;
    let (_, response) = agent.prompt(&session, "after the failure").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
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
        // The first summary never comes; later ones do.
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::stream(Vec::new(), Split::Whole).hanging()
        } else {
            summary_reply()
        }
    }))
    .await;
    let mut agent = Agent::spawn(&config_with(&server.base_url(), WINDOW, "")).await;
    let session = agent.start_session().await;
    server.wait_warmups(1).await;
    fill_in_two(&mut agent, &session).await;
    wait_until("the compaction request", || {
        server.chat_requests().iter().any(is_compaction)
    })
    .await;
    let prompt = big_prompt("never mind");
    let id = agent.start_prompt(&session, &prompt).await;
    agent.wait_for(notice_of(WAIT_NOTICE)).await;
    agent
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (_, response) = agent.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    server.wait_disconnect().await;
    // No model call for the cancelled prompt.
    assert!(
        !(server.chat_requests().iter()).any(|r| r.last_user_text() == prompt),
        "the cancelled prompt went to the model"
    );
    // The context is as it was: the compaction that follows the cancelled
    // turn summarizes the whole history, no summary in it.
    wait_until("a second compaction request", || {
        compactions(&server).len() >= 2
    })
    .await;
    let again = &compactions(&server)[1];
    let text = all_text(again);
    assert!(text.contains("question 0"), "{text}");
    assert!(!text.contains(SUMMARY), "{text}");
    let (_, response) = agent.prompt(&session, "and now").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
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
