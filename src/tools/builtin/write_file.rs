//! `write_file`: creates a file or replaces its whole text.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Target, first_changed_line, path_location, plural, titled};
use crate::events::{Location, ToolContent, ToolKind};
use crate::tools::{ToolContext, ToolError, ToolOutput, TypedTool};

#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFileTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The file, relative to the working directory or absolute
    path: String,
    /// The file's complete new text
    content: String,
}

impl TypedTool for WriteFileTool {
    type Args = Args;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create a text file, or replace the whole text of an existing one. Missing directories are created. \
         To change part of an existing file, prefer edit_file.";
    const BRIEF: Option<&'static str> = Some("Create or overwrite a text file.");
    const KIND: ToolKind = ToolKind::Edit;
    const MUTATES: bool = true;

    fn title_for(&self, args: &Args) -> String {
        titled("Write file", Some(&args.path), |path| {
            format!("Write {path}")
        })
    }

    fn locations_for(&self, args: &Args, ctx: &ToolContext) -> Vec<Location> {
        path_location(Some(&args.path), ctx)
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        write(args, ctx).await
    }
}

async fn write(args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let file = Target::resolve(ctx, &args.path)?;
    let old_text = match file.read_text(ctx).await {
        Ok(text) => Some(text),
        // A file that is not text is replaced like a new one: there is no
        // old text to show.
        Err(
            ToolError::NotFound { .. } | ToolError::NotText { .. } | ToolError::TooLarge { .. },
        ) => None,
        Err(err) => return Err(err),
    };
    let new_text = args.content;
    let shown = &file.shown;
    let lines = plural(new_text.lines().count(), "line");
    let for_model = match &old_text {
        Some(old) if *old == new_text => {
            format!("{shown} already had this content; nothing changed.")
        }
        Some(_) => format!("Wrote {shown} ({lines})."),
        None => format!("Created {shown} ({lines})."),
    };
    if old_text.as_deref() != Some(new_text.as_str()) {
        file.write_text(ctx, &new_text).await?;
    }
    let line = first_changed_line(old_text.as_deref().unwrap_or(""), &new_text);
    Ok(ToolOutput {
        for_model,
        raw_output: json!({
            "path": shown,
            "created": old_text.is_none(),
            "bytes": new_text.len(),
        }),
        locations: vec![file.at_line(line)],
        content: vec![ToolContent::Diff {
            path: file.path().to_path_buf(),
            old_text,
            new_text,
        }],
        plan: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::*;

    #[tokio::test]
    async fn creates_or_replaces_a_file_showing_the_diff() {
        // (old text, path, new text, what the model reads, first changed line)
        let cases = [
            (
                None,
                "src/new/mod.rs",
                "pub fn f() {}\n",
                "Created src/new/mod.rs (1 line).",
                1,
            ),
            (
                Some("one\ntwo\nthree\n"),
                "a.txt",
                "one\n2\nthree\n",
                "Wrote a.txt (3 lines).",
                2,
            ),
        ];
        for (old_text, path, content, for_model, line) in cases {
            let existing: Vec<_> = old_text.map(|old| (path, old)).into_iter().collect();
            let write = json!({"path": path, "content": content});
            let (ws, out) = run_on(&existing, &WriteFileTool, write).await;
            assert_eq!(ws.read(path), content);
            assert_eq!(out.for_model, for_model);
            assert_eq!(
                out.content,
                [ToolContent::Diff {
                    path: ws.path(path),
                    old_text: old_text.map(Into::into),
                    new_text: content.into(),
                }]
            );
            assert_eq!(out.raw_output["created"], old_text.is_none());
            assert_eq!(out.locations, [Location::at_line(ws.path(path), line)]);
        }
    }

    #[tokio::test]
    async fn the_same_content_changes_nothing() {
        let write = json!({"path": "a.txt", "content": "same\n"});
        let (_ws, out) = run_on(&[("a.txt", "same\n")], &WriteFileTool, write).await;
        assert_contains(&out.for_model, "nothing changed");
    }

    #[tokio::test]
    async fn refuses_paths_outside_directories_and_no_content() {
        let ws = workspace_with(&[("src/a.rs", "")]);
        let cases = vec![
            (
                json!({"path": "../evil.txt", "content": "x"}),
                Failure::Is(|err| matches!(err, ToolError::PathOutsideWorkspace { .. })),
            ),
            (
                json!({"path": "src", "content": "x"}),
                Failure::Says("directory"),
            ),
            (
                json!({"path": "a.txt"}),
                Failure::Reads("invalid arguments: missing field `content`"),
            ),
        ];
        ws.assert_failures(&WriteFileTool, cases).await;
        assert!(!ws.dir.path().join("evil.txt").exists());
    }

    #[tokio::test]
    async fn a_hard_link_to_a_file_outside_is_replaced_not_written_through() {
        // A hard link cannot be told from a plain file by its path; the
        // write replaces the link (temp file renamed over it), so the file
        // outside the workspace keeps its content.
        let ws = workspace();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "outside\n").unwrap();
        if std::fs::hard_link(&secret, ws.path("linked.txt")).is_err() {
            return; // another filesystem: no hard link possible, nothing to test
        }
        let written = ws
            .call(
                &WriteFileTool,
                json!({"path": "linked.txt", "content": "inside\n"}),
            )
            .await;
        assert!(written.is_ok(), "{written:?}");
        assert_eq!(ws.read("linked.txt"), "inside\n");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "outside\n");
    }

    #[test]
    fn title_and_locations_come_from_the_arguments() {
        let ws = workspace();
        assert_eq!(
            WriteFileTool.title(&json!({"path": "a.txt"})),
            "Write a.txt"
        );
        assert_eq!(WriteFileTool.title(&json!({})), "Write file");
        assert_eq!(
            WriteFileTool.locations(&json!({"path": "a.txt"}), &ws.ctx),
            [Location::file(ws.path("a.txt"))]
        );
    }
}
