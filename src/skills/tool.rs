//! The `skill` tool: a skill's full instructions (and the list of its
//! files) on demand, or one of its files, so the context pays only for the
//! skills a task uses.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::Catalog;
use crate::events::ToolKind;
use crate::tools::{ToolContext, ToolError, ToolOutput, TypedTool};

pub const NAME: &str = "skill";
/// The most files a listing names, and the largest file read.
const MAX_FILES: usize = 200;
const MAX_FILE_BYTES: u64 = 256 * 1024;

pub struct SkillTool {
    pub catalog: Arc<Catalog>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The skill's name, as listed under Skills in the system prompt
    name: String,
    /// A file of the skill's folder to read instead, relative to it (e.g. `reference.md`, `scripts/fill.py`)
    file: Option<String>,
}

impl TypedTool for SkillTool {
    type Args = Args;
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Load a skill: its full instructions and the list of files in its folder. \
         Use it before a task that matches a skill's description, then follow the instructions. \
         With `file`, read one of the skill's files instead.";
    const KIND: ToolKind = ToolKind::Read;
    const MUTATES: bool = false;

    fn title_for(&self, args: &Args) -> String {
        match &args.file {
            Some(file) => format!("Read {file} of skill `{}`", args.name),
            None => format!("Load skill `{}`", args.name),
        }
    }

    async fn run(&self, args: Args, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let skill = self.catalog.find(args.name.trim()).ok_or_else(|| {
            let known: Vec<String> = self.catalog.skills().into_iter().map(|s| s.name).collect();
            ToolError::Failed(format!(
                "there is no skill `{}`; the skills are: {}",
                args.name,
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ))
        })?;
        let Some(file) = args.file.as_deref().filter(|f| !f.trim().is_empty()) else {
            let files = files_of(&skill.dir);
            let listing = if files.is_empty() {
                "(none besides SKILL.md)".to_string()
            } else {
                files.join("\n")
            };
            return Ok(ToolOutput::text(format!(
                "# Skill `{}`\nFolder: {}\n\n{}\n\n## Files in the skill's folder (read one with `file`)\n{listing}",
                skill.name,
                skill.dir.display(),
                skill.instructions
            )));
        };
        read_file(&skill.dir, file).map(ToolOutput::text)
    }
}

/// The skill's files besides SKILL.md, relative to its folder, sorted.
fn files_of(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir)
                && relative != Path::new(super::SKILL_FILE)
            {
                files.push(relative.display().to_string());
            }
        }
    }
    files.sort();
    files.truncate(MAX_FILES);
    files
}

/// `file` inside `dir`, never outside it (nor through a link out of it).
fn read_file(dir: &Path, file: &str) -> Result<String, ToolError> {
    let relative = PathBuf::from(file);
    let escapes = relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    let path = dir.join(&relative);
    let inside = path
        .canonicalize()
        .ok()
        .zip(dir.canonicalize().ok())
        .is_some_and(|(path, dir)| path.starts_with(dir));
    if escapes || !inside {
        return Err(ToolError::NotFound {
            path: format!("{file} (in the skill's folder {})", dir.display()),
        });
    }
    let io = |source| ToolError::Io {
        path: path.display().to_string(),
        source,
    };
    let size = std::fs::metadata(&path).map_err(io)?.len();
    if size > MAX_FILE_BYTES {
        return Err(ToolError::TooLarge {
            path: path.display().to_string(),
            size,
            limit: MAX_FILE_BYTES,
        });
    }
    let bytes = std::fs::read(&path).map_err(io)?;
    String::from_utf8(bytes).map_err(|_| ToolError::NotText {
        path: path.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_listed_and_read_only_inside_the_skill() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("s");
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join(super::super::SKILL_FILE), "x").unwrap();
        std::fs::write(dir.join("scripts/run.py"), "print(1)").unwrap();
        std::fs::write(root.path().join("secret"), "no").unwrap();
        assert_eq!(files_of(&dir), ["scripts/run.py"]);
        assert_eq!(read_file(&dir, "scripts/run.py").unwrap(), "print(1)");
        for outside in ["../secret", "/etc/passwd", "scripts/../../secret"] {
            assert!(read_file(&dir, outside).is_err(), "{outside}");
        }
    }
}
