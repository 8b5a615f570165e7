//! `list_dir`: one directory's entries, as .gitignore leaves them.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::walk::{require_dir, walk};
use super::{Target, given, titled};
use crate::events::{Location, ToolKind};
use crate::tools::{ToolContext, ToolError, ToolOutput, TypedTool};

/// The most entries one listing shows.
pub const MAX_ENTRIES: usize = 500;

#[derive(Debug, Clone, Copy, Default)]
pub struct ListDirTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The directory, relative to the working directory or absolute (default: the working directory)
    path: Option<String>,
}

impl TypedTool for ListDirTool {
    type Args = Args;
    const NAME: &'static str = "list_dir";
    const DESCRIPTION: &'static str = "List the entries of a directory (not recursive), sorted by name; directories end with `/`. \
         Entries matched by .gitignore are left out. Shows at most 500 entries. \
         To find files by name across directories, use glob.";
    const BRIEF: Option<&'static str> = Some("List a directory.");
    const KIND: ToolKind = ToolKind::Read;
    const MUTATES: bool = false;

    fn title_for(&self, args: &Args) -> String {
        titled("List the working directory", args.path.as_deref(), |path| {
            format!("List {path}")
        })
    }

    fn locations_for(&self, args: &Args, ctx: &ToolContext) -> Vec<Location> {
        ctx.resolve(given(args.path.as_deref()).unwrap_or("."))
            .ok()
            .map(Location::file)
            .into_iter()
            .collect()
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        list(args, ctx).await
    }
}

async fn list(args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let dir = Target::resolve(ctx, args.path.as_deref().unwrap_or("."))?;
    require_dir(&dir).await?;
    let mut entries = walk(ctx, dir.path(), Some(1), Vec::new(), |entries, entry| {
        if entry.depth() == 0 {
            return;
        }
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_some_and(|kind| kind.is_dir()) {
            name.push('/');
        }
        entries.push(name);
    })
    .await?;
    entries.sort();
    let total = entries.len();
    entries.truncate(MAX_ENTRIES);

    let mut for_model = if entries.is_empty() {
        format!("({} is empty)", dir.shown)
    } else {
        entries.join("\n")
    };
    if total > entries.len() {
        for_model.push_str(&format!(
            "\n[{} more entries not shown; use glob to narrow down]",
            total - entries.len()
        ));
    }
    Ok(ToolOutput::text(for_model)
        .with_raw_output(json!({
            "path": dir.shown,
            "entries": entries,
            "total": total,
        }))
        .with_locations(vec![Location::file(dir.path().to_path_buf())]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::*;

    #[tokio::test]
    async fn lists_sorted_entries_with_directories_marked() {
        let ws = workspace();
        ws.touch(["b.txt", "a.txt", "src/main.rs", ".github/ci.yml"]);
        std::fs::create_dir_all(ws.path(".git")).unwrap();
        let out = ws.run(&ListDirTool, json!({})).await;
        assert_eq!(out.for_model, ".github/\na.txt\nb.txt\nsrc/");
        assert_eq!(out.locations, [Location::file(ws.ctx.cwd.clone())]);

        let sub = ws.run(&ListDirTool, json!({"path": "src"})).await;
        assert_eq!(sub.for_model, "main.rs");
    }

    #[tokio::test]
    async fn leaves_out_what_gitignore_ignores() {
        let ws = workspace_with(&[(".gitignore", "target/\n*.log\n")]);
        ws.touch(["target/debug/x", "run.log", "keep.rs"]);
        let out = ws.run(&ListDirTool, json!({"path": "."})).await;
        assert_eq!(out.for_model, ".gitignore\nkeep.rs");
    }

    #[tokio::test]
    async fn caps_long_listings() {
        let ws = workspace();
        ws.touch((0..MAX_ENTRIES + 5).map(|n| format!("many/f{n:04}")));
        let out = ws.run(&ListDirTool, json!({"path": "many"})).await;
        assert_eq!(out.for_model.lines().count(), MAX_ENTRIES + 1);
        assert!(
            out.for_model
                .ends_with("[5 more entries not shown; use glob to narrow down]")
        );
        assert_eq!(out.raw_output["total"], MAX_ENTRIES + 5);
    }

    #[tokio::test]
    async fn empty_missing_file_and_outside_paths() {
        let ws = workspace_with(&[("a.txt", "")]);
        std::fs::create_dir_all(ws.path("empty")).unwrap();
        let empty = ws.run(&ListDirTool, json!({"path": "empty"})).await;
        assert_eq!(empty.for_model, "(empty is empty)");
        let cases = vec![
            (
                json!({"path": "nope"}),
                Failure::Reads("nope does not exist; check the path with list_dir or glob"),
            ),
            (json!({"path": "a.txt"}), Failure::Says("use read_file")),
            (
                json!({"path": ".."}),
                Failure::Is(|err| matches!(err, ToolError::PathOutsideWorkspace { .. })),
            ),
        ];
        ws.assert_failures(&ListDirTool, cases).await;
    }

    #[test]
    fn title_names_the_directory() {
        assert_eq!(ListDirTool.title(&json!({"path": "src"})), "List src");
        assert_eq!(ListDirTool.title(&json!({})), "List the working directory");
    }
}
