//! `read_file`: a text file, or a window of its lines, numbered for the model.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{MAX_LINE_CHARS, Target, given, plural, titled};
use crate::events::{Location, ToolContent, ToolKind};
use crate::tools::{ToolContext, ToolError, ToolOutput, TypedTool, shorten};

/// Lines one read returns when the model gives no limit.
pub const DEFAULT_LINE_LIMIT: u32 = 2000;

#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFileTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The file, relative to the working directory or absolute
    path: String,
    /// The first line to read, 1-based (default 1)
    #[schemars(range(min = 1))]
    offset: Option<u32>,
    /// How many lines to read (default 2000)
    #[schemars(range(min = 1))]
    limit: Option<u32>,
}

impl TypedTool for ReadFileTool {
    type Args = Args;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a text file. Returns its lines numbered from 1 (`number<TAB>line`; the numbers are not part of the file). \
         Reads up to 2000 lines by default; for long files pass `offset` (the first line, 1-based) and `limit` (how many lines). \
         Binary files cannot be read. Read a file before editing it.";
    const BRIEF: Option<&'static str> = Some("Read a text file (lines numbered from 1).");
    const KIND: ToolKind = ToolKind::Read;
    const MUTATES: bool = false;

    fn title_for(&self, args: &Args) -> String {
        titled("Read file", Some(&args.path), |path| match args.offset {
            Some(offset) => format!("Read {path}:{offset}"),
            None => format!("Read {path}"),
        })
    }

    fn locations_for(&self, args: &Args, ctx: &ToolContext) -> Vec<Location> {
        let Some(path) = given(Some(&args.path)).and_then(|path| ctx.resolve(path).ok()) else {
            return Vec::new();
        };
        vec![Location::at_line(path, args.offset.unwrap_or(1).max(1))]
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        read(args, ctx).await
    }
}

async fn read(args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if args.limit == Some(0) {
        return Err(ToolError::InvalidArguments(
            "`limit` must be at least 1".into(),
        ));
    }
    let file = Target::resolve(ctx, &args.path)?;
    let shown = file.shown.clone();
    let max_bytes = ctx.settings.max_read_bytes;
    // A huge file is refused before it is loaded, unless a window was asked for.
    if args.offset.is_none()
        && args.limit.is_none()
        && let Ok(meta) = tokio::fs::metadata(file.path()).await
        && meta.is_file()
        && meta.len() > max_bytes
    {
        return Err(ToolError::TooLarge {
            path: shown,
            size: meta.len(),
            limit: max_bytes,
        });
    }
    let text = file.read_text(ctx).await?;
    if text.contains('\0') {
        return Err(ToolError::NotText { path: shown });
    }

    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let first = args.offset.unwrap_or(1).max(1) as usize;
    if total == 0 {
        let mut output = ToolOutput::text(format!("({shown} is empty)"))
            .with_raw_output(json!({"path": shown, "total_lines": 0}))
            .with_locations(vec![file.at_line(1)]);
        output.content = vec![ToolContent::Text(String::new())];
        return Ok(output);
    }
    if first > total {
        return Err(ToolError::InvalidArguments(format!(
            "`offset` {first} is past the end of {shown}, which has {}",
            plural(total, "line")
        )));
    }
    let limit = args.limit.unwrap_or(DEFAULT_LINE_LIMIT) as usize;

    let mut for_model = String::new();
    let mut shown_lines = Vec::new();
    let mut byte_capped = false;
    for (index, line) in lines.iter().enumerate().skip(first - 1).take(limit) {
        let numbered = format!("{:>6}\t{}\n", index + 1, shorten(line, MAX_LINE_CHARS));
        if !shown_lines.is_empty() && (for_model.len() + numbered.len()) as u64 > max_bytes {
            byte_capped = true;
            break;
        }
        for_model.push_str(&numbered);
        shown_lines.push(*line);
    }
    let last = first + shown_lines.len() - 1;
    if last < total {
        let why = if byte_capped {
            format!(" (stopped at the {max_bytes}-byte limit of one read)")
        } else {
            String::new()
        };
        for_model.push_str(&format!(
            "(Showing lines {first}-{last} of {total}{why}. Use offset={} to read on.)\n",
            last + 1
        ));
    }
    Ok(ToolOutput {
        for_model,
        content: vec![ToolContent::Text(shown_lines.join("\n"))],
        raw_output: json!({
            "path": shown,
            "start_line": first,
            "end_line": last,
            "total_lines": total,
        }),
        locations: vec![file.at_line(first)],
        plan: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::*;

    #[tokio::test]
    async fn reads_numbered_lines_for_the_model_and_plain_text_for_the_editor() {
        let file = ("src/a.rs", "fn main() {\n    println!(\"hi\");\n}\n");
        let (ws, out) = run_on(&[file], &ReadFileTool, json!({"path": "src/a.rs"})).await;
        assert_eq!(
            out.for_model,
            "     1\tfn main() {\n     2\t    println!(\"hi\");\n     3\t}\n"
        );
        assert_eq!(
            out.content,
            [ToolContent::Text(
                "fn main() {\n    println!(\"hi\");\n}".into()
            )]
        );
        assert_eq!(out.locations, [Location::at_line(ws.path("src/a.rs"), 1)]);
        assert_eq!(out.raw_output["total_lines"], 3);
    }

    #[tokio::test]
    async fn reads_a_window_and_says_how_to_read_on() {
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        let window = json!({"path": "a.txt", "offset": 4, "limit": 2});
        let (ws, out) = run_on(&[("a.txt", &text)], &ReadFileTool, window).await;
        assert_eq!(
            out.for_model,
            "     4\tline 4\n     5\tline 5\n(Showing lines 4-5 of 10. Use offset=6 to read on.)\n"
        );
        assert_eq!(out.content, [ToolContent::Text("line 4\nline 5".into())]);
        assert_eq!(out.locations, [Location::at_line(ws.path("a.txt"), 4)]);
    }

    #[tokio::test]
    async fn empty_files_say_so() {
        let empty = json!({"path": "empty.txt"});
        let (_ws, out) = run_on(&[("empty.txt", "")], &ReadFileTool, empty).await;
        assert_eq!(out.for_model, "(empty.txt is empty)");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn refuses_binary_missing_outside_files_and_directories() {
        let ws = workspace_with(&[("src/a.rs", "")]);
        ws.write("image.png", b"\x89PNG\r\n\x1a\n\0\0\0");
        let secret = ws.dir.path().join("secret.txt");
        std::fs::write(&secret, "secret").unwrap();
        std::os::unix::fs::symlink(&secret, ws.path("innocent.txt")).unwrap();
        let outside = || Failure::Is(|err| matches!(err, ToolError::PathOutsideWorkspace { .. }));
        let cases = vec![
            (
                json!({"path": "image.png"}),
                Failure::Reads(
                    "image.png is not a text file (binary or not UTF-8); it cannot be read or edited as text",
                ),
            ),
            (
                json!({"path": "nope.txt"}),
                Failure::Reads("nope.txt does not exist; check the path with list_dir or glob"),
            ),
            (json!({"path": "/etc/passwd"}), outside()),
            // A symlink out of the workspace.
            (json!({"path": "innocent.txt"}), outside()),
            (json!({"path": "src"}), Failure::Says("list_dir")),
        ];
        ws.assert_failures(&ReadFileTool, cases).await;
    }

    #[tokio::test]
    async fn a_huge_file_is_refused_whole_but_read_in_a_window() {
        let mut ws = workspace();
        ws.ctx.settings.max_read_bytes = 100;
        let lines: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        ws.write("big.txt", &lines);
        let big = ws.fail(&ReadFileTool, json!({"path": "big.txt"})).await;
        assert!(matches!(big, ToolError::TooLarge { .. }), "{big}");
        assert_contains(&big, "offset and limit");

        // A window of a big file is fine, cut at the byte limit.
        let window = ws
            .run(&ReadFileTool, json!({"path": "big.txt", "offset": 1}))
            .await;
        assert!(window.for_model.starts_with("     1\tline 1\n"));
        assert_contains(&window.for_model, "stopped at the 100-byte limit");
    }

    #[tokio::test]
    async fn invalid_arguments_name_the_field() {
        let ws = workspace_with(&[("a.txt", "one\n")]);
        let cases = vec![
            (
                json!({"path": "a.txt", "offset": 5}),
                Failure::Reads(
                    "invalid arguments: `offset` 5 is past the end of a.txt, which has 1 line",
                ),
            ),
            (
                json!({}),
                Failure::Reads("invalid arguments: missing field `path`"),
            ),
            (
                json!({"path": "a", "offset": "ten"}),
                Failure::Says("`offset`"),
            ),
            (
                json!({"path": "a", "limit": 0}),
                Failure::Says("`limit` must be at least 1"),
            ),
        ];
        ws.assert_failures(&ReadFileTool, cases).await;
    }

    #[test]
    fn title_and_locations_come_from_the_arguments() {
        let ws = workspace();
        let titles = [
            (json!({"path": "src/a.rs"}), "Read src/a.rs"),
            (
                json!({"path": "src/a.rs", "offset": 12}),
                "Read src/a.rs:12",
            ),
            (json!("garbage"), "Read file"),
        ];
        for (arguments, title) in titles {
            assert_eq!(ReadFileTool.title(&arguments), title);
        }
        assert_eq!(
            ReadFileTool.locations(&json!({"path": "src/a.rs", "offset": 12}), &ws.ctx),
            [Location::at_line(ws.path("src/a.rs"), 12)]
        );
        assert!(
            ReadFileTool
                .locations(&json!({"path": "../x"}), &ws.ctx)
                .is_empty()
        );
    }
}
