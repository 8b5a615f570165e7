//! llama.cpp's server slots: a session keeps the slot it started on. A
//! llama-server started with `-np N` holds N slots, each with the prompt
//! it last read in its cache; a request that lands on another slot than
//! the session's last one reads the whole prefix again. Where the server
//! lets a client choose (`id_slot` in the body), every request with the
//! same cache key (the session's id: its turns, its warm-ups and its
//! compactions) asks for one slot, and new sessions spread over the slots.
//!
//! Detection costs nothing on the way to `initialize`: llama-server names
//! itself in the `Server` header of every answer (the model list the
//! session reads for its window, or a chat answer), and only then is its
//! `/props` (`total_slots`; `/slots` where an older server has no count)
//! asked once. Any other server is never asked and gets no `id_slot`.
//!
//! A delegated agent is a session of its own, so it takes the least-used
//! slot too: sharing its parent's would overwrite the parent's cached
//! prefix while the parent waits for it, and the parent's next call would
//! read everything again.

use std::collections::HashMap;
use std::sync::Mutex;

use reqwest::header::{HeaderMap, SERVER};
use serde::{Deserialize, Serialize};

use super::lenient::Lenient;
use crate::util::lock;

/// One of the server's slots, as `id_slot` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SlotId(pub u32);

/// Cache keys kept at most; past it the least recently used goes (a
/// session that comes back after that is placed again).
const MAX_KEYS: usize = 4096;

/// What the provider knows of its server's slots and which session has
/// which. One per provider; cheap when the server is not llama.cpp.
#[derive(Debug, Default)]
pub struct ServerSlots {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// An answer's `Server` header named llama.cpp.
    llama_cpp: bool,
    /// What the server said of its slots; None: not asked yet.
    count: Option<SlotCount>,
    /// Session (cache key) → its slot.
    placed: HashMap<String, Placed>,
    /// Per slot, when it was last asked for (0: never).
    last_used: Vec<u64>,
    /// A counter for "when": each placement or use takes the next value.
    clock: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotCount {
    /// The server did not say (or has one slot): nothing to choose.
    Unknown,
    Slots(u32),
}

#[derive(Debug, Clone, Copy)]
struct Placed {
    slot: u32,
    used: u64,
}

/// `GET /props`: only the slot count is read.
#[derive(Debug, Default, Deserialize)]
pub struct Props {
    #[serde(default)]
    pub total_slots: Lenient<u32>,
}

/// `GET /slots`: one entry per slot (older servers' only count).
#[derive(Debug, Default, Deserialize)]
#[serde(transparent)]
pub struct SlotList(pub Vec<serde::de::IgnoredAny>);

impl ServerSlots {
    /// Note who answered: a `Server: llama.cpp` header marks llama-server.
    pub fn observe(&self, headers: &HeaderMap) {
        let llama = (headers.get(SERVER))
            .and_then(|value| value.to_str().ok())
            .is_some_and(|server| server.trim().starts_with("llama.cpp"));
        if llama {
            lock(&self.inner).llama_cpp = true;
        }
    }

    /// Whether the server is llama.cpp and its slots are still to be asked.
    pub fn needs_count(&self) -> bool {
        let inner = lock(&self.inner);
        inner.llama_cpp && inner.count.is_none()
    }

    /// What the server said: its slot count, or nothing readable. The
    /// sessions keep their slots while the count stays what it was.
    pub fn counted(&self, total: Option<u32>) {
        let mut inner = lock(&self.inner);
        let count = match total {
            Some(total) if total > 1 => SlotCount::Slots(total),
            _ => SlotCount::Unknown,
        };
        if inner.last_used.len() != total.unwrap_or(0) as usize || count == SlotCount::Unknown {
            inner.last_used = vec![0; total.unwrap_or(0) as usize];
            inner.placed.clear();
        }
        inner.count = Some(count);
    }

    /// Ask the count again before the next request: a request failed, and
    /// the server may have been restarted with another `-np`.
    pub fn recount(&self) {
        lock(&self.inner).count = None;
    }

    /// The slot for the requests of `key`: the one it has, else the
    /// least-used (fewest sessions placed there, then the one idle
    /// longest, then the lowest). None where the server offers no choice.
    pub fn slot_for(&self, key: &str) -> Option<SlotId> {
        let mut inner = lock(&self.inner);
        let Some(SlotCount::Slots(total)) = inner.count else {
            return None;
        };
        inner.clock += 1;
        let now = inner.clock;
        let slot = match inner.placed.get_mut(key) {
            Some(placed) => {
                placed.used = now;
                placed.slot
            }
            None => {
                let slot = inner.least_used(total);
                inner.forget_oldest_past(MAX_KEYS - 1);
                inner
                    .placed
                    .insert(key.to_string(), Placed { slot, used: now });
                slot
            }
        };
        if let Some(last) = inner.last_used.get_mut(slot as usize) {
            *last = now;
        }
        Some(SlotId(slot))
    }

    /// The session of `key` ended: its slot counts one session less.
    pub fn release(&self, key: &str) {
        lock(&self.inner).placed.remove(key);
    }
}

impl Inner {
    fn least_used(&self, total: u32) -> u32 {
        let mut sessions = vec![0usize; total as usize];
        for placed in self.placed.values() {
            if let Some(count) = sessions.get_mut(placed.slot as usize) {
                *count += 1;
            }
        }
        (0..total)
            .min_by_key(|&slot| {
                let at = slot as usize;
                (sessions[at], self.last_used.get(at).copied().unwrap_or(0))
            })
            .unwrap_or(0)
    }

    /// Keep at most `keep` placements, dropping the least recently used.
    fn forget_oldest_past(&mut self, keep: usize) {
        while self.placed.len() > keep {
            let oldest = (self.placed.iter())
                .min_by_key(|(_, placed)| placed.used)
                .map(|(key, _)| key.clone());
            match oldest {
                Some(key) => self.placed.remove(&key),
                None => break,
            };
        }
    }
}

/// The server's root, where llama-server answers `/props` and `/slots`:
/// the endpoint without its `/v1`.
pub fn server_root(endpoint: &str) -> &str {
    endpoint.strip_suffix("/v1").unwrap_or(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn llama(total: Option<u32>) -> ServerSlots {
        let slots = ServerSlots::default();
        let mut headers = HeaderMap::new();
        headers.insert(SERVER, HeaderValue::from_static("llama.cpp"));
        slots.observe(&headers);
        assert!(slots.needs_count());
        slots.counted(total);
        assert!(!slots.needs_count());
        slots
    }

    #[test]
    fn a_session_keeps_its_slot_and_sessions_spread_over_the_slots() {
        let slots = llama(Some(2));
        let a = slots.slot_for("a");
        let b = slots.slot_for("b");
        assert!(a.is_some() && b.is_some());
        assert_ne!(a, b);
        for _ in 0..3 {
            assert_eq!(slots.slot_for("a"), a);
            assert_eq!(slots.slot_for("b"), b);
        }
        // A third shares the slot idle longest: b's was used last.
        slots.slot_for("b");
        assert_eq!(slots.slot_for("c"), a);
        // When b's session ends, its slot is the least used again.
        slots.release("b");
        assert_eq!(slots.slot_for("d"), b);
    }

    #[test]
    fn other_servers_and_single_slots_get_none_and_are_never_counted() {
        let other = ServerSlots::default();
        let mut headers = HeaderMap::new();
        headers.insert(SERVER, HeaderValue::from_static("uvicorn"));
        other.observe(&headers);
        assert!(
            !other.needs_count(),
            "only llama.cpp is asked for its slots"
        );
        assert_eq!(other.slot_for("a"), None);
        assert_eq!(llama(Some(1)).slot_for("a"), None);
        assert_eq!(llama(None).slot_for("a"), None);
    }

    #[test]
    fn a_recount_keeps_the_places_unless_the_count_changed() {
        let slots = llama(Some(4));
        let a = slots.slot_for("a");
        let b = slots.slot_for("b");
        slots.recount();
        assert!(slots.needs_count());
        assert_eq!(slots.slot_for("a"), None, "not until asked again");
        slots.counted(Some(4));
        assert_eq!((slots.slot_for("b"), slots.slot_for("a")), (b, a));
        slots.recount();
        slots.counted(Some(2));
        assert_eq!(slots.slot_for("b"), Some(SlotId(0)), "placed again");
    }

    #[test]
    fn the_root_drops_v1_and_the_counts_read_as_llama_server_writes_them() {
        assert_eq!(
            server_root("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(server_root("http://h:1"), "http://h:1");
        let props: Props =
            serde_json::from_str(r#"{"total_slots": 2, "model_alias": "m", "n_ctx": 4096}"#)
                .unwrap();
        assert_eq!(props.total_slots.into_option(), Some(2));
        let list: SlotList =
            serde_json::from_str(r#"[{"id":0,"n_ctx":4096},{"id":1,"n_ctx":4096}]"#).unwrap();
        assert_eq!(list.0.len(), 2);
    }

    #[test]
    fn the_placements_stay_bounded() {
        let slots = llama(Some(2));
        for n in 0..MAX_KEYS + 10 {
            slots.slot_for(&format!("s{n}"));
        }
        assert_eq!(lock(&slots.inner).placed.len(), MAX_KEYS);
    }
}
