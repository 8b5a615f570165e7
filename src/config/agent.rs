//! `[agent]`: how far a turn may go (model calls, tokens, cost, repeated
//! calls), how the agent starts (mode, reasoning), and when it tells the
//! user the model is slow to answer.

use std::path::Path;
use std::time::Duration;

use super::error::{ConfigError, invalid};
use super::raw::RawAgent;
use super::{DEFAULT_FIRST_TOKEN_NOTICE, DEFAULT_MAX_TURN_REQUESTS, non_zero};
use crate::context::spend::Budgets;
use crate::modes::ModeRegistry;
use crate::providers::Reasoning;
use crate::tools::repeats::LoopGuardSettings;

/// `[agent]`, validated.
pub(super) struct AgentSection {
    pub budgets: Budgets,
    pub default_mode: String,
    pub max_turn_requests: u32,
    pub loop_guard: LoopGuardSettings,
    pub first_token_notice: Option<Duration>,
    pub thought_level: Reasoning,
}

/// `[agent]` of the file at `path`; its `default_mode` one of `modes`.
pub(super) fn validate(
    agent: RawAgent,
    modes: &ModeRegistry,
    path: &Path,
) -> Result<AgentSection, ConfigError> {
    let budgets = budgets(&agent, path)?;
    let default_mode = default_mode(agent.default_mode, modes, path)?;
    let max_turn_requests = non_zero(
        agent.max_turn_requests,
        path,
        "agent.max_turn_requests",
        "is 0",
        "Allow at least one model call per turn (default 25), or leave it out.",
    )?
    .unwrap_or(DEFAULT_MAX_TURN_REQUESTS);
    let loop_guard = LoopGuardSettings::from_written(agent.repeated_call_limit).map_err(|problem| {
        invalid(
            path,
            "agent.repeated_call_limit",
            problem.to_string(),
            "Give the number of identical calls in a row that stops a turn (2 or more; default 3), or 0 to turn the guard off.",
        )
    })?;
    let first_token_notice = match agent.first_token_notice_secs {
        None => Some(DEFAULT_FIRST_TOKEN_NOTICE),
        Some(0) => None,
        Some(secs) => Some(Duration::from_secs(secs)),
    };
    let thought_level = thought_level(agent.thought_level.as_deref(), path)?;
    Ok(AgentSection {
        budgets,
        default_mode,
        max_turn_requests,
        loop_guard,
        first_token_notice,
        thought_level,
    })
}

/// `[agent] thought_level`: one of the levels; off when not written.
fn thought_level(written: Option<&str>, path: &Path) -> Result<Reasoning, ConfigError> {
    let Some(written) = written else {
        return Ok(Reasoning::default());
    };
    Reasoning::parse(written.trim()).ok_or_else(|| {
        invalid(
            path,
            "agent.thought_level",
            format!("is `{written}`"),
            "Use one of off, low, medium, high (how hard reasoning models think; default off).",
        )
    })
}

/// `[agent]`'s budgets: each above 0 when given.
fn budgets(agent: &RawAgent, path: &Path) -> Result<Budgets, ConfigError> {
    let tokens = |value: Option<u64>, key: &str| {
        non_zero(
            value,
            path,
            format!("agent.{key}"),
            "is 0",
            "Give a number of tokens above 0, or leave it out for no limit.",
        )
    };
    let cost = match agent.max_session_cost {
        Some(cost) if !(cost.is_finite() && cost > 0.0) => {
            return Err(invalid(
                path,
                "agent.max_session_cost",
                format!("`{cost}` is not above 0"),
                "Give the most the session may cost, in the price table's currency, or leave it out.",
            ));
        }
        cost => cost,
    };
    Ok(Budgets {
        max_turn_tokens: tokens(agent.max_turn_tokens, "max_turn_tokens")?,
        max_session_tokens: tokens(agent.max_session_tokens, "max_session_tokens")?,
        max_session_cost: cost,
    })
}

/// `[agent] default_mode`: one of the built-in or configured modes.
fn default_mode(
    written: Option<String>,
    modes: &ModeRegistry,
    path: &Path,
) -> Result<String, ConfigError> {
    match written {
        Some(mode) if modes.find(&mode).is_none() => Err(invalid(
            path,
            "agent.default_mode",
            format!("`{mode}` is not a mode"),
            format!(
                "Use one of: {} (or define it in a [modes.{mode}] table).",
                modes.ids()
            ),
        )),
        Some(mode) => Ok(mode),
        None => Ok(crate::modes::DEFAULT_MODE.to_string()),
    }
}
