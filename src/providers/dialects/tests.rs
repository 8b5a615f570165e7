//! One recorded answer per row, written from each format's documentation
//! and the issues that report it; near misses that must stay text.

use super::*;
use serde_json::json;

fn tools() -> Vec<ToolDefinition> {
    let tool = |name: &str, parameters: Value| ToolDefinition {
        name: name.into(),
        description: String::new(),
        parameters,
    };
    vec![
        tool(
            "read_file",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}}, "required": ["path"]}),
        ),
        tool(
            "write_file",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
        ),
        tool(
            "github__search_code",
            json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        ),
    ]
}

/// Decodes `text` split into `pieces` roughly equal parts (0: byte by byte
/// on char boundaries); returns the text shown and the calls (name,
/// arguments as JSON).
fn answer_end(cut_off: bool) -> AnswerEnd {
    if cut_off {
        AnswerEnd::OutputLimit
    } else {
        AnswerEnd::Stopped
    }
}

fn decode(text: &str, pieces: usize, cut_off: bool) -> (String, Vec<(String, Value)>) {
    let mut decoder = TextCallDecoder::new(&tools());
    let mut shown = String::new();
    let chars: Vec<char> = text.chars().collect();
    let size = if pieces == 0 {
        1
    } else {
        chars.len().div_ceil(pieces).max(1)
    };
    for chunk in chars.chunks(size) {
        shown.push_str(&decoder.push(&chunk.iter().collect::<String>()));
    }
    let finished = decoder.finish(answer_end(cut_off));
    shown.push_str(&finished.text);
    let calls = finished
        .calls
        .into_iter()
        .map(|call| {
            let arguments = repair::arguments(&call.arguments).unwrap_or_else(
                |err| json!({ "unparsed": call.arguments, "error": err.to_string() }),
            );
            (call.name, arguments)
        })
        .collect();
    (shown, calls)
}

/// Every split gives the same text and calls.
fn decode_all_ways(text: &str) -> (String, Vec<(String, Value)>) {
    let whole = decode(text, 1, false);
    for pieces in [0, 2, 3, 7, 16] {
        assert_eq!(
            decode(text, pieces, false),
            whole,
            "{pieces} pieces: {text}"
        );
    }
    whole
}

/// A row: what it shows, the answer, the text shown, the calls.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    Vec<(String, Value)>,
);

fn call(name: &str, arguments: Value) -> (String, Value) {
    (name.to_string(), arguments)
}

#[test]
fn each_dialect_decodes_to_its_calls() {
    let read_a = || call("read_file", json!({"path": "a.txt"}));
    let table: Vec<Row> = vec![
        (
            "hermes",
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>",
            "",
            vec![read_a()],
        ),
        (
            "hermes after text, with the end token, two calls",
            "Let me look at both.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b.txt\"}}\n</tool_call><|im_end|>",
            "Let me look at both.\n",
            vec![read_a(), call("read_file", json!({"path": "b.txt"}))],
        ),
        (
            "hermes without its closing tag",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}",
            "",
            vec![read_a()],
        ),
        (
            "qwen3-coder xml in tool_call tags, typed by the schema",
            "<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/main.rs\n</parameter>\n<parameter=offset>\n10\n</parameter>\n</function>\n</tool_call>",
            "",
            vec![call(
                "read_file",
                json!({"path": "src/main.rs", "offset": 10}),
            )],
        ),
        (
            "qwen3-coder xml bare, as Ollama passes it (opencode #4428)",
            "I'll write the file.\n\n<function=write_file>\n<parameter=path>\nhello.py\n</parameter>\n<parameter=content>\nprint(\"hi\")\n\n</parameter>\n</function>",
            "I'll write the file.\n\n",
            vec![call(
                "write_file",
                json!({"path": "hello.py", "content": "print(\"hi\")\n"}),
            )],
        ),
        (
            "llama 3 bare json",
            "{\"name\": \"read_file\", \"parameters\": {\"path\": \"a.txt\"}}",
            "",
            vec![read_a()],
        ),
        (
            "llama 3 after python_tag, two calls",
            "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"a.txt\"}}; {\"name\": \"read_file\", \"parameters\": {\"path\": \"b.txt\"}}<|eom_id|>",
            "",
            vec![read_a(), call("read_file", json!({"path": "b.txt"}))],
        ),
        (
            "mistral v3 list",
            "[TOOL_CALLS] [{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}]</s>",
            "",
            vec![read_a()],
        ),
        (
            "mistral v11 name and args",
            "[TOOL_CALLS]read_file[ARGS]{\"path\": \"a.txt\"}",
            "",
            vec![read_a()],
        ),
        (
            "mistral v11 with a call id, two calls",
            "[TOOL_CALLS]read_file[CALL_ID]a1b2c3d4e[ARGS]{\"path\": \"a.txt\"}[TOOL_CALLS]write_file[ARGS]{\"path\": \"b.txt\", \"content\": \"x\"}",
            "",
            vec![
                read_a(),
                call("write_file", json!({"path": "b.txt", "content": "x"})),
            ],
        ),
        (
            "harmony leak",
            "<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>{\"path\":\"a.txt\"}<|call|>",
            "",
            vec![read_a()],
        ),
        (
            "harmony after its analysis, recipient in the header",
            "<|channel|>analysis<|message|>Need the file.<|end|><|start|>assistant to=functions.read_file<|channel|>commentary json<|message|>{\"path\":\"a.txt\"}",
            "<|channel|>analysis<|message|>Need the file.<|end|>",
            vec![read_a()],
        ),
        (
            "json in a fence",
            "I'll read it.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n```\n",
            "I'll read it.\n",
            vec![read_a()],
        ),
        (
            "openai-shaped json in an untagged fence",
            "```\n{\"type\": \"function\", \"function\": {\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"a.txt\\\"}\"}}\n```",
            "",
            vec![read_a()],
        ),
        (
            "repaired names: case, prefix, MCP server",
            "<tool_call>{\"name\": \"ReadFile\", \"arguments\": {\"path\": \"a.txt\"}}</tool_call><tool_call>{\"name\": \"functions.read-file\", \"arguments\": {\"path\": \"a.txt\"}}</tool_call><tool_call>{\"name\": \"search_code\", \"arguments\": {\"query\": \"x\"}}</tool_call>",
            "",
            vec![
                read_a(),
                read_a(),
                call("github__search_code", json!({"query": "x"})),
            ],
        ),
        (
            "repaired arguments: single quotes, trailing comma",
            "<tool_call>{'name': 'read_file', 'arguments': {'path': 'a.txt',},}</tool_call>",
            "",
            vec![read_a()],
        ),
    ];
    for (row, text, shown, calls) in table {
        let decoded = decode_all_ways(text);
        assert_eq!(decoded, (shown.to_string(), calls), "{row}");
    }
}

#[test]
fn near_misses_stay_text() {
    let table = [
        (
            "prose about a tool",
            "I will use the read_file tool to read a.txt.",
        ),
        (
            "a quoted example in inline code",
            "Hermes models write `<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call>` to call a tool.",
        ),
        (
            "an example in an xml fence",
            "Like this:\n```xml\n<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call>\n```",
        ),
        (
            "a call followed by explanation",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}</tool_call> is how a call looks.",
        ),
        (
            "a fence in the middle of explanation",
            "For example:\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```\nwould read a.",
        ),
        (
            "json that is not a call",
            "{\"name\": \"my-app\", \"version\": \"1.0.0\"}",
        ),
        (
            "a call object with other keys",
            "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}, \"version\": 2}",
        ),
        (
            "a call to a tool not offered",
            "<tool_call>{\"name\": \"delete_everything\", \"arguments\": {}}</tool_call>",
        ),
        (
            "bare json after prose",
            "The call would be {\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}",
        ),
        (
            "a tag named in prose",
            "Use a <tool_call> tag, then [TOOL_CALLS] for Mistral, <function=x> too.",
        ),
        (
            "harmony analysis alone",
            "<|channel|>analysis<|message|>Thinking about read_file.<|end|>",
        ),
        (
            "a markdown link",
            "See [the docs](https://example.com) and [x].",
        ),
        (
            "python in a python_tag",
            "<|python_tag|>brave_search.call(query=\"weather\")",
        ),
        ("unbalanced json at the start", "{ not json at all"),
    ];
    for (row, text) in table {
        let (shown, calls) = decode_all_ways(text);
        assert_eq!(calls, Vec::new(), "{row}");
        assert_eq!(shown, text, "{row}");
    }
}

#[test]
fn ordinary_text_streams_as_it_comes() {
    let mut decoder = TextCallDecoder::new(&tools());
    assert_eq!(decoder.push("Hello, "), "Hello, ");
    assert_eq!(decoder.push("world. Now <"), "world. Now ");
    assert_eq!(decoder.push("b>bold</b> "), "<b>bold</b> ");
    assert_eq!(decoder.push("and <tool_"), "and ");
    assert_eq!(
        decoder.push("call>{\"name\": \"read_file\", \"arguments\": {}}</tool_call>"),
        ""
    );
    let finished = decoder.finish(AnswerEnd::Stopped);
    assert_eq!(finished.text, "");
    assert_eq!(finished.calls.len(), 1);
}

#[test]
fn a_call_cut_off_by_the_limit_is_a_call_that_does_not_parse() {
    let text = "Writing it.\n<tool_call>{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"abc";
    let (shown, calls) = decode(text, 3, true);
    assert_eq!(shown, "Writing it.\n");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].0, "write_file");
    assert!(calls[0].1.get("error").is_some(), "{calls:?}");
    // Without the limit, text the model stopped in is what it said.
    let qwen = "<function=write_file>\n<parameter=path>\na.txt";
    let (_, cut) = decode(qwen, 1, true);
    assert_eq!(cut.len(), 1, "{cut:?}");
}

#[test]
fn settle_repairs_in_place_and_explains_what_it_cannot() {
    let offered = tools();
    let mut parts = vec![
        Part::Text { text: "ok".into() },
        Part::ToolCall {
            id: "1".into(),
            name: "ReadFile".into(),
            arguments: r#""{\"path\": \"a.txt\",}""#.into(),
        },
        Part::ToolCall {
            id: "2".into(),
            name: "write_file".into(),
            arguments: r#"{"path": "a.txt", "content": "x"#.into(),
        },
    ];
    let settled = settle(&mut parts, &offered, AnswerEnd::Stopped);
    assert_eq!(settled[0].name, "read_file");
    assert_eq!(settled[0].arguments, Ok(json!({"path": "a.txt"})));
    assert_eq!(
        parts[1],
        Part::ToolCall {
            id: "1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a.txt"}"#.into(),
        }
    );
    let error = settled[1].arguments.clone().unwrap_err().to_string();
    assert!(error.contains("not valid JSON"), "{error}");
    assert!(
        error.contains(r#""required":["path","content"]"#),
        "{error}"
    );
    let cut = settle(&mut parts, &offered, AnswerEnd::OutputLimit);
    let error = cut[1].arguments.clone().unwrap_err().to_string();
    assert!(
        error.contains("cut off by the output token limit"),
        "{error}"
    );
}
