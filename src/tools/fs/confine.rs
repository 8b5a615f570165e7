//! Where a path the model gave really leads, and whether that stays inside
//! the roots a session may reach: the check that makes a [`ConfinedPath`].

use std::io;
use std::path::{Component, Path, PathBuf, Prefix};

use super::ConfinedPath;
use crate::tools::ToolError;

/// A path the model gave, checked against the `allowed` roots (`cwd`, where
/// relative paths start, among them). `..` is normalised first; then
/// symlinks are resolved on the longest existing ancestor, so neither can
/// lead outside, while a new file in an existing directory is still
/// allowed. Local reads and writes go through the result, which keeps them
/// beneath the root that was checked even if a symlink is swapped in
/// afterwards.
pub(crate) fn confine(
    path: &str,
    cwd: &Path,
    allowed: Vec<PathBuf>,
) -> Result<ConfinedPath, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::InvalidArguments("the path is empty".into()));
    }
    if let Some(Component::Prefix(prefix)) = Path::new(path).components().next()
        && !Path::new(path).has_root()
    {
        // Windows' `C:foo` starts at drive C's current directory, which
        // the agent does not choose.
        return Err(ToolError::InvalidArguments(format!(
            "{path} is relative to the current directory of drive {}; give a path relative to the working directory, or an absolute one",
            prefix.as_os_str().to_string_lossy()
        )));
    }
    let joined = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        cwd.join(path)
    };
    let normalized = normalize(&joined);
    if !on_a_root_volume(&normalized, &allowed) {
        // Not even looked at: touching `\\server\share` would make
        // Windows contact that server (and offer it the user's credentials).
        return Err(ToolError::PathOutsideWorkspace {
            path: path.to_string(),
            allowed,
        });
    }
    let real = real_path(&normalized).map_err(|err| match err {
        RealPathError::DanglingSymlink(link) => ToolError::Failed(format!(
            "{path} goes through the symlink {}, whose target does not exist; refusing to follow it",
            link.display()
        )),
        RealPathError::Io(source) => ToolError::Io {
            path: path.to_string(),
            source,
        },
    })?;
    let confined = allowed.iter().find_map(|root| {
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| normalize(root));
        ConfinedPath::new(normalized.clone(), &root, &real)
    });
    confined.ok_or_else(|| ToolError::PathOutsideWorkspace {
        path: path.to_string(),
        allowed,
    })
}

/// Whether `path` is on the drive or network share of one of the `roots`
/// (always on Unix, where paths have no such prefix).
fn on_a_root_volume(path: &Path, roots: &[PathBuf]) -> bool {
    let Some(wanted) = volume(path) else {
        return true;
    };
    roots.iter().any(|root| {
        volume(root).is_some_and(|v| v == wanted)
            || std::fs::canonicalize(root)
                .ok()
                .and_then(|real| volume(&real))
                .is_some_and(|v| v == wanted)
    })
}

/// A Windows path's drive or share, spelt one way (`C:`, `\\server\share`):
/// `\\?\C:\` and `C:\` are the same volume.
pub(crate) fn volume(path: &Path) -> Option<String> {
    let Some(Component::Prefix(prefix)) = path.components().next() else {
        return None;
    };
    Some(match prefix.kind() {
        Prefix::Disk(drive) | Prefix::VerbatimDisk(drive) => {
            format!("{}:", char::from(drive.to_ascii_uppercase()))
        }
        Prefix::UNC(server, share) | Prefix::VerbatimUNC(server, share) => format!(
            "\\\\{}\\{}",
            server.to_string_lossy(),
            share.to_string_lossy()
        )
        .to_lowercase(),
        Prefix::Verbatim(name) | Prefix::DeviceNS(name) => name.to_string_lossy().to_lowercase(),
    })
}

/// Removes `.` and resolves `..` lexically (`..` at the root stays there).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                }
            }
            other => out.push(other),
        }
    }
    out
}

enum RealPathError {
    DanglingSymlink(PathBuf),
    Io(io::Error),
}

/// Where `path` really leads: its longest existing ancestor canonicalised,
/// with the not-yet-existing rest appended.
fn real_path(path: &Path) -> Result<PathBuf, RealPathError> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(mut real) => {
                for name in rest.iter().rev() {
                    real.push(name);
                }
                return Ok(real);
            }
            Err(err) => {
                // It exists but cannot be resolved: a dangling symlink (whose
                // target a write would create, maybe outside) or no access.
                if let Ok(meta) = std::fs::symlink_metadata(&existing) {
                    return Err(if meta.file_type().is_symlink() {
                        RealPathError::DanglingSymlink(existing)
                    } else {
                        RealPathError::Io(err)
                    });
                }
                match (existing.file_name(), existing.parent()) {
                    (Some(name), Some(parent)) => {
                        rest.push(name.to_os_string());
                        existing = parent.to_path_buf();
                    }
                    _ => return Err(RealPathError::Io(err)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_are_compared_however_they_are_spelt() {
        // Unix paths have no volume, so nothing is refused for one.
        assert_eq!(volume(Path::new("/home/u")), None);
        assert!(on_a_root_volume(
            Path::new("/etc"),
            &[PathBuf::from("/home/u")]
        ));
        #[cfg(windows)]
        {
            assert_eq!(volume(Path::new(r"c:\x")), volume(Path::new(r"\\?\C:\y")));
            assert_eq!(
                volume(Path::new(r"\\Srv\Share\x")).as_deref(),
                Some(r"\\srv\share")
            );
        }
    }
}
