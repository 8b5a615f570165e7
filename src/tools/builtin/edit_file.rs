//! `edit_file`: replaces an exact piece of a file's text.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Target, numbered_lines, path_location, plural, titled};
use crate::events::{Location, ToolContent, ToolKind};
use crate::tools::{ToolContext, ToolError, ToolOutput, TypedTool};

/// Lines of context shown around an edit for the model to check it.
const EXCERPT_CONTEXT: usize = 3;
/// The longest excerpt shown back.
const EXCERPT_MAX_LINES: usize = 40;

#[derive(Debug, Clone, Copy, Default)]
pub struct EditFileTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The file, relative to the working directory or absolute
    path: String,
    /// The exact text to replace
    old_text: String,
    /// The text to put in its place
    new_text: String,
    /// Replace every occurrence of old_text instead of exactly one (default false)
    replace_all: Option<bool>,
}

impl TypedTool for EditFileTool {
    type Args = Args;
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Edit a text file by replacing `old_text` with `new_text`. `old_text` must match the file exactly \
         (whitespace and indentation included) and exactly once: include enough surrounding lines to make it unique, \
         or set `replace_all` to change every occurrence. Do not include the line numbers read_file shows. \
         Read the file first. To create a file, use write_file.";
    const BRIEF: Option<&'static str> =
        Some("Replace the exact, unique `old_text` with `new_text` in a file.");
    const KIND: ToolKind = ToolKind::Edit;
    const MUTATES: bool = true;

    fn title_for(&self, args: &Args) -> String {
        titled("Edit file", Some(&args.path), |path| format!("Edit {path}"))
    }

    fn locations_for(&self, args: &Args, ctx: &ToolContext) -> Vec<Location> {
        path_location(Some(&args.path), ctx)
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        edit(args, ctx).await
    }
}

async fn edit(args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if args.old_text.is_empty() {
        return Err(ToolError::InvalidArguments(
            "`old_text` is empty; give the exact text to replace (to create a file or replace all of it, use write_file)".into(),
        ));
    }
    if args.old_text == args.new_text {
        return Err(ToolError::InvalidArguments(
            "`old_text` and `new_text` are the same; there is nothing to change".into(),
        ));
    }
    let replace_all = args.replace_all.unwrap_or(false);
    let file = Target::resolve(ctx, &args.path)?;
    let old_file = file.read_text(ctx).await?;

    // Models write "\n"; a file with Windows line ends gets its own.
    let (old_text, new_text) = if !old_file.contains(&args.old_text)
        && old_file.contains("\r\n")
        && !args.old_text.contains('\r')
    {
        (
            args.old_text.replace('\n', "\r\n"),
            args.new_text.replace('\n', "\r\n"),
        )
    } else {
        (args.old_text, args.new_text)
    };

    let count = old_file.matches(old_text.as_str()).count();
    let Some(first_match) = old_file.find(old_text.as_str()) else {
        return Err(ToolError::EditNoMatch {
            hint: no_match_hint(&old_file, &old_text),
            path: file.shown,
        });
    };
    if count > 1 && !replace_all {
        return Err(ToolError::EditAmbiguous {
            path: file.shown,
            count,
        });
    }
    let new_file = if replace_all {
        old_file.replace(old_text.as_str(), &new_text)
    } else {
        old_file.replacen(old_text.as_str(), &new_text, 1)
    };
    file.write_text(ctx, &new_file).await?;

    let shown = &file.shown;
    let first_line = old_file[..first_match].matches('\n').count() + 1;
    let last_line = first_line + new_text.lines().count().saturating_sub(1);
    let excerpt_first = first_line.saturating_sub(EXCERPT_CONTEXT).max(1);
    let excerpt_last = (last_line + EXCERPT_CONTEXT)
        .min(excerpt_first + EXCERPT_MAX_LINES - 1)
        .min(new_file.lines().count());
    let replaced = plural(count, "occurrence");
    let for_model = if excerpt_last >= excerpt_first {
        format!(
            "Edited {shown}: replaced {replaced}, the first at line {first_line}. Lines {excerpt_first}-{excerpt_last} now read:\n{}",
            numbered_lines(&new_file, excerpt_first, excerpt_last)
        )
    } else {
        format!("Edited {shown}: replaced {replaced}; the file is now empty.")
    };
    Ok(ToolOutput {
        for_model,
        raw_output: json!({
            "path": shown,
            "replacements": count,
            "first_line": first_line,
        }),
        locations: vec![file.at_line(first_line)],
        content: vec![ToolContent::Diff {
            path: file.path().to_path_buf(),
            old_text: Some(old_file),
            new_text: new_file,
        }],
        plan: None,
    })
}

/// Where the model may have meant, when its text is almost there.
fn no_match_hint(file: &str, old_text: &str) -> String {
    let file_lines: Vec<&str> = file.lines().map(str::trim).collect();
    let wanted: Vec<&str> = old_text.lines().map(str::trim).collect();
    if !wanted.is_empty()
        && let Some(index) = file_lines
            .windows(wanted.len())
            .position(|window| window == wanted.as_slice())
    {
        return format!(
            " (text that differs only in whitespace starts at line {})",
            index + 1
        );
    }
    let first_wanted = wanted.iter().find(|line| !line.is_empty());
    if let Some(first) = first_wanted
        && let Some(index) = file_lines.iter().position(|line| line == first)
    {
        return format!(
            " (its first line matches line {}, but what follows differs)",
            index + 1
        );
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::*;

    const TWO_FUNCTIONS: &str = "fn a() {\n    1\n}\n\nfn b() {\n    2\n}\n";

    #[tokio::test]
    async fn replaces_exactly_one_match() {
        let edit =
            json!({"path": "src/a.rs", "old_text": "    2\n", "new_text": "    20\n    21\n"});
        let (ws, out) = run_on(&[("src/a.rs", TWO_FUNCTIONS)], &EditFileTool, edit).await;
        let expected = "fn a() {\n    1\n}\n\nfn b() {\n    20\n    21\n}\n";
        assert_eq!(ws.read("src/a.rs"), expected);
        assert_eq!(
            out.content,
            [ToolContent::Diff {
                path: ws.path("src/a.rs"),
                old_text: Some(TWO_FUNCTIONS.into()),
                new_text: expected.into(),
            }]
        );
        assert_eq!(out.locations, [Location::at_line(ws.path("src/a.rs"), 6)]);
        assert!(
            out.for_model.starts_with(
                "Edited src/a.rs: replaced 1 occurrence, the first at line 6. Lines 3-8 now read:\n     3\t}\n"
            ),
            "{}",
            out.for_model
        );
        assert_contains(&out.for_model, "     7\t    21\n");
    }

    #[tokio::test]
    async fn several_matches_are_ambiguous_unless_replace_all() {
        let ws = workspace_with(&[("src/a.rs", "x = 1;\nx = 1;\nx = 1;\n")]);
        let once = json!({"path": "src/a.rs", "old_text": "x = 1;", "new_text": "x = 2;"});
        let err = ws.fail(&EditFileTool, once).await;
        assert_eq!(
            err.to_string(),
            "old_text matches 3 places in src/a.rs; include more surrounding lines so it matches exactly once, or set replace_all to true to change every one"
        );
        assert_eq!(ws.read("src/a.rs"), "x = 1;\nx = 1;\nx = 1;\n");

        let every = json!({"path": "src/a.rs", "old_text": "x = 1;", "new_text": "x = 2;", "replace_all": true});
        let out = ws.run(&EditFileTool, every).await;
        assert_eq!(ws.read("src/a.rs"), "x = 2;\nx = 2;\nx = 2;\n");
        assert_eq!(out.raw_output["replacements"], 3);
        assert_contains(&out.for_model, "replaced 3 occurrences");
    }

    #[tokio::test]
    async fn no_match_explains_and_points_near_misses() {
        let ws = workspace_with(&[("a.py", "def f():\n    return 1\n")]);
        let cases = [
            (
                "def f():\n  return 1",
                Some("differs only in whitespace starts at line 1"),
            ),
            (
                "def f():\n    return 2",
                Some("its first line matches line 1, but what follows differs"),
            ),
            ("nothing like it", None),
        ];
        for (old_text, hint) in cases {
            let edit = json!({"path": "a.py", "old_text": old_text, "new_text": "x"});
            let err = ws.fail(&EditFileTool, edit).await;
            assert!(matches!(err, ToolError::EditNoMatch { .. }), "{err}");
            let message = err.to_string();
            assert!(
                message.starts_with("old_text was not found in a.py."),
                "{message}"
            );
            match hint {
                Some(hint) => assert_contains(&message, hint),
                None => {
                    assert!(!message.contains(" at line"), "{message}");
                    assert!(!message.contains("matches line"), "{message}");
                }
            }
        }
    }

    #[tokio::test]
    async fn windows_line_ends_are_matched() {
        let file = ("a.txt", "one\r\ntwo\r\nthree\r\n");
        let edit = json!({"path": "a.txt", "old_text": "one\ntwo\n", "new_text": "1\n2\n"});
        let (ws, _) = run_on(&[file], &EditFileTool, edit).await;
        assert_eq!(ws.read("a.txt"), "1\r\n2\r\nthree\r\n");
    }

    #[tokio::test]
    async fn refuses_empty_identical_missing_and_outside() {
        let ws = workspace_with(&[("a.txt", "x")]);
        let edit = |path: &str, old_text: &str, new_text: &str| json!({"path": path, "old_text": old_text, "new_text": new_text});
        let cases = vec![
            (edit("a.txt", "", "y"), Failure::Says("write_file")),
            (edit("a.txt", "x", "x"), Failure::Says("nothing to change")),
            (
                edit("b.txt", "x", "y"),
                Failure::Is(|err| matches!(err, ToolError::NotFound { path } if path == "b.txt")),
            ),
            (
                edit("/etc/hosts", "x", "y"),
                Failure::Is(|err| matches!(err, ToolError::PathOutsideWorkspace { .. })),
            ),
            (
                json!({"path": "a.txt", "old_text": "x"}),
                Failure::Reads("invalid arguments: missing field `new_text`"),
            ),
        ];
        ws.assert_failures(&EditFileTool, cases).await;
    }

    #[test]
    fn title_names_the_file() {
        assert_eq!(
            EditFileTool.title(&json!({"path": "src/a.rs"})),
            "Edit src/a.rs"
        );
        assert_eq!(EditFileTool.title(&json!(null)), "Edit file");
    }
}
