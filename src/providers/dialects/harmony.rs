//! gpt-oss's Harmony format, leaked as text when the server does not parse
//! it: `<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>{"path":
//! "a.txt"}<|call|>`, also with the recipient in the role header
//! (`<|start|>assistant to=functions.read_file<|channel|>commentary json<|message|>…`).

use super::{Attempt, Found, Offered, TextEnd, json};

pub const MARKERS: &[&str] = &["<|start|>", "<|channel|>"];
const MESSAGE: &str = "<|message|>";
/// The most a header may take before `<|message|>`.
const MAX_HEADER: usize = 256;

/// `input` starts with one of [`MARKERS`].
pub fn parse(input: &str, end: TextEnd, offered: &Offered) -> Attempt {
    let Some(header_end) = input.find(MESSAGE) else {
        return if end == TextEnd::Reached || input.len() > MAX_HEADER {
            Attempt::No
        } else {
            Attempt::More
        };
    };
    if header_end > MAX_HEADER {
        return Attempt::No;
    }
    let Some(recipient) = recipient(&input[..header_end]) else {
        return Attempt::No;
    };
    let Some(name) = offered.name(recipient) else {
        return Attempt::No;
    };
    let start = header_end + MESSAGE.len();
    let body = &input[start..];
    let skipped = body.len() - body.trim_start().len();
    match json::span(&body[skipped..]) {
        json::Span::Closed(end) => Attempt::Calls(
            vec![Found {
                name,
                arguments: body[skipped..skipped + end].to_string(),
            }],
            start + skipped + end,
        ),
        json::Span::Open if end == TextEnd::Open => Attempt::More,
        json::Span::None if body[skipped..].is_empty() && end == TextEnd::Open => Attempt::More,
        _ => Attempt::No,
    }
}

/// The `to=` of a header: `functions.read_file` (the prefix is repaired
/// away with the name).
fn recipient(header: &str) -> Option<&str> {
    let at = header.find("to=")?;
    let rest = &header[at + 3..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '<')
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|name| !name.is_empty())
}
