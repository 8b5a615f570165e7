//! The tools every session gets. File contents go through `ctx.fs`;
//! directory walks (list_dir, glob, grep) read the disk directly.

pub mod edit_file;
pub mod glob;
pub mod grep;
pub mod list_dir;
pub mod read_file;
pub mod shell;
pub mod todo;
mod walk;
pub mod write_file;

use std::sync::Arc;

use super::{Tool, ToolError};

pub use edit_file::EditFileTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use list_dir::ListDirTool;
pub use read_file::ReadFileTool;
pub use shell::ShellTool;
pub use todo::TodoTool;
pub use write_file::WriteFileTool;

/// All built-ins, in the order the model is shown them.
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFileTool),
        Arc::new(WriteFileTool),
        Arc::new(EditFileTool),
        Arc::new(ListDirTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
        Arc::new(ShellTool),
        Arc::new(TodoTool),
    ]
}

/// A file-system error told with the path as the model wrote it (the file
/// system knows only the absolute path).
fn with_shown_path(err: ToolError, shown: &str) -> ToolError {
    let path = shown.to_string();
    match err {
        ToolError::NotFound { .. } => ToolError::NotFound { path },
        ToolError::NotText { .. } => ToolError::NotText { path },
        ToolError::TooLarge { size, limit, .. } => ToolError::TooLarge { path, size, limit },
        ToolError::Io { source, .. } => ToolError::Io { path, source },
        other => other,
    }
}

/// The 1-based line where `new` first differs from `old`.
fn first_changed_line(old: &str, new: &str) -> u32 {
    let mut line = 1u32;
    for (old_line, new_line) in old.split_inclusive('\n').zip(new.split_inclusive('\n')) {
        if old_line != new_line {
            return line;
        }
        line = line.saturating_add(1);
    }
    // One is a prefix of the other: the change starts after the shorter,
    // but never past the new text's last line.
    let new_lines = u32::try_from(new.lines().count()).unwrap_or(u32::MAX);
    line.min(new_lines.max(1))
}

/// Lines `first..=last` (1-based) of `text`, numbered like `cat -n`.
fn numbered_lines(text: &str, first: usize, last: usize) -> String {
    let mut out = String::new();
    for (index, line) in text.lines().enumerate().skip(first.saturating_sub(1)) {
        let number = index + 1;
        if number > last {
            break;
        }
        out.push_str(&format!(
            "{number:>6}\t{}\n",
            super::shorten(line, MAX_LINE_CHARS)
        ));
    }
    out
}

/// A directory as a sentence names it.
fn place(shown: &str) -> String {
    if shown == "." {
        "the working directory".into()
    } else {
        shown.into()
    }
}

/// "1 line", "3 lines".
fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        format!("1 {word}")
    } else {
        format!("{count} {word}s")
    }
}

/// Longer lines are cut for the model (minified files would flood it).
const MAX_LINE_CHARS: usize = 2000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_changed_line_finds_the_first_difference() {
        assert_eq!(first_changed_line("a\nb\nc\n", "a\nB\nc\n"), 2);
        assert_eq!(first_changed_line("a\nb\n", "a\nb\nc\n"), 3);
        assert_eq!(first_changed_line("a\nb\nc\n", "a\nb\n"), 2);
        assert_eq!(first_changed_line("", "x"), 1);
        assert_eq!(first_changed_line("a", "a\n"), 1);
    }

    #[test]
    fn numbered_lines_number_from_one() {
        assert_eq!(numbered_lines("a\nb\nc\n", 2, 3), "     2\tb\n     3\tc\n");
        assert_eq!(numbered_lines("a\nb\n", 1, 9), "     1\ta\n     2\tb\n");
    }
}
