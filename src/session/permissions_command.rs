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
                    .map(|problem| format!("\nNot used (fix the file): {problem}"))
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
            ["revoke", id] => permissions.revoke(id).unwrap_or_else(|err| err),
            _ => "usage: `/permissions` lists the rules; `/permissions revoke ID` removes one."
                .into(),
        }
    }
}
