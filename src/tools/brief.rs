//! Brief tool definitions, for models with small windows: the tools' text
//! is read into every request, and at 4k tokens the full descriptions and
//! schemas would leave little room for the conversation. Every tool is still
//! offered: a one-line description and a schema that keeps only what
//! validates the arguments (names, types, required, enums). Optional
//! arguments are left out where some are required: the tool still takes
//! them, but a small model is better served by the few it must give.

use serde_json::{Map, Value};

use crate::model::ToolDefinition;

/// Longest brief description taken from a tool's own text.
const MAX_BRIEF_CHARS: usize = 160;

/// Schema keys a model needs to form valid arguments; the rest (prose,
/// bounds, defaults) is dropped.
const KEPT_KEYS: [&str; 8] = [
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "anyOf",
    "oneOf",
];

/// The brief form of `definition`; `brief` is the tool's own short text,
/// if it has one.
pub fn brief_definition(definition: ToolDefinition, brief: Option<&str>) -> ToolDefinition {
    ToolDefinition {
        description: match brief {
            Some(text) => text.to_string(),
            None => first_sentence(&definition.description),
        },
        parameters: minimal_schema(&definition.parameters),
        name: definition.name,
    }
}

/// The text up to the end of its first sentence (a `.` before a space or
/// the end, not in an abbreviation like "e.g."), cut at a word boundary
/// if still long.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let mut end = text.len();
    for (i, _) in text.match_indices('.') {
        let next = text[i + 1..].chars().next();
        if !matches!(next, None | Some(' ' | '\n')) {
            continue;
        }
        let word = text[..i].rsplit([' ', '\n', '(']).next().unwrap_or("");
        if matches!(word, "e.g" | "i.e" | "etc" | "vs") {
            continue;
        }
        end = i + 1;
        break;
    }
    let sentence = &text[..end];
    if sentence.chars().count() <= MAX_BRIEF_CHARS {
        return sentence.to_string();
    }
    let mut cut: String = sentence.chars().take(MAX_BRIEF_CHARS).collect();
    if let Some(space) = cut.rfind(' ') {
        cut.truncate(space);
    }
    cut.push('…');
    cut
}

/// `schema` with only [`KEPT_KEYS`], recursively; property names are kept
/// whatever they are called.
fn minimal_schema(schema: &Value) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let required: Vec<&str> = match object.get("required") {
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut out = Map::new();
    for (key, value) in object {
        if !KEPT_KEYS.contains(&key.as_str()) {
            continue;
        }
        let value = match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => Value::Object(
                properties
                    .iter()
                    .filter(|(name, _)| required.is_empty() || required.contains(&name.as_str()))
                    .map(|(name, property)| (name.clone(), minimal_schema(property)))
                    .collect(),
            ),
            ("items", item) => minimal_schema(item),
            ("anyOf" | "oneOf", Value::Array(variants)) => {
                Value::Array(variants.iter().map(minimal_schema).collect())
            }
            // Nothing is required: saying so costs tokens and tells nothing.
            ("required", Value::Array(names)) if names.is_empty() => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn first_sentences_end_at_a_full_stop_not_an_abbreviation() {
        let cases = [
            ("Read a text file. Returns lines.", "Read a text file."),
            (
                "Find files by pattern, e.g. `*.rs`. Then more.",
                "Find files by pattern, e.g. `*.rs`.",
            ),
            ("Open `a.txt` first. Then.", "Open `a.txt` first."),
            ("No full stop at all", "No full stop at all"),
            ("  Padded.  ", "Padded."),
        ];
        for (text, expected) in cases {
            assert_eq!(first_sentence(text), expected, "{text}");
        }
        let long = format!("{} end.", "word ".repeat(60));
        let cut = first_sentence(&long);
        assert!(cut.chars().count() <= MAX_BRIEF_CHARS + 1, "{cut}");
        assert!(cut.ends_with("word…"), "{cut}");
    }

    #[test]
    fn schemas_keep_what_validates_and_drop_the_prose() {
        let full = json!({
            "type": "object",
            "description": "dropped",
            "properties": {
                "path": {"type": "string", "description": "The file"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many"},
                "items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "status": {"type": "string", "enum": ["a", "b"], "description": "x"},
                        "note": {"type": "string"}
                    },
                    "required": ["status"]
                }},
                "description": {"type": "string", "description": "a property named description stays"}
            },
            "required": ["path", "items", "description"],
            "additionalProperties": false
        });
        assert_eq!(
            minimal_schema(&full),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "items": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"status": {"type": "string", "enum": ["a", "b"]}},
                        "required": ["status"]
                    }},
                    "description": {"type": "string"}
                },
                "required": ["path", "items", "description"]
            })
        );
    }

    #[test]
    fn with_nothing_required_every_argument_stays() {
        let schema =
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": []});
        assert_eq!(
            minimal_schema(&schema),
            json!({"type": "object", "properties": {"path": {"type": "string"}}})
        );
    }

    #[test]
    fn a_tool_s_own_brief_wins() {
        let definition = ToolDefinition {
            name: "t".into(),
            description: "Long text. More.".into(),
            parameters: json!({"type": "object"}),
        };
        let brief = brief_definition(definition.clone(), Some("Short."));
        assert_eq!(brief.description, "Short.");
        assert_eq!(brief_definition(definition, None).description, "Long text.");
    }
}
