//! Budgets: the tokens one turn and one session may use, and what a
//! session may cost (from the price table). Set in `[agent]`, in an agent
//! card's front matter, or for the session with `/budget`; the later
//! replaces the earlier, limit by limit. A turn past a limit ends with the
//! `max_tokens` stop reason; the next prompt of a session past its own
//! asks first.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The limits in force; None: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budgets {
    pub max_turn_tokens: Option<u64>,
    pub max_session_tokens: Option<u64>,
    pub max_session_cost: Option<f64>,
}

/// What was used so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spent {
    pub turn_tokens: u64,
    pub session_tokens: u64,
    /// The session's cost and its currency, where the model is priced.
    pub session_cost: Option<(f64, String)>,
}

/// The totals saved at each turn's end, so budgets count on after a restart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub turn_tokens: u64,
    pub session_tokens: u64,
    /// In the price table's currency; 0 where nothing is priced.
    pub session_cost: f64,
}

/// A session's tokens (prompt and completion, every model call), shared by its turns.
#[derive(Debug, Clone, Default)]
pub struct TokenTally(Arc<AtomicU64>);

impl TokenTally {
    /// A tally that starts from a loaded session's total.
    pub fn starting_at(tokens: u64) -> Self {
        Self(Arc::new(AtomicU64::new(tokens)))
    }

    pub fn add(&self, tokens: u64) -> u64 {
        self.0.fetch_add(tokens, Ordering::SeqCst) + tokens
    }

    pub fn total(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// One limit `/budget` sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    TurnTokens,
    SessionTokens,
    SessionCost,
}

impl Limit {
    /// `turn_tokens` or `max_turn_tokens`, and so on.
    pub fn parse(name: &str) -> Option<Self> {
        match name.strip_prefix("max_").unwrap_or(name) {
            "turn_tokens" => Some(Self::TurnTokens),
            "session_tokens" => Some(Self::SessionTokens),
            "session_cost" => Some(Self::SessionCost),
            _ => None,
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Self::TurnTokens => "max_turn_tokens",
            Self::SessionTokens => "max_session_tokens",
            Self::SessionCost => "max_session_cost",
        }
    }
}

/// A `/budget` value that is neither a number above 0 nor `off`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{value}` is not a limit for `{key}`; give a number above 0, or `off`")]
pub struct NotALimit {
    value: String,
    key: &'static str,
}

impl Budgets {
    /// These limits, with each one `later` sets in its place.
    pub fn then(self, later: Budgets) -> Budgets {
        Budgets {
            max_turn_tokens: later.max_turn_tokens.or(self.max_turn_tokens),
            max_session_tokens: later.max_session_tokens.or(self.max_session_tokens),
            max_session_cost: later.max_session_cost.or(self.max_session_cost),
        }
    }

    /// Sets (or, with `off`, lifts) one limit from `/budget`'s text.
    pub fn set(&mut self, limit: Limit, value: &str) -> Result<(), NotALimit> {
        let off = matches!(value, "off" | "none" | "0");
        let bad = || NotALimit {
            value: value.to_string(),
            key: limit.key(),
        };
        match limit {
            Limit::TurnTokens | Limit::SessionTokens => {
                let tokens = if off {
                    None
                } else {
                    Some(
                        value
                            .parse::<u64>()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(bad)?,
                    )
                };
                if limit == Limit::TurnTokens {
                    self.max_turn_tokens = tokens;
                } else {
                    self.max_session_tokens = tokens;
                }
            }
            Limit::SessionCost => {
                self.max_session_cost = if off {
                    None
                } else {
                    let cost = value.parse::<f64>().ok();
                    Some(cost.filter(|c| c.is_finite() && *c > 0.0).ok_or_else(bad)?)
                };
            }
        }
        Ok(())
    }

    /// These limits without the session's (for a turn the user let go on).
    pub fn turn_only(self) -> Budgets {
        Budgets {
            max_turn_tokens: self.max_turn_tokens,
            ..Budgets::default()
        }
    }

    /// Why the session may not go on: a session limit reached.
    pub fn session_crossed(&self, spent: &Spent) -> Option<String> {
        if let Some(max) = self.max_session_tokens
            && spent.session_tokens >= max
        {
            return Some(format!(
                "This session has used {} tokens; its budget is {max} (`max_session_tokens`).",
                spent.session_tokens
            ));
        }
        if let (Some(max), Some((cost, currency))) = (self.max_session_cost, &spent.session_cost)
            && *cost >= max
        {
            return Some(format!(
                "This session has cost {cost:.4} {currency}; its budget is {max} {currency} (`max_session_cost`)."
            ));
        }
        None
    }

    /// Why a turn must stop now: any limit reached.
    pub fn crossed(&self, spent: &Spent) -> Option<String> {
        if let Some(max) = self.max_turn_tokens
            && spent.turn_tokens >= max
        {
            return Some(format!(
                "This turn has used {} tokens; its budget is {max} (`max_turn_tokens`).",
                spent.turn_tokens
            ));
        }
        self.session_crossed(spent)
    }

    /// The spend against each budget, for `/context` and `/budget`.
    pub fn report(&self, spent: &Spent) -> String {
        let mut out = String::from("Token and cost budgets (spent / limit):\n");
        let tokens = |out: &mut String, what: &str, used: u64, max: Option<u64>, key: &str| {
            let _ = match max {
                Some(max) => writeln!(out, "- {what}: {used} / {max} tokens (`{key}`)"),
                None => writeln!(out, "- {what}: {used} tokens (no `{key}`)"),
            };
        };
        tokens(
            &mut out,
            "last turn",
            spent.turn_tokens,
            self.max_turn_tokens,
            "max_turn_tokens",
        );
        tokens(
            &mut out,
            "session",
            spent.session_tokens,
            self.max_session_tokens,
            "max_session_tokens",
        );
        let _ = match (&spent.session_cost, self.max_session_cost) {
            (Some((cost, currency)), Some(max)) => writeln!(
                out,
                "- session cost: {cost:.4} / {max} {currency} (`max_session_cost`)"
            ),
            (Some((cost, currency)), None) => writeln!(
                out,
                "- session cost: {cost:.4} {currency} (no `max_session_cost`)"
            ),
            (None, Some(max)) => writeln!(
                out,
                "- session cost: unknown, the model has no price in `[prices]` (`max_session_cost` = {max})"
            ),
            (None, None) => writeln!(out, "- session cost: the model has no price in `[prices]`"),
        };
        out.push_str("Change one with `/budget LIMIT VALUE` (turn_tokens, session_tokens, session_cost; `off` lifts it).");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_cross_and_later_settings_replace_earlier_ones() {
        let config = Budgets {
            max_turn_tokens: Some(100),
            max_session_tokens: Some(1000),
            max_session_cost: None,
        };
        let mut session = Budgets::default();
        session.set(Limit::SessionCost, "0.5").unwrap();
        session
            .set(Limit::parse("max_turn_tokens").unwrap(), "200")
            .unwrap();
        assert!(session.set(Limit::TurnTokens, "-3").is_err());
        let budgets = config.then(session);
        assert_eq!(budgets.max_turn_tokens, Some(200));
        assert_eq!(budgets.max_session_tokens, Some(1000));
        let mut spent = Spent {
            turn_tokens: 150,
            session_tokens: 900,
            session_cost: Some((0.1, "USD".into())),
        };
        assert_eq!(budgets.crossed(&spent), None);
        spent.turn_tokens = 200;
        assert!(budgets.crossed(&spent).unwrap().contains("max_turn_tokens"));
        assert_eq!(budgets.turn_only().session_crossed(&spent), None);
        spent.session_cost = Some((0.6, "USD".into()));
        let why = budgets.session_crossed(&spent).unwrap();
        assert!(why.contains("0.6000 USD"), "{why}");
        let report = budgets.report(&spent);
        assert!(report.contains("session: 900 / 1000 tokens"), "{report}");
        assert!(report.contains("0.6000 / 0.5 USD"), "{report}");
    }
}
