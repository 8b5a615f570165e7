//! Hermes (NousResearch Hermes 2/3, Qwen 2.5/3 chat templates):
//! `<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>`.
//! Qwen3-Coder writes its XML form inside the same tags.

use super::{Attempt, Offered, TextEnd, json, qwen_xml};

pub const MARKER: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// `input` starts with [`MARKER`]. The call ends at the closing tag, or at
/// the end of the answer when the model stopped without one.
pub fn parse(input: &str, end: TextEnd, offered: &Offered) -> Attempt {
    let after = &input[MARKER.len()..];
    // A call's body is JSON or XML; anything else is a tag in prose.
    if let Some(first) = after.trim_start().chars().next()
        && !matches!(first, '{' | '[' | '<')
    {
        return Attempt::No;
    }
    let (body, used) = match after.find(CLOSE) {
        Some(end) => (&after[..end], MARKER.len() + end + CLOSE.len()),
        None if end == TextEnd::Reached => (after, input.len()),
        None => return Attempt::More,
    };
    let body = body.trim();
    if body.starts_with(qwen_xml::MARKER) {
        return match qwen_xml::parse(body, TextEnd::Reached, offered) {
            Attempt::Calls(calls, _) => Attempt::Calls(calls, used),
            _ => Attempt::No,
        };
    }
    if let Some(calls) = json::lenient(body).and_then(|value| json::calls(&value, offered)) {
        return Attempt::Calls(calls, used);
    }
    // Broken JSON inside the tags still names its tool: the model is told
    // what is wrong instead of seeing its call shown as text.
    match json::salvage(body, offered) {
        Some(found) => Attempt::Calls(vec![found], used),
        None => Attempt::No,
    }
}
