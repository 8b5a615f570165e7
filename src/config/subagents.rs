//! `[subagents]`: how far delegation (the `delegate` tool) may go.

use std::path::Path;

use super::error::ConfigError;
use super::non_zero;
use super::raw::RawSubagents;
use crate::agents::SubagentSettings;

pub(super) fn validate(raw: RawSubagents, path: &Path) -> Result<SubagentSettings, ConfigError> {
    let defaults = SubagentSettings::default();
    let max_per_turn = non_zero(
        raw.max_per_turn,
        path,
        "subagents.max_per_turn",
        "is 0",
        "Allow at least one delegated agent per turn (default 4), or turn delegation off with max_depth = 0.",
    )?;
    let token_budget = non_zero(
        raw.token_budget,
        path,
        "subagents.token_budget",
        "is 0, which stops every delegated agent at once",
        "Give the tokens one delegated agent may use (e.g. 200000), or leave it out for no limit.",
    )?;
    Ok(SubagentSettings {
        max_depth: raw.max_depth.unwrap_or(defaults.max_depth),
        max_per_turn: max_per_turn.unwrap_or(defaults.max_per_turn),
        token_budget,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load, refusal};
    use crate::agents::SubagentSettings;

    #[test]
    fn subagent_limits_are_read_and_checked() {
        let config = load("[subagents]\nmax_depth = 2\ntoken_budget = 5000", &[]).unwrap();
        assert_eq!(
            config.subagents,
            SubagentSettings {
                max_depth: 2,
                token_budget: Some(5000),
                ..SubagentSettings::default()
            }
        );
        assert_eq!(load("", &[]).unwrap().subagents.max_depth, 1);
        let message = refusal("[subagents]\nmax_per_turn = 0");
        assert!(message.contains("subagents.max_per_turn"), "{message}");
        let message = refusal("[subagents]\nmax_childs = 3");
        assert!(message.contains("max_childs"), "{message}");
    }
}
