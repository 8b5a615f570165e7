//! File contents behind a small trait: on the local disk, or through the
//! editor (ACP `fs/read_text_file`, `fs/write_text_file`) where it offers
//! them, so the editor sees unsaved buffers and records edits.

use std::io::{self, Read};
use std::path::Path;

use futures::future::BoxFuture;

use super::ToolError;

pub(super) mod confine;
mod confined;

pub(crate) use confine::confine;
pub use confined::ConfinedPath;

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

/// Reads and writes whole text files, at paths confined by [`confine`].
/// A missing file must be [`ToolError::NotFound`]: `write_file` tells a new file by it.
pub trait FileSystem: Send + Sync {
    /// The file's text, or the lines of it `window` asks for.
    fn read_text_file<'a>(
        &'a self,
        path: &'a ConfinedPath,
        window: LineWindow,
    ) -> FsFuture<'a, String>;

    /// Replaces the file's text, creating the file and any missing
    /// parent directories.
    fn write_text_file<'a>(&'a self, path: &'a ConfinedPath, content: &'a str) -> FsFuture<'a, ()>;
}

/// The local disk, reached from the allowed root down (see [`ConfinedPath`]).
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
    fn read_text_file<'a>(
        &'a self,
        path: &'a ConfinedPath,
        window: LineWindow,
    ) -> FsFuture<'a, String> {
        Box::pin(async move {
            let max_file_bytes = self.max_file_bytes;
            let place = path.clone();
            let found = blocking(path, move || {
                let file = place.open()?;
                let meta = file.metadata()?;
                if meta.is_dir() {
                    return Ok(Found::Directory);
                }
                if meta.len() > max_file_bytes {
                    return Ok(Found::TooLarge(meta.len()));
                }
                let mut bytes = Vec::new();
                // The limit again: the file may grow after the check.
                file.take(max_file_bytes + 1).read_to_end(&mut bytes)?;
                Ok(match bytes.len() as u64 {
                    size if size > max_file_bytes => Found::TooLarge(size),
                    _ => Found::File(bytes),
                })
            })
            .await?;
            let shown = path.path();
            let bytes = match found {
                Found::File(bytes) => bytes,
                Found::TooLarge(size) => {
                    return Err(ToolError::TooLarge {
                        path: shown.display().to_string(),
                        size,
                        limit: max_file_bytes,
                    });
                }
                Found::Directory => {
                    return Err(ToolError::Failed(format!(
                        "{} is a directory, not a file; use list_dir to see what it holds",
                        shown.display()
                    )));
                }
            };
            let not_text = || ToolError::NotText {
                path: shown.display().to_string(),
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

    fn write_text_file<'a>(&'a self, path: &'a ConfinedPath, content: &'a str) -> FsFuture<'a, ()> {
        Box::pin(async move {
            let place = path.clone();
            let content = content.to_string();
            blocking(path, move || place.write(content.as_bytes())).await
        })
    }
}

/// What a read found at the path.
enum Found {
    File(Vec<u8>),
    Directory,
    TooLarge(u64),
}

/// Runs blocking file work off the runtime, its errors told as the tools
/// tell them.
async fn blocking<T: Send + 'static>(
    path: &ConfinedPath,
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(io_error(path.path(), err)),
        Err(err) => Err(ToolError::Failed(format!(
            "the file operation on {} stopped: {err}",
            path.path().display()
        ))),
    }
}

pub(crate) fn io_error(path: &Path, err: io::Error) -> ToolError {
    if confined::left_the_root(&err) {
        ToolError::Failed(format!(
            "{} now leads outside the workspace (a symlink on the way was changed); nothing was read or written",
            path.display()
        ))
    } else if err.kind() == io::ErrorKind::IsADirectory {
        ToolError::Failed(format!(
            "{} is a directory; give the path of a file",
            path.display()
        ))
    } else if err.kind() == io::ErrorKind::NotFound {
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

/// Confined paths for tests, checked against one root.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    use super::{ConfinedPath, ToolError};

    pub fn place(root: impl AsRef<Path>, path: &str) -> ConfinedPath {
        checked(root, path).unwrap()
    }

    /// `path` checked against `root` alone, as a session in `root` checks it.
    pub fn checked(root: impl AsRef<Path>, path: &str) -> Result<ConfinedPath, ToolError> {
        let root = root.as_ref();
        super::confine(path, root, vec![root.to_path_buf()])
    }
}

#[cfg(test)]
mod tests {
    use super::testing::place;
    use super::*;

    #[tokio::test]
    async fn reads_whole_files_and_line_windows() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\nfour").unwrap();
        let path = place(dir.path(), "a.txt");
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
            .read_text_file(&place(dir.path(), "nope"), LineWindow::WHOLE)
            .await;
        assert!(matches!(missing, Err(ToolError::NotFound { .. })));

        std::fs::write(dir.path().join("bin"), b"ab\0cd").unwrap();
        let binary = fs
            .read_text_file(&place(dir.path(), "bin"), LineWindow::WHOLE)
            .await;
        assert!(matches!(binary, Err(ToolError::NotText { .. })));

        std::fs::write(dir.path().join("latin1"), b"caf\xe9").unwrap();
        let latin1 = fs
            .read_text_file(&place(dir.path(), "latin1"), LineWindow::WHOLE)
            .await;
        assert!(matches!(latin1, Err(ToolError::NotText { .. })));

        std::fs::write(dir.path().join("big"), "x".repeat(11)).unwrap();
        let big = fs
            .read_text_file(&place(dir.path(), "big"), LineWindow::WHOLE)
            .await;
        assert!(matches!(big, Err(ToolError::TooLarge { size: 11, .. })));

        let directory = fs
            .read_text_file(&place(dir.path(), "."), LineWindow::WHOLE)
            .await
            .unwrap_err();
        assert!(directory.to_string().contains("list_dir"), "{directory}");
    }

    #[tokio::test]
    async fn writes_create_directories_and_leave_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = place(dir.path(), "new/deeper/a.txt");
        let fs = LocalFs::default();
        fs.write_text_file(&path, "hello").await.unwrap();
        fs.write_text_file(&path, "hello again").await.unwrap();
        assert_eq!(std::fs::read_to_string(path.path()).unwrap(), "hello again");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("new/deeper"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.txt"]);
    }

    #[cfg(unix)]
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
            .write_text_file(&place(dir.path(), "link.sh"), "#!/bin/sh\necho hi\n")
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
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        for path in [".", "sub"] {
            let err = LocalFs::default()
                .write_text_file(&place(dir.path(), path), "x")
                .await
                .unwrap_err();
            assert!(err.to_string().contains("is a directory"), "{path}: {err}");
        }
    }
}
