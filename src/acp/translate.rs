//! Pure translation between the agent's own types and ACP's. Internal events
//! in, ACP updates out (and prompt content the other way); no I/O, so it is
//! tested table-style.

use agent_client_protocol_schema::v1 as acp;

use crate::client::{
    AgentMessage, Answer, CommandInfo, MessageKind, OptionCategory, PlanContent, PromptOrigin,
    Question, SelectOption, Update,
};
use crate::events::{
    AgentEvent, StopReason, TodoItem, ToolCallInfo, ToolCallProgress, ToolContent, ToolStatus,
};
use crate::model::{Part, SessionId};
use crate::providers::Usage;

mod cursors;
pub(in crate::acp) mod same_shape;
mod subagents;

same_shape::same_shape!(acp);

/// What `update` is in ACP v1: one update, several (a replayed prompt's
/// parts), or none (what v1 has no update for).
pub fn session_updates(update: &Update) -> Vec<acp::SessionUpdate> {
    let single = match update {
        Update::Agent(AgentEvent::AgentText(text)) => {
            acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(text_block(text)))
        }
        Update::Agent(AgentEvent::Thought(text)) => {
            acp::SessionUpdate::AgentThoughtChunk(acp::ContentChunk::new(text_block(text)))
        }
        // A replay's whole message: one chunk, as v1 has always shown it.
        Update::AgentMessage(message) => whole_message(message),
        Update::Agent(AgentEvent::Usage { used, size, cost }) => acp::SessionUpdate::UsageUpdate(
            acp::UsageUpdate::new(*used, *size).cost(
                cost.as_ref()
                    .map(|cost| acp::Cost::new(cost.amount, cost.currency.clone())),
            ),
        ),
        Update::Agent(AgentEvent::ToolCall(call)) => acp::SessionUpdate::ToolCall(tool_call(call)),
        Update::Agent(AgentEvent::ToolCallUpdate(progress)) => {
            acp::SessionUpdate::ToolCallUpdate(tool_call_update(progress))
        }
        Update::Agent(AgentEvent::Plan(todos)) => acp::SessionUpdate::Plan(plan(todos)),
        // Sent only as `Update::Plan` (to clients that take plans by id);
        // here it reads the same.
        Update::Agent(AgentEvent::PlanDocument(Some(document))) => markdown_plan(
            crate::client::MARKDOWN_PLAN_ID,
            &document.markdown,
            &document.path,
        ),
        Update::Agent(AgentEvent::PlanDocument(None)) => {
            acp::SessionUpdate::PlanRemoved(acp::PlanRemoved::new(crate::client::MARKDOWN_PLAN_ID))
        }
        Update::Agent(AgentEvent::Notice(event)) => notice(event),
        Update::Agent(AgentEvent::Compaction(step)) => compaction(step, |id, status| {
            acp::CompactionUpdate::new(id.to_string(), status)
        }),
        Update::ConfigOptions(options) => acp::SessionUpdate::ConfigOptionUpdate(
            acp::ConfigOptionUpdate::new(config_options(options)),
        ),
        Update::AvailableCommands(commands) => acp::SessionUpdate::AvailableCommandsUpdate(
            acp::AvailableCommandsUpdate::new(commands.iter().map(available_command).collect()),
        ),
        Update::CurrentMode(id) => {
            acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(id.clone()))
        }
        // v1 echoes no live prompt (the client sent it) and never steers;
        // a stored one is shown again part by part.
        Update::UserPrompt(prompt) => {
            return match prompt.origin {
                PromptOrigin::Replayed => prompt.content.iter().map(user_message_chunk).collect(),
                PromptOrigin::Live | PromptOrigin::Steered => Vec::new(),
            };
        }
        // v1 has no foreground state: the prompt's answer ends the turn.
        Update::State(_) | Update::ReplayComplete => return Vec::new(),
        Update::SessionInfo { title, updated_at } => session_info(title.as_ref(), updated_at),
        Update::Subagent(info) => subagent_update(info, subagents::state_update),
        Update::SessionMessage(message) => session_message(message),
        Update::Plan { plan_id, plan } => match plan {
            PlanContent::Items(items) => acp::SessionUpdate::PlanUpdate(acp::PlanUpdate::new(
                acp::PlanUpdateContent::items(plan_id.clone(), plan_entries(items)),
            )),
            PlanContent::Markdown { content, path } => markdown_plan(plan_id, content, path),
        },
        Update::PlanRemoved { plan_id } => {
            acp::SessionUpdate::PlanRemoved(acp::PlanRemoved::new(plan_id.clone()))
        }
        Update::Tagged { message_id, event } => return cursors::tagged(message_id, event),
        Update::Cursor(cursor) => cursor_update(cursor),
        Update::PromptSuggestions(prompts) => prompt_suggestions(prompts),
    };
    vec![single]
}

fn whole_message(message: &AgentMessage) -> acp::SessionUpdate {
    let chunk = acp::ContentChunk::new(text_block(&message.text))
        .message_id(message.message_id.clone().map(acp::MessageId::new));
    match message.kind {
        MessageKind::Answer => acp::SessionUpdate::AgentMessageChunk(chunk),
        MessageKind::Thought => acp::SessionUpdate::AgentThoughtChunk(chunk),
    }
}

fn user_message_chunk(part: &Part) -> acp::SessionUpdate {
    acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(match part {
        Part::Image { mime_type, data } => image_block(mime_type, data),
        other => text_block(&part_text(other)),
    }))
}

fn markdown_plan(
    plan_id: &str,
    content: &str,
    path: &Option<std::path::PathBuf>,
) -> acp::SessionUpdate {
    acp::SessionUpdate::PlanUpdate(acp::PlanUpdate::new(acp::PlanUpdateContent::Markdown(
        acp::PlanMarkdown::new(plan_id.to_string(), content.to_string()).path(path.clone()),
    )))
}

/// A question as an ACP form: one required `answer` field, a choice
/// among titled options when there are any.
pub fn elicitation(question: &Question) -> acp::CreateElicitationRequest {
    let mut field = acp::StringPropertySchema::new().title("Answer".to_string());
    if !question.choices.is_empty() {
        field = field.one_of(
            question
                .choices
                .iter()
                .map(|(value, label)| acp::EnumOption::new(value.clone(), label.clone()))
                .collect::<Vec<_>>(),
        );
    }
    let schema = acp::ElicitationSchema::new().property(ANSWER_FIELD, field, true);
    let scope = acp::ElicitationScope::Session(acp::ElicitationSessionScope::new(
        acp::SessionId::new(question.session_id.clone()),
    ));
    acp::CreateElicitationRequest::new(
        acp::ElicitationMode::Form(acp::ElicitationFormMode::new(scope, schema)),
        question.message.clone(),
    )
}

const ANSWER_FIELD: &str = "answer";

/// The user's action on a question's form.
pub fn answer(response: acp::CreateElicitationResponse) -> Answer {
    match response.action {
        acp::ElicitationAction::Accept(accepted) => {
            let given = accepted
                .content
                .and_then(|mut content| content.remove(ANSWER_FIELD))
                .and_then(|value| match value {
                    acp::ElicitationContentValue::String(text) => Some(text),
                    acp::ElicitationContentValue::StringArray(items) => Some(items.join(", ")),
                    acp::ElicitationContentValue::Integer(n) => Some(n.to_string()),
                    acp::ElicitationContentValue::Number(n) => Some(n.to_string()),
                    acp::ElicitationContentValue::Boolean(b) => Some(b.to_string()),
                    _ => None,
                })
                .filter(|text| !text.trim().is_empty());
            given.map_or(Answer::Declined, Answer::Given)
        }
        acp::ElicitationAction::Decline => Answer::Declined,
        _ => Answer::Cancelled,
    }
}

pub fn mode_state(options: &[SelectOption]) -> Option<acp::SessionModeState> {
    let mode = options
        .iter()
        .find(|option| option.category == OptionCategory::Mode)?;
    Some(acp::SessionModeState::new(
        mode.current.clone(),
        mode.values
            .iter()
            .map(|value| {
                acp::SessionMode::new(value.id.clone(), value.name.clone())
                    .description(value.description.clone())
            })
            .collect(),
    ))
}

pub fn tool_call(call: &ToolCallInfo) -> acp::ToolCall {
    acp::ToolCall::new(call.id.clone(), call.title.clone())
        .name((!call.name.is_empty()).then(|| call.name.clone()))
        .kind(tool_kind(call.kind))
        .status(acp::ToolCallStatus::Pending)
        .locations(call.locations.iter().map(location).collect())
        .raw_input(call.raw_input.clone())
}

/// The question whether `call` may run, with the choices the agent offers.
pub fn permission_request(
    session_id: &SessionId,
    call: &ToolCallInfo,
) -> acp::RequestPermissionRequest {
    acp::RequestPermissionRequest::new(
        session_id.to_string(),
        tool_call(call).into(),
        crate::acp::permission::v1::options(),
    )
}

pub use crate::acp::permission::v1::choice as permission_choice;

pub fn tool_call_update(progress: &ToolCallProgress) -> acp::ToolCallUpdate {
    let mut fields = acp::ToolCallUpdateFields::new().status(match progress.status {
        ToolStatus::InProgress => acp::ToolCallStatus::InProgress,
        ToolStatus::Completed => acp::ToolCallStatus::Completed,
        ToolStatus::Failed => acp::ToolCallStatus::Failed,
    });
    if !progress.content.is_empty() {
        fields = fields.content(
            progress
                .content
                .iter()
                .map(tool_content)
                .collect::<Vec<_>>(),
        );
    }
    if !progress.locations.is_empty() {
        fields = fields.locations(progress.locations.iter().map(location).collect::<Vec<_>>());
    }
    if let Some(raw) = &progress.raw_output {
        fields = fields.raw_output(raw.clone());
    }
    if !progress.name.is_empty() {
        fields = fields.name(progress.name.clone());
    }
    acp::ToolCallUpdate::new(progress.id.clone(), fields)
}

fn tool_content(content: &ToolContent) -> acp::ToolCallContent {
    match content {
        ToolContent::Text(text) => acp::ToolCallContent::from(text_block(text)),
        ToolContent::Image { mime_type, data } => {
            acp::ToolCallContent::from(image_block(mime_type, data))
        }
        ToolContent::Diff {
            path,
            old_text,
            new_text,
        } => acp::ToolCallContent::Diff(
            acp::Diff::new(path.clone(), new_text.clone()).old_text(old_text.clone()),
        ),
        ToolContent::Terminal { terminal_id } => {
            acp::ToolCallContent::Terminal(acp::Terminal::new(terminal_id.clone()))
        }
        ToolContent::Session { session_id } => acp::ToolCallContent::Session(
            acp::SessionReference::new(acp::SessionId::new(session_id.clone())),
        ),
    }
}

fn plan(todos: &[TodoItem]) -> acp::Plan {
    acp::Plan::new(plan_entries(todos))
}

/// A user part as text; only text and images reach a prompt's replay.
fn part_text(part: &Part) -> String {
    match part {
        Part::Text { text } | Part::Thinking { text, .. } => text.clone(),
        Part::ToolResult { content, .. } => content.clone(),
        _ => String::new(),
    }
}

fn available_command(command: &CommandInfo) -> acp::AvailableCommand {
    let input = command.hint.as_ref().map(|hint| {
        acp::AvailableCommandInput::Unstructured(acp::UnstructuredCommandInput::new(hint.clone()))
    });
    acp::AvailableCommand::new(command.name.clone(), command.description.clone()).input(input)
}

/// The model list in the shape of the old session-model extension
/// (`models: {availableModels, currentModelId}`), which clients built on
/// it (Crucible's own) read from the `session/new` answer. Not in the
/// schema, so plain JSON; `configOptions` stays the primary way.
pub fn session_models(options: &[SelectOption]) -> Option<serde_json::Value> {
    let model = options
        .iter()
        .find(|option| option.category == OptionCategory::Model)?;
    let available: Vec<serde_json::Value> = model
        .values
        .iter()
        .map(|value| {
            let mut entry = serde_json::json!({"modelId": value.id, "name": value.name});
            if let Some(description) = &value.description {
                entry["description"] = description.clone().into();
            }
            entry
        })
        .collect();
    Some(serde_json::json!({
        "availableModels": available,
        "currentModelId": model.current,
    }))
}

/// What `session/list` tells in `_meta` (the schema has no fields for it):
/// a delegated session's parent and agent, a parent's children, and an
/// internal error that stopped the session.
pub fn list_meta(session: &crate::store::Metadata) -> Option<acp::Meta> {
    let mut meta = acp::Meta::new();
    if let Some(parent) = &session.parent_id {
        meta.insert("parentSessionId".into(), serde_json::json!(parent));
    }
    if let Some(call) = &session.parent_tool_call_id {
        meta.insert("parentToolCallId".into(), serde_json::json!(call));
    }
    if let Some(agent) = &session.agent {
        meta.insert("agent".into(), serde_json::json!(agent));
    }
    if !session.children.is_empty() {
        meta.insert(
            "childSessionIds".into(),
            serde_json::json!(session.children),
        );
    }
    // A session whose last turn (or itself) stopped on an internal error.
    if let Some(broken) = &session.broken {
        meta.insert(
            "brokenAt".into(),
            serde_json::json!({"at": broken.at, "detail": broken.detail}),
        );
    }
    let lineage = session.parent_id.is_some() || !session.children.is_empty();
    (lineage || session.broken.is_some()).then_some(meta)
}

/// A turn's token totals (unstable in the schema as end-turn token usage).
pub fn turn_usage(usage: Usage) -> acp::Usage {
    acp::Usage::new(
        usage.prompt_tokens + usage.completion_tokens,
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    .cached_read_tokens((usage.cached_prompt_tokens > 0).then_some(usage.cached_prompt_tokens))
    .cached_write_tokens(
        (usage.cache_written_prompt_tokens > 0).then_some(usage.cache_written_prompt_tokens),
    )
}

pub fn stop_reason(reason: StopReason) -> acp::StopReason {
    match reason {
        StopReason::EndTurn => acp::StopReason::EndTurn,
        StopReason::MaxTokens => acp::StopReason::MaxTokens,
        StopReason::MaxTurnRequests => acp::StopReason::MaxTurnRequests,
        StopReason::Refusal => acp::StopReason::Refusal,
        StopReason::Cancelled => acp::StopReason::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::OptionValue;
    use crate::events::{TodoPriority, TodoStatus};
    use serde_json::{Value, json};

    fn wire(update: &Update) -> Value {
        serde_json::to_value(session_updates(update).pop()).unwrap()
    }

    #[test]
    fn plans_by_id_become_plan_updates_and_removals() {
        let todo = TodoItem {
            content: "Fix".into(),
            status: TodoStatus::Pending,
            priority: TodoPriority::High,
        };
        let markdown = |path: Option<&str>| Update::Plan {
            plan_id: "plan".into(),
            plan: PlanContent::Markdown {
                content: "# Plan\n1. Fix\n".into(),
                path: path.map(Into::into),
            },
        };
        let table = vec![
            (
                Update::Plan {
                    plan_id: "todos".into(),
                    plan: PlanContent::Items(vec![todo]),
                },
                json!({"sessionUpdate":"plan_update","plan":{"type":"items","planId":"todos",
                    "entries":[{"content":"Fix","priority":"high","status":"pending"}]}}),
            ),
            (
                markdown(Some("/data/sessions/s/plan.md")),
                json!({"sessionUpdate":"plan_update","plan":{"type":"markdown","planId":"plan",
                    "content":"# Plan\n1. Fix\n","path":"/data/sessions/s/plan.md"}}),
            ),
            (
                markdown(None),
                json!({"sessionUpdate":"plan_update","plan":{"type":"markdown","planId":"plan",
                    "content":"# Plan\n1. Fix\n"}}),
            ),
            (
                Update::Agent(AgentEvent::PlanDocument(Some(
                    crate::events::PlanDocument {
                        markdown: "# Plan\n1. Fix\n".into(),
                        path: None,
                    },
                ))),
                json!({"sessionUpdate":"plan_update","plan":{"type":"markdown","planId":"plan",
                    "content":"# Plan\n1. Fix\n"}}),
            ),
            (
                Update::PlanRemoved {
                    plan_id: "plan".into(),
                },
                json!({"sessionUpdate":"plan_removed","planId":"plan"}),
            ),
            (
                Update::Agent(AgentEvent::PlanDocument(None)),
                json!({"sessionUpdate":"plan_removed","planId":"plan"}),
            ),
        ];
        for (update, expected) in table {
            assert_eq!(wire(&update), expected, "{update:?}");
        }
    }

    #[test]
    fn agent_events_become_acp_updates() {
        let table = vec![
            (
                Update::Agent(AgentEvent::AgentText("Hé".into())),
                json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hé"}}),
            ),
            (
                Update::Agent(AgentEvent::Thought("hmm".into())),
                json!({"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}),
            ),
            (
                Update::Agent(AgentEvent::Usage {
                    used: 120,
                    size: 8192,
                    cost: None,
                }),
                json!({"sessionUpdate":"usage_update","used":120,"size":8192}),
            ),
            (
                Update::Agent(AgentEvent::Usage {
                    used: 120,
                    size: 8192,
                    cost: Some(crate::events::Cost {
                        amount: 0.25,
                        currency: "USD".into(),
                    }),
                }),
                json!({"sessionUpdate":"usage_update","used":120,"size":8192,"cost":{"amount":0.25,"currency":"USD"}}),
            ),
            (
                Update::AvailableCommands(same_shape::two_commands()),
                json!({"sessionUpdate":"available_commands_update","availableCommands":[
                    {"name":"help","description":"List"},
                    {"name":"compact","description":"Sum","input":{"hint":"focus"}}
                ]}),
            ),
            (
                Update::PromptSuggestions(vec![
                    "Continue".into(),
                    "Continue with the plan: Run the tests".into(),
                ]),
                json!({"sessionUpdate":"prompt_suggestions_update","suggestions":[
                    {"prompt":[{"type":"text","text":"Continue"}]},
                    {"prompt":[{"type":"text","text":"Continue with the plan: Run the tests"}]}
                ]}),
            ),
            (
                Update::PromptSuggestions(Vec::new()),
                json!({"sessionUpdate":"prompt_suggestions_update","suggestions":[]}),
            ),
        ];
        for (update, expected) in table {
            assert_eq!(wire(&update), expected, "{update:?}");
        }
    }

    #[test]
    fn model_option_is_a_select_in_the_model_category() {
        let option = SelectOption {
            id: "model".into(),
            name: "Model".into(),
            description: "d".into(),
            category: OptionCategory::Model,
            current: "a".into(),
            values: vec![
                OptionValue {
                    id: "a".into(),
                    name: "a".into(),
                    description: None,
                },
                OptionValue {
                    id: "b".into(),
                    name: "b".into(),
                    description: Some("the bigger one".into()),
                },
            ],
        };
        let value = wire(&Update::ConfigOptions(vec![option]));
        assert_eq!(value["sessionUpdate"], "config_option_update");
        let first = &value["configOptions"][0];
        assert_eq!(first["id"], "model");
        assert_eq!(first["type"], "select");
        assert_eq!(first["category"], "model");
        assert_eq!(first["currentValue"], "a");
        assert_eq!(first["options"][1]["value"], "b");
    }

    #[test]
    fn turn_usage_carries_cache_reads_and_writes_only_when_there_are_any() {
        let usage = Usage {
            prompt_tokens: 125,
            completion_tokens: 5,
            cached_prompt_tokens: 100,
            cache_written_prompt_tokens: 20,
        };
        let sent = serde_json::to_value(turn_usage(usage)).unwrap();
        assert_eq!(sent["totalTokens"], 130);
        assert_eq!(sent["cachedReadTokens"], 100);
        assert_eq!(sent["cachedWriteTokens"], 20);
        let plain = serde_json::to_value(turn_usage(Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            ..Usage::default()
        }))
        .unwrap();
        assert!(plain.get("cachedReadTokens").is_none(), "{plain}");
        assert!(plain.get("cachedWriteTokens").is_none(), "{plain}");
    }

    #[test]
    fn stop_reasons_map_one_to_one() {
        let table = [
            (StopReason::EndTurn, "end_turn"),
            (StopReason::MaxTokens, "max_tokens"),
            (StopReason::MaxTurnRequests, "max_turn_requests"),
            (StopReason::Refusal, "refusal"),
            (StopReason::Cancelled, "cancelled"),
        ];
        for (reason, wire) in table {
            assert_eq!(
                serde_json::to_value(stop_reason(reason)).unwrap(),
                json!(wire)
            );
        }
    }
}
