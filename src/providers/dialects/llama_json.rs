//! Llama 3.1-3.3's JSON calls: a bare `{"name": "read_file", "parameters":
//! {"path": "a.txt"}}` as the whole answer, or the same after
//! `<|python_tag|>`; several are separated by `;`.

use super::{Attempt, Offered, TextEnd, json};

pub const MARKER: &str = "<|python_tag|>";

/// `input` starts with [`MARKER`].
pub fn parse_tagged(input: &str, end: TextEnd, offered: &Offered) -> Attempt {
    let after = &input[MARKER.len()..];
    let skipped = after.len() - after.trim_start().len();
    match parse_bare(&after[skipped..], end, offered) {
        Attempt::Calls(calls, used) => Attempt::Calls(calls, MARKER.len() + skipped + used),
        Attempt::More if after.trim_start().is_empty() && end == TextEnd::Open => Attempt::More,
        other => other,
    }
}

/// `input` starts with `{` (or is empty, after the tag).
pub fn parse_bare(input: &str, end: TextEnd, offered: &Offered) -> Attempt {
    match json::span(input) {
        json::Span::Closed(end) => {
            match json::lenient(&input[..end]).and_then(|value| json::calls(&value, offered)) {
                Some(calls) => Attempt::Calls(calls, end),
                None => Attempt::No,
            }
        }
        json::Span::Open if end == TextEnd::Open => Attempt::More,
        json::Span::None if input.is_empty() && end == TextEnd::Open => Attempt::More,
        _ => Attempt::No,
    }
}
