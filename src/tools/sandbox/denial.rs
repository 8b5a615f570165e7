//! Reading a failed confined command's output for what the sandbox denied.
//! Landlock answers a denied write or connection with EACCES ("Permission
//! denied") or EPERM ("Operation not permitted"); programs print that with
//! the path they tried, in their own words:
//! `touch: cannot touch '/x': Permission denied`,
//! `sh: 1: cannot create /x: Permission denied`,
//! `PermissionError: [Errno 13] Permission denied: '/x'`.

use std::path::{Path, PathBuf};

use super::{Confinement, Network, SandboxMode};

/// How a denial reads (compared in lower case).
const DENIALS: [&str; 3] = ["permission denied", "operation not permitted", "eacces"];

/// How programs report a refused connection without the errno (curl).
const NETWORK_FAILURES: [&str; 1] = ["couldn't connect to server"];

/// What the sandbox blocked, for the model, or None when the output shows
/// no denial the sandbox could have caused (e.g. a denied path inside the
/// writable directories is a file's own permissions).
pub(super) fn explain(confinement: &Confinement, output: &str, cwd: &Path) -> Option<String> {
    let sandbox = match confinement.mode {
        SandboxMode::ReadOnly => "the read-only sandbox",
        _ => "the workspace sandbox",
    };
    let lower = output.to_lowercase();
    let denied_lines: Vec<&str> = output
        .lines()
        .zip(lower.lines())
        .filter(|(_, lower)| DENIALS.iter().any(|denial| lower.contains(denial)))
        .map(|(line, _)| line)
        .collect();
    if denied_lines.is_empty() {
        let refused = NETWORK_FAILURES
            .iter()
            .any(|failure| lower.contains(failure));
        return (refused && confinement.network == Network::Denied).then(|| {
            format!(
                "blocked by {sandbox}: a network connection (commands have no network; `[sandbox] network = true` allows it)"
            )
        });
    }
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
    Some(if confinement.network == Network::Allowed {
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
    let lower = line.to_lowercase();
    if let Some(quoted) = quoted_parts(line).into_iter().find(|part| !part.is_empty()) {
        return Some(cwd.join(expand_home(quoted)?));
    }
    let at = DENIALS
        .iter()
        .filter_map(|denial| lower.find(denial))
        .min()?;
    let before = line.get(..at)?.trim_end();
    let word = before.split_whitespace().next_back()?.trim_end_matches(':');
    if word.is_empty() || word.ends_with(']') {
        return None;
    }
    let path = cwd.join(expand_home(word)?);
    // `cannot create x:` names a file; `127.0.0.1:` does not.
    let names_a_file = word.contains('/')
        || std::fs::symlink_metadata(&path).is_ok()
        || ["cannot create", "cannot open", "can't create"]
            .iter()
            .any(|verb| before.contains(verb));
    names_a_file.then_some(path)
}

/// `~/x` with the home directory for `~`.
fn expand_home(text: &str) -> Option<PathBuf> {
    match text.strip_prefix("~/") {
        Some(rest) => Some(PathBuf::from(std::env::var_os("HOME")?).join(rest)),
        None => Some(PathBuf::from(text)),
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

    fn confinement(dir: &Path, network: Network) -> Confinement {
        Confinement {
            mode: SandboxMode::WorkspaceWrite,
            writable: vec![dir.to_path_buf(), PathBuf::from("/tmp")],
            network,
        }
    }

    #[test]
    fn names_the_path_outside_in_the_usual_wordings() {
        let dir = tempfile::tempdir().unwrap();
        let c = confinement(dir.path(), Network::Denied);
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

    #[cfg(unix)]
    #[test]
    fn a_symlink_inside_that_leads_outside_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        let c = Confinement {
            writable: vec![dir.path().to_path_buf()],
            ..confinement(dir.path(), Network::Denied)
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
        let c = confinement(dir.path(), Network::Denied);
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
            &confinement(dir.path(), Network::Denied),
            "PermissionError: [Errno 13] Permission denied",
            dir.path(),
        )
        .unwrap();
        assert!(off.contains("network connection"), "{off}");
        let on = explain(
            &confinement(dir.path(), Network::Allowed),
            "curl: (7) Immediate connect fail for 127.0.0.1: Permission denied",
            dir.path(),
        )
        .unwrap();
        assert!(!on.contains("network"), "{on}");
    }
}
