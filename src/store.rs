//! Sessions on disk, under the data dir:
//!
//! ```text
//! sessions/<id>/metadata.json   who the session is (rewritten atomically)
//! sessions/<id>/history.jsonl   what happened, one StoredEvent a line, append-only
//! sessions/<id>/lock            flock'ed by the process that has the session open
//! sessions/<id>/blobs/<sha256>  file contents a rewind may put back (content-addressed)
//! ```
//!
//! The history holds two views of a conversation: the updates the client saw
//! (replayed by `session/load`) and the messages the model saw (the context a
//! loaded session continues from). A torn last line after a crash and lines
//! this version cannot read are skipped with a warning, never an error.
//! Writes happen on a writer thread per open session, so an actor never
//! waits on the disk.
//!
//! The files hold the store's own types (`disk`), not the agent's: the
//! format changes only when `disk.rs` does, and `metadata.json` says which
//! format it is (`format_version`; files without it are version 1).

mod blobs;
mod disk;
mod files;
#[cfg(test)]
mod fixture;
mod recorder;
mod views;

pub use blobs::{Blobs, MAX_BLOB_BYTES, content_hash};
pub use disk::{Metadata, PromptIds, StoredEvent, StoredUpdate};
pub use files::{ArchiveMark, ListPage, OpenSession, Store, StoreError, list_page};
pub use recorder::{Recorder, Settings, Titled};
pub use views::{
    Restored, context_from, files_from, keys_from, replay_from, replay_part, todos_from,
    totals_from,
};
