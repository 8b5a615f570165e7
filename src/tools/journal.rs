//! The port through which the file tools tell the session what they are
//! about to change, so a rewind can put it back (`context::rewind`).

use std::path::Path;

use super::ConfinedPath;
use super::sensitive::SensitiveFiles;

/// What a file held before the agent wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    Absent,
    Content(Vec<u8>),
    /// It existed, but it is a sensitive file (`[sensitive_files]`): its
    /// content is not kept, so no secret reaches the session's store.
    Withheld,
}

/// Told of every file write the agent makes, after it succeeded.
pub trait FileJournal: Send + Sync {
    fn written(&self, path: &Path, before: Before, after: &[u8]);
}

/// What `place` holds before the agent writes it, as the journal may keep
/// it: the content of a file `sensitive` names is withheld.
pub fn before_write(place: &ConfinedPath, sensitive: &SensitiveFiles) -> Option<Before> {
    let path = place.path();
    if sensitive.matching(path).is_some() {
        return Some(if path.exists() {
            Before::Withheld
        } else {
            Before::Absent
        });
    }
    match place.read_if_present() {
        Ok(Some(bytes)) => Some(Before::Content(bytes)),
        Ok(None) => Some(Before::Absent),
        Err(err) => {
            tracing::warn!(path = %path.display(), %err, "cannot keep the file's content for a rewind");
            None
        }
    }
}
