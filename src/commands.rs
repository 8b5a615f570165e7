//! Slash commands: what a session advertises (ACP
//! `available_commands_update`) and how a prompt's text becomes a command.
//! A prompt that starts with an unknown `/name` is not a command: it goes
//! to the model as text, as users expect. Built-ins may also be written
//! `/crucible:name` (seed 001's reserved namespace).

use thiserror::Error;

use crate::providers::Part;

/// The reserved namespace: `/crucible:context` is always the built-in.
pub const NAMESPACE: &str = "crucible:";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    /// Shown by clients for the text after the name.
    pub hint: Option<String>,
}

const BUILTIN: [(&str, &str, Option<&str>); 7] = [
    ("help", "List the commands", None),
    (
        "compact",
        "Summarize older turns to free context (optionally: what the summary should focus on)",
        Some("focus instructions"),
    ),
    (
        "context",
        "Show the context stack, or: checkpoint NAME, rollback NAME, pop [N], reset, summarize",
        Some("checkpoint NAME | rollback NAME | pop [N] | reset | summarize"),
    ),
    (
        "agent",
        "List agent cards, or switch to one",
        Some("agent name"),
    ),
    (
        "mode",
        "Show or switch the mode (plan, act, auto)",
        Some("mode"),
    ),
    ("model", "Show or switch the model", Some("model id")),
    (
        "clear",
        "Start the context over (the session, its mode and model stay)",
        None,
    ),
];

pub fn builtin() -> Vec<CommandInfo> {
    BUILTIN
        .iter()
        .map(|(name, description, hint)| CommandInfo {
            name: name.to_string(),
            description: description.to_string(),
            hint: hint.map(str::to_string),
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Compact { focus: Option<String> },
    Context(ContextCommand),
    Agent(Option<String>),
    Mode(Option<String>),
    Model(Option<String>),
    Clear,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextCommand {
    Show,
    Checkpoint(String),
    Rollback(String),
    Pop(usize),
    Reset,
    Summarize,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CommandError {
    #[error(
        "usage: /context [checkpoint NAME | rollback NAME | pop [N] | reset | summarize]; `{0}` is not one of them"
    )]
    ContextUsage(String),
    #[error("`/context {0}` needs a name, e.g. `/context {0} before-refactor`")]
    NeedsName(&'static str),
    #[error("`/context pop` takes a positive number of entries, not `{0}`")]
    BadCount(String),
}

/// The command a prompt's text names. `None`: not a built-in command, so
/// the text goes to the model.
pub fn parse(text: &str) -> Option<Result<Command, CommandError>> {
    let text = text.trim();
    let rest = text.strip_prefix('/')?;
    let rest = rest.strip_prefix(NAMESPACE).unwrap_or(rest);
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let arg = (!args.is_empty()).then(|| args.to_string());
    let command = match name {
        "help" => Command::Help,
        "compact" => Command::Compact { focus: arg },
        "context" => return Some(parse_context(args).map(Command::Context)),
        "agent" => Command::Agent(arg),
        "mode" => Command::Mode(arg),
        "model" => Command::Model(arg),
        "clear" => Command::Clear,
        _ => return None,
    };
    Some(Ok(command))
}

/// The command a prompt names, when it is text only (an attachment makes
/// it a message for the model).
pub fn from_parts(parts: &[Part]) -> Option<Result<Command, CommandError>> {
    let mut text = String::new();
    for part in parts {
        match part {
            Part::Text { text: piece } => text.push_str(piece),
            _ => return None,
        }
    }
    parse(&text)
}

fn parse_context(args: &str) -> Result<ContextCommand, CommandError> {
    let mut words = args.split_whitespace();
    let verb = words.next().unwrap_or("");
    let rest: Vec<&str> = words.collect();
    let name = |what: &'static str| {
        if rest.is_empty() {
            Err(CommandError::NeedsName(what))
        } else {
            Ok(rest.join(" "))
        }
    };
    match verb {
        "" | "show" | "list" => Ok(ContextCommand::Show),
        "checkpoint" => name("checkpoint").map(ContextCommand::Checkpoint),
        "rollback" => name("rollback").map(ContextCommand::Rollback),
        "pop" => match rest.first() {
            None => Ok(ContextCommand::Pop(1)),
            Some(n) => match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(ContextCommand::Pop(n)),
                _ => Err(CommandError::BadCount((*n).to_string())),
            },
        },
        "reset" => Ok(ContextCommand::Reset),
        "summarize" | "compact" => Ok(ContextCommand::Summarize),
        other => Err(CommandError::ContextUsage(other.to_string())),
    }
}

/// `/help`'s text.
pub fn help(commands: &[CommandInfo]) -> String {
    let mut out = String::from("Commands:\n");
    for command in commands {
        match &command.hint {
            Some(hint) => out.push_str(&format!(
                "- `/{} [{hint}]`: {}\n",
                command.name, command.description
            )),
            None => out.push_str(&format!("- `/{}`: {}\n", command.name, command.description)),
        }
    }
    out.push_str("Built-ins can also be written `/crucible:NAME`. Any other text starting with `/` goes to the model.");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_parse_into_commands() {
        use Command as C;
        use ContextCommand as X;
        let cases: Vec<(&str, Option<Result<Command, CommandError>>)> = vec![
            ("/help", Some(Ok(C::Help))),
            ("  /compact  ", Some(Ok(C::Compact { focus: None }))),
            (
                "/compact keep the API decisions",
                Some(Ok(C::Compact {
                    focus: Some("keep the API decisions".into()),
                })),
            ),
            ("/context", Some(Ok(C::Context(X::Show)))),
            ("/crucible:context", Some(Ok(C::Context(X::Show)))),
            (
                "/context checkpoint a b",
                Some(Ok(C::Context(X::Checkpoint("a b".into())))),
            ),
            (
                "/context rollback a",
                Some(Ok(C::Context(X::Rollback("a".into())))),
            ),
            (
                "/context rollback",
                Some(Err(CommandError::NeedsName("rollback"))),
            ),
            ("/context pop", Some(Ok(C::Context(X::Pop(1))))),
            ("/context pop 3", Some(Ok(C::Context(X::Pop(3))))),
            (
                "/context pop 0",
                Some(Err(CommandError::BadCount("0".into()))),
            ),
            ("/context reset", Some(Ok(C::Context(X::Reset)))),
            ("/context summarize", Some(Ok(C::Context(X::Summarize)))),
            (
                "/context fly",
                Some(Err(CommandError::ContextUsage("fly".into()))),
            ),
            ("/agent", Some(Ok(C::Agent(None)))),
            (
                "/agent reviewer",
                Some(Ok(C::Agent(Some("reviewer".into())))),
            ),
            ("/mode plan", Some(Ok(C::Mode(Some("plan".into()))))),
            ("/model", Some(Ok(C::Model(None)))),
            ("/clear", Some(Ok(C::Clear))),
            ("/unknown thing", None),
            ("/usr/bin is where?", None),
            ("hello /help", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), expected, "{text}");
        }
    }
}
