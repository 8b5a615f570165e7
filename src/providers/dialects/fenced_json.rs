//! A JSON call in a Markdown fence, as small models write it when they
//! know no other way: "```json\n{"name": "read_file", "arguments": {…}}\n```".
//! Only fences tagged `json` (or untagged, or `tool_call`) whose whole
//! content is a call count; the scanner also requires the fence to end the
//! answer.

use super::{Attempt, Offered, TextEnd, json};

const INFOS: &[&str] = &["", "json", "jsonc", "tool_call", "tool_code"];

/// `input` starts with a run of `fence` backticks (three or more).
pub fn parse(input: &str, fence: usize, end: TextEnd, offered: &Offered) -> Attempt {
    let after = &input[fence..];
    let Some(line_end) = after.find('\n') else {
        return if end == TextEnd::Reached || after.len() > 32 {
            Attempt::No
        } else {
            Attempt::More
        };
    };
    let info = after[..line_end].trim().to_ascii_lowercase();
    if !INFOS.contains(&info.as_str()) {
        return Attempt::No;
    }
    let content_start = fence + line_end + 1;
    let content = &input[content_start..];
    let closing = "`".repeat(fence);
    let Some(close) = content.find(&closing) else {
        return if end == TextEnd::Reached {
            Attempt::No
        } else {
            Attempt::More
        };
    };
    // The closing run may be longer than the opening one.
    let run = content[close..].len() - content[close..].trim_start_matches('`').len();
    if close + run == content.len() && end == TextEnd::Open {
        return Attempt::More;
    }
    let body = content[..close].trim();
    match json::lenient(body).and_then(|value| json::calls(&value, offered)) {
        Some(calls) => Attempt::Calls(calls, content_start + close + run),
        None => Attempt::No,
    }
}
