//! Fields real servers fill differently: a value read when it has the
//! expected type and ignored otherwise, as a reader that looks for a
//! string or a number would. Wire types use it where a server is known to
//! (or may) put something else, so one odd field never fails a stream.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

/// `T` when the field holds one; none when it is missing, `null` or of
/// another type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lenient<T>(pub Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<T> Lenient<T> {
    pub fn into_option(self) -> Option<T> {
        self.0
    }

    pub fn as_ref(&self) -> Option<&T> {
        self.0.as_ref()
    }
}

impl Lenient<String> {
    /// The text, unless it is empty (servers send `""` for "nothing yet").
    pub fn text(&self) -> Option<&str> {
        self.0.as_deref().filter(|text| !text.is_empty())
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(Self(T::deserialize(value).ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Field {
        #[serde(default)]
        text: Lenient<String>,
    }

    #[test]
    fn other_types_read_as_none() {
        for (json, expected) in [
            (r#"{"text":"hi"}"#, Some("hi")),
            (r#"{"text":""}"#, None),
            (r#"{"text":null}"#, None),
            (r#"{"text":5}"#, None),
            (r#"{"text":[{"type":"thinking"}]}"#, None),
            ("{}", None),
        ] {
            let field: Field = serde_json::from_str(json).unwrap();
            assert_eq!(field.text.text(), expected, "{json}");
        }
    }
}
