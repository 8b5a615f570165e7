//! How well the context's token estimate tracks what a real server counts:
//! five turns of a realistic session (the agent's real system prompt and
//! tool definitions) against llama-server (SmolLM2-135M). Before each call
//! the estimate of the request is compared with the prompt tokens the
//! server then reports; the estimator learns from each report exactly as
//! the agent loop does. Needs the server, so ignored by `cargo test`; run
//! with `CRUCIBLE_E2E_LLM_URL=http://127.0.0.1:8080 cargo test --test all
//! context_real_llm:: -- --ignored --nocapture`.

use std::path::Path;
use std::sync::Arc;

use crucible_agent::config::{Config, Overrides};
use crucible_agent::context::{ContextManager, budget};
use crucible_agent::prompt::{PromptLayers, PromptVars};
use crucible_agent::providers::{
    ChatRequest, Message, ProviderEvent, Providers, ToolChoice, retry,
};
use crucible_agent::tools::ToolRegistry;
use futures::StreamExt;

const MODEL: &str = "smollm2-135m";

const QUESTIONS: [&str; 5] = [
    "What does this project do? Answer in two sentences.",
    "Explain the difference between `Arc<Mutex<T>>` and `tokio::sync::Mutex` in Rust, and when each is the right choice for shared state across async tasks.",
    "Here is a function:\n```rust\nfn parse(s: &str) -> Option<u32> {\n    s.trim().parse().ok()\n}\n```\nWrite three unit tests for it, table-style.",
    "Thanks. Now, why might `cargo clippy -- -D warnings` fail on code that compiles? Name two common lints.",
    "Summarize what we discussed so far in one bullet list.",
];

#[tokio::test]
#[ignore = "needs a real llama-server: set CRUCIBLE_E2E_LLM_URL"]
async fn the_estimate_tracks_reported_prompt_tokens() {
    let root = std::env::var("CRUCIBLE_E2E_LLM_URL")
        .expect("CRUCIBLE_E2E_LLM_URL is not set: start llama-server and point this at it");
    let toml = format!(
        "[llm.providers.real]\ntype = \"openai\"\nendpoint = \"{}/v1\"\ndefault_model = \"{MODEL}\"\nmax_output_tokens = 96\n",
        root.trim_end_matches('/')
    );
    let config = Config::from_toml(
        &toml,
        Path::new("/e2e.toml"),
        &|_| None,
        &Overrides::default(),
    )
    .unwrap();
    let provider = Providers::new(config.providers.clone())
        .get("real")
        .unwrap();

    let cwd = std::env::current_dir().unwrap();
    let tools = ToolRegistry::builtin();
    let names: Vec<String> = tools.names().map(str::to_string).collect();
    let definitions = tools.definitions();
    let system = PromptLayers::load(&cwd, "act", None, None).render(&PromptVars {
        provider: "real",
        model: MODEL,
        cwd: &cwd,
        mode: "act",
        tools: &names,
    });
    let fixed_chars = budget::fixed_chars(Some(&system), &definitions);

    let mut context = ContextManager::new();
    let mut errors = Vec::new();
    for (turn, question) in QUESTIONS.iter().enumerate() {
        context.push(Arc::new(Message::user_text(*question)));
        let chars = fixed_chars + context.chars();
        let estimate = context.estimator.tokens(chars);
        let request = ChatRequest {
            model: MODEL.into(),
            system: Some(system.clone()),
            messages: context.messages(),
            tools: definitions.clone(),
            tool_choice: ToolChoice::None,
            max_output_tokens: Some(96),
            context_window: None,
            reasoning: None,
            cache_key: None,
        };
        let mut stream = retry::start_stream(&*provider, &request, &|_| {})
            .await
            .unwrap();
        let mut answer = String::new();
        let mut reported = 0;
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                ProviderEvent::TextDelta(text) => answer.push_str(&text),
                ProviderEvent::Usage(usage) => reported = usage.prompt_tokens,
                _ => {}
            }
        }
        assert!(reported > 0, "the server reported no usage");
        let error = (estimate as f64 - reported as f64) / reported as f64;
        eprintln!(
            "turn {}: estimate {estimate:>5}, reported {reported:>5}, error {:+.1} % (drift before the call ×{:.3})",
            turn + 1,
            error * 100.0,
            context.estimator.drift
        );
        errors.push(error);
        context.estimator.observe(chars, reported);
        context.push(Arc::new(Message::assistant_text(if answer.is_empty() {
            "(no answer)".to_string()
        } else {
            answer
        })));
    }
    // After learning, the estimate is within a few percent of the server's count.
    let last = errors.last().unwrap().abs();
    assert!(last < 0.05, "error after five turns: {:.1} %", last * 100.0);
}
