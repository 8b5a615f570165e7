//! Agent Skills: a folder with a `SKILL.md` (front matter `name` and
//! `description`, then instructions) and any files beside it. Found, as
//! Crucible finds them, in the user's `~/.config/crucible/skills/`
//! (`$XDG_CONFIG_HOME`), then the project's `.claude/skills/`,
//! `.codex/skills/`, `.opencode/skills/` and `.crucible/skills/`, then the
//! kiln's `.crucible/skills/` (a later one replaces an earlier skill of the
//! same name). The model sees only each skill's
//! name and description ([`prompt_layer`]); the `skill` tool ([`tool`])
//! loads the instructions when a task needs them, and `/NAME args` runs a
//! turn with them. A [`Catalog`] re-reads the folders when their times change.

pub mod tool;

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use thiserror::Error;

use crate::agents::CardError;
use crate::agents::front_matter::{self, Value};
use crate::util::lock_read;

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Longest description shown to the model (the Agent Skills limit).
const MAX_DESCRIPTION: usize = 1024;

/// Why a folder's `SKILL.md` is no usable skill (it is skipped, with this
/// in the log).
#[derive(Debug, Error)]
pub enum SkillError {
    #[error("{file}: {source}")]
    Unreadable {
        file: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    FrontMatter(#[from] CardError),
    #[error("{file}: name `{name}` is not one word (letters, digits, `-`, `_`)")]
    NameNotOneWord { file: String, name: String },
    #[error("{file}: `description` is missing; say when the skill should be used")]
    NoDescription { file: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its command and the name the `skill` tool takes.
    pub name: String,
    pub description: String,
    /// The instructions after the front matter.
    pub instructions: String,
    /// The skill's folder: its other files are read from here.
    pub dir: PathBuf,
}

impl Skill {
    /// The skill in `dir`, if it holds a usable `SKILL.md`.
    pub fn load(dir: &Path) -> Result<Self, SkillError> {
        let file = dir.join(SKILL_FILE);
        let source = file.display().to_string();
        let text = std::fs::read_to_string(&file).map_err(|err| SkillError::Unreadable {
            file: source.clone(),
            source: err,
        })?;
        let (pairs, instructions) = front_matter::split_document(&text, &source)?;
        let text_of = |key: &str| {
            pairs.iter().find_map(|(k, v)| match v {
                Value::Text(text) if k == key => Some(text.trim().to_string()),
                _ => None,
            })
        };
        let folder = dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = text_of("name").filter(|n| !n.is_empty()).unwrap_or(folder);
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
        {
            return Err(SkillError::NameNotOneWord { file: source, name });
        }
        let description = text_of("description")
            .filter(|d| !d.is_empty())
            .ok_or(SkillError::NoDescription { file: source })?;
        Ok(Self {
            name,
            description: crate::util::truncate(&description, MAX_DESCRIPTION),
            instructions,
            dir: dir.to_path_buf(),
        })
    }
}

/// The harnesses whose project folders hold skills, in Crucible's order.
const HARNESSES: [&str; 4] = [".claude", ".codex", ".opencode", ".crucible"];

/// The folders skills are read from, in order (later wins), for a session
/// in `cwd` with the config's `kiln`, if any.
pub fn folders(cwd: &Path, kiln: Option<&Path>) -> Vec<PathBuf> {
    let project = project_of(cwd);
    crate::util::crucible_config_dir()
        .map(|dir| dir.join("skills"))
        .into_iter()
        .chain(HARNESSES.map(|harness| project.join(harness).join("skills")))
        .chain(kiln.map(|kiln| kiln.join(".crucible").join("skills")))
        .collect()
}

/// The nearest directory at or above `cwd` with one of the harnesses'
/// folders (below the home directory), else `cwd`.
fn project_of(cwd: &Path) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    cwd.ancestors()
        .take_while(|dir| Some(*dir) != home.as_deref())
        .find(|dir| HARNESSES.iter().any(|harness| dir.join(harness).is_dir()))
        .unwrap_or(cwd)
        .to_path_buf()
}

/// Every skill in `folders`, sorted by name; a later folder's skill
/// replaces an earlier one of the same name. Broken skills are logged.
pub fn discover(folders: &[PathBuf]) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    for folder in folders {
        let Ok(entries) = std::fs::read_dir(folder) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.join(SKILL_FILE).is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            match Skill::load(&dir) {
                Ok(skill) => {
                    skills.retain(|s| s.name != skill.name);
                    skills.push(skill);
                }
                Err(err) => tracing::warn!(%err, "skill skipped"),
            }
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

/// What the model reads about the skills: names and descriptions only.
/// Empty without skills. The same set gives the same text, so a prompt
/// cache keeps working across turns.
pub fn prompt_layer(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "# Skills\n\nSkills hold instructions for particular tasks. When a task matches a skill's description, load it with the `skill` tool (name) before you start, and follow it; the tool also lists and reads the skill's other files.\n",
    );
    for skill in skills {
        text.push_str(&format!("\n- `{}`: {}", skill.name, skill.description));
    }
    text
}

/// When the folders last changed: the folders, each skill folder and each
/// `SKILL.md` (editing one changes its time; adding a skill, the folder's).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Stamp(Vec<(PathBuf, Option<SystemTime>)>);

impl Stamp {
    fn of(folders: &[PathBuf]) -> Self {
        let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let mut stamp = Vec::new();
        for folder in folders {
            stamp.push((folder.clone(), modified(folder)));
            let Ok(entries) = std::fs::read_dir(folder) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            dirs.sort();
            for dir in dirs {
                let file = dir.join(SKILL_FILE);
                stamp.push((file.clone(), modified(&file)));
                stamp.push((dir.clone(), modified(&dir)));
            }
        }
        Self(stamp)
    }
}

/// A session's skills, re-read when their folders change.
#[derive(Debug, Default)]
pub struct Catalog {
    folders: Vec<PathBuf>,
    state: RwLock<(Stamp, Vec<Skill>)>,
}

impl Catalog {
    /// The skills of `folders`, read now.
    pub fn new(folders: Vec<PathBuf>) -> Self {
        let stamp = Stamp::of(&folders);
        let skills = discover(&folders);
        Self {
            folders,
            state: RwLock::new((stamp, skills)),
        }
    }

    pub fn skills(&self) -> Vec<Skill> {
        lock_read(&self.state).1.clone()
    }

    pub fn find(&self, name: &str) -> Option<Skill> {
        lock_read(&self.state)
            .1
            .iter()
            .find(|s| s.name == name)
            .cloned()
    }

    /// Read the folders again if they changed; whether the skills did.
    pub fn refresh(&self) -> bool {
        let stamp = Stamp::of(&self.folders);
        if lock_read(&self.state).0 == stamp {
            return false;
        }
        let skills = discover(&self.folders);
        let mut state = self
            .state
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        let changed = state.1 != skills;
        *state = (stamp, skills);
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(root: &Path, folder: &str, front: &str, body: &str) {
        let dir = root.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SKILL_FILE), format!("---\n{front}\n---\n{body}\n")).unwrap();
    }

    #[test]
    fn skills_are_read_named_described_and_later_folders_win() {
        let user = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        write_skill(
            user.path(),
            "pdf",
            "name: pdf\ndescription: Fill PDF forms",
            "User's.",
        );
        write_skill(
            user.path(),
            "review",
            "description: >\n  Review a change\n  carefully",
            "Look.",
        );
        write_skill(
            project.path(),
            "pdf2",
            "name: pdf\ndescription: The project's PDF way",
            "Project's.",
        );
        write_skill(
            project.path(),
            "broken",
            "name: two words\ndescription: d",
            "",
        );
        write_skill(project.path(), "mute", "name: mute", "");
        let skills = discover(&[user.path().to_path_buf(), project.path().to_path_buf()]);
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["pdf", "review"]);
        assert_eq!(skills[0].instructions, "Project's.");
        assert_eq!(skills[1].description, "Review a change carefully");
        let layer = prompt_layer(&skills);
        assert!(layer.contains("- `pdf`: The project's PDF way") && !layer.contains("Project's."));
        assert_eq!(prompt_layer(&[]), "");
    }

    #[test]
    fn the_catalog_sees_a_skill_added_later() {
        let root = tempfile::tempdir().unwrap();
        let catalog = Catalog::new(vec![root.path().join("skills")]);
        assert!(catalog.skills().is_empty());
        assert!(!catalog.refresh());
        write_skill(
            &root.path().join("skills"),
            "new",
            "description: d",
            "Do it.",
        );
        assert!(catalog.refresh());
        assert_eq!(catalog.find("new").unwrap().instructions, "Do it.");
        assert!(!catalog.refresh());
    }

    #[test]
    fn every_harness_folder_then_the_kiln_in_crucibles_order() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("project");
        let sub = project.join("src");
        std::fs::create_dir_all(project.join(".opencode")).unwrap();
        std::fs::create_dir_all(&sub).unwrap();
        let kiln = root.path().join("kiln");
        let found = folders(&sub, Some(&kiln));
        let tail: Vec<PathBuf> = found[found.len() - 5..].to_vec();
        assert_eq!(
            tail,
            [
                project.join(".claude/skills"),
                project.join(".codex/skills"),
                project.join(".opencode/skills"),
                project.join(".crucible/skills"),
                kiln.join(".crucible/skills"),
            ]
        );
        assert!(!folders(&sub, None).contains(&kiln.join(".crucible/skills")));
    }
}
