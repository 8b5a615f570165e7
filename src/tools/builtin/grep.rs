//! `grep`: lines matching a regular expression, in files .gitignore leaves.

use std::io::Read;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::glob::compile_glob;
use super::walk::{is_file, skipped_as_sensitive, walk};
use super::{Target, path_location, place, plural, search_title};
use crate::events::{Location, ToolKind};
use crate::tools::fs::{io_error, looks_binary};
use crate::tools::{
    ConfinedPath, ToolContext, ToolError, ToolOutput, TypedTool, display_path, shorten,
};

/// The most matching lines one call returns.
pub const MAX_MATCHES: usize = 200;
/// Matching lines are cut to this many characters.
const MAX_LINE_CHARS: usize = 300;
/// Larger files are skipped (generated data, not code).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Files with matches the editor is pointed at.
const MAX_LOCATIONS: usize = 10;

#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The regular expression to search for
    pattern: String,
    /// The directory or file to search (default: the working directory)
    path: Option<String>,
    /// Search only files matching this glob: `*.rs` matches file names, a pattern with `/` matches paths relative to path
    glob: Option<String>,
    /// Ignore case (default false)
    case_insensitive: Option<bool>,
}

impl TypedTool for GrepTool {
    type Args = Args;
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search file contents for a regular expression (Rust regex syntax, like ripgrep; no look-around). \
         Matches single lines and answers `path:line: text`, paths relative to the working directory. \
         Files matched by .gitignore and binary files are skipped. Narrow the search with `path` (a directory or a file) \
         and `glob` (a file-name filter such as `*.rs`, or a path pattern such as `src/**/*.ts`). \
         Returns at most 200 matching lines.";
    const BRIEF: Option<&'static str> = Some("Search file contents for a regex.");
    const KIND: ToolKind = ToolKind::Search;
    const MUTATES: bool = false;

    fn title_for(&self, args: &Args) -> String {
        let pattern = shorten(&args.pattern, 60);
        search_title("Search files", "Search for", &pattern, args.path.as_deref())
    }

    fn locations_for(&self, args: &Args, ctx: &ToolContext) -> Vec<Location> {
        path_location(args.path.as_deref(), ctx)
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        search(args, ctx).await
    }
}

/// A file filter: by file name, or by relative path when it has a `/`.
struct FileFilter {
    matcher: globset::GlobMatcher,
    by_path: bool,
}

impl FileFilter {
    fn accepts(&self, path: &Path, base: &Path) -> bool {
        if self.by_path {
            let relative = path.strip_prefix(base).unwrap_or(path);
            self.matcher.is_match(relative)
        } else {
            path.file_name()
                .is_some_and(|name| self.matcher.is_match(Path::new(name)))
        }
    }
}

struct Match {
    path: PathBuf,
    line: usize,
    text: String,
}

#[derive(Default)]
struct Found {
    shown: Vec<Match>,
    total_matches: usize,
    /// Files with matches, in order, with their first matching line.
    files: Vec<(PathBuf, usize)>,
}

async fn search(args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::InvalidArguments("`pattern` is empty".into()));
    }
    let regex = regex::RegexBuilder::new(&args.pattern)
        .case_insensitive(args.case_insensitive.unwrap_or(false))
        .build()
        .map_err(|err| {
            ToolError::InvalidArguments(format!(
                "`pattern` is not a valid regular expression: {err}"
            ))
        })?;
    let filter = match args.glob.as_deref().map(str::trim) {
        Some(glob) if !glob.is_empty() => {
            let glob = glob.strip_prefix("./").unwrap_or(glob);
            Some(FileFilter {
                matcher: compile_glob(glob, "glob")?,
                by_path: glob.contains('/'),
            })
        }
        _ => None,
    };
    let base = Target::resolve(ctx, args.path.as_deref().unwrap_or("."))?;
    tokio::fs::metadata(base.path())
        .await
        .map_err(|err| base.error(io_error(base.path(), err)))?;

    let root = base.path().to_path_buf();
    let confined = base.place.clone();
    let named = args.glob.clone();
    let sensitive = std::sync::Arc::clone(&ctx.settings.sensitive_files);
    let found = walk(
        ctx,
        base.path(),
        None,
        Found::default(),
        move |found, entry| {
            let wanted = filter
                .as_ref()
                .is_none_or(|filter| filter.accepts(entry.path(), &root));
            if is_file(&entry)
                && wanted
                && !skipped_as_sensitive(&sensitive, entry.path(), &root, named.as_deref())
                && let Ok(relative) = entry.path().strip_prefix(&root)
                && let Some(text) = read_searchable(&confined.child(relative))
            {
                search_text(&regex, entry.path(), &text, found);
            }
        },
    )
    .await?;

    let mut for_model = String::new();
    for found_match in &found.shown {
        for_model.push_str(&format!(
            "{}:{}: {}\n",
            display_path(&found_match.path, &ctx.cwd),
            found_match.line,
            found_match.text
        ));
    }
    if found.total_matches == 0 {
        for_model = format!(
            "No matches for `{}` in {}.",
            args.pattern,
            place(&base.shown)
        );
    } else if found.total_matches > found.shown.len() {
        for_model.push_str(&format!(
            "[showing the first {} of {} matching lines in {}; narrow the pattern, path or glob]\n",
            found.shown.len(),
            found.total_matches,
            plural(found.files.len(), "file")
        ));
    }
    let raw_output = json!({
        "matches": found.total_matches,
        "files": found.files.len(),
        "truncated": found.total_matches > found.shown.len(),
    });
    let locations = found
        .files
        .into_iter()
        .take(MAX_LOCATIONS)
        .map(|(path, line)| Location::at_line(path, u32::try_from(line).unwrap_or(u32::MAX)))
        .collect();
    Ok(ToolOutput::text(for_model)
        .with_raw_output(raw_output)
        .with_locations(locations))
}

/// The file's text, or None for files not worth searching (unreadable,
/// too large, binary). Invalid UTF-8 is replaced, as ripgrep does.
/// The file's text, read beneath the root the search was confined to: a
/// directory swapped for a symlink during the walk cannot lead outside.
fn read_searchable(place: &ConfinedPath) -> Option<String> {
    let file = place.open().ok()?;
    if file.metadata().ok()?.len() > MAX_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes).ok()?;
    if looks_binary(&bytes) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn search_text(regex: &regex::Regex, path: &Path, text: &str, found: &mut Found) {
    let mut first_line = None;
    for (index, line) in text.lines().enumerate() {
        if !regex.is_match(line) {
            continue;
        }
        found.total_matches += 1;
        first_line.get_or_insert(index + 1);
        if found.shown.len() < MAX_MATCHES {
            found.shown.push(Match {
                path: path.to_path_buf(),
                line: index + 1,
                text: shorten(line.trim_end(), MAX_LINE_CHARS),
            });
        }
    }
    if let Some(line) = first_line {
        found.files.push((path.to_path_buf(), line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::*;

    /// Callers and a definition of `helper`, and places grep must skip.
    fn project() -> Workspace {
        let ws = workspace_with(&[
            (".gitignore", "target/\n"),
            ("src/main.rs", "fn main() {\n    helper();\n}\n"),
            ("src/lib.rs", "pub fn helper() {}\n// TODO: more\n"),
            ("README.md", "Call Helper() first.\n"),
            ("target/debug/gen.rs", "fn helper_generated() {}\n"),
        ]);
        ws.write("data.bin", b"helper\0\x01\x02");
        ws
    }

    #[tokio::test]
    async fn finds_matching_lines_skipping_ignored_and_binary_files() {
        let ws = project();
        let out = ws.run(&GrepTool, json!({"pattern": "helper\\("})).await;
        assert_eq!(
            out.for_model,
            "src/lib.rs:1: pub fn helper() {}\nsrc/main.rs:2:     helper();\n"
        );
        assert_eq!(
            out.locations,
            [
                Location::at_line(ws.path("src/lib.rs"), 1),
                Location::at_line(ws.path("src/main.rs"), 2)
            ]
        );
        assert_eq!(out.raw_output["matches"], 2);
        assert_eq!(out.raw_output["files"], 2);
    }

    #[tokio::test]
    async fn case_insensitive_path_and_glob_narrow_the_search() {
        let ws = project();
        let insensitive = ws
            .run(
                &GrepTool,
                json!({"pattern": "helper\\(", "case_insensitive": true}),
            )
            .await;
        assert!(
            insensitive
                .for_model
                .starts_with("README.md:1: Call Helper() first.\n")
        );

        // (arguments, the answer, how many files the editor is pointed at)
        let cases = [
            (
                json!({"pattern": "helper", "path": "src/main.rs"}),
                "src/main.rs:2:     helper();\n",
                1,
            ),
            (
                json!({"pattern": "(?i)helper", "glob": "*.md"}),
                "README.md:1: Call Helper() first.\n",
                1,
            ),
            (
                json!({"pattern": "helper", "glob": "src/**/lib.rs"}),
                "src/lib.rs:1: pub fn helper() {}\n",
                1,
            ),
            // No matches is an answer, not an error.
            (
                json!({"pattern": "zebra"}),
                "No matches for `zebra` in the working directory.",
                0,
            ),
        ];
        for (arguments, for_model, located) in cases {
            let out = ws.run(&GrepTool, arguments.clone()).await;
            assert_eq!(out.for_model, for_model, "{arguments}");
            assert_eq!(out.locations.len(), located, "{arguments}");
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn symlinks_are_not_followed_out_of_the_workspace() {
        let ws = project();
        let outside = ws.dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "helper( secret\n").unwrap();
        std::os::unix::fs::symlink(&outside, ws.path("linked_dir")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), ws.path("linked.txt")).unwrap();
        let out = ws.run(&GrepTool, json!({"pattern": "secret"})).await;
        assert_eq!(
            out.for_model,
            "No matches for `secret` in the working directory."
        );
        let through = ws
            .fail(
                &GrepTool,
                json!({"pattern": "secret", "path": "linked_dir"}),
            )
            .await;
        assert!(matches!(through, ToolError::PathOutsideWorkspace { .. }));
    }

    #[tokio::test]
    async fn nested_gitignore_and_ignore_files_are_respected() {
        let ws = workspace_with(&[
            ("sub/.gitignore", "generated.txt\n"),
            (".ignore", "scratch/\n"),
        ]);
        for path in [
            "keep.txt",
            "sub/generated.txt",
            "sub/kept.txt",
            "scratch/notes.txt",
        ] {
            ws.write(path, "needle\n");
        }
        let out = ws.run(&GrepTool, json!({"pattern": "needle"})).await;
        assert_eq!(
            out.for_model,
            "keep.txt:1: needle\nsub/kept.txt:1: needle\n"
        );
    }

    #[tokio::test]
    async fn caps_the_matches_with_a_note() {
        let text: String = (0..150).map(|n| format!("hit {n}\n")).collect();
        let files = [("a.txt", text.as_str()), ("b.txt", text.as_str())];
        let (_ws, out) = run_on(&files, &GrepTool, json!({"pattern": "^hit"})).await;
        assert_eq!(out.for_model.lines().count(), MAX_MATCHES + 1);
        assert!(
            out.for_model.ends_with(
                "[showing the first 200 of 300 matching lines in 2 files; narrow the pattern, path or glob]\n"
            ),
            "{}",
            out.for_model
        );
        assert_eq!(out.raw_output["truncated"], true);
    }

    #[tokio::test]
    async fn long_lines_are_cut() {
        let minified = format!("var x='{}';\n", "a".repeat(1000));
        let (_ws, out) = run_on(
            &[("min.js", &minified)],
            &GrepTool,
            json!({"pattern": "var"}),
        )
        .await;
        assert!(out.for_model.len() < 400, "{}", out.for_model.len());
        assert!(out.for_model.contains('…'));
    }

    #[tokio::test]
    async fn bad_arguments_are_errors() {
        let cases = vec![
            (
                json!({"pattern": "fn ("}),
                Failure::Says("not a valid regular expression"),
            ),
            (
                json!({"pattern": ""}),
                Failure::Is(|err| matches!(err, ToolError::InvalidArguments(_))),
            ),
            (
                json!({"pattern": "x", "glob": "[z"}),
                Failure::Says("`glob`"),
            ),
            (
                json!({"pattern": "root", "path": "/etc"}),
                Failure::Is(|err| matches!(err, ToolError::PathOutsideWorkspace { .. })),
            ),
            (
                json!({"pattern": "x", "path": "nope"}),
                Failure::Is(|err| matches!(err, ToolError::NotFound { path } if path == "nope")),
            ),
            (
                json!({"pattern": "x", "case_insensitive": "yes"}),
                Failure::Says("`case_insensitive`"),
            ),
        ];
        project().assert_failures(&GrepTool, cases).await;
    }

    #[tokio::test]
    async fn a_cancelled_search_says_so() {
        let ws = project();
        ws.ctx.cancel.cancel();
        let err = ws.fail(&GrepTool, json!({"pattern": "x"})).await;
        assert!(matches!(err, ToolError::Cancelled));
    }

    #[test]
    fn title_quotes_the_pattern() {
        let titles = [
            (json!({"pattern": "fn main"}), "Search for `fn main`"),
            (
                json!({"pattern": "x", "path": "src"}),
                "Search for `x` in src",
            ),
            (json!({}), "Search files"),
        ];
        for (arguments, title) in titles {
            assert_eq!(GrepTool.title(&arguments), title);
        }
    }
}
