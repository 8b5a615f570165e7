//! The port through which the file tools tell the session what they are
//! about to change, so a rewind can put it back (`context::rewind`).

use std::path::Path;

use super::ConfinedPath;

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
/// it: a sensitive file's content is withheld.
pub fn before_write(place: &ConfinedPath, ctx: &super::ToolContext) -> Option<Before> {
    let path = place.path();
    if ctx.settings.sensitive_files.matching(path).is_some() {
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

/// The files a tool without a file tool's knowledge (an MCP tool marked
/// destructive) may write: each path-like argument (a string whose key
/// names a path or file) inside the workspace, with what it holds before
/// the call; after it, those that changed are told to the journal.
pub struct Watch {
    files: Vec<(ConfinedPath, Before)>,
}

impl Watch {
    pub fn before_call(arguments: &serde_json::Value, ctx: &super::ToolContext) -> Self {
        let mut files = Vec::new();
        if ctx.journal.is_some()
            && let Some(arguments) = arguments.as_object()
        {
            for (key, value) in arguments {
                let key = key.to_ascii_lowercase();
                let Some(path) = value.as_str() else { continue };
                if !(key.contains("path") || key.contains("file")) {
                    continue;
                }
                let Ok(place) = ctx.confine(path) else {
                    continue;
                };
                if place.path().is_dir() {
                    continue;
                }
                if let Some(before) = before_write(&place, ctx) {
                    files.push((place, before));
                }
            }
        }
        Self { files }
    }

    /// After the call: the files it changed, told to the journal.
    pub fn after_call(self, ctx: &super::ToolContext) {
        let Some(journal) = &ctx.journal else { return };
        for (place, was) in self.files {
            let after = match place.read_if_present() {
                Ok(Some(bytes)) => bytes,
                // Removed: nothing a hash of the agent's write could name.
                _ => continue,
            };
            if was != Before::Content(after.clone()) {
                journal.written(place.path(), was, &after);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Kept(Mutex<Vec<(std::path::PathBuf, Before, Vec<u8>)>>);

    impl FileJournal for Kept {
        fn written(&self, path: &Path, before: Before, after: &[u8]) {
            crate::util::lock(&self.0).push((path.to_path_buf(), before, after.to_vec()));
        }
    }

    #[test]
    fn a_watched_call_tells_the_files_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = super::super::ToolContext::local(dir.path());
        let kept = Arc::new(Kept::default());
        ctx.journal = Some(kept.clone());
        std::fs::write(dir.path().join("a.txt"), "old").unwrap();
        std::fs::write(dir.path().join("same.txt"), "same").unwrap();
        let arguments = serde_json::json!({
            "file_path": "a.txt", "target_file": "new.txt", "path": "same.txt",
            "content": "a.txt", "other": 3
        });
        let watch = Watch::before_call(&arguments, &ctx);
        std::fs::write(dir.path().join("a.txt"), "new").unwrap();
        std::fs::write(dir.path().join("new.txt"), "created").unwrap();
        watch.after_call(&ctx);
        let mut told = crate::util::lock(&kept.0).clone();
        told.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(told.len(), 2, "{told:?}");
        assert_eq!(told[0].1, Before::Content(b"old".to_vec()));
        assert_eq!(told[1].1, Before::Absent);
        assert_eq!(told[1].2, b"created");
    }
}
