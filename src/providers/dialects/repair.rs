//! Repair, then tell: names and arguments a model got slightly wrong are
//! put right when only one reading is possible; what cannot be put right
//! goes back to the model as an error quoting what failed and the tool's
//! schema, never as a call with made-up arguments.

use serde_json::Value;

use crate::model::ToolDefinition;

/// Prefixes models put before a tool's name (OpenAI's `functions.`, Gemini's
/// `default_api.`, Harmony's recipient `functions.`).
const NAME_PREFIXES: &[&str] = &[
    "functions.",
    "default_api.",
    "functions:",
    "tools.",
    "tool.",
];

/// The offered tool `called` means: itself when offered, else the one
/// offered name it matches ignoring case, `-`/`_`/`.`, a known prefix, or
/// the `server__` prefix of an MCP tool. None when no tool or several match.
pub fn tool_name<'a>(called: &str, offered: &'a [ToolDefinition]) -> Option<&'a str> {
    let called = called.trim();
    if let Some(exact) = offered.iter().find(|tool| tool.name == called) {
        return Some(&exact.name);
    }
    let mut bare = called;
    for prefix in NAME_PREFIXES {
        if let Some(rest) = bare.strip_prefix(prefix) {
            bare = rest;
        }
    }
    let wanted = folded(bare);
    if wanted.is_empty() {
        return None;
    }
    // The whole name first; an MCP tool's name without its server only if
    // that finds nothing.
    let whole: Vec<&str> = offered
        .iter()
        .filter(|tool| folded(&tool.name) == wanted)
        .map(|tool| tool.name.as_str())
        .collect();
    if let [only] = whole.as_slice() {
        return Some(only);
    }
    if !whole.is_empty() {
        return None;
    }
    let unprefixed: Vec<&str> = offered
        .iter()
        .filter(|tool| {
            tool.name
                .split_once("__")
                .is_some_and(|(_, tool)| folded(tool) == wanted)
        })
        .map(|tool| tool.name.as_str())
        .collect();
    match unprefixed.as_slice() {
        [only] => Some(only),
        _ => None,
    }
}

/// A name without case or separators: `ReadFile`, `read-file` and
/// `read_file` are all `readfile`.
fn folded(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// A call's arguments as an object, repaired when the model wrote them
/// slightly wrong: JSON inside a JSON string, trailing commas, single
/// quotes, Python's `True`/`False`/`None`. Empty text and `null` are no
/// arguments. The error says what is wrong, for the model.
pub fn arguments(text: &str) -> Result<Value, ArgumentsError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    let first = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(err) => match json_text(text).and_then(|fixed| serde_json::from_str(&fixed).ok()) {
            Some(value) => value,
            None => return Err(ArgumentsError::NotJson(err.to_string())),
        },
    };
    object(first, 0)
}

/// Why a call's arguments are not an object, in words for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsError {
    #[error("the arguments are not valid JSON: {0}")]
    NotJson(String),
    /// A string that holds no object, quoted (cut short).
    #[error("the arguments are a string, not an object: {0}")]
    StringNotObject(String),
    #[error("the arguments are {0}, not an object")]
    NotObject(JsonKind),
}

/// What a JSON value is, named as the model reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    List,
    Boolean,
    Number,
    String,
}

impl std::fmt::Display for JsonKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JsonKind::List => "a list",
            JsonKind::Boolean => "a boolean",
            JsonKind::Number => "a number",
            JsonKind::String => "a string",
        })
    }
}

/// `value` as the arguments object, decoding JSON the model wrote as a
/// string (at most twice: `"{\"path\": …}"`, or that encoded again).
fn object(value: Value, depth: u8) -> Result<Value, ArgumentsError> {
    match value {
        Value::Object(_) => Ok(value),
        Value::Null => Ok(Value::Object(serde_json::Map::new())),
        Value::String(inner) if depth < 2 => match arguments(&inner) {
            Ok(value) if value.is_object() => object(value, depth + 1),
            _ => Err(ArgumentsError::StringNotObject(crate::util::truncate(
                &inner, 200,
            ))),
        },
        other => Err(ArgumentsError::NotObject(match other {
            Value::Array(_) => JsonKind::List,
            Value::Bool(_) => JsonKind::Boolean,
            Value::Number(_) => JsonKind::Number,
            _ => JsonKind::String,
        })),
    }
}

/// JSON-like text made JSON: single-quoted strings double-quoted, commas
/// before a closing bracket dropped, Python's literals as JSON's. None when
/// nothing needed changing (so the caller's error stands).
pub fn json_text(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 8);
    let mut changed = false;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => {
                out.push('"');
                copy_string(&mut chars, &mut out, '"');
            }
            '\'' => {
                changed = true;
                out.push('"');
                copy_string(&mut chars, &mut out, '\'');
            }
            ',' => {
                let next = text[at + 1..].trim_start().chars().next();
                if matches!(next, Some('}' | ']')) {
                    changed = true;
                } else {
                    out.push(',');
                }
            }
            c if c.is_ascii_alphabetic() => {
                let word_end = text[at..]
                    .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .map_or(text.len(), |len| at + len);
                let word = &text[at..word_end];
                let json = match word {
                    "True" => "true",
                    "False" => "false",
                    "None" => "null",
                    other => other,
                };
                changed |= json != word;
                out.push_str(json);
                while chars.peek().is_some_and(|(i, _)| *i < word_end) {
                    chars.next();
                }
            }
            c => out.push(c),
        }
    }
    changed.then_some(out)
}

/// Copies a string's body up to its closing `quote` as a double-quoted JSON
/// body (the opening quote is already out).
fn copy_string(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
    out: &mut String,
    quote: char,
) {
    while let Some((_, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                // `\'` means nothing in JSON.
                Some((_, '\'')) => out.push('\''),
                Some((_, escaped)) => {
                    out.push('\\');
                    out.push(escaped);
                }
                None => out.push('\\'),
            },
            c if c == quote => {
                out.push('"');
                return;
            }
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// What the model reads when a call's arguments cannot be used: the
/// error, then the tool's schema to write them again.
pub fn unusable(error: &str, tool: &ToolDefinition) -> String {
    format!(
        "{error}. Nothing was run. Call `{}` again with arguments that match its JSON schema: {}",
        tool.name, tool.parameters
    )
}

/// What the model reads for a call the output limit cut off.
pub fn cut_off(error: &str) -> String {
    format!(
        "the call was cut off by the output token limit before its arguments were complete ({error}); nothing was run. Make the call again with less in it (split a large file into several smaller writes or edits)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(names: &[&str]) -> Vec<ToolDefinition> {
        names
            .iter()
            .map(|name| ToolDefinition {
                name: name.to_string(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            })
            .collect()
    }

    #[test]
    fn names_are_repaired_only_to_one_offered_tool() {
        let offered = tools(&["read_file", "write_file", "github__search_code", "fs__list"]);
        for (called, expected) in [
            ("read_file", Some("read_file")),
            ("ReadFile", Some("read_file")),
            ("read-file", Some("read_file")),
            ("READ_FILE", Some("read_file")),
            ("functions.read_file", Some("read_file")),
            ("default_api.write_file", Some("write_file")),
            ("search_code", Some("github__search_code")),
            ("github.search_code", Some("github__search_code")),
            ("list", Some("fs__list")),
            ("delete_file", None),
            ("functions.", None),
            ("", None),
        ] {
            assert_eq!(tool_name(called, &offered), expected, "{called}");
        }
        // Two tools fold alike: no guess.
        let twins = tools(&["read_file", "readFile2", "a__x", "b__x"]);
        assert_eq!(tool_name("x", &twins), None);
        assert_eq!(tool_name("Read-File", &twins), Some("read_file"));
    }

    #[test]
    fn arguments_are_repaired_or_the_error_says_why() {
        for (text, expected) in [
            (r#"{"path": "a.txt"}"#, json!({"path": "a.txt"})),
            ("", json!({})),
            ("null", json!({})),
            (r#""{\"path\": \"a.txt\"}""#, json!({"path": "a.txt"})),
            (r#"{"path": "a.txt",}"#, json!({"path": "a.txt"})),
            (r#"{"paths": ["a", "b",],}"#, json!({"paths": ["a", "b"]})),
            (
                "{'path': 'it\\'s.txt', 'x': True}",
                json!({"path": "it's.txt", "x": true}),
            ),
            (
                r#"{'content': 'say "hi"'}"#,
                json!({"content": "say \"hi\""}),
            ),
            (r#"{"text": "a, }"}"#, json!({"text": "a, }"})),
        ] {
            assert_eq!(arguments(text), Ok(expected), "{text}");
        }
        for (text, why) in [
            (r#"{"path": "a.txt""#, "not valid JSON"),
            ("[1, 2]", "a list"),
            (r#""just text""#, "a string, not an object"),
            ("42", "a number"),
        ] {
            let err = arguments(text).unwrap_err();
            assert!(err.to_string().contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn the_error_for_the_model_quotes_the_schema() {
        let tool = ToolDefinition {
            name: "read_file".into(),
            description: String::new(),
            parameters: json!({"type": "object", "required": ["path"]}),
        };
        let told = unusable("the arguments are not valid JSON: EOF", &tool);
        assert!(told.contains("not valid JSON: EOF"), "{told}");
        assert!(told.contains(r#""required":["path"]"#), "{told}");
    }
}
