//! Journalling the writes of a tool that is no file tool (an MCP tool
//! marked destructive), from the paths its arguments name.

use super::ToolContext;
use super::fs::ConfinedPath;
use super::journal::{Before, before_write};

/// The files a tool without a file tool's knowledge (an MCP tool marked
/// destructive) may write: each path-like argument (a string whose key
/// names a path or file) inside the workspace, with what it holds before
/// the call; after it, those that changed are told to the journal.
pub struct Watch {
    files: Vec<(ConfinedPath, Before)>,
}

impl Watch {
    pub fn before_call(arguments: &serde_json::Value, ctx: &ToolContext) -> Self {
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
                if let Some(before) = before_write(&place, &ctx.settings.sensitive_files) {
                    files.push((place, before));
                }
            }
        }
        Self { files }
    }

    /// After the call: the files it changed, told to the journal.
    pub fn after_call(self, ctx: &ToolContext) {
        let Some(journal) = &ctx.journal else { return };
        for (place, was) in self.files {
            // Removed: nothing a hash of the agent's write could name.
            let Ok(Some(after)) = place.read_if_present() else {
                continue;
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
    use crate::tools::journal::FileJournal;
    use std::path::Path;
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
        let mut ctx = ToolContext::local(dir.path());
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
