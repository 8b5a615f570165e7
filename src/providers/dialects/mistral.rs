//! Mistral's calls: `[TOOL_CALLS][{"name": "read_file", "arguments":
//! {"path": "a.txt"}}]` (tokenizer v3), and `[TOOL_CALLS]read_file[ARGS]{"path":
//! "a.txt"}` (v11 and later, sometimes with `[CALL_ID]…` before `[ARGS]`,
//! or with neither).

use super::{Attempt, Found, Offered, TextEnd, json};

pub const MARKER: &str = "[TOOL_CALLS]";
const CALL_ID: &str = "[CALL_ID]";
const ARGS: &str = "[ARGS]";

/// `input` starts with [`MARKER`].
pub fn parse(input: &str, end: TextEnd, offered: &Offered) -> Attempt {
    let after = &input[MARKER.len()..];
    let skipped = after.len() - after.trim_start().len();
    let rest = &after[skipped..];
    let base = MARKER.len() + skipped;
    if rest.is_empty() {
        return if end == TextEnd::Reached {
            Attempt::No
        } else {
            Attempt::More
        };
    }
    if rest.starts_with(['[', '{']) {
        return match json::span(rest) {
            json::Span::Closed(end) => {
                match json::lenient(&rest[..end]).and_then(|v| json::calls(&v, offered)) {
                    Some(calls) => Attempt::Calls(calls, base + end),
                    None => Attempt::No,
                }
            }
            json::Span::Open if end == TextEnd::Open => Attempt::More,
            _ => Attempt::No,
        };
    }
    named(rest, end, offered).map_used(|used| base + used)
}

/// `name[CALL_ID]id[ARGS]{…}`, the ids and `[ARGS]` optional.
fn named(rest: &str, end: TextEnd, offered: &Offered) -> Attempt {
    let name_end = rest
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .unwrap_or(rest.len());
    if name_end == rest.len() {
        return if end == TextEnd::Reached || name_end > 128 {
            Attempt::No
        } else {
            Attempt::More
        };
    }
    let Some(name) = offered.name(&rest[..name_end]) else {
        return Attempt::No;
    };
    let mut at = name_end;
    for tag in [CALL_ID, ARGS] {
        let here = &rest[at..];
        if here.len() < tag.len() && tag.starts_with(here) && end == TextEnd::Open {
            return Attempt::More;
        }
        if let Some(after) = here.strip_prefix(tag) {
            at += tag.len();
            if tag == CALL_ID {
                let id_len = after
                    .find(|c: char| !c.is_ascii_alphanumeric())
                    .unwrap_or(after.len());
                if id_len == after.len() && end == TextEnd::Open {
                    return Attempt::More;
                }
                at += id_len;
            }
        }
    }
    let skipped = rest[at..].len() - rest[at..].trim_start().len();
    at += skipped;
    match json::span(&rest[at..]) {
        json::Span::Closed(end) => Attempt::Calls(
            vec![Found {
                name,
                arguments: rest[at..at + end].to_string(),
            }],
            at + end,
        ),
        json::Span::Open if end == TextEnd::Open => Attempt::More,
        json::Span::None if rest[at..].is_empty() && end == TextEnd::Open => Attempt::More,
        _ => Attempt::No,
    }
}
