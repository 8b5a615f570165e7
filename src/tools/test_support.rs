//! A throwaway workspace for tool tests.

use std::path::PathBuf;

use serde_json::Value;

pub(crate) use super::Tool;
use super::{ToolContext, ToolError, ToolOutput};

pub(crate) struct Workspace {
    /// Holds `project/` (the cwd) and room beside it for escape attempts.
    pub dir: tempfile::TempDir,
    pub ctx: ToolContext,
}

pub(crate) fn workspace() -> Workspace {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("project");
    std::fs::create_dir_all(&cwd).unwrap();
    let ctx = ToolContext::local(cwd);
    Workspace { dir, ctx }
}

/// A workspace holding `files`: each a path relative to the working
/// directory, and its text.
pub(crate) fn workspace_with(files: &[(&str, &str)]) -> Workspace {
    let ws = workspace();
    for (path, text) in files {
        ws.write(path, text);
    }
    ws
}

/// One call that must succeed, in a fresh workspace holding `files`.
pub(crate) async fn run_on(
    files: &[(&str, &str)],
    tool: &dyn Tool,
    arguments: Value,
) -> (Workspace, ToolOutput) {
    let ws = workspace_with(files);
    let out = ws.run(tool, arguments).await;
    (ws, out)
}

/// What a failing call's error must be.
pub(crate) enum Failure {
    /// Its message holds this.
    Says(&'static str),
    /// Its message is exactly this.
    Reads(&'static str),
    /// It is this kind of error.
    Is(fn(&ToolError) -> bool),
}

impl Workspace {
    pub fn path(&self, relative: &str) -> PathBuf {
        self.ctx.cwd.join(relative)
    }

    pub fn write(&self, relative: &str, content: impl AsRef<[u8]>) {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, content).unwrap();
    }

    /// Empty files, for tests that care only about paths.
    pub fn touch<P: AsRef<str>>(&self, paths: impl IntoIterator<Item = P>) {
        for path in paths {
            self.write(path.as_ref(), "");
        }
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap()
    }

    pub async fn call(&self, tool: &dyn Tool, arguments: Value) -> Result<ToolOutput, ToolError> {
        tool.call(arguments, &self.ctx).await
    }

    /// The call's output; a failed call fails the test.
    pub async fn run(&self, tool: &dyn Tool, arguments: Value) -> ToolOutput {
        match self.call(tool, arguments).await {
            Ok(output) => output,
            Err(err) => panic!("{} failed: {err}", tool.name()),
        }
    }

    /// The call's error; a call that succeeds fails the test.
    pub async fn fail(&self, tool: &dyn Tool, arguments: Value) -> ToolError {
        match self.call(tool, arguments).await {
            Ok(output) => panic!("{} succeeded: {}", tool.name(), output.for_model),
            Err(err) => err,
        }
    }

    /// Each call fails as its case says.
    pub async fn assert_failures(&self, tool: &dyn Tool, cases: Vec<(Value, Failure)>) {
        for (arguments, expected) in cases {
            let err = self.fail(tool, arguments.clone()).await;
            let message = err.to_string();
            match expected {
                Failure::Says(part) => assert!(
                    message.contains(part),
                    "{arguments}: {part:?} is not in:\n{message}"
                ),
                Failure::Reads(whole) => assert_eq!(message, whole, "{arguments}"),
                Failure::Is(kind) => assert!(kind(&err), "{arguments}: {err:?}"),
            }
        }
    }
}

/// Fails the test, showing `text`, when `text` lacks `part`.
#[track_caller]
pub(crate) fn assert_contains(text: impl std::fmt::Display, part: &str) {
    let text = text.to_string();
    assert!(text.contains(part), "{part:?} is not in:\n{text}");
}
