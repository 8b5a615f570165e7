//! Sessions on disk, under the data dir:
//!
//! ```text
//! sessions/<id>/metadata.json   who the session is (rewritten atomically)
//! sessions/<id>/history.jsonl   what happened, one StoredEvent a line, append-only
//! sessions/<id>/lock            flock'ed by the process that has the session open
//! ```
//!
//! The history holds two views of a conversation: the updates the client saw
//! (replayed by `session/load`) and the messages the model saw (the context a
//! loaded session continues from). A torn last line after a crash and lines
//! this version cannot read are skipped with a warning, never an error.
//! Writes happen on a writer thread per open session, so an actor never
//! waits on the disk.

mod events;
mod files;
mod recorder;

pub use events::{Restored, StoredEvent, StoredUpdate, context_from, replay_from, title_from};
pub use files::{ListPage, Metadata, OpenSession, Store, StoreError, list_page, now_rfc3339};
pub use recorder::Recorder;
