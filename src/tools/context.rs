//! What a tool call runs with: the workspace it is confined to, the file
//! system and shell it goes through, its cancel token and the session state
//! tools share (the todo list).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::environment::EnvironmentPolicy;
use super::fs::confine;
use super::sandbox::SessionSandbox;
use super::sensitive::SensitiveFiles;
use super::{
    ConfinedPath, Delegator, FileJournal, FileSystem, LocalFs, LocalShell, PlanKeeper, Progress,
    Shell, ToolError,
};
use crate::events::TodoItem;

/// Limits the tools keep to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSettings {
    /// How long a shell command may run when the model does not say.
    pub shell_timeout: Duration,
    /// The most command output the model gets back, in bytes.
    pub output_cap: usize,
    /// The largest file `read_file` returns whole, and the most text one
    /// read returns, in bytes.
    pub max_read_bytes: u64,
    /// `[shell_environment]`: what commands get of the agent's environment.
    pub environment: Arc<EnvironmentPolicy>,
    /// `[sensitive_files]`: what grep and glob skip unless named.
    pub sensitive_files: Arc<SensitiveFiles>,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            shell_timeout: Duration::from_secs(120),
            output_cap: 100 * 1024,
            max_read_bytes: 256 * 1024,
            environment: Arc::default(),
            sensitive_files: Arc::default(),
        }
    }
}

/// Cheap to clone: everything shared sits behind an `Arc`.
#[derive(Clone)]
pub struct ToolContext {
    /// The session's working directory (absolute); relative paths start here.
    pub cwd: PathBuf,
    /// Directories paths may reach, besides `cwd` (which is always allowed).
    pub roots: Vec<PathBuf>,
    pub fs: Arc<dyn FileSystem>,
    pub shell: Arc<dyn Shell>,
    /// Cancelled when the user cancels the turn (a child of the prompt's token).
    pub cancel: CancellationToken,
    /// The session's todo list, replaced whole by the `todo` tool.
    pub todos: Arc<Mutex<Vec<TodoItem>>>,
    pub settings: ToolSettings,
    /// The running call's progress hook (set per call by the agent loop).
    pub progress: Progress,
    /// The running call's id as the client knows it (set per call).
    pub call_id: Option<String>,
    /// Runs `delegate` calls in child sessions; None where there is none.
    pub delegator: Option<Arc<dyn Delegator>>,
    /// Where commands run: the session's sandbox ([`SessionSandbox::off`] outside one).
    pub sandbox: Arc<SessionSandbox>,
    /// Where `ask_user` asks; None when the editor cannot show questions.
    pub asker: Option<Asker>,
    /// Told of each file the agent writes (for rewinds); None: nobody keeps them.
    pub journal: Option<Arc<dyn FileJournal>>,
    /// Where `write_plan` keeps the session's plan; None: nowhere.
    pub plan: Option<Arc<dyn PlanKeeper>>,
}

/// The editor a session's questions go to.
#[derive(Clone)]
pub struct Asker {
    pub session_id: crate::model::SessionId,
    pub sink: Arc<dyn crate::client::ClientSink>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("cwd", &self.cwd)
            .field("roots", &self.roots)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("settings", &self.settings)
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// Tools on the local disk and shell, confined to `cwd`.
    pub fn local(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        Self {
            roots: vec![cwd.clone()],
            cwd,
            fs: Arc::new(LocalFs::default()),
            shell: Arc::new(LocalShell),
            cancel: CancellationToken::new(),
            todos: Arc::default(),
            settings: ToolSettings::default(),
            progress: Progress::default(),
            call_id: None,
            delegator: None,
            sandbox: Arc::new(SessionSandbox::off()),
            asker: None,
            journal: None,
            plan: None,
        }
    }

    /// The same context with another cancel token (e.g. a child token per call).
    pub fn with_cancel(&self, cancel: CancellationToken) -> Self {
        Self {
            cancel,
            ..self.clone()
        }
    }

    /// The same context for one call: its id, its own cancel token and
    /// progress hook.
    pub fn for_call(&self, call_id: &str, cancel: CancellationToken, progress: Progress) -> Self {
        Self {
            cancel,
            progress,
            call_id: Some(call_id.to_string()),
            ..self.clone()
        }
    }

    /// A snapshot of the todo list.
    pub fn todos(&self) -> Vec<TodoItem> {
        self.lock_todos().clone()
    }

    pub fn set_todos(&self, todos: Vec<TodoItem>) {
        *self.lock_todos() = todos;
    }

    /// Empties the todo list, returning what it held.
    pub fn take_todos(&self) -> Vec<TodoItem> {
        std::mem::take(&mut *self.lock_todos())
    }

    fn lock_todos(&self) -> MutexGuard<'_, Vec<TodoItem>> {
        self.todos
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The directories paths may reach: `cwd` and the extra roots.
    pub fn allowed_roots(&self) -> Vec<PathBuf> {
        let mut allowed = vec![self.cwd.clone()];
        for root in &self.roots {
            if !allowed.contains(root) {
                allowed.push(root.clone());
            }
        }
        allowed
    }

    /// The absolute path for a path the model gave, if it stays inside the
    /// allowed roots (see [`Self::confine`]): the normalised path, what
    /// the editor knows, not the resolved one.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        self.confine(path)
            .map(|confined| confined.path().to_path_buf())
    }

    /// A path the model gave, checked against the allowed roots. `..` is
    /// normalised first; then symlinks are resolved on the longest existing
    /// ancestor, so neither can lead outside, while a new file in an
    /// existing directory is still allowed. Local reads and writes go
    /// through the result, which keeps them beneath the root that was
    /// checked even if a symlink is swapped in afterwards.
    pub fn confine(&self, path: &str) -> Result<ConfinedPath, ToolError> {
        confine(path, &self.cwd, self.allowed_roots())
    }

    /// A path as the model should see it: relative to `cwd` when inside it.
    pub fn display_path(&self, path: &Path) -> String {
        super::display_path(path, &self.cwd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{TodoPriority, TodoStatus};

    fn workspace() -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("project");
        std::fs::create_dir_all(cwd.join("src")).unwrap();
        std::fs::write(cwd.join("src/a.rs"), "fn a() {}\n").unwrap();
        (dir, ToolContext::local(cwd))
    }

    fn assert_outside(ctx: &ToolContext, path: &str) {
        match ctx.resolve(path) {
            Err(err @ ToolError::PathOutsideWorkspace { .. }) => {
                let message = err.to_string();
                assert!(
                    message.contains(&ctx.cwd.display().to_string()),
                    "the error names the allowed directory: {message}"
                );
            }
            other => panic!("{path} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn relative_paths_start_at_cwd() {
        let (_dir, ctx) = workspace();
        assert_eq!(ctx.resolve("src/a.rs").unwrap(), ctx.cwd.join("src/a.rs"));
        assert_eq!(
            ctx.resolve("./src/../src/a.rs").unwrap(),
            ctx.cwd.join("src/a.rs")
        );
        assert_eq!(ctx.resolve(".").unwrap(), ctx.cwd);
    }

    #[test]
    fn new_files_in_new_directories_are_allowed() {
        let (_dir, ctx) = workspace();
        assert_eq!(
            ctx.resolve("new/deeper/file.txt").unwrap(),
            ctx.cwd.join("new/deeper/file.txt")
        );
    }

    #[test]
    fn absolute_paths_inside_are_allowed() {
        let (_dir, ctx) = workspace();
        let absolute = ctx.cwd.join("src/a.rs");
        assert_eq!(ctx.resolve(absolute.to_str().unwrap()).unwrap(), absolute);
    }

    #[cfg(unix)]
    #[test]
    fn every_way_out_of_the_workspace_is_refused() {
        let (dir, ctx) = workspace();
        // A sibling whose name starts with the workspace's.
        std::fs::create_dir_all(dir.path().join("project2")).unwrap();
        let sibling = dir.path().join("project2/x");
        // Symlinks pointing outside.
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(&outside, ctx.cwd.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), ctx.cwd.join("secret_link")).unwrap();
        let ways_out = [
            "../x",
            "a/../../x",
            "src/../../project-sibling/x",
            "../../../../../../../../etc/passwd",
            "/etc/passwd",
            "/",
            sibling.to_str().unwrap(),
            "link/secret",
            "link/new_file",
            "link/new_dir/new_file",
            "secret_link",
        ];
        for path in ways_out {
            assert_outside(&ctx, path);
        }
    }

    #[cfg(unix)]
    #[test]
    fn dangling_symlinks_are_refused() {
        let (dir, ctx) = workspace();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), ctx.cwd.join("dangling")).unwrap();
        let err = ctx.resolve("dangling").unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(ctx.resolve("dangling/x").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_inside_the_workspace_are_followed() {
        let (_dir, ctx) = workspace();
        std::os::unix::fs::symlink(ctx.cwd.join("src"), ctx.cwd.join("src_link")).unwrap();
        assert_eq!(
            ctx.resolve("src_link/a.rs").unwrap(),
            ctx.cwd.join("src_link/a.rs")
        );
    }

    #[test]
    fn extra_roots_are_allowed() {
        let (dir, mut ctx) = workspace();
        let extra = dir.path().join("extra");
        std::fs::create_dir_all(&extra).unwrap();
        assert_outside(&ctx, extra.join("x").to_str().unwrap());
        ctx.roots.push(extra.clone());
        assert_eq!(
            ctx.resolve(extra.join("x").to_str().unwrap()).unwrap(),
            extra.join("x")
        );
        let err = ctx.resolve("/etc/passwd").unwrap_err().to_string();
        assert!(err.contains(&extra.display().to_string()), "{err}");
    }

    #[test]
    fn empty_paths_are_invalid() {
        let (_dir, ctx) = workspace();
        assert!(matches!(
            ctx.resolve(" "),
            Err(ToolError::InvalidArguments(_))
        ));
    }

    #[test]
    fn display_paths_are_relative_to_cwd() {
        let (_dir, ctx) = workspace();
        assert_eq!(ctx.display_path(&ctx.cwd.join("src/a.rs")), "src/a.rs");
        assert_eq!(ctx.display_path(&ctx.cwd), ".");
        assert_eq!(ctx.display_path(Path::new("/etc/hosts")), "/etc/hosts");
    }

    #[test]
    fn todos_are_shared_between_clones() {
        let (_dir, ctx) = workspace();
        let clone = ctx.with_cancel(CancellationToken::new());
        clone.set_todos(vec![TodoItem {
            content: "x".into(),
            status: TodoStatus::Pending,
            priority: TodoPriority::default(),
        }]);
        assert_eq!(ctx.todos().len(), 1);
        // Emptied through any clone (`/clear`), for all of them.
        assert_eq!(clone.take_todos().len(), 1);
        assert!(ctx.todos().is_empty());
        assert!(ctx.take_todos().is_empty());
    }

    /// Windows' own ways out: another drive, a drive-relative path, a
    /// network share (refused before anything touches it).
    #[cfg(windows)]
    #[test]
    fn drive_relative_unc_and_other_drive_paths_are_refused() {
        let (_dir, ctx) = workspace();
        let drive = super::super::fs::confine::volume(&ctx.cwd).unwrap();
        let err = ctx.resolve(&format!("{drive}foo")).unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "drive-relative: {err:?}"
        );
        assert_outside(&ctx, r"\\attacker\share\x");
        assert_outside(&ctx, r"\\?\UNC\attacker\share\x");
        let other = if drive == "Q:" { "R:" } else { "Q:" };
        assert_outside(&ctx, &format!(r"{other}\x"));
        assert_outside(&ctx, r"..\..\x");
        // The project's own drive, spelt another way, is still the project.
        let upper = ctx.cwd.join("src").join("a.rs");
        assert_eq!(ctx.resolve(&upper.display().to_string()).unwrap(), upper);
    }
}
