//! The port through which the file tools tell the session what they are
//! about to change, so a rewind can put it back (`context::rewind`).

use std::path::Path;

/// What a file held before the agent wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    Absent,
    Content(Vec<u8>),
}

/// Told of every file write the agent makes, after it succeeded.
pub trait FileJournal: Send + Sync {
    fn written(&self, path: &Path, before: Before, after: &[u8]);
}

/// What `path` holds on disk now, read before a write. None: it cannot be
/// read (the write goes on; the change is not kept).
pub fn before(path: &Path) -> Option<Before> {
    match std::fs::read(path) {
        Ok(bytes) => Some(Before::Content(bytes)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some(Before::Absent),
        Err(err) => {
            tracing::warn!(path = %path.display(), %err, "cannot keep the file's content for a rewind");
            None
        }
    }
}
