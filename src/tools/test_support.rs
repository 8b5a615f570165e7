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
}
