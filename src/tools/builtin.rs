//! The tools every session gets, each a [`TypedTool`](super::TypedTool).
//! File contents go through `ctx.fs`; directory walks (list_dir, glob,
//! grep) read the disk directly.

pub mod ask_user;
pub mod edit_file;
pub mod glob;
pub mod grep;
pub mod list_dir;
pub mod read_file;
pub mod shell;
pub mod todo;
mod walk;
pub mod write_file;
pub mod write_plan;

use std::path::Path;
use std::sync::Arc;

use super::{ConfinedPath, LineWindow, Tool, ToolContext, ToolError};
use crate::events::Location;

pub use ask_user::AskUserTool;
pub use edit_file::EditFileTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use list_dir::ListDirTool;
pub use read_file::ReadFileTool;
pub use shell::ShellTool;
pub use todo::TodoTool;
pub use write_file::WriteFileTool;
pub use write_plan::WritePlanTool;

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
        Arc::new(WritePlanTool),
        Arc::new(AskUserTool),
    ]
}

/// A text argument as the model gave it, or None when it is missing or
/// empty (salvaged arguments leave a missing required text empty).
fn given(text: Option<&str>) -> Option<&str> {
    text.filter(|text| !text.is_empty())
}

/// A title from a text the model gave ("Edit src/a.rs"), or `untitled`
/// when it gave none.
fn titled(untitled: &str, text: Option<&str>, title: impl FnOnce(&str) -> String) -> String {
    given(text).map_or_else(|| untitled.to_string(), title)
}

/// "Find `*.rs` in src": what a search looks for, and where when it says.
fn search_title(untitled: &str, verb: &str, pattern: &str, path: Option<&str>) -> String {
    titled(untitled, Some(pattern), |pattern| match given(path) {
        Some(path) => format!("{verb} `{pattern}` in {path}"),
        None => format!("{verb} `{pattern}`"),
    })
}

/// The path the model gave as a location the editor can follow, when it
/// names a place inside the workspace.
fn path_location(path: Option<&str>, ctx: &ToolContext) -> Vec<Location> {
    given(path)
        .and_then(|path| ctx.resolve(path).ok())
        .map(Location::file)
        .into_iter()
        .collect()
}

/// A path the model named: where it is, and how the model should read it.
struct Target {
    place: ConfinedPath,
    shown: String,
}

impl Target {
    /// The model's path, confined to the workspace.
    fn resolve(ctx: &ToolContext, path: &str) -> Result<Self, ToolError> {
        let place = ctx.confine(path)?;
        let shown = ctx.display_path(place.path());
        Ok(Self { place, shown })
    }

    /// The absolute path, as the editor knows it.
    fn path(&self) -> &Path {
        self.place.path()
    }

    /// An error about the path told with the path as the model wrote it
    /// (the file system knows only the absolute path).
    fn error(&self, err: ToolError) -> ToolError {
        let path = self.shown.clone();
        match err {
            ToolError::NotFound { .. } => ToolError::NotFound { path },
            ToolError::NotText { .. } => ToolError::NotText { path },
            ToolError::TooLarge { size, limit, .. } => ToolError::TooLarge { path, size, limit },
            ToolError::Io { source, .. } => ToolError::Io { path, source },
            other => other,
        }
    }

    async fn read_text(&self, ctx: &ToolContext) -> Result<String, ToolError> {
        ctx.fs
            .read_text_file(&self.place, LineWindow::WHOLE)
            .await
            .map_err(|err| self.error(err))
    }

    /// Writes the file; the session's journal is told what it held before.
    async fn write_text(&self, ctx: &ToolContext, text: &str) -> Result<(), ToolError> {
        let before = ctx
            .journal
            .as_ref()
            .and_then(|_| super::journal::before_write(&self.place, &ctx.settings.sensitive_files));
        ctx.fs
            .write_text_file(&self.place, text)
            .await
            .map_err(|err| self.error(err))?;
        if let (Some(journal), Some(before)) = (&ctx.journal, before) {
            journal.written(self.path(), before, text.as_bytes());
        }
        Ok(())
    }

    /// A location at a 1-based line.
    fn at_line(&self, line: usize) -> Location {
        Location::at_line(
            self.path().to_path_buf(),
            u32::try_from(line).unwrap_or(u32::MAX),
        )
    }
}

/// The 1-based line where `new` first differs from `old`.
fn first_changed_line(old: &str, new: &str) -> usize {
    let mut line = 1;
    for (old_line, new_line) in old.split_inclusive('\n').zip(new.split_inclusive('\n')) {
        if old_line != new_line {
            return line;
        }
        line += 1;
    }
    // One is a prefix of the other: the change starts after the shorter,
    // but never past the new text's last line.
    line.min(new.lines().count().max(1))
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
    fn definitions_say_what_the_hand_written_schemas_said() {
        // What the model reads, checked in: the schemas derived from the
        // argument structs must not change unnoticed (a new schemars, a
        // reworded doc comment). Update the file when a change is meant.
        let expected: Vec<crate::model::ToolDefinition> =
            serde_json::from_str(include_str!("builtin/definitions.json")).unwrap();
        let definitions: Vec<_> = all().iter().map(|tool| tool.definition()).collect();
        assert_eq!(definitions, expected);
    }

    #[test]
    fn brief_definitions_are_a_fraction_of_the_full_ones() {
        // What a 4k window pays for the tools before the conversation: the
        // brief form must stay small as tools are added (about 4 characters
        // a token: 2,400 characters is some 600 tokens).
        let mut registry = crate::tools::ToolRegistry::builtin();
        let full = serde_json::to_string(&registry.definitions())
            .unwrap()
            .len();
        registry.set_descriptions(crate::tools::Descriptions::Brief);
        let definitions = registry.definitions();
        let brief = serde_json::to_string(&definitions).unwrap().len();
        assert!(brief <= 2400, "brief tool definitions: {brief} characters");
        assert!(brief * 3 <= full, "brief {brief}, full {full}");
        assert_eq!(
            definitions.len(),
            all().len(),
            "every tool is still offered"
        );
    }

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
