//! Permission questions as ACP v2 asks them: a required `title` and the
//! tool call as a typed `subject`; the answer read as v1 reads it (the
//! outcome's shape did not change).

use agent_client_protocol_schema::v2;

use super::updates;
use crate::acp::permission;
use crate::client::{ClientError, PermissionChoice};
use crate::events::ToolCallInfo;
use crate::model::SessionId;

/// The question whether `call` may run, with the choices v1 offers.
pub fn request(session_id: &SessionId, call: &ToolCallInfo) -> v2::RequestPermissionRequest {
    let options = permission::v2::options();
    let tool_call = updates::tool_call(call);
    v2::RequestPermissionRequest::new(session_id.to_string(), title(call), options).subject(
        v2::RequestPermissionSubject::ToolCall(Box::new(v2::ToolCallPermissionSubject::new(
            tool_call,
        ))),
    )
}

/// What the client shows as the question.
fn title(call: &ToolCallInfo) -> String {
    if call.title.is_empty() {
        format!("Allow {}?", call.name)
    } else {
        format!("Allow {}?", call.title)
    }
}

/// The user's answer, as the agent knows it.
pub fn choice(response: v2::RequestPermissionResponse) -> Result<PermissionChoice, ClientError> {
    permission::v2::choice(response).map_err(|err| ClientError::Failed(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ToolKind;
    use serde_json::json;

    #[test]
    fn a_v2_permission_request_has_a_title_and_the_call_as_its_subject() {
        let call = ToolCallInfo {
            id: "call-1".into(),
            name: "shell".into(),
            title: "Run `make test`".into(),
            kind: ToolKind::Execute,
            raw_input: json!({"command": "make test"}),
            locations: Vec::new(),
        };
        let value = serde_json::to_value(request(&"s1".into(), &call)).unwrap();
        assert_eq!(value["sessionId"], "s1");
        assert_eq!(value["title"], "Allow Run `make test`?");
        assert_eq!(value["subject"]["type"], "tool_call");
        assert_eq!(value["subject"]["toolCall"]["toolCallId"], "call-1");
        assert_eq!(value["subject"]["toolCall"]["kind"], "execute");
        assert!(
            value.get("toolCall").is_none(),
            "v1's field is gone: {value}"
        );
        let options = value["options"].as_array().unwrap();
        assert!(options.iter().any(|o| o["kind"] == "allow_once"), "{value}");
        // And the answer back.
        let first = options[0]["optionId"].as_str().unwrap().to_string();
        let answer: v2::RequestPermissionResponse =
            serde_json::from_value(json!({"outcome": {"outcome": "selected", "optionId": first}}))
                .unwrap();
        assert!(choice(answer).is_ok());
        let cancelled: v2::RequestPermissionResponse =
            serde_json::from_value(json!({"outcome": {"outcome": "cancelled"}})).unwrap();
        assert_eq!(choice(cancelled), Ok(PermissionChoice::Cancelled));
    }
}
