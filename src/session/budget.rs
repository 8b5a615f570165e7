//! Budgets in the session: which limits are in force (the config's, the
//! active card's, then `/budget`'s), what was spent against them, the
//! `/budget` command, and the question the next prompt asks once the
//! session is past one of its limits.

use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::SessionActor;

use crate::client::{Answer, Question};
use crate::context::spend::{Budgets, Limit, Spent};
use crate::providers::pricing::price_of;
use crate::tools::Asker;

/// The answer that lets a prompt go on past the session's budget.
const GO_ON: &str = "go_on";

impl SessionActor {
    /// The limits in force now.
    pub(super) fn budgets(&self) -> Budgets {
        let card = self.active_card().map(|card| Budgets {
            max_turn_tokens: card.max_turn_tokens,
            max_session_tokens: card.max_session_tokens,
            max_session_cost: card.max_session_cost,
        });
        (self.services.defaults.budgets)
            .then(card.unwrap_or_default())
            .then(self.conversation.budgets)
    }

    /// What was spent: the last turn's tokens, the session's tokens and cost.
    pub(super) fn spent(&self) -> Spent {
        let price = price_of(&self.services.defaults.prices, &self.settings.current.model);
        Spent {
            turn_tokens: self.conversation.last_turn_tokens,
            session_tokens: self.services.tokens.total(),
            session_cost: price
                .map(|price| (self.services.spending.add(0.0), price.currency.clone())),
        }
    }

    /// `/budget`: the spend against each limit, or `/budget LIMIT VALUE`.
    pub(super) fn budget_command(&mut self, args: Option<&str>) -> String {
        let words: Vec<&str> = args.unwrap_or("").split_whitespace().collect();
        match words.as_slice() {
            [] => self.budgets().report(&self.spent()),
            [name, value] => {
                let Some(limit) = Limit::parse(name) else {
                    return format!(
                        "`{name}` is not a budget; use turn_tokens, session_tokens or session_cost"
                    );
                };
                let mut session = self.conversation.budgets;
                match session.set(limit, value) {
                    Ok(()) => {
                        self.conversation.budgets = session;
                        if let Some(recorder) = &self.services.recorder {
                            recorder.budgets(session);
                        }
                        let report = self.budgets().report(&self.spent());
                        format!("`{}` is now `{value}` for this session.\n{report}", limit.key())
                    }
                    Err(err) => err.to_string(),
                }
            }
            _ => "usage: `/budget`, or `/budget LIMIT VALUE` (turn_tokens, session_tokens, session_cost; `off` lifts it)".into(),
        }
    }

    /// Why the next prompt must ask before it goes on, if it must.
    pub(super) fn over_budget(&self) -> Option<OverBudget> {
        let why = self.budgets().session_crossed(&self.spent())?;
        Some(OverBudget {
            why,
            asker: self.services.tool_context.asker.clone(),
        })
    }
}

/// A prompt the budget stopped, with the message that ends it.
#[derive(Debug, Error)]
#[error(
    "{why} Stopped before calling the model. Raise or lift the limit with `/budget` (e.g. `/budget session_tokens off`) to go on."
)]
pub(super) struct Stopped {
    why: String,
}

/// A session past its budget, at the start of a prompt.
pub(super) struct OverBudget {
    why: String,
    /// Where to ask; None (a client without forms): the prompt stops.
    asker: Option<Asker>,
}

impl OverBudget {
    /// Whether the user lets this prompt go on; else why it stops.
    pub async fn go_on(self, cancel: &CancellationToken) -> Result<(), Stopped> {
        let stopped = Stopped {
            why: self.why.clone(),
        };
        let Some(asker) = self.asker else {
            return Err(stopped);
        };
        let question = Question {
            session_id: asker.session_id.clone(),
            message: format!("{} Go on with this prompt anyway?", self.why),
            choices: vec![
                (GO_ON.into(), "Go on with this prompt".into()),
                ("stop".into(), "Stop".into()),
            ],
        };
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(stopped),
            answer = asker.sink.ask_user(question) => answer,
        };
        match answer {
            Ok(Answer::Given(choice)) if choice == GO_ON => Ok(()),
            _ => Err(stopped),
        }
    }
}
