//! JSON as the dialects write it: where a value ends in a stream, and
//! whether a value is a call (or a list of calls) to an offered tool.

use serde_json::Value;

use super::{Found, Offered, repair};

/// Where the JSON object or array at the start of `text` ends.
#[derive(Debug, PartialEq, Eq)]
pub enum Span {
    /// It closes: the byte just after it.
    Closed(usize),
    /// `text` ends first.
    Open,
    /// `text` does not start with `{` or `[`.
    None,
}

/// The extent of the bracketed value at the start of `text`, counting
/// brackets outside strings (double- or single-quoted, since models write
/// both).
pub fn span(text: &str) -> Span {
    if !text.starts_with(['{', '[']) {
        return Span::None;
    }
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for (at, &byte) in text.as_bytes().iter().enumerate() {
        if let Some(open) = quote {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == open {
                quote = None;
            }
            continue;
        }
        match byte {
            b'"' | b'\'' => quote = Some(byte),
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Span::Closed(at + 1);
                }
            }
            _ => {}
        }
    }
    Span::Open
}

/// `text` as JSON, or as JSON after repair.
pub fn lenient(text: &str) -> Option<Value> {
    serde_json::from_str(text)
        .ok()
        .or_else(|| repair::json_text(text).and_then(|fixed| serde_json::from_str(&fixed).ok()))
}

/// The calls `value` holds: one call object, or a non-empty list of them.
/// Anything else (a list with one non-call, an object with other keys, a
/// name no offered tool has) holds none.
pub fn calls(value: &Value, offered: &Offered) -> Option<Vec<Found>> {
    match value {
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| call(item, offered))
            .collect::<Option<Vec<_>>>(),
        Value::Object(_) => call(value, offered).map(|found| vec![found]),
        _ => None,
    }
}

const NAME_KEYS: &[&str] = &["name", "tool", "tool_name", "function"];
const ARGUMENT_KEYS: &[&str] = &["arguments", "parameters", "args", "input", "tool_input"];
/// Keys a call object may carry besides its name and arguments.
const OTHER_KEYS: &[&str] = &["type", "id"];

/// One call object: `{"name": …, "arguments": …}` (or `parameters`,
/// `args`, …), also wrapped as OpenAI writes it (`{"type": "function",
/// "function": {…}}`).
fn call(value: &Value, offered: &Offered) -> Option<Found> {
    let object = value.as_object()?;
    if let Some(inner @ Value::Object(_)) = object.get("function")
        && object
            .keys()
            .all(|key| key == "function" || OTHER_KEYS.contains(&key.as_str()))
    {
        return call(inner, offered);
    }
    let mut name = None;
    let mut arguments = None;
    for (key, value) in object {
        if NAME_KEYS.contains(&key.as_str()) && name.is_none() {
            name = Some(value.as_str()?);
        } else if ARGUMENT_KEYS.contains(&key.as_str()) && arguments.is_none() {
            arguments = Some(value);
        } else if !OTHER_KEYS.contains(&key.as_str()) {
            return None;
        }
    }
    let name = offered.name(name?)?;
    let arguments = match arguments {
        None | Some(Value::Null) => "{}".to_string(),
        // Double-encoded: left as written, for the repair to read.
        Some(Value::String(text)) => Value::String(text.clone()).to_string(),
        Some(value @ Value::Object(_)) => value.to_string(),
        Some(_) => return None,
    };
    Some(Found { name, arguments })
}

/// A call whose JSON does not parse, read as far as its name: the name of
/// an offered tool and the text of its arguments, for the error the model
/// gets. Used only inside a dialect's own markers.
pub fn salvage(body: &str, offered: &Offered) -> Option<Found> {
    let name = string_after_key(body, "name")?;
    let name = offered.name(&name)?;
    let arguments = ARGUMENT_KEYS.iter().find_map(|key| {
        let at = body.find(&format!("\"{key}\""))?;
        let rest = body[at + key.len() + 2..].trim_start().strip_prefix(':')?;
        let rest = rest.trim();
        // The call's own closing brace is not part of its arguments.
        Some(
            rest.strip_suffix('}')
                .unwrap_or(rest)
                .trim_end()
                .to_string(),
        )
    })?;
    Some(Found { name, arguments })
}

/// The string value after `"key":` in `text`, unescaped naively.
pub fn string_after_key(text: &str, key: &str) -> Option<String> {
    let at = text.find(&format!("\"{key}\""))?;
    let rest = text[at + key.len() + 2..].trim_start().strip_prefix(':')?;
    let rest = rest.trim_start().strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(rest[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_close_on_their_bracket_outside_strings() {
        assert_eq!(span(r#"{"a": "}"} tail"#), Span::Closed(10));
        assert_eq!(span(r#"[{"a": 1}, {"b": [2]}]"#), Span::Closed(22));
        assert_eq!(span(r#"{'a': '}', "b": "\"}"}"#), Span::Closed(22));
        assert_eq!(span(r#"{"a": {"#), Span::Open);
        assert_eq!(span("text"), Span::None);
    }
}
