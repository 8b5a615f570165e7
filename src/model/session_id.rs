//! A session's id: one type from the adapter down, so an id cannot be
//! mixed up with a message's, a tool call's or a path. The adapter turns
//! the protocol's id into this once, at the edge.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Cheap to clone (shared text). Serialized as the bare string, so saved
/// sessions and the wire read exactly as they did when ids were strings.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(Arc<str>);

impl SessionId {
    /// A new session's id: a random UUID (v4), hyphenated.
    pub fn random() -> Self {
        Self::from(uuid::Uuid::new_v4().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so widths (`{:<36}` in the CLI's table) apply as to a str.
        f.pad(&self.0)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

// By hand rather than derived: serde's impls for `Arc<str>` need its `rc`
// feature, and the form must stay the bare string whatever the features.
impl Serialize for SessionId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<String> for SessionId {
    fn from(id: String) -> Self {
        Self(id.into())
    }
}

impl From<&str> for SessionId {
    fn from(id: &str) -> Self {
        Self(id.into())
    }
}

impl From<Arc<str>> for SessionId {
    fn from(id: Arc<str>) -> Self {
        Self(id)
    }
}

impl From<SessionId> for Arc<str> {
    fn from(id: SessionId) -> Self {
        id.0
    }
}

impl PartialEq<str> for SessionId {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SessionId {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_as_the_bare_string() {
        let id = SessionId::from("0b5e1c2a-7d1f-4e0a-9c3b-2f6d8e4a1b7c");
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, r#""0b5e1c2a-7d1f-4e0a-9c3b-2f6d8e4a1b7c""#);
        let back: SessionId = serde_json::from_str(&json).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn a_random_id_is_a_hyphenated_uuid() {
        let id = SessionId::random();
        let parsed = uuid::Uuid::parse_str(id.as_str()).unwrap();
        assert_eq!(parsed.hyphenated().to_string(), id.as_str());
        assert_ne!(SessionId::random(), id);
    }

    #[test]
    fn shows_the_id_itself() {
        let id = SessionId::from("abc");
        assert_eq!(id.to_string(), "abc");
        assert_eq!(format!("[{id:<5}]"), "[abc  ]");
        assert_eq!(format!("{id:?}"), r#""abc""#);
    }
}
