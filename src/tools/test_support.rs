//! A throwaway workspace for tool tests.

use std::path::PathBuf;

use super::{Tool, ToolContext, ToolError, ToolOutput};

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

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap()
    }

    pub async fn call(
        &self,
        tool: &dyn Tool,
        arguments: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        tool.call(arguments, &self.ctx).await
    }

    /// The call's output; a failed call fails the test.
    pub async fn run(&self, tool: &dyn Tool, arguments: serde_json::Value) -> ToolOutput {
        match self.call(tool, arguments).await {
            Ok(output) => output,
            Err(err) => panic!("{} failed: {err}", tool.name()),
        }
    }

    /// The call's error; a call that succeeds fails the test.
    pub async fn fail(&self, tool: &dyn Tool, arguments: serde_json::Value) -> ToolError {
        match self.call(tool, arguments).await {
            Ok(output) => panic!("{} succeeded: {}", tool.name(), output.for_model),
            Err(err) => err,
        }
    }
}

/// Fails the test, showing `text`, when `text` lacks `part`.
#[track_caller]
pub(crate) fn assert_contains(text: impl std::fmt::Display, part: &str) {
    let text = text.to_string();
    assert!(text.contains(part), "{part:?} is not in:\n{text}");
}
