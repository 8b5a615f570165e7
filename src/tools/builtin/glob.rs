//! `glob`: files whose path matches a pattern, as .gitignore leaves them.

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::json;

use super::place;
use super::walk::{require_dir, run_blocking, walker};
use crate::events::{Location, ToolKind};
use crate::tools::{
    Tool, ToolContext, ToolError, ToolOutput, deserialize_arguments, display_path, str_argument,
};

/// The most paths one call returns.
pub const MAX_MATCHES: usize = 500;
/// Matches the editor is pointed at.
const MAX_LOCATIONS: usize = 10;

#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

#[derive(Debug, Deserialize)]
struct Arguments {
    pattern: String,
    path: Option<String>,
}

impl Tool for GlobTool {
    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        "Find files by path pattern, e.g. `**/*.rs`, `src/**/test_*.py`, `*.{json,toml}`. \
         The pattern matches paths relative to `path` (default: the working directory); `*` stays within one directory, \
         `**` crosses directories. Files matched by .gitignore are left out. Returns paths relative to the working directory, \
         sorted, at most 500. To search file contents, use grep."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "The glob pattern, relative to path"
                },
                "path": {
                    "type": "string",
                    "description": "The directory to search in (default: the working directory)"
                }
            },
            "required": ["pattern"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn title(&self, arguments: &serde_json::Value) -> String {
        let Some(pattern) = str_argument(arguments, "pattern") else {
            return "Find files".into();
        };
        match str_argument(arguments, "path") {
            Some(path) => format!("Find `{pattern}` in {path}"),
            None => format!("Find `{pattern}`"),
        }
    }

    fn locations(&self, arguments: &serde_json::Value, ctx: &ToolContext) -> Vec<Location> {
        crate::tools::path_location(arguments, ctx)
    }

    fn mutates(&self) -> bool {
        false
    }

    fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments: Arguments = deserialize_arguments(arguments)?;
            find(arguments, ctx).await
        })
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

async fn find(arguments: Arguments, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let pattern = arguments.pattern.trim();
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
    let base = ctx.resolve(arguments.path.as_deref().unwrap_or("."))?;
    let shown_base = ctx.display_path(&base);
    require_dir(&base, &shown_base).await?;

    let walk_base = base.clone();
    let (paths, total) = run_blocking(&ctx.cancel, move |cancel| {
        let mut paths = Vec::new();
        let mut total = 0usize;
        for entry in walker(&walk_base, None).flatten() {
            if cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            let Ok(relative) = entry.path().strip_prefix(&walk_base) else {
                continue;
            };
            if matcher.is_match(relative) {
                total += 1;
                if paths.len() < MAX_MATCHES {
                    paths.push(entry.into_path());
                }
            }
        }
        Ok((paths, total))
    })
    .await?;

    let shown: Vec<String> = paths
        .iter()
        .map(|path| display_path(path, &ctx.cwd))
        .collect();
    let mut for_model = if shown.is_empty() {
        format!("No files match `{pattern}` in {}.", place(&shown_base))
    } else {
        shown.join("\n")
    };
    if total > shown.len() {
        for_model.push_str(&format!(
            "\n[showing the first {} of {total} files; narrow the pattern or path]",
            shown.len()
        ));
    }
    let mut output = ToolOutput::text(for_model);
    output.raw_output = json!({"files": shown, "total": total});
    output.locations = paths
        .into_iter()
        .take(MAX_LOCATIONS)
        .map(Location::file)
        .collect();
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::workspace;

    fn fixture() -> crate::tools::test_support::Workspace {
        let ws = workspace();
        ws.write("Cargo.toml", "");
        ws.write("src/main.rs", "");
        ws.write("src/tools/grep.rs", "");
        ws.write("src/tools/notes.md", "");
        ws.write("target/debug/build.rs", "");
        ws.write(".gitignore", "target/\n");
        ws
    }

    #[tokio::test]
    async fn double_star_crosses_directories_and_star_does_not() {
        let ws = fixture();
        let all = ws
            .call(&GlobTool, json!({"pattern": "**/*.rs"}))
            .await
            .unwrap();
        assert_eq!(all.for_model, "src/main.rs\nsrc/tools/grep.rs");
        assert_eq!(
            all.locations,
            [
                Location::file(ws.path("src/main.rs")),
                Location::file(ws.path("src/tools/grep.rs"))
            ]
        );

        let top = ws
            .call(&GlobTool, json!({"pattern": "src/*.rs"}))
            .await
            .unwrap();
        assert_eq!(top.for_model, "src/main.rs");

        let alternatives = ws
            .call(&GlobTool, json!({"pattern": "**/*.{md,toml}"}))
            .await
            .unwrap();
        assert_eq!(alternatives.for_model, "Cargo.toml\nsrc/tools/notes.md");
    }

    #[tokio::test]
    async fn matches_relative_to_path_and_answers_relative_to_cwd() {
        let ws = fixture();
        let out = ws
            .call(&GlobTool, json!({"pattern": "*.rs", "path": "src/tools"}))
            .await
            .unwrap();
        assert_eq!(out.for_model, "src/tools/grep.rs");
    }

    #[tokio::test]
    async fn respects_gitignore() {
        let ws = fixture();
        let out = ws
            .call(&GlobTool, json!({"pattern": "target/**"}))
            .await
            .unwrap();
        assert_eq!(
            out.for_model,
            "No files match `target/**` in the working directory."
        );
    }

    #[tokio::test]
    async fn caps_the_matches() {
        let ws = workspace();
        for n in 0..MAX_MATCHES + 2 {
            ws.write(&format!("d/f{n:04}.txt"), "");
        }
        let out = ws
            .call(&GlobTool, json!({"pattern": "**/*.txt"}))
            .await
            .unwrap();
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
        let ws = fixture();
        let invalid = ws
            .call(&GlobTool, json!({"pattern": "src/[a"}))
            .await
            .unwrap_err();
        assert!(
            invalid.to_string().contains("not a valid glob"),
            "{invalid}"
        );
        let absolute = ws
            .call(&GlobTool, json!({"pattern": "/etc/*"}))
            .await
            .unwrap_err();
        assert!(absolute.to_string().contains("`path`"), "{absolute}");
        let outside = ws
            .call(&GlobTool, json!({"pattern": "*", "path": "/etc"}))
            .await
            .unwrap_err();
        assert!(matches!(outside, ToolError::PathOutsideWorkspace { .. }));
        let missing = ws.call(&GlobTool, json!({})).await.unwrap_err();
        assert_eq!(
            missing.to_string(),
            "invalid arguments: missing field `pattern`"
        );
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
