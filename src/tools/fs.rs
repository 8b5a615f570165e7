//! File contents behind a small trait: on the local disk now, through the
//! editor (ACP `fs/read_text_file`, `fs/write_text_file`) later, so the
//! editor sees unsaved buffers and records edits.

use std::io;
use std::path::Path;

use futures::future::BoxFuture;
use tokio::io::AsyncWriteExt;

use super::ToolError;

/// A file operation under way.
pub type FsFuture<'a, T> = BoxFuture<'a, Result<T, ToolError>>;

/// Which lines of a file to read: `limit` lines from the 1-based `line` on,
/// as ACP's `fs/read_text_file` asks; by default the whole file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineWindow {
    pub line: Option<u32>,
    pub limit: Option<u32>,
}

impl LineWindow {
    pub const WHOLE: Self = Self {
        line: None,
        limit: None,
    };
}

/// Reads and writes whole text files. Paths are absolute and already
/// confined by [`super::ToolContext::resolve`]. A missing file must be
/// [`ToolError::NotFound`]: `write_file` tells a new file by it.
pub trait FileSystem: Send + Sync {
    /// The file's text, or the lines of it `window` asks for.
    fn read_text_file<'a>(&'a self, path: &'a Path, window: LineWindow) -> FsFuture<'a, String>;

    /// Replaces the file's text, creating the file and any missing
    /// parent directories.
    fn write_text_file<'a>(&'a self, path: &'a Path, content: &'a str) -> FsFuture<'a, ()>;
}

/// The local disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalFs {
    /// Larger files are refused rather than loaded into memory.
    pub max_file_bytes: u64,
}

impl Default for LocalFs {
    fn default() -> Self {
        Self {
            max_file_bytes: 32 * 1024 * 1024,
        }
    }
}

impl FileSystem for LocalFs {
    fn read_text_file<'a>(&'a self, path: &'a Path, window: LineWindow) -> FsFuture<'a, String> {
        Box::pin(async move {
            let meta = tokio::fs::metadata(path)
                .await
                .map_err(|err| io_error(path, err))?;
            if meta.is_dir() {
                return Err(ToolError::Failed(format!(
                    "{} is a directory, not a file; use list_dir to see what it holds",
                    path.display()
                )));
            }
            if meta.len() > self.max_file_bytes {
                return Err(ToolError::TooLarge {
                    path: path.display().to_string(),
                    size: meta.len(),
                    limit: self.max_file_bytes,
                });
            }
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|err| io_error(path, err))?;
            let not_text = || ToolError::NotText {
                path: path.display().to_string(),
            };
            if looks_binary(&bytes) {
                return Err(not_text());
            }
            let text = String::from_utf8(bytes).map_err(|_| not_text())?;
            Ok(if window == LineWindow::WHOLE {
                text
            } else {
                select_lines(&text, window).to_string()
            })
        })
    }

    fn write_text_file<'a>(&'a self, path: &'a Path, content: &'a str) -> FsFuture<'a, ()> {
        Box::pin(async move {
            // Write through a symlink to its target rather than replacing the link.
            let target = tokio::fs::canonicalize(path)
                .await
                .unwrap_or_else(|_| path.to_path_buf());
            let existing = match tokio::fs::metadata(&target).await {
                Ok(meta) if meta.is_dir() => {
                    return Err(ToolError::Failed(format!(
                        "{} is a directory; give the path of a file",
                        path.display()
                    )));
                }
                Ok(meta) => Some(meta),
                Err(_) => None,
            };
            let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
                return Err(ToolError::Failed(format!(
                    "{} is not a file path",
                    path.display()
                )));
            };
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|err| io_error(parent, err))?;
            // A temp file in the same directory, renamed over the target: readers
            // never see half a file.
            let temp = parent.join(format!(
                ".{}.{:016x}.tmp",
                name.to_string_lossy(),
                fastrand::u64(..)
            ));
            let written = write_new(&temp, content, existing.map(|meta| meta.permissions())).await;
            let renamed = match written {
                Ok(()) => tokio::fs::rename(&temp, &target).await,
                Err(err) => Err(err),
            };
            if let Err(err) = renamed {
                let _ = tokio::fs::remove_file(&temp).await;
                return Err(io_error(path, err));
            }
            Ok(())
        })
    }
}

async fn write_new(
    path: &Path,
    content: &str,
    permissions: Option<std::fs::Permissions>,
) -> io::Result<()> {
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .await?;
    file.write_all(content.as_bytes()).await?;
    // Keep the mode of the file being replaced (an executable script stays one).
    if let Some(permissions) = permissions {
        file.set_permissions(permissions).await?;
    }
    file.sync_all().await?;
    Ok(())
}

pub(crate) fn io_error(path: &Path, err: io::Error) -> ToolError {
    if err.kind() == io::ErrorKind::NotFound {
        ToolError::NotFound {
            path: path.display().to_string(),
        }
    } else {
        ToolError::Io {
            path: path.display().to_string(),
            source: err,
        }
    }
}

/// A NUL byte early on means binary, as git and grep judge it.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|byte| *byte == 0)
}

/// The window's lines, with their line ends.
pub(crate) fn select_lines(text: &str, window: LineWindow) -> &str {
    let skip = window.line.unwrap_or(1).saturating_sub(1) as usize;
    let mut starts = text.split_inclusive('\n').scan(0, |offset, piece| {
        let start = *offset;
        *offset += piece.len();
        Some(start)
    });
    let Some(start) = starts.nth(skip) else {
        return "";
    };
    let end = match window.limit {
        Some(limit) => {
            text[start..]
                .split_inclusive('\n')
                .take(limit as usize)
                .map(str::len)
                .sum::<usize>()
                + start
        }
        None => text.len(),
    };
    &text[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_whole_files_and_line_windows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "one\ntwo\nthree\nfour").unwrap();
        let fs = LocalFs::default();
        let table = [
            (None, None, "one\ntwo\nthree\nfour"),
            (Some(2), Some(2), "two\nthree\n"),
            (Some(3), None, "three\nfour"),
            (None, Some(1), "one\n"),
            (Some(9), None, ""),
        ];
        for (line, limit, expected) in table {
            let window = LineWindow { line, limit };
            let text = fs.read_text_file(&path, window).await.unwrap();
            assert_eq!(text, expected, "{window:?}");
        }
    }

    #[tokio::test]
    async fn refuses_missing_binary_large_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let fs = LocalFs { max_file_bytes: 10 };
        let missing = fs
            .read_text_file(&dir.path().join("nope"), LineWindow::WHOLE)
            .await;
        assert!(matches!(missing, Err(ToolError::NotFound { .. })));

        std::fs::write(dir.path().join("bin"), b"ab\0cd").unwrap();
        let binary = fs
            .read_text_file(&dir.path().join("bin"), LineWindow::WHOLE)
            .await;
        assert!(matches!(binary, Err(ToolError::NotText { .. })));

        std::fs::write(dir.path().join("latin1"), b"caf\xe9").unwrap();
        let latin1 = fs
            .read_text_file(&dir.path().join("latin1"), LineWindow::WHOLE)
            .await;
        assert!(matches!(latin1, Err(ToolError::NotText { .. })));

        std::fs::write(dir.path().join("big"), "x".repeat(11)).unwrap();
        let big = fs
            .read_text_file(&dir.path().join("big"), LineWindow::WHOLE)
            .await;
        assert!(matches!(big, Err(ToolError::TooLarge { size: 11, .. })));

        let directory = fs
            .read_text_file(dir.path(), LineWindow::WHOLE)
            .await
            .unwrap_err();
        assert!(directory.to_string().contains("list_dir"), "{directory}");
    }

    #[tokio::test]
    async fn writes_create_directories_and_leave_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/deeper/a.txt");
        let fs = LocalFs::default();
        fs.write_text_file(&path, "hello").await.unwrap();
        fs.write_text_file(&path, "hello again").await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello again");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("new/deeper"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.txt"]);
    }

    #[tokio::test]
    async fn writes_keep_the_file_mode_and_follow_symlinks() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let link = dir.path().join("link.sh");
        std::os::unix::fs::symlink(&script, &link).unwrap();

        LocalFs::default()
            .write_text_file(&link, "#!/bin/sh\necho hi\n")
            .await
            .unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(&script).unwrap(),
            "#!/bin/sh\necho hi\n"
        );
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[tokio::test]
    async fn writing_over_a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = LocalFs::default()
            .write_text_file(dir.path(), "x")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
    }
}
