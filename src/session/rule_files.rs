//! The remembered permission rules a session starts with: the project's
//! `.crucible/permissions.toml` (the project is the nearest directory at or
//! above the session's with a `.crucible/`, else the session's own) and
//! the user's `permissions.toml` beside the config. Read at each session
//! start, so a rule one session wrote holds in every later one.

use std::path::Path;

use crate::permissions::remembered::FILE_NAME;
use crate::permissions::{Rule, RuleFiles, RuleOrigin};

/// The files, the rules they hold now, and why a file could not be used
/// (it is left out: none of its rules apply, so nothing is allowed by it).
pub(super) fn load(cwd: &Path) -> (RuleFiles, Vec<Rule>, Vec<String>) {
    let project_root = crate::util::project_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    let files = RuleFiles {
        user: crate::util::crucible_config_dir().map(|dir| dir.join(FILE_NAME)),
        project_root,
    };
    let project = files.project();
    let mut problems = Vec::new();
    let origin = RuleOrigin::ProjectFile(project.clone());
    let mut rules = read(&project, Some(&files.project_root), origin, &mut problems);
    if let Some(user) = &files.user {
        let origin = RuleOrigin::UserFile(user.clone());
        rules.extend(read(user, None, origin, &mut problems));
    }
    (files, rules, problems)
}

fn read(
    path: &Path,
    base: Option<&Path>,
    origin: RuleOrigin,
    problems: &mut Vec<String>,
) -> Vec<Rule> {
    crate::config::load_rules_file(path, base, origin).unwrap_or_else(|err| {
        tracing::warn!(%err, "permission rules file not used");
        problems.push(err.to_string());
        Vec::new()
    })
}
