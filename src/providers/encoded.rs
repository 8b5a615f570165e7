//! Past messages never change once they are in the context, yet every model
//! call sends them all again. Re-encoding each one per call made a turn's
//! cost grow with the session's length; this cache keeps each message's wire
//! JSON, so a call only encodes what is new and copies the rest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use super::Message;

use crate::util::lock;

/// Encoded JSON per message, keyed by the message's allocation. The `Weak`
/// keeps that allocation from being reused by another message while the
/// entry exists, so the key cannot alias; entries whose message is gone are
/// swept out.
#[derive(Default)]
pub struct EncodedMessages {
    entries: Mutex<HashMap<usize, Encoded>>,
}

/// The message (held weakly) and its wire items joined by commas.
type Encoded = (Weak<Message>, Arc<str>);

impl EncodedMessages {
    /// The wire form of `messages` as the inside of a JSON array (items
    /// separated by commas). `encode` turns one message into its wire items
    /// (a message may become none, one or several).
    pub fn join(
        &self,
        messages: &[Arc<Message>],
        encode: impl Fn(&Message, &mut Vec<Value>),
    ) -> String {
        let mut entries = lock(&self.entries);
        let mut out = String::new();
        for message in messages {
            let key = Arc::as_ptr(message) as usize;
            let encoded = match entries.get(&key) {
                Some((weak, encoded)) if weak.upgrade().is_some() => Arc::clone(encoded),
                _ => {
                    let mut items = Vec::new();
                    encode(message, &mut items);
                    let encoded: Arc<str> = items
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                        .into();
                    entries.insert(key, (Arc::downgrade(message), Arc::clone(&encoded)));
                    encoded
                }
            };
            if encoded.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(&encoded);
        }
        // Messages dropped from every context (compaction, /clear, closed
        // sessions) leave; swept only when the cache has clearly outgrown
        // what is in use, so the sweep stays amortised O(1) per message.
        if entries.len() > 2 * messages.len() + 64 {
            entries.retain(|_, (weak, _)| weak.strong_count() > 0);
        }
        out
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

/// `body` (a JSON object without `key`) with `"key": [items]` added, as text.
pub fn with_array_field(body: &Value, key: &str, items: &str) -> String {
    let rest = body.to_string();
    let mut out = String::with_capacity(rest.len() + items.len() + key.len() + 8);
    out.push('{');
    out.push_str(&Value::from(key).to_string());
    out.push_str(":[");
    out.push_str(items);
    out.push(']');
    match rest.strip_prefix('{') {
        Some("}") | None => out.push('}'),
        Some(fields) => {
            out.push(',');
            out.push_str(fields);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encode(message: &Message, out: &mut Vec<Value>) {
        for _ in 0..message.parts.len() {
            out.push(json!({ "text": message.text() }));
        }
    }

    #[test]
    fn joined_items_parse_back_in_order_and_empty_messages_vanish() {
        let cache = EncodedMessages::default();
        let messages = vec![
            Arc::new(Message::user_text("a")),
            Arc::new(Message {
                role: super::super::Role::User,
                parts: Vec::new(),
            }),
            Arc::new(Message::assistant_text("b")),
        ];
        let joined = cache.join(&messages, encode);
        let body = with_array_field(&json!({"model": "m"}), "messages", &joined);
        let parsed: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            parsed,
            json!({"model": "m", "messages": [{"text": "a"}, {"text": "b"}]})
        );
    }

    #[test]
    fn a_message_is_encoded_once_and_forgotten_when_dropped() {
        let cache = EncodedMessages::default();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let counting = |message: &Message, out: &mut Vec<Value>| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            encode(message, out);
        };
        let kept = Arc::new(Message::user_text("kept"));
        for _ in 0..3 {
            cache.join(&[Arc::clone(&kept)], counting);
        }
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1);
        for i in 0..200 {
            let passing = Arc::new(Message::user_text(format!("gone {i}")));
            cache.join(&[Arc::clone(&kept), passing], counting);
        }
        assert!(
            cache.len() < 100,
            "dropped messages were swept: {}",
            cache.len()
        );
    }

    #[test]
    fn an_empty_body_still_gets_the_field() {
        assert_eq!(with_array_field(&json!({}), "m", "1,2"), r#"{"m":[1,2]}"#);
    }
}
