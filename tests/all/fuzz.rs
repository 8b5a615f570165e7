//! Property-based fuzzing of what reads outside input: the JSON-RPC line
//! parser, each provider's stream decoder, the config loader, the history
//! loader, the slash-command and MCP-prompt argument parsers, the
//! permission-rule matcher, and the decoder of tool calls written as text
//! with its argument repair. Inputs are random, and mutations of the real
//! fixtures (streams, a stored session) so they reach deep paths. The
//! property: no panic, and every call returns (proptest runs each case on
//! this thread; a hang fails the run by its time limit).
//!
//! `cargo test` runs a CI-sized number of cases (proptest's 256 per target);
//! `make fuzz` runs 10⁶ per target (`PROPTEST_CASES`). A failing input is
//! saved under `tests/proptest-regressions/fuzz.txt` and replayed first.

use std::path::Path;

use crucible_agent::config::{Config, Overrides};
use crucible_agent::events::ToolKind;
use crucible_agent::mcp::{McpPrompt, McpPromptArgument};
use crucible_agent::model::ToolDefinition;
use crucible_agent::permissions::patterns::{PatternLists, PatternRule};
use crucible_agent::providers::dialects::{AnswerEnd, TextCallDecoder, repair};
use crucible_agent::providers::stream::WireDecoder;
use crucible_agent::providers::{anthropic, ollama, openai};
use crucible_agent::store::{Store, context_from, replay_from};
use crucible_agent::transport::jsonrpc::parse;
use proptest::prelude::*;
use serde_json::{Value, json};

fn fixture(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    std::fs::read_to_string(root.join(path)).unwrap()
}

/// The (event name, data) pairs of a fixture stream: SSE blocks, or NDJSON
/// lines with no name.
fn fixture_events(path: &str) -> Vec<(String, String)> {
    let text = fixture(path);
    if path.ends_with(".ndjson") {
        return text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| (String::new(), l.to_string()))
            .collect();
    }
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = String::new();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(rest) = line.strip_prefix("event:") {
                    name = rest.trim().to_string();
                } else if let Some(rest) = line.strip_prefix("data:") {
                    data.push(rest.trim_start().to_string());
                }
            }
            (!data.is_empty()).then(|| (name, data.join("\n")))
        })
        .collect()
}

fn all_fixture_events(provider: &str, extension: &str) -> Vec<(String, String)> {
    [
        "text",
        "tool_call",
        "parallel_tool_calls",
        "thinking",
        "utf8_arguments",
        "error_mid_stream",
        "dropped",
    ]
    .iter()
    .flat_map(|name| fixture_events(&format!("{provider}/{name}.{extension}")))
    .collect()
}

/// Keys the wire formats use, so random JSON reaches their branches.
const KEYS: &[&str] = &[
    "choices",
    "delta",
    "content",
    "tool_calls",
    "index",
    "id",
    "function",
    "name",
    "arguments",
    "finish_reason",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "type",
    "message",
    "content_block",
    "text",
    "thinking",
    "signature",
    "input",
    "partial_json",
    "stop_reason",
    "error",
    "done",
    "done_reason",
    "reasoning_content",
    "reasoning",
    "prompt_eval_count",
    "eval_count",
    "input_tokens",
    "output_tokens",
    "role",
    "model",
    "jsonrpc",
    "method",
    "params",
    "result",
    "sessionId",
    "prompt",
    "cwd",
    "mcpServers",
    "protocolVersion",
    "clientCapabilities",
    "outcome",
    "optionId",
    "modeId",
    "value",
];

/// The history's event kinds and the keys its events and metadata use.
const EVENT_KINDS: &[&str] = &[
    "user_prompt",
    "update",
    "round",
    "context",
    "turn_end",
    "mode_changed",
    "model_changed",
    "file_changed",
    "rewound",
    "rewind_undone",
    "crashed",
];
const STORE_KEYS: &[&str] = &[
    "at",
    "detail",
    "message",
    "messages",
    "update",
    "op",
    "estimator",
    "spent",
    "mode",
    "provider",
    "model",
    "change",
    "rewind",
    "id",
];

/// A history line of a known kind with random fields.
fn stored_event() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(EVENT_KINDS),
        prop::collection::vec((prop::sample::select(STORE_KEYS), json_value()), 0..4),
    )
        .prop_map(|(kind, fields)| {
            let mut event = serde_json::Map::new();
            event.insert("event".into(), json!(kind));
            for (key, value) in fields {
                event.insert(key.into(), value);
            }
            Value::Object(event)
        })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        "\\PC{0,12}".prop_map(Value::String),
        prop::sample::select(KEYS).prop_map(|k| json!(k)),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// A change to a text: cut it, splice bytes into it, or swap a part.
#[derive(Debug, Clone)]
enum Mutation {
    Keep,
    Cut(usize),
    Insert(usize, String),
    Replace(usize, usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => Just(Mutation::Keep),
        1 => any::<usize>().prop_map(Mutation::Cut),
        1 => (any::<usize>(), "\\PC{0,6}|[\\[\\]{}\",:0-9-]{1,4}").prop_map(|(at, s)| Mutation::Insert(at, s)),
        1 => (any::<usize>(), 0..8usize, "\\PC{0,6}|[\\[\\]{}\",:0-9-]{1,4}")
            .prop_map(|(at, len, s)| Mutation::Replace(at, len, s)),
    ]
}

fn apply(text: &str, mutation: &Mutation) -> String {
    let boundary = |at: usize| {
        let mut at = at % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    match mutation {
        Mutation::Keep => text.to_string(),
        Mutation::Cut(at) => text[..boundary(*at)].to_string(),
        Mutation::Insert(at, s) => {
            let at = boundary(*at);
            format!("{}{s}{}", &text[..at], &text[at..])
        }
        Mutation::Replace(at, len, s) => {
            let start = boundary(*at);
            let end = boundary(start + len).max(start);
            format!("{}{s}{}", &text[..start], &text[end..])
        }
    }
}

/// A stream for a decoder: fixture events (mutated, reordered, repeated)
/// and random JSON events.
fn stream(fixtures: Vec<(String, String)>) -> impl Strategy<Value = Vec<(String, String)>> {
    let names = prop::sample::select(vec![
        "",
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "error",
        "ping",
    ]);
    let from_fixture = (prop::sample::select(fixtures), mutation())
        .prop_map(|((name, data), m)| (name, apply(&data, &m)));
    let random = (names, json_value()).prop_map(|(name, v)| (name.to_string(), v.to_string()));
    prop::collection::vec(prop_oneof![3 => from_fixture, 1 => random], 0..40)
}

fn decode_all<D: WireDecoder>(events: &[(String, String)]) {
    let mut decoder = D::default();
    for (name, data) in events {
        let data = data.trim();
        if data.is_empty() {
            continue;
        }
        let _ = decoder.on_event(name, data);
        if decoder.done() {
            return;
        }
    }
    let _ = decoder.finish();
}

/// Config text built from the sections and keys the loader knows, with
/// random values and random lines between.
fn config_text() -> impl Strategy<Value = String> {
    let sections = prop::sample::select(vec![
        "[llm]",
        "[llm.providers.local]",
        "[llm.providers.remote]",
        "[agent]",
        "[chat]",
        "[permissions]",
        "[[permissions.rules]]",
        "[mcp]",
        "[[mcp.servers]]",
        "[mcp.servers.x]",
        "[context]",
        "[subagents]",
        "[sandbox]",
        "[acp]",
        "[acp.agents.careful]",
        "[prices.\"m\"]",
        "[include]",
        "[modes.plan]",
        "[[gateway.upstreams]]",
        "[shell_environment]",
    ]);
    let keys = prop::sample::select(vec![
        "default",
        "type",
        "provider_type",
        "endpoint",
        "base_url",
        "api_key",
        "model",
        "default_model",
        "default_mode",
        "models",
        "max_tokens",
        "temperature",
        "timeout_secs",
        "allow",
        "deny",
        "ask",
        "name",
        "command",
        "args",
        "env",
        "url",
        "transport",
        "context_window",
        "compact_at",
        "unstable",
        "mode",
        "network",
        "writable",
        "max_depth",
        "max_per_turn",
        "token_budget",
        "input",
        "output",
        "files",
        "system_prompt",
        "thought_level",
        "trust",
        "prewarm",
        "keep_alive",
    ]);
    let values = prop_oneof![
        Just("\"openai\"".to_string()),
        Just("\"anthropic\"".to_string()),
        Just("\"ollama\"".to_string()),
        Just("\"http://127.0.0.1:1/v1\"".to_string()),
        Just("\"{env:HOME}\"".to_string()),
        Just("\"{file:/nonexistent}\"".to_string()),
        Just("[\"read:*\", \"shell:git *\"]".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        "\"\\PC{0,10}\"".prop_map(|s| s.replace('\\', "")),
    ];
    let line = prop_oneof![
        4 => (keys, values).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => sections.prop_map(str::to_string),
        1 => "\\PC{0,20}",
    ];
    prop::collection::vec(line, 0..30).prop_map(|lines| lines.join("\n"))
}

fn prompt_with(arguments: Vec<(String, bool)>) -> McpPrompt {
    McpPrompt {
        server: "srv".into(),
        name: "review".into(),
        description: None,
        arguments: arguments
            .into_iter()
            .map(|(name, required)| McpPromptArgument {
                name,
                description: None,
                required,
            })
            .collect(),
    }
}

fn tool_kind() -> impl Strategy<Value = ToolKind> {
    prop::sample::select(ToolKind::ALL.to_vec())
}

/// Rules as users write them, and random ones.
fn rule_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (
            prop::sample::select(vec!["read", "write", "shell", "bash", "search", "fetch", "mcp__x__y", "*", "edit", ""]),
            "[a-z*/ .~$()|;&-]{0,16}",
        ).prop_map(|(tool, arg)| if arg.is_empty() { tool.to_string() } else { format!("{tool}:{arg}") }),
        1 => "\\PC{0,24}",
    ]
}

/// Shell command lines, with the operators, quotes and substitutions the
/// matcher must see through.
fn command_line() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        prop::sample::select(vec![
            "git",
            "status",
            "rm",
            "-rf",
            "ls",
            "echo",
            "cat",
            "sudo",
            "env",
            "FOO=1",
            "bash",
            "-c",
            "&&",
            "||",
            ";",
            "|",
            "&",
            "$(",
            ")",
            "`",
            "'",
            "\"",
            ">",
            "<",
            "2>&1",
            "\\",
            "\n",
            "#",
            "*",
            "~",
            "..",
            "/etc/passwd",
            "{",
            "}",
        ])
        .prop_map(str::to_string),
        "\\PC{0,6}",
    ];
    prop::collection::vec(word, 0..14).prop_map(|words| words.join(" "))
}

/// Pieces of the text-call dialects (markers, names, JSON), prose and
/// Markdown, so random answers reach every dialect's branches.
const DIALECT_PIECES: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<|start|>assistant",
    "<|channel|>",
    "commentary to=functions.read_file ",
    "<|constrain|>json",
    "<|message|>",
    "<|call|>",
    "<|im_end|>",
    "```",
    "```json\n",
    "`",
    "\n",
    " ",
    ";",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    ",",
    ":",
    "read_file",
    "ReadFile",
    "write_file>",
    "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}",
    "{\"name\": \"write_file\", \"parameters\": ",
    "\"path\"",
    "Let me look. ",
    "héllo ✓ ",
];

fn offered_tools() -> Vec<ToolDefinition> {
    ["read_file", "write_file", "github__search_code"]
        .iter()
        .map(|name| ToolDefinition {
            name: name.to_string(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}}}),
        })
        .collect()
}

/// A model's answer: dialect pieces and random text.
fn answer_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => prop::sample::select(DIALECT_PIECES).prop_map(str::to_string),
        1 => "\\PC{0,8}",
    ];
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

/// Decodes `text` cut at `cuts` (byte offsets, moved to char boundaries):
/// the text shown, the calls (name, arguments) and the calls' source.
fn decode_text(
    text: &str,
    cuts: &[usize],
    cut_off: bool,
) -> (String, Vec<(String, String)>, String) {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|cut| {
            let mut cut = cut % (text.len() + 1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            cut
        })
        .collect();
    at.push(text.len());
    at.sort_unstable();
    let mut decoder = TextCallDecoder::new(&offered_tools());
    let mut shown = String::new();
    let mut from = 0;
    for cut in at {
        shown.push_str(&decoder.push(&text[from..cut]));
        from = cut;
    }
    let finished = decoder.finish(if cut_off {
        AnswerEnd::OutputLimit
    } else {
        AnswerEnd::Stopped
    });
    shown.push_str(&finished.text);
    let calls = finished
        .calls
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect();
    (shown, calls, finished.source)
}

proptest! {
    #[test]
    fn jsonrpc_lines_never_panic(line in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        (json_value(), mutation()).prop_map(|(v, m)| apply(&v.to_string(), &m).into_bytes()),
    ]) {
        let _ = parse(&line);
    }

    #[test]
    fn openai_streams_never_panic(events in stream(all_fixture_events("openai", "sse"))) {
        decode_all::<openai::StreamDecoder>(&events);
    }

    #[test]
    fn anthropic_streams_never_panic(events in stream(all_fixture_events("anthropic", "sse"))) {
        decode_all::<anthropic::StreamDecoder>(&events);
    }

    #[test]
    fn ollama_streams_never_panic(events in stream(all_fixture_events("ollama", "ndjson"))) {
        decode_all::<ollama::StreamDecoder>(&events);
    }

    #[test]
    fn config_texts_never_panic(text in config_text()) {
        let env = |name: &str| (name == "HOME").then(|| "/home/fuzz".to_string());
        let _ = Config::from_toml(&text, Path::new("/fuzz/config.toml"), &env, &Overrides::default());
    }

    #[test]
    fn stored_histories_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), mutation()), 0..6),
        extra in prop::collection::vec(prop_oneof![json_value(), stored_event()], 0..3),
    ) {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sessions/1a16db45-1483-4fb1-ae8c-5d2f2067f4a5");
        let history = std::fs::read_to_string(source.join("history.jsonl")).unwrap();
        let mut lines: Vec<String> = history.lines().map(str::to_string).collect();
        for (at, m) in &edits {
            let i = at.index(lines.len());
            lines[i] = apply(&lines[i], m);
        }
        lines.extend(extra.iter().map(Value::to_string));
        let data = tempfile::tempdir().unwrap();
        let id = "1a16db45-1483-4fb1-ae8c-5d2f2067f4a5";
        let dir = data.path().join("sessions").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(source.join("metadata.json"), dir.join("metadata.json")).unwrap();
        std::fs::write(dir.join("history.jsonl"), lines.join("\n")).unwrap();
        let store = Store::new(data.path());
        if let Ok((_, events)) = store.read(&id.into()) {
            let _ = replay_from(&events);
            let _ = context_from(&events);
        }
        let _ = store.list();
    }

    #[test]
    fn stored_metadata_never_panics(m in mutation(), v in json_value(), broken in json_value()) {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sessions/1a16db45-1483-4fb1-ae8c-5d2f2067f4a5");
        let metadata = std::fs::read_to_string(source.join("metadata.json")).unwrap();
        // With a `broken` mark of any shape, then mutated as text.
        let mut marked: Value = serde_json::from_str(&metadata).unwrap();
        marked["broken"] = broken;
        let metadata = marked.to_string();
        let data = tempfile::tempdir().unwrap();
        let id = "1a16db45-1483-4fb1-ae8c-5d2f2067f4a5";
        for (n, text) in [apply(&metadata, &m), v.to_string()].iter().enumerate() {
            let dir = data.path().join("sessions").join(format!("{id}{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("metadata.json"), text).unwrap();
            std::fs::copy(source.join("history.jsonl"), dir.join("history.jsonl")).unwrap();
        }
        let store = Store::new(data.path());
        let _ = store.list();
        let _ = store.read(&format!("{id}0").into());
        let _ = store.read(&format!("{id}1").into());
    }

    #[test]
    fn slash_commands_never_panic(text in prop_oneof![
        "/\\PC{0,30}",
        (prop::sample::select(vec!["/compact", "/context", "/context rollback", "/context pop", "/agent", "/mode", "/model", "/clear", "/help", "/mcp.srv.review"]), "\\PC{0,20}")
            .prop_map(|(c, rest)| format!("{c} {rest}")),
    ]) {
        let _ = crucible_agent::commands::parse(&text);
    }

    #[test]
    fn prompt_arguments_never_panic(
        declared in prop::collection::vec(("[a-z=\" ]{0,6}", any::<bool>()), 0..4),
        text in "[a-z=\" \\\\]{0,30}|\\PC{0,30}",
    ) {
        let prompts = [prompt_with(declared)];
        for command in crucible_agent::commands::prompt_commands(&prompts) {
            let _ = command.arguments(&text);
            let _ = command.usage();
        }
    }

    #[test]
    fn permission_rules_never_panic(
        allow in prop::collection::vec(rule_text(), 0..4),
        deny in prop::collection::vec(rule_text(), 0..4),
        tool in prop::sample::select(vec!["shell", "read_file", "write_file", "edit_file", "grep", "mcp__x__y", "fetch"]),
        kind in tool_kind(),
        command in command_line(),
        path in "[a-z./~*]{0,20}",
    ) {
        let parsed = |texts: Vec<String>| -> Vec<PatternRule> {
            texts.iter().filter_map(|t| PatternRule::parse(t).ok()).collect()
        };
        let lists = PatternLists { allow: parsed(allow), deny: parsed(deny), ..PatternLists::default() };
        let _ = lists.evaluate(tool, kind, &json!({"command": command, "path": path}));
    }

    /// However the answer is split, the same text is shown and the same
    /// calls are read; nothing is lost or invented (the text shown and the
    /// calls' source are the answer).
    #[test]
    fn text_calls_are_the_same_however_the_answer_is_split(
        text in answer_text(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        cut_off in any::<bool>(),
    ) {
        let whole = decode_text(&text, &[], cut_off);
        let split = decode_text(&text, &cuts, cut_off);
        prop_assert_eq!(&split, &whole);
        prop_assert_eq!(format!("{}{}", whole.0, whole.2), text);
    }

    /// Text with no marker, no bracket and no fence holds no call, and is
    /// shown as it is.
    #[test]
    fn text_without_a_marker_holds_no_call(
        text in "[^<\\[{`]{0,200}",
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let (shown, calls, _) = decode_text(&text, &cuts, true);
        prop_assert!(calls.is_empty());
        prop_assert_eq!(shown, text);
    }

    /// Repair returns an object or says why not; valid objects pass as they are.
    #[test]
    fn argument_repair_never_panics(
        value in json_value(),
        m in mutation(),
        quotes in any::<bool>(),
    ) {
        let text = value.to_string();
        let text = if quotes { text.replace('"', "'") } else { text };
        let mutated = apply(&text, &m);
        if let Ok(repaired) = repair::arguments(&mutated) {
            prop_assert!(repaired.is_object());
        }
        if value.is_object() {
            let text = value.to_string();
            let parsed: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(repair::arguments(&text), Ok(parsed));
        }
    }
}
