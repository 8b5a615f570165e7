//! `[context]`: how the conversation is kept within the model's window.

use std::path::Path;

use super::error::{ConfigError, invalid};
use super::non_zero;
use super::raw::RawContext;
use crate::context::ContextSettings;
use crate::prompt::RulesFiles;

/// `[context] rules_files`: relative paths, in the order given. An entry
/// that leaves the project (absolute, or with `..`) is left out with a
/// warning rather than refused: the file is shared with the Crucible TUI.
pub(super) fn rules_files(
    raw: Option<Vec<String>>,
    path: &Path,
    warnings: &mut Vec<String>,
) -> RulesFiles {
    let Some(names) = raw else {
        return RulesFiles(None);
    };
    let mut files = Vec::new();
    for (n, name) in names.into_iter().enumerate() {
        let file = std::path::PathBuf::from(name.trim());
        let inside = !name.trim().is_empty()
            && file.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
        if inside {
            files.push(file);
        } else {
            warnings.push(format!(
                "{}: key `context.rules_files[{n}]`: `{name}` is not a path inside the project (left out); name a file relative to the project, e.g. \"AGENTS.md\" or \".github/copilot-instructions.md\"",
                path.display()
            ));
        }
    }
    RulesFiles(Some(files))
}

pub(super) fn validate_context(
    raw: &RawContext,
    path: &Path,
) -> Result<ContextSettings, ConfigError> {
    let defaults = ContextSettings::default();
    let key = |field: &str| format!("context.{field}");
    let compaction_threshold = match raw.compaction_threshold {
        Some(threshold) if !(threshold > 0.0 && threshold <= 1.0) => {
            return Err(invalid(
                path,
                key("compaction_threshold"),
                format!("is {threshold}, outside (0, 1]"),
                "Give the share of the window at which to compact, e.g. 0.8 for 80 % (the default).",
            ));
        }
        threshold => threshold.unwrap_or(defaults.compaction_threshold),
    };
    let compact_between_turns = match raw.compact_between_turns {
        None => defaults.compact_between_turns,
        Some(0.0) => None,
        Some(share) if share > 0.0 && share < 1.0 => Some(share),
        Some(share) => {
            return Err(invalid(
                path,
                key("compact_between_turns"),
                format!("is {share}, outside (0, 1)"),
                "Give the share of the window past which a turn that ends starts a compaction in the background, e.g. 0.7 for 70 % (the default), or 0 to turn it off.",
            ));
        }
    };
    let reserve_tokens = non_zero(
        raw.reserve_tokens,
        path,
        key("reserve_tokens"),
        "is 0, which leaves no room for the answer",
        "Reserve some tokens for the answer (default 4096), or leave it out.",
    )?;
    let keep_recent_turns = non_zero(
        raw.keep_recent_turns,
        path,
        key("keep_recent_turns"),
        "is 0",
        "Keep at least the latest turn verbatim (default 2), or leave it out.",
    )?;
    Ok(ContextSettings {
        reserve_tokens: reserve_tokens.unwrap_or(defaults.reserve_tokens),
        compaction_threshold,
        keep_recent_turns: keep_recent_turns.unwrap_or(defaults.keep_recent_turns),
        compact_between_turns,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load, refusal};

    #[test]
    fn context_settings_are_read_and_checked() {
        let config = load(
            "[chat]\nsystem_prompt = \"Answer in French.\"\n[context]\ncompaction_threshold = 0.5\nreserve_tokens = 1000\nkeep_recent_turns = 3",
            &[],
        )
        .unwrap();
        assert_eq!(config.system_prompt.as_deref(), Some("Answer in French."));
        assert_eq!(config.context.compaction_threshold, 0.5);
        assert_eq!(config.context.reserve_tokens, 1000);
        assert_eq!(config.context.keep_recent_turns, 3);
        assert_eq!(config.context.compact_between_turns, Some(0.7));
        let off = load("[context]\ncompact_between_turns = 0", &[]).unwrap();
        assert_eq!(off.context.compact_between_turns, None);
        let half = load("[context]\ncompact_between_turns = 0.5", &[]).unwrap();
        assert_eq!(half.context.compact_between_turns, Some(0.5));
        let defaults = load("", &[]).unwrap().context;
        assert_eq!(defaults, crate::context::ContextSettings::default());
        for (text, key) in [
            (
                "[context]\ncompaction_threshold = 1.5",
                "context.compaction_threshold",
            ),
            (
                "[context]\ncompaction_threshold = 0.0",
                "context.compaction_threshold",
            ),
            ("[context]\nreserve_tokens = 0", "context.reserve_tokens"),
            (
                "[context]\ncompact_between_turns = 1.0",
                "context.compact_between_turns",
            ),
            (
                "[context]\ncompact_between_turns = -0.5",
                "context.compact_between_turns",
            ),
            (
                "[context]\nkeep_recent_turns = 0",
                "context.keep_recent_turns",
            ),
            ("[context]\nthreshold = 0.5", "threshold"),
        ] {
            let err = refusal(text);
            assert!(err.contains(key), "{text}: {err}");
        }
    }

    #[test]
    fn rules_files_are_read_in_order_and_leaving_the_project_is_left_out() {
        let config = load(
            "[context]\nrules_files = [\"TEAM-RULES.md\", \"/etc/passwd\", \"../up.md\", \".github/copilot-instructions.md\"]",
            &[],
        )
        .unwrap();
        assert_eq!(
            config.rules_files,
            crate::prompt::RulesFiles(Some(vec![
                "TEAM-RULES.md".into(),
                ".github/copilot-instructions.md".into()
            ]))
        );
        for key in ["context.rules_files[1]", "context.rules_files[2]"] {
            assert!(
                config.warnings.iter().any(|w| w.contains(key)),
                "{key}: {:?}",
                config.warnings
            );
        }
        let empty = load("[context]\nrules_files = []", &[]).unwrap();
        assert_eq!(empty.rules_files, crate::prompt::RulesFiles(Some(vec![])));
        assert_eq!(load("", &[]).unwrap().rules_files, Default::default());
    }
}
