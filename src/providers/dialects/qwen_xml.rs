//! Qwen3-Coder's XML calls, which Ollama passes through as text (opencode
//! #4428): `<function=read_file><parameter=path>a.txt</parameter></function>`,
//! usually inside `<tool_call>` tags.

use serde_json::{Map, Value};

use super::{Attempt, Found, Offered, TextEnd};

pub const MARKER: &str = "<function=";
const CLOSE: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_CLOSE: &str = "</parameter>";

/// `input` starts with [`MARKER`]; the call ends at `</function>`, or at
/// the end of the answer.
pub fn parse(input: &str, end: TextEnd, offered: &Offered) -> Attempt {
    let after = &input[MARKER.len()..];
    let Some(name_end) = after.find('>') else {
        return if end == TextEnd::Reached || after.len() > 128 {
            Attempt::No
        } else {
            Attempt::More
        };
    };
    let called = &after[..name_end];
    if called.contains(['<', '\n']) {
        return Attempt::No;
    }
    let Some(name) = offered.name(called) else {
        return Attempt::No;
    };
    let body_start = name_end + 1;
    let (body, used) = match after[body_start..].find(CLOSE) {
        Some(end) => (
            &after[body_start..body_start + end],
            MARKER.len() + body_start + end + CLOSE.len(),
        ),
        None if end == TextEnd::Reached => (&after[body_start..], input.len()),
        None => return Attempt::More,
    };
    let schema = offered.schema(&name);
    let mut arguments = Map::new();
    let mut rest = body;
    while let Some(start) = rest.find(PARAMETER) {
        let tail = &rest[start + PARAMETER.len()..];
        let Some(key_end) = tail.find('>') else { break };
        let key = tail[..key_end].trim().to_string();
        let value_text = &tail[key_end + 1..];
        // A missing close tag ends the value at the next parameter.
        let value_end = value_text
            .find(PARAMETER_CLOSE)
            .or_else(|| value_text.find(PARAMETER))
            .unwrap_or(value_text.len());
        let raw = trim_newline(&value_text[..value_end]);
        let typed = typed_value(
            raw,
            schema.and_then(|s| s.pointer(&format!("/properties/{key}"))),
        );
        arguments.insert(key, typed);
        rest = &value_text[value_end..];
    }
    Attempt::Calls(
        vec![Found {
            name,
            arguments: Value::Object(arguments).to_string(),
        }],
        used,
    )
}

/// The value between the tags without the one newline on each side the
/// format puts there; inner whitespace is the value's own.
fn trim_newline(text: &str) -> &str {
    let text = text.strip_prefix('\n').unwrap_or(text);
    text.strip_suffix('\n').unwrap_or(text)
}

/// Values are text; the schema says when one is a number, a boolean, a
/// list or an object written as JSON (as Qwen's own parser reads them).
fn typed_value(raw: &str, property: Option<&Value>) -> Value {
    let wants_text = property
        .and_then(|p| p.get("type"))
        .is_none_or(|kind| kind == "string");
    if !wants_text && let Ok(value) = serde_json::from_str::<Value>(raw.trim()) {
        return value;
    }
    Value::String(raw.to_string())
}
