//! `/agent` and `/model` typed without a name, in an editor that shows
//! forms: the user picks from the choices (ACP elicitation), and the pick
//! goes to the actor like a selector change.

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{SessionActor, SessionMsg};
use crate::client::{AGENT_OPTION, Answer, MODEL_OPTION, Question};
use crate::tools::Asker;

/// A question to put to the user, and the option its answer sets.
pub(super) struct Pick {
    option: &'static str,
    question: Question,
    asker: Asker,
    mailbox: mpsc::WeakUnboundedSender<SessionMsg>,
}

impl SessionActor {
    /// The picker for `option` (agent or model), when the editor shows forms.
    pub(super) fn picker(&self, option: &'static str) -> Option<Pick> {
        let asker = self.services.tool_context.asker.clone()?;
        let options = self.options();
        let select = options.iter().find(|o| o.id == option)?;
        let choices = select
            .values
            .iter()
            .map(|value| {
                let label = match &value.description {
                    Some(description) if value.name != *description => {
                        format!("{} — {description}", value.name)
                    }
                    _ => value.name.clone(),
                };
                (value.id.clone(), label)
            })
            .collect();
        Some(Pick {
            option,
            question: Question {
                session_id: self.services.id.clone(),
                message: format!("{} (now `{}`)", select.name, select.current),
                choices,
            },
            asker,
            mailbox: self.services.mailbox.clone(),
        })
    }
}

impl Pick {
    /// Ask, then apply the answer; the report for the user.
    pub(super) async fn run(self, cancel: &CancellationToken) -> String {
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => return "Cancelled.".into(),
            answer = self.asker.sink.ask_user(self.question) => answer,
        };
        let value = match answer {
            Ok(Answer::Given(value)) => value,
            Ok(Answer::Declined | Answer::Cancelled) => return "Nothing changed.".into(),
            Err(err) => return format!("Could not ask: {err}"),
        };
        let Some(mailbox) = self.mailbox.upgrade() else {
            return "The session is closing.".into();
        };
        // Both tell the client of the change themselves.
        let applied = if self.option == MODEL_OPTION {
            let (reply, answer) = oneshot::channel();
            let model = value.clone();
            let _ = mailbox.send(SessionMsg::SetModel { model, reply });
            answer.await
        } else {
            let (reply, answer) = oneshot::channel();
            let id = AGENT_OPTION.to_string();
            let _ = mailbox.send(SessionMsg::SetOption {
                id,
                value: value.clone(),
                reply,
            });
            answer.await.map(|applied| applied.map(drop))
        };
        match applied {
            Ok(Ok(())) => format!("{} is now `{value}`.", self.option),
            Ok(Err(err)) => err.to_string(),
            Err(_) => "The session is closing.".into(),
        }
    }
}
