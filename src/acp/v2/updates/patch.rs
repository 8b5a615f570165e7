//! Whole-file texts as Git `--patch` text, the renderable part of a v2
//! diff: changed lines with three lines of context, absolute paths as they
//! are (no `a/` `b/` prefixes), no commit metadata.

use std::fmt::Write;

/// Lines of unchanged text shown around a change.
const CONTEXT: usize = 3;

/// The most cells of the line table worked out exactly; a larger changed
/// region is shown as removed whole and added whole (still a valid patch).
/// Its shorter side is then at most 2000 lines, so a run fits a `u16`.
const TABLE_CELLS: usize = 4_000_000;

/// The patch that turns `old` (None: a new file) into `new` at `path`;
/// None when nothing changed.
pub(super) fn git_patch(path: &str, old: Option<&str>, new: &str) -> Option<String> {
    if old == Some(new) {
        return None;
    }
    let mut text = format!("diff --git {path} {path}\n");
    if old.is_none() {
        text.push_str("new file mode 100644\n");
        if new.is_empty() {
            return Some(text);
        }
    }
    let old_lines = lines(old.unwrap_or_default());
    let new_lines = lines(new);
    let source = if old.is_some() { path } else { "/dev/null" };
    let _ = write!(text, "--- {source}\n+++ {path}\n");
    let edits = edits(&old_lines, &new_lines);
    for hunk in hunks(&edits) {
        write_hunk(&mut text, &edits, hunk);
    }
    Some(text)
}

fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// The lines of both texts in order, each kept, removed or added.
fn edits<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<Edit<'a>> {
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (old_middle, new_middle) = (
        &old[prefix..old.len() - suffix],
        &new[prefix..new.len() - suffix],
    );
    let mut edits: Vec<Edit<'a>> = old[..prefix].iter().map(|l| Edit::Same(l)).collect();
    if old_middle.len().saturating_mul(new_middle.len()) <= TABLE_CELLS {
        edits.extend(common_lines(old_middle, new_middle));
    } else {
        edits.extend(old_middle.iter().map(|l| Edit::Removed(l)));
        edits.extend(new_middle.iter().map(|l| Edit::Added(l)));
    }
    edits.extend(old[old.len() - suffix..].iter().map(|l| Edit::Same(l)));
    edits
}

/// The longest common subsequence of lines, by its table: `table[i][j]`
/// is the longest common run of `old[i..]` and `new[j..]`.
fn common_lines<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<Edit<'a>> {
    let width = new.len() + 1;
    // A run is at most the shorter side, which the cell bound keeps small.
    let mut table = vec![0u16; (old.len() + 1) * width];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            table[i * width + j] = if old[i] == new[j] {
                table[(i + 1) * width + j + 1] + 1
            } else {
                table[(i + 1) * width + j].max(table[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut edits = Vec::with_capacity(old.len() + new.len());
    while i < old.len() && j < new.len() {
        if old[i] == new[j] {
            edits.push(Edit::Same(old[i]));
            (i, j) = (i + 1, j + 1);
        } else if table[(i + 1) * width + j] >= table[i * width + j + 1] {
            edits.push(Edit::Removed(old[i]));
            i += 1;
        } else {
            edits.push(Edit::Added(new[j]));
            j += 1;
        }
    }
    edits.extend(old[i..].iter().map(|l| Edit::Removed(l)));
    edits.extend(new[j..].iter().map(|l| Edit::Added(l)));
    edits
}

/// The ranges of `edits` shown as hunks: each change with its context,
/// changes closer than twice the context joined.
fn hunks(edits: &[Edit<'_>]) -> Vec<std::ops::Range<usize>> {
    let mut hunks: Vec<std::ops::Range<usize>> = Vec::new();
    for (at, edit) in edits.iter().enumerate() {
        if matches!(edit, Edit::Same(_)) {
            continue;
        }
        let start = at.saturating_sub(CONTEXT);
        let end = (at + 1 + CONTEXT).min(edits.len());
        match hunks.last_mut() {
            Some(last) if start <= last.end => last.end = end,
            _ => hunks.push(start..end),
        }
    }
    hunks
}

fn write_hunk(text: &mut String, edits: &[Edit<'_>], hunk: std::ops::Range<usize>) {
    let (old_before, new_before) = counts(&edits[..hunk.start]);
    let (old_count, new_count) = counts(&edits[hunk.clone()]);
    let _ = writeln!(
        text,
        "@@ -{} +{} @@",
        range(old_before, old_count),
        range(new_before, new_count)
    );
    for edit in &edits[hunk] {
        let (mark, line) = match edit {
            Edit::Same(line) => (' ', line),
            Edit::Removed(line) => ('-', line),
            Edit::Added(line) => ('+', line),
        };
        text.push(mark);
        text.push_str(line);
        if !line.ends_with('\n') {
            text.push_str("\n\\ No newline at end of file\n");
        }
    }
}

/// Lines of the old and of the new text among `edits`.
fn counts(edits: &[Edit<'_>]) -> (usize, usize) {
    edits.iter().fold((0, 0), |(old, new), edit| match edit {
        Edit::Same(_) => (old + 1, new + 1),
        Edit::Removed(_) => (old + 1, new),
        Edit::Added(_) => (old, new + 1),
    })
}

/// A hunk's range as Git writes it: an empty one names the line before
/// it, a single line goes without its count.
fn range(before: usize, count: usize) -> String {
    match count {
        0 => format!("{before},0"),
        1 => format!("{}", before + 1),
        _ => format!("{},{count}", before + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_shows_with_its_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            git_patch("/p/a.txt", Some(old), new).unwrap(),
            "diff --git /p/a.txt /p/a.txt\n--- /p/a.txt\n+++ /p/a.txt\n\
             @@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn far_apart_changes_are_two_hunks_and_near_ones_one() {
        let text = |changed: &[(usize, &str)]| -> String {
            (1..=20)
                .map(|n| match changed.iter().find(|(at, _)| *at == n) {
                    Some((_, line)) => format!("{line}\n"),
                    None => format!("{n}\n"),
                })
                .collect()
        };
        let old = text(&[]);
        let far = text(&[(2, "two"), (19, "nineteen")]);
        let patch = git_patch("/a", Some(&old), &far).unwrap();
        assert_eq!(patch.matches("@@ -").count(), 2, "{patch}");
        assert!(patch.contains("@@ -1,5 +1,5 @@"), "{patch}");
        assert!(patch.contains("@@ -16,5 +16,5 @@"), "{patch}");
        let near = text(&[(5, "five"), (9, "nine")]);
        let patch = git_patch("/a", Some(&old), &near).unwrap();
        assert_eq!(patch.matches("@@ -").count(), 1, "{patch}");
        assert!(patch.contains("@@ -2,11 +2,11 @@"), "{patch}");
    }

    #[test]
    fn new_files_missing_newlines_and_no_change() {
        assert_eq!(
            git_patch("/n.rs", None, "fn main() {}\n").unwrap(),
            "diff --git /n.rs /n.rs\nnew file mode 100644\n--- /dev/null\n+++ /n.rs\n\
             @@ -0,0 +1 @@\n+fn main() {}\n"
        );
        assert_eq!(
            git_patch("/e", None, "").unwrap(),
            "diff --git /e /e\nnew file mode 100644\n"
        );
        assert_eq!(
            git_patch("/a", Some("x"), "y").unwrap(),
            "diff --git /a /a\n--- /a\n+++ /a\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n\
             +y\n\\ No newline at end of file\n"
        );
        assert_eq!(
            git_patch("/a", Some("a\nb\n"), "").unwrap(),
            "diff --git /a /a\n--- /a\n+++ /a\n@@ -1,2 +0,0 @@\n-a\n-b\n"
        );
        assert_eq!(git_patch("/a", Some("same\n"), "same\n"), None);
    }

    #[test]
    fn a_changed_region_too_large_to_table_is_removed_and_added_whole() {
        let old: String = (0..3000).map(|n| format!("{n}\n")).collect();
        let new = format!("first\n{}last\n", &old[2..old.len() - 5]);
        let patch = git_patch("/big", Some(&old), &new).unwrap();
        assert!(patch.contains("@@ -1,3000 +1,3000 @@"), "{}", &patch[..200]);
        assert_eq!(
            patch.lines().filter(|l| l.starts_with('-')).count(),
            3000 + 1
        );
        assert_eq!(
            patch.lines().filter(|l| l.starts_with('+')).count(),
            3000 + 1
        );
    }

    #[test]
    fn lines_moved_around_keep_the_longest_common_run() {
        let patch = git_patch("/a", Some("a\nb\nc\nd\n"), "b\nc\nd\na\n").unwrap();
        assert!(
            patch.ends_with("@@ -1,4 +1,4 @@\n-a\n b\n c\n d\n+a\n"),
            "{patch}"
        );
    }
}
