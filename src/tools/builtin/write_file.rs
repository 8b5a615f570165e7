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
    let old_text = match ctx.fs.read_text_file(&file.path, None, None).await {
        Ok(text) => Some(text),
        // A file that is not text is replaced like a new one: there is no
        // old text to show.
        Err(
            ToolError::NotFound { .. } | ToolError::NotText { .. } | ToolError::TooLarge { .. },
        ) => None,
        Err(err) => return Err(file.error(err)),
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
            path: file.path,
            old_text,
            new_text,
        }],
        plan: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool;
    use crate::tools::test_support::{assert_contains, workspace};

    #[tokio::test]
    async fn creates_a_file_and_its_directories() {
        let ws = workspace();
        let out = ws
            .run(
                &WriteFileTool,
                json!({"path": "src/new/mod.rs", "content": "pub fn f() {}\n"}),
            )
            .await;
        assert_eq!(ws.read("src/new/mod.rs"), "pub fn f() {}\n");
        assert_eq!(out.for_model, "Created src/new/mod.rs (1 line).");
        assert_eq!(
            out.content,
            [ToolContent::Diff {
                path: ws.path("src/new/mod.rs"),
                old_text: None,
                new_text: "pub fn f() {}\n".into(),
            }]
        );
        assert_eq!(out.raw_output["created"], true);
    }

    #[tokio::test]
    async fn replaces_a_file_showing_the_old_text() {
        let ws = workspace();
        ws.write("a.txt", "one\ntwo\nthree\n");
        let out = ws
            .run(
                &WriteFileTool,
                json!({"path": "a.txt", "content": "one\n2\nthree\n"}),
            )
            .await;
        assert_eq!(ws.read("a.txt"), "one\n2\nthree\n");
        assert_eq!(out.for_model, "Wrote a.txt (3 lines).");
        assert_eq!(
            out.content,
            [ToolContent::Diff {
                path: ws.path("a.txt"),
                old_text: Some("one\ntwo\nthree\n".into()),
                new_text: "one\n2\nthree\n".into(),
            }]
        );
        assert_eq!(out.locations, [Location::at_line(ws.path("a.txt"), 2)]);
    }

    #[tokio::test]
    async fn the_same_content_changes_nothing() {
        let ws = workspace();
        ws.write("a.txt", "same\n");
        let out = ws
            .run(
                &WriteFileTool,
                json!({"path": "a.txt", "content": "same\n"}),
            )
            .await;
        assert_contains(&out.for_model, "nothing changed");
    }

    #[tokio::test]
    async fn refuses_paths_outside_and_directories() {
        let ws = workspace();
        let outside = ws
            .fail(
                &WriteFileTool,
                json!({"path": "../evil.txt", "content": "x"}),
            )
            .await;
        assert!(matches!(outside, ToolError::PathOutsideWorkspace { .. }));
        assert!(!ws.dir.path().join("evil.txt").exists());

        ws.write("src/a.rs", "");
        let directory = ws
            .fail(&WriteFileTool, json!({"path": "src", "content": "x"}))
            .await;
        assert_contains(&directory, "directory");
    }

    #[tokio::test]
    async fn content_is_required() {
        let ws = workspace();
        let err = ws.fail(&WriteFileTool, json!({"path": "a.txt"})).await;
        assert_eq!(
            err.to_string(),
            "invalid arguments: missing field `content`"
        );
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
