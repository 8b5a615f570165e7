//! `/permissions`: the rules in force, each with its id and where it comes
//! from; `/permissions revoke ID` removes one (from its file too).

use std::fmt::Write as _;

use super::SessionActor;

const NO_RULES: &str = "No permission rules: the mode decides, and the editor asks before anything changes. \"Always allow\" answers add rules.";

impl SessionActor {
    pub(super) fn permissions_command(&self, args: Option<&str>) -> String {
        let permissions = &self.services.permissions;
        let words: Vec<&str> = args.unwrap_or_default().split_whitespace().collect();
        match words.as_slice() {
            [] | ["list"] => {
                let rules = permissions.listing();
                let problems: String = (permissions.file_problems().iter())
                    .map(|problem| format!("\n{problem}"))
                    .collect();
                if rules.is_empty() {
                    return format!("{NO_RULES}{problems}");
                }
                let mut text = String::from(
                    "Permission rules, first match wins (this session's answers, then the project's and your files, then the config):\n",
                );
                for rule in rules {
                    let _ = writeln!(text, "- `{}` {} — {}", rule.id, rule.text, rule.origin);
                }
                text.push_str("Revoke one with `/permissions revoke ID`.");
                text.push_str(&problems);
                text
            }
            ["revoke", id] => permissions
                .revoke(id)
                .unwrap_or_else(|err| err.to_string()),
            ["trust"] => self.trust_project_rules(),
            _ => "usage: `/permissions` lists the rules; `/permissions revoke ID` removes one; `/permissions trust` applies the project file's allow rules (check the file first)."
                .into(),
        }
    }

    /// `/permissions trust`: the project's rules file, as it is now, may
    /// allow; its rules are read again for this session.
    fn trust_project_rules(&self) -> String {
        let permissions = &self.services.permissions;
        let Some(files) = permissions.rule_files() else {
            return "This session reads no rules files.".into();
        };
        let Some(trust) = files.trust.clone() else {
            return "Every project rules file applies here: without a data directory, there is nowhere to keep which are trusted.".into();
        };
        let project = files.project();
        if !project.exists() {
            return format!("There is no {} to trust.", project.display());
        }
        if let Err(err) = trust.trust_current(&project) {
            return format!("Cannot record {} as trusted: {err}", project.display());
        }
        let loaded = super::rule_files::load(&self.services.cwd, Some(trust));
        let allowing = (loaded.rules.iter())
            .filter(|rule| {
                rule.decision == crate::permissions::Decision::Allow
                    && matches!(rule.origin, crate::permissions::RuleOrigin::ProjectFile(_))
            })
            .count();
        permissions.set_rule_files(loaded.files, loaded.rules, loaded.problems);
        format!(
            "Trusted {} as it is now: its allow rules ({allowing}) apply from now on, here and in new sessions. A change to it other than through the agent's own \"always allow\" answers needs `/permissions trust` again.",
            project.display()
        )
    }
}
