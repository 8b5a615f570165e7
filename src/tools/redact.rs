//! Secrets that still come back in a tool result (printed by a script,
//! read from a file) are replaced with [`REDACTED`] before the model, the
//! editor or the store sees them. The secrets are the values of the
//! variables the session's [`super::environment::EnvironmentPolicy`]
//! withholds from commands.

use serde_json::Value;

use super::ToolOutput;
use crate::events::ToolContent;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Shorter values are left alone: `1` or `true` in a variable named
/// `*TOKEN*` are not secrets, and replacing them everywhere would garble
/// every result.
pub const MIN_SECRET_LEN: usize = 8;

/// Replaces known secret values in text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a secret containing another is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = values
            .into_iter()
            .filter(|value| value.trim().chars().count() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced.
    pub fn text(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    fn in_place(&self, text: &mut String) {
        if self.secrets.iter().any(|s| text.contains(s.as_str())) {
            *text = self.text(text);
        }
    }

    fn json(&self, value: &mut Value) {
        match value {
            Value::String(text) => self.in_place(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.json(item)),
            Value::Object(fields) => fields.values_mut().for_each(|field| self.json(field)),
            _ => {}
        }
    }

    /// A finished call's output with every secret replaced: what the model
    /// reads, what the editor shows and the raw output.
    pub fn output(&self, mut output: ToolOutput) -> ToolOutput {
        if self.is_empty() {
            return output;
        }
        self.in_place(&mut output.for_model);
        for content in &mut output.content {
            match content {
                ToolContent::Text(text) => self.in_place(text),
                ToolContent::Diff {
                    old_text, new_text, ..
                } => {
                    if let Some(old) = old_text {
                        self.in_place(old);
                    }
                    self.in_place(new_text);
                }
                ToolContent::Image { .. }
                | ToolContent::Terminal { .. }
                | ToolContent::Session { .. } => {}
            }
        }
        self.json(&mut output.raw_output);
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_replaced_everywhere_in_an_output_and_short_values_are_not() {
        let redactor = Redactor::new(["sk-abcdefgh".into(), "1".into(), "sk-abcdefgh-long".into()]);
        assert_eq!(
            redactor.text("a sk-abcdefgh-long b sk-abcdefgh 1"),
            "a [redacted] b [redacted] 1"
        );
        let output = ToolOutput::text("key=sk-abcdefgh").with_raw_output(json!({
            "output": ["key=sk-abcdefgh"],
            "exit_code": 0,
        }));
        let output = redactor.output(output);
        assert_eq!(output.for_model, "key=[redacted]");
        assert_eq!(output.content, [ToolContent::Text("key=[redacted]".into())]);
        assert_eq!(output.raw_output["output"][0], "key=[redacted]");
        assert!(Redactor::new(["short".to_string()]).is_empty());
    }
}
