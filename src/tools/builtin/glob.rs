//! `glob`: files whose path matches a pattern, as .gitignore leaves them.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::walk::{is_file, require_dir, skipped_as_sensitive, walk};
use super::{Target, path_location, place, search_title};
use crate::events::{Location, ToolKind};
use crate::tools::{ToolContext, ToolError, ToolOutput, TypedTool, display_path};

/// The most paths one call returns.
pub const MAX_MATCHES: usize = 500;
/// Matches the editor is pointed at.
const MAX_LOCATIONS: usize = 10;

#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The glob pattern, relative to path
    pattern: String,
    /// The directory to search in (default: the working directory)
    path: Option<String>,
}

impl TypedTool for GlobTool {
    type Args = Args;
    const NAME: &'static str = "glob";
    const DESCRIPTION: &'static str = "Find files by path pattern, e.g. `**/*.rs`, `src/**/test_*.py`, `*.{json,toml}`. \
         The pattern matches paths relative to `path` (default: the working directory); `*` stays within one directory, \
         `**` crosses directories. Files matched by .gitignore are left out. Returns paths relative to the working directory, \
         sorted, at most 500. To search file contents, use grep.";
    const BRIEF: Option<&'static str> = Some("Find files by path pattern, e.g. `**/*.rs`.");
    const KIND: ToolKind = ToolKind::Search;
    const MUTATES: bool = false;

    fn title_for(&self, args: &Args) -> String {
        search_title("Find files", "Find", &args.pattern, args.path.as_deref())
    }

    fn locations_for(&self, args: &Args, ctx: &ToolContext) -> Vec<Location> {
        path_location(args.path.as_deref(), ctx)
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        find(args, ctx).await
    }
}

/// A glob in which `*` does not cross `/`, as in a shell.
pub(super) fn compile_glob(pattern: &str, field: &str) -> Result<globset::GlobMatcher, ToolError> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|err| {
            ToolError::InvalidArguments(format!("`{field}` is not a valid glob pattern: {err}"))
        })
}

async fn find(args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let pattern = args.pattern.trim();
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    if pattern.is_empty() {
        return Err(ToolError::InvalidArguments("`pattern` is empty".into()));
    }
    if pattern.starts_with('/') {
        return Err(ToolError::InvalidArguments(
            "`pattern` must be relative; put the directory to search in `path`".into(),
        ));
    }
    let matcher = compile_glob(pattern, "pattern")?;
    let base = Target::resolve(ctx, args.path.as_deref().unwrap_or("."))?;
    require_dir(&base).await?;

    let root = base.path().to_path_buf();
    let pattern_given = pattern.to_string();
    let sensitive = std::sync::Arc::clone(&ctx.settings.sensitive_files);
    let (paths, total) = walk(
        ctx,
        base.path(),
        None,
        (Vec::new(), 0),
        move |found, entry| {
            let (paths, total) = found;
            let matches = entry
                .path()
                .strip_prefix(&root)
                .is_ok_and(|relative| matcher.is_match(relative));
            if is_file(&entry)
                && matches
                && !skipped_as_sensitive(&sensitive, entry.path(), &root, Some(&pattern_given))
            {
                *total += 1;
                if paths.len() < MAX_MATCHES {
                    paths.push(entry.into_path());
                }
            }
        },
    )
    .await?;

    let shown: Vec<String> = paths
        .iter()
        .map(|path| display_path(path, &ctx.cwd))
        .collect();
    let mut for_model = if shown.is_empty() {
        format!("No files match `{pattern}` in {}.", place(&base.shown))
    } else {
        shown.join("\n")
    };
    if total > shown.len() {
        for_model.push_str(&format!(
            "\n[showing the first {} of {total} files; narrow the pattern or path]",
            shown.len()
        ));
    }
    let locations = paths
        .into_iter()
        .take(MAX_LOCATIONS)
        .map(Location::file)
        .collect();
    Ok(ToolOutput::text(for_model)
        .with_raw_output(json!({"files": shown, "total": total}))
        .with_locations(locations))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::*;

    /// A small project with a build directory .gitignore leaves out.
    fn project() -> Workspace {
        let ws = workspace_with(&[(".gitignore", "target/\n")]);
        ws.touch([
            "Cargo.toml",
            "src/main.rs",
            "src/tools/grep.rs",
            "src/tools/notes.md",
            "target/debug/build.rs",
        ]);
        ws
    }

    #[tokio::test]
    async fn double_star_crosses_directories_and_star_does_not() {
        let ws = project();
        let all = ws.run(&GlobTool, json!({"pattern": "**/*.rs"})).await;
        assert_eq!(all.for_model, "src/main.rs\nsrc/tools/grep.rs");
        assert_eq!(
            all.locations,
            [
                Location::file(ws.path("src/main.rs")),
                Location::file(ws.path("src/tools/grep.rs"))
            ]
        );
    }

    #[tokio::test]
    async fn answers_the_matches_relative_to_cwd() {
        let ws = project();
        let cases = [
            (json!({"pattern": "src/*.rs"}), "src/main.rs"),
            (
                json!({"pattern": "**/*.{md,toml}"}),
                "Cargo.toml\nsrc/tools/notes.md",
            ),
            // Matched relative to path.
            (
                json!({"pattern": "*.rs", "path": "src/tools"}),
                "src/tools/grep.rs",
            ),
            // .gitignore is respected.
            (
                json!({"pattern": "target/**"}),
                "No files match `target/**` in the working directory.",
            ),
        ];
        for (arguments, for_model) in cases {
            let out = ws.run(&GlobTool, arguments.clone()).await;
            assert_eq!(out.for_model, for_model, "{arguments}");
        }
    }

    #[tokio::test]
    async fn caps_the_matches() {
        let ws = workspace();
        ws.touch((0..MAX_MATCHES + 2).map(|n| format!("d/f{n:04}.txt")));
        let out = ws.run(&GlobTool, json!({"pattern": "**/*.txt"})).await;
        assert!(
            out.for_model
                .ends_with("[showing the first 500 of 502 files; narrow the pattern or path]"),
            "{}",
            out.for_model
        );
        assert_eq!(out.locations.len(), MAX_LOCATIONS);
    }

    #[tokio::test]
    async fn bad_patterns_and_paths_are_errors() {
        let cases = vec![
            (
                json!({"pattern": "src/[a"}),
                Failure::Says("not a valid glob"),
            ),
            (json!({"pattern": "/etc/*"}), Failure::Says("`path`")),
            (
                json!({"pattern": "*", "path": "/etc"}),
                Failure::Is(|err| matches!(err, ToolError::PathOutsideWorkspace { .. })),
            ),
            (
                json!({}),
                Failure::Reads("invalid arguments: missing field `pattern`"),
            ),
        ];
        project().assert_failures(&GlobTool, cases).await;
    }

    #[test]
    fn title_quotes_the_pattern() {
        assert_eq!(
            GlobTool.title(&json!({"pattern": "**/*.rs"})),
            "Find `**/*.rs`"
        );
        assert_eq!(
            GlobTool.title(&json!({"pattern": "*.rs", "path": "src"})),
            "Find `*.rs` in src"
        );
    }
}
