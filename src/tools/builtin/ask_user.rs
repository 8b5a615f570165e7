//! `ask_user`: the model asks the user one question, with choices or for a
//! short answer, in a form of the editor's (ACP elicitation). Offered only
//! when the client can show such forms.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::client::{Answer, Question};
use crate::events::ToolKind;
use crate::tools::{ToolContext, ToolError, ToolOutput, TypedTool};

#[derive(Debug, Clone, Copy, Default)]
pub struct AskUserTool;

pub const NAME: &str = "ask_user";

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The question, complete and short
    question: String,
    /// The answers to choose from; leave out to ask for a short typed answer
    choices: Option<Vec<String>>,
}

impl TypedTool for AskUserTool {
    type Args = Args;
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Ask the user a question when you cannot go on without their decision or a fact only they know. \
         Give choices when the answer is one of a few; otherwise the user types a short answer. Do not ask what you can find out yourself.";
    const BRIEF: Option<&'static str> = Some("Ask the user a question.");
    const KIND: ToolKind = ToolKind::Think;
    const MUTATES: bool = false;

    fn title_for(&self, args: &Args) -> String {
        super::titled("Ask the user", Some(&args.question), |q| {
            format!("Ask: {q}")
        })
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(asker) = &ctx.asker else {
            return Err(ToolError::Failed(
                "this editor cannot ask the user questions; say what you need in your answer instead".into(),
            ));
        };
        if args.question.trim().is_empty() {
            return Err(ToolError::InvalidArguments("the question is empty".into()));
        }
        let choices = args.choices.unwrap_or_default();
        let question = Question {
            session_id: asker.session_id.clone(),
            message: args.question,
            choices: choices.iter().map(|c| (c.clone(), c.clone())).collect(),
        };
        let answer = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            answer = asker.sink.ask_user(question) => answer,
        };
        let answer = answer
            .map_err(|err| ToolError::Failed(format!("the question could not be asked: {err}")))?;
        let (text, raw) = match answer {
            Answer::Given(text) => (
                format!("The user answered: {text}"),
                json!({"answer": text}),
            ),
            Answer::Declined => (
                "The user declined to answer.".to_string(),
                json!({"declined": true}),
            ),
            Answer::Cancelled => (
                "The user dismissed the question.".to_string(),
                json!({"cancelled": true}),
            ),
        };
        let mut output = ToolOutput::text(text);
        output.raw_output = raw;
        Ok(output)
    }
}
