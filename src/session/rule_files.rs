//! The remembered permission rules a session starts with: the project's
//! `.crucible/permissions.toml` (the project is the nearest directory at or
//! above the session's with a `.crucible/`, else the session's own) and
//! the user's `permissions.toml` beside the config. Read at each session
//! start, so a rule one session wrote holds in every later one. The
//! project file's allow rules apply only if it is trusted
//! ([`TrustedRules`]).

use std::path::Path;

use crate::permissions::remembered::FILE_NAME;
use crate::permissions::{Decision, Rule, RuleFiles, RuleOrigin, TrustedRules};

/// The rules files a session starts with.
pub(super) struct Loaded {
    pub files: RuleFiles,
    /// The rules they hold now.
    pub rules: Vec<Rule>,
    /// What keeps rules from applying, for `/permissions`: a file that
    /// cannot be used (it is left out: none of its rules apply, so nothing
    /// is allowed by it), or a project file that is not trusted.
    pub problems: Vec<String>,
    /// The project file is not trusted: what the user is told.
    pub untrusted: Option<String>,
}

pub(super) fn load(cwd: &Path, trust: Option<TrustedRules>) -> Loaded {
    let project_root = crate::util::project_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    let files = RuleFiles {
        user: crate::util::crucible_config_dir().map(|dir| dir.join(FILE_NAME)),
        project_root,
        trust,
    };
    let project = files.project();
    let mut problems = Vec::new();
    let origin = RuleOrigin::ProjectFile(project.clone());
    let (mut rules, text) = read(&project, Some(&files.project_root), origin, &mut problems);
    let untrusted = (files.trust.as_ref())
        .and_then(|trust| hold_back_untrusted(&project, &text, trust, &mut rules));
    problems.extend(untrusted.clone());
    if let Some(user) = &files.user {
        let origin = RuleOrigin::UserFile(user.clone());
        rules.extend(read(user, None, origin, &mut problems).0);
    }
    Loaded {
        files,
        rules,
        problems,
        untrusted,
    }
}

/// A file's rules and the text they were read from.
fn read(
    path: &Path,
    base: Option<&Path>,
    origin: RuleOrigin,
    problems: &mut Vec<String>,
) -> (Vec<Rule>, String) {
    crate::config::load_rules_file(path, base, origin).unwrap_or_else(|err| {
        tracing::warn!(%err, "permission rules file not used");
        problems.push(format!("Not used (fix the file): {err}"));
        (Vec::new(), String::new())
    })
}

/// Marks the project file's allow rules as not applied when `text`, what
/// they were read from, is not what the agent last wrote or the user
/// trusted; what to tell then.
fn hold_back_untrusted(
    project: &Path,
    text: &str,
    trust: &TrustedRules,
    rules: &mut [Rule],
) -> Option<String> {
    let allowing = rules
        .iter()
        .filter(|r| r.decision == Decision::Allow)
        .count();
    if allowing == 0 {
        return None;
    }
    if trust.is_trusted(project, text.as_bytes()) {
        return None;
    }
    for rule in rules.iter_mut().filter(|r| r.decision == Decision::Allow) {
        rule.untrusted = true;
    }
    tracing::warn!(path = %project.display(), allowing, "project rules file not trusted; its allow rules are not applied");
    Some(untrusted_note(project, allowing))
}

/// What the user is told of a project file whose allow rules wait for trust.
fn untrusted_note(project: &Path, allowing: usize) -> String {
    format!(
        "Not applied: the {} in {} (deny and ask rules apply). The file changed since crucible-agent last wrote it or you last trusted it: the model, another program or a checkout may have written it. Check it, then run `/permissions trust` to apply {}.",
        if allowing == 1 {
            "allow rule".to_string()
        } else {
            format!("{allowing} allow rules")
        },
        project.display(),
        if allowing == 1 { "it" } else { "them" }
    )
}
