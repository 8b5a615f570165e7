//! Directory walks shared by list_dir, glob and grep: .gitignore-aware
//! (also outside a git repository), hidden files included, `.git` left out,
//! symlinks not followed (they could lead outside the workspace), sorted.

use std::path::Path;

use super::Target;
use crate::tools::sensitive::SensitiveFiles;
use crate::tools::{ToolContext, ToolError};

fn walker(root: &Path, max_depth: Option<usize>) -> ignore::Walk {
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| entry.file_name() != ".git");
    builder.build()
}

/// Walks `root` down to `max_depth` on a blocking thread, handing each
/// entry to `visit` with `state`; answers [`ToolError::Cancelled`] once the
/// call's token fires.
pub(super) async fn walk<S, F>(
    ctx: &ToolContext,
    root: &Path,
    max_depth: Option<usize>,
    mut state: S,
    mut visit: F,
) -> Result<S, ToolError>
where
    S: Send + 'static,
    F: FnMut(&mut S, ignore::DirEntry) + Send + 'static,
{
    let cancel = ctx.cancel.clone();
    let root = root.to_path_buf();
    tokio::task::spawn_blocking(move || {
        for entry in walker(&root, max_depth).flatten() {
            if cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            visit(&mut state, entry);
        }
        Ok(state)
    })
    .await
    .map_err(|err| ToolError::Failed(format!("the directory walk stopped unexpectedly: {err}")))?
}

/// Whether grep or glob leave the file at `path` out as one that usually
/// holds secrets ([`crate::tools::sensitive`]): yes, unless it was asked for
/// by name, as the walk's `root` itself or by a `pattern` whose last part
/// has no wildcard.
pub(super) fn skipped_as_sensitive(
    files: &SensitiveFiles,
    path: &Path,
    root: &Path,
    pattern: Option<&str>,
) -> bool {
    let named = pattern.is_some_and(|pattern| {
        let last = pattern.rsplit('/').next().unwrap_or(pattern);
        !last.contains(['*', '?', '[', '{'])
    });
    path != root && !named && files.matching(path).is_some()
}

/// Whether the entry is a file (symlinks are not followed, so not them).
pub(super) fn is_file(entry: &ignore::DirEntry) -> bool {
    entry.file_type().is_some_and(|kind| kind.is_file())
}

/// Whether `dir` is a directory, told as the model should hear it.
pub(super) async fn require_dir(dir: &Target) -> Result<(), ToolError> {
    match tokio::fs::metadata(dir.path()).await {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(ToolError::Failed(format!(
            "{} is a file, not a directory; use read_file to read it",
            dir.shown
        ))),
        Err(err) => Err(dir.error(crate::tools::fs::io_error(dir.path(), err))),
    }
}
