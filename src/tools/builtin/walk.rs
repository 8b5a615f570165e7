//! Directory walks shared by list_dir, glob and grep: .gitignore-aware
//! (also outside a git repository), hidden files included, `.git` left out,
//! symlinks not followed (they could lead outside the workspace), sorted.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::tools::ToolError;

pub(super) fn walker(root: &Path, max_depth: Option<usize>) -> ignore::Walk {
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

/// Runs a walk on a blocking thread; `work` checks the token as it goes
/// and answers [`ToolError::Cancelled`] once it fires.
pub(super) async fn run_blocking<T, F>(cancel: &CancellationToken, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&CancellationToken) -> Result<T, ToolError> + Send + 'static,
{
    let token = cancel.clone();
    tokio::task::spawn_blocking(move || work(&token))
        .await
        .map_err(|err| {
            ToolError::Failed(format!("the directory walk stopped unexpectedly: {err}"))
        })?
}

/// Whether `path` is a directory, told as the model should hear it.
pub(super) async fn require_dir(path: &Path, shown: &str) -> Result<(), ToolError> {
    match tokio::fs::metadata(path).await {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(ToolError::Failed(format!(
            "{shown} is a file, not a directory; use read_file to read it"
        ))),
        Err(err) => Err(super::with_shown_path(
            crate::tools::fs::io_error(path, err),
            shown,
        )),
    }
}
