//! Reading a failed confined command's output for what the sandbox denied.
//! Landlock answers a denied write or connection with EACCES ("Permission
//! denied") or EPERM ("Operation not permitted"); programs print that with
//! the path they tried, in their own words:
//! `touch: cannot touch '/x': Permission denied`,
//! `sh: 1: cannot create /x: Permission denied`,
//! `PermissionError: [Errno 13] Permission denied: '/x'`.

use std::path::{Path, PathBuf};

use super::{Confinement, SandboxMode};

const DENIALS: [&str; 2] = ["Permission denied", "Operation not permitted"];

/// What the sandbox blocked, for the model, or None when the output shows
/// no denial the sandbox could have caused (e.g. a denied path inside the
/// writable directories is a file's own permissions).
pub(super) fn explain(confinement: &Confinement, output: &str, cwd: &Path) -> Option<String> {
    let denied_lines: Vec<&str> = output
        .lines()
        .filter(|line| DENIALS.iter().any(|denial| line.contains(denial)))
        .collect();
    if denied_lines.is_empty() {
        return None;
    }
    let sandbox = match confinement.mode {
        SandboxMode::ReadOnly => "the read-only sandbox",
        _ => "the workspace sandbox",
    };
    let where_ = confinement.writable_list();
    let paths: Vec<PathBuf> = denied_lines
        .iter()
        .filter_map(|line| denied_path(line, cwd))
        .collect();
    if let Some(outside) = paths
        .iter()
        .find(|path| !is_writable(confinement, &real_path(path)))
    {
        return Some(format!(
            "blocked by {sandbox}: writing {} (commands may write only in {where_})",
            outside.display()
        ));
    }
    if !paths.is_empty() {
        // Every denied path is one the sandbox allows: not the sandbox.
        return None;
    }
    Some(if confinement.network {
        format!("probably blocked by {sandbox}: a write outside {where_}")
    } else {
        format!(
            "probably blocked by {sandbox}: a network connection (commands have no network; `[sandbox] network = true` allows it) or a write outside {where_}"
        )
    })
}

/// The path a denial line names: a quoted one, or the word before the
/// denial (`cannot create /x: Permission denied`). A word without `/` counts
/// only if it exists in `cwd` (so `127.0.0.1:` is not a path).
fn denied_path(line: &str, cwd: &Path) -> Option<PathBuf> {
    let quoted = quoted_parts(line).into_iter().find(|part| !part.is_empty());
    let before_denial = || {
        let at = DENIALS
            .iter()
            .filter_map(|denial| line.find(denial))
            .min()?;
        let word = line[..at].trim_end().split_whitespace().next_back()?;
        let word = word.trim_end_matches(':');
        (!word.is_empty() && !word.ends_with(']')).then_some(word)
    };
    let text = quoted.or_else(before_denial)?;
    let text = match text.strip_prefix("~/") {
        Some(rest) => std::env::var("HOME")
            .ok()
            .map(|home| format!("{home}/{rest}"))?,
        None => text.to_string(),
    };
    let path = cwd.join(&text);
    if text.contains('/') || std::fs::symlink_metadata(&path).is_ok() {
        Some(path)
    } else {
        None
    }
}

/// Text between matching quotes: '…', "…", ‘…’ or `…'.
fn quoted_parts(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')] {
        let mut rest = line;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            parts.push(&after[..end]);
            rest = &after[end + close.len_utf8()..];
        }
    }
    parts
}

/// Where a path really leads: through symlinks (also a dangling last one),
/// to the longest existing ancestor, with the rest appended.
fn real_path(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    if let Ok(target) = std::fs::read_link(path) {
        let parent = path.parent().unwrap_or(Path::new("/"));
        return real_path(&parent.join(target));
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if parent != path => real_path(parent).join(name),
        _ => path.to_path_buf(),
    }
}

fn is_writable(confinement: &Confinement, path: &Path) -> bool {
    confinement.writable.iter().any(|dir| {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        path.starts_with(dir)
    }) || path.starts_with("/dev")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confinement(dir: &Path, network: bool) -> Confinement {
        Confinement {
            mode: SandboxMode::WorkspaceWrite,
            writable: vec![dir.to_path_buf(), PathBuf::from("/tmp")],
            network,
        }
    }

    #[test]
    fn names_the_path_outside_in_the_usual_wordings() {
        let dir = tempfile::tempdir().unwrap();
        let c = confinement(dir.path(), false);
        for line in [
            "touch: cannot touch '/etc/x': Permission denied",
            "sh: 1: cannot create /etc/x: Permission denied",
            "PermissionError: [Errno 13] Permission denied: '/etc/x'",
            "mkdir: cannot create directory ‘/etc/x’: Permission denied",
            "bash: /etc/x: Operation not permitted",
        ] {
            let text = explain(&c, &format!("ok\n{line}\n"), dir.path()).unwrap();
            assert_eq!(
                text,
                format!(
                    "blocked by the workspace sandbox: writing /etc/x (commands may write only in {}, /tmp)",
                    dir.path().display()
                ),
                "{line}"
            );
        }
    }

    #[test]
    fn a_symlink_inside_that_leads_outside_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        let c = Confinement {
            writable: vec![dir.path().to_path_buf()],
            ..confinement(dir.path(), false)
        };
        std::os::unix::fs::symlink(outside.path().join("f"), dir.path().join("link")).unwrap();
        let text = explain(
            &c,
            "sh: 1: cannot create link: Permission denied",
            dir.path(),
        );
        assert!(
            text.is_some_and(|text| text.contains("writing ") && text.contains("link")),
            "a dangling link to outside is the sandbox's doing"
        );
    }

    #[test]
    fn denials_inside_or_unrelated_output_are_not_the_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        let c = confinement(dir.path(), false);
        let inside = format!(
            "touch: cannot touch '{}/f': Permission denied",
            dir.path().display()
        );
        assert_eq!(explain(&c, &inside, dir.path()), None);
        assert_eq!(explain(&c, "error: no such file", dir.path()), None);
    }

    #[test]
    fn a_denial_without_a_path_mentions_the_network_when_it_is_off() {
        let dir = tempfile::tempdir().unwrap();
        let off = explain(
            &confinement(dir.path(), false),
            "PermissionError: [Errno 13] Permission denied",
            dir.path(),
        )
        .unwrap();
        assert!(off.contains("network connection"), "{off}");
        let on = explain(
            &confinement(dir.path(), true),
            "curl: (7) Immediate connect fail for 127.0.0.1: Permission denied",
            dir.path(),
        )
        .unwrap();
        assert!(!on.contains("network"), "{on}");
    }
}
