//! Local file access that cannot leave the root a path was checked
//! against. [`super::confine`] checks where a path
//! really leads; between that check and the access, another program (or
//! the model's own shell command) could swap a directory on the way for a
//! symlink to somewhere else. So the access does not go by the path string:
//! it opens the root and walks down from it with `openat2(RESOLVE_BENEATH)`
//! (cap-std), where any symlink that leads out of the root fails. A symlink
//! that stays inside is still followed, and the last step of a write is a
//! rename inside the parent directory, which replaces a swapped-in link
//! rather than writing through it.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

/// A path the model named, checked against the allowed roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinedPath {
    /// Absolute and normalised, as the model and the editor name it.
    shown: PathBuf,
    /// The allowed root (canonical) the real path lies beneath.
    root: PathBuf,
    /// Where the path really leads, relative to `root`, with no symlinks.
    within: PathBuf,
}

impl ConfinedPath {
    /// `real` must be canonical (its existing part) and start with `root`.
    pub(crate) fn new(shown: PathBuf, root: &Path, real: &Path) -> Option<Self> {
        let within = real.strip_prefix(root).ok()?.to_path_buf();
        Some(Self {
            shown,
            root: root.to_path_buf(),
            within,
        })
    }

    /// The path as the model and the editor know it.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// A path beneath this one (`relative` as a walk of it found it), held
    /// to the same root.
    pub fn child(&self, relative: &Path) -> Self {
        if relative.as_os_str().is_empty() {
            // `join("")` would add a trailing slash, which only a directory has.
            return self.clone();
        }
        Self {
            shown: self.shown.join(relative),
            root: self.root.clone(),
            within: self.within.join(relative),
        }
    }

    fn root_dir(&self) -> io::Result<Dir> {
        Dir::open_ambient_dir(&self.root, ambient_authority())
    }

    /// The file itself, or "." for the root.
    fn target(&self) -> &Path {
        if self.within.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.within
        }
    }

    /// Opens the file for reading. Refused (PermissionDenied) if the way
    /// to it now leads outside the root.
    pub(crate) fn open(&self) -> io::Result<std::fs::File> {
        Ok(self.root_dir()?.open(self.target())?.into_std())
    }

    /// The whole content, or None if there is no such file.
    pub(crate) fn read_if_present(&self) -> io::Result<Option<Vec<u8>>> {
        match self.open() {
            Ok(mut file) => {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                Ok(Some(bytes))
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Replaces the file's content: a temp file beside it, renamed over
    /// it, so readers never see half a file; missing parents are created,
    /// and the mode of the file replaced is kept.
    pub(crate) fn write(&self, content: &[u8]) -> io::Result<()> {
        let (parent, name) = self.parent(Parents::Create)?;
        // Its mode, from the file itself (following a link only if it stays inside).
        let existing = match parent.metadata(name) {
            Ok(meta) if meta.is_dir() => return Err(io::ErrorKind::IsADirectory.into()),
            Ok(meta) => Some(meta.permissions()),
            Err(_) => None,
        };
        let temp = format!(".{}.{:016x}.tmp", name.to_string_lossy(), fastrand::u64(..));
        let written = (|| {
            let file = parent.open_with(&temp, OpenOptions::new().write(true).create_new(true))?;
            if let Some(permissions) = existing {
                file.set_permissions(permissions)?;
            }
            let mut file = file.into_std();
            file.write_all(content)?;
            file.sync_all()?;
            parent.rename(&temp, &parent, name)
        })();
        if written.is_err() {
            let _ = parent.remove_file(&temp);
        }
        written
    }

    /// Removes the file; a file already gone (or its directory) is not an error.
    pub(crate) fn remove(&self) -> io::Result<()> {
        let removed = self
            .parent(Parents::Existing)
            .and_then(|(parent, name)| parent.remove_file(name));
        match removed {
            Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    /// The directory the file is in, opened beneath the root, and the
    /// file's name in it.
    fn parent(&self, parents: Parents) -> io::Result<(Dir, &OsStr)> {
        let root = self.root_dir()?;
        let (Some(parent), Some(name)) = (self.within.parent(), self.within.file_name()) else {
            // The root itself.
            return Err(io::ErrorKind::IsADirectory.into());
        };
        if parent.as_os_str().is_empty() {
            return Ok((root, name));
        }
        let dir = match root.open_dir(parent) {
            Err(err) if err.kind() == io::ErrorKind::NotFound && parents == Parents::Create => {
                root.create_dir_all(parent)?;
                root.open_dir(parent)
            }
            opened => opened,
        }?;
        Ok((dir, name))
    }
}

/// Whether [`ConfinedPath::parent`] creates the directories that are missing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parents {
    Create,
    Existing,
}

/// Whether an error is cap-std's refusal of a path that left the root.
pub(crate) fn left_the_root(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied
        && err.to_string().contains("outside of the filesystem")
}

// Symlink races, made with Unix symlinks.
#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use crate::tools::fs::testing::{checked, place};
    use crate::tools::{FileSystem, LineWindow, LocalFs, ToolError};

    /// A workspace with `sub/f.txt`, and beside it an `outside` directory
    /// holding `f.txt` with a secret.
    fn workspace() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("sub/f.txt"), "inside").unwrap();
        std::fs::write(outside.join("f.txt"), "secret").unwrap();
        (dir, root, outside)
    }

    /// `sub` becomes a symlink to `outside`, as a swap after the check would make it.
    fn swap_in_link(root: &Path, outside: &Path) {
        std::fs::rename(root.join("sub"), root.join("sub.real")).unwrap();
        std::os::unix::fs::symlink(outside, root.join("sub")).unwrap();
    }

    #[tokio::test]
    async fn a_directory_swapped_for_a_symlink_after_the_check_is_not_followed() {
        let (_dir, root, outside) = workspace();
        let checked = place(&root, "sub/f.txt");
        swap_in_link(&root, &outside);

        let write = LocalFs::default()
            .write_text_file(&checked, "overwritten")
            .await
            .unwrap_err();
        assert!(
            write.to_string().contains("outside the workspace"),
            "{write}"
        );
        let read = LocalFs::default()
            .read_text_file(&checked, LineWindow::WHOLE)
            .await
            .unwrap_err();
        assert!(read.to_string().contains("outside the workspace"), "{read}");
        assert!(checked.remove().is_err());
        assert_eq!(
            std::fs::read_to_string(outside.join("f.txt")).unwrap(),
            "secret"
        );
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            1,
            "no temp file outside"
        );
    }

    #[test]
    fn removing_a_file_already_gone_with_its_directory_is_not_an_error() {
        let (_dir, root, _outside) = workspace();
        let checked = place(&root, "sub/f.txt");
        std::fs::remove_dir_all(root.join("sub")).unwrap();
        checked.remove().unwrap();
        assert!(place(&root, ".").remove().is_err(), "the root is no file");
    }

    #[tokio::test]
    async fn a_file_swapped_for_a_symlink_is_replaced_not_written_through() {
        let (_dir, root, outside) = workspace();
        let checked = place(&root, "sub/f.txt");
        std::fs::remove_file(root.join("sub/f.txt")).unwrap();
        std::os::unix::fs::symlink(outside.join("f.txt"), root.join("sub/f.txt")).unwrap();

        let read = LocalFs::default()
            .read_text_file(&checked, LineWindow::WHOLE)
            .await
            .unwrap_err();
        assert!(read.to_string().contains("outside the workspace"), "{read}");
        LocalFs::default()
            .write_text_file(&checked, "new")
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("sub/f.txt")).unwrap(),
            "new"
        );
        assert!(
            !std::fs::symlink_metadata(root.join("sub/f.txt"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("f.txt")).unwrap(),
            "secret"
        );
    }

    #[tokio::test]
    async fn a_symlink_swapped_back_and_forth_during_reads_and_writes_never_leads_outside() {
        let (_dir, root, outside) = workspace();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let swapper = std::thread::spawn({
            let (root, outside) = (root.clone(), outside.clone());
            let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
            // The writer may create `sub` again while it is away, so each
            // step may fail; the swaps that happen are counted.
            move || {
                let (sub, real) = (root.join("sub"), root.join("sub.real"));
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::fs::rename(&sub, &real);
                    if std::os::unix::fs::symlink(&outside, &sub).is_ok() {
                        swaps.fetch_add(1, Ordering::Relaxed);
                        std::thread::yield_now();
                        let _ = std::fs::remove_file(&sub);
                    }
                    let _ = std::fs::rename(&real, &sub);
                    // A moment with `sub` real, or a scheduler that runs
                    // the writer only while it is away leaves nothing written.
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            }
        });
        while swaps.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let fs = LocalFs::default();
        let (mut written, mut refused) = (0, 0);
        // 2,000 rounds at least, and on until one write got through: on a
        // loaded machine the swapper can sit with `sub` away for all of them.
        let mut round = 0;
        while round < 2000 || (written == 0 && round < 200_000) {
            round += 1;
            let text = format!("round {round}");
            let outcome = match checked(&root, "sub/f.txt") {
                Ok(checked) => fs.write_text_file(&checked, &text).await,
                Err(err) => Err(err),
            };
            match outcome {
                Ok(()) => written += 1,
                Err(ToolError::Io { .. } | ToolError::NotFound { .. } | ToolError::Failed(_)) => {
                    refused += 1;
                }
                Err(ToolError::PathOutsideWorkspace { .. }) => refused += 1,
                Err(other) => panic!("unexpected error: {other}"),
            }
            if let Ok(checked) = checked(&root, "sub/f.txt")
                && let Ok(text) = fs.read_text_file(&checked, LineWindow::WHOLE).await
            {
                assert_ne!(text, "secret", "a read went outside");
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        let swaps = swaps.load(Ordering::Relaxed);
        assert!(
            written > 0,
            "swaps {swaps}, written {written}, refused {refused}"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("f.txt")).unwrap(),
            "secret"
        );
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            1,
            "no file written outside"
        );
    }
}
