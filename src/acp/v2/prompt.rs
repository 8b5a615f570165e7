//! `session/prompt` in v2: answered as soon as the message is in the
//! conversation, with its `messageId`; the turn's end is a `state_update`
//! (`idle`). With `[acp] unstable = ["steering"]` a prompt sent while a
//! turn runs joins it instead of being refused.

use agent_client_protocol_schema::{v1, v2};

use super::convert;
use crate::acp::router::{Router, session_error};
use crate::acp::translate;
use crate::model::{Part, SessionId};
use crate::session::{
    InsertReply, Inserted, PromptAnswer, PromptSubmission, SessionError, SessionMsg, WhenBusy,
};
use crate::transport::{Responder, RpcError};

/// v2 prompt content as the model will see it (v2 kept v1's content
/// blocks for prompts).
pub fn parts(blocks: &[v2::ContentBlock]) -> Result<Vec<Part>, RpcError> {
    let blocks: Vec<v1::ContentBlock> = convert::params("session/prompt", &blocks)?;
    translate::prompt_parts(blocks).map_err(RpcError::invalid_params)
}

pub fn prompt(router: &mut Router, request: v2::PromptRequest, responder: Responder) {
    let id = SessionId::from(request.session_id.0.clone());
    let Some(session) = router.sessions.get(&id) else {
        return responder.respond(Err(router.not_running(&id)));
    };
    let content = match parts(&request.prompt) {
        Ok(content) => content,
        Err(err) => return responder.respond(Err(err)),
    };
    // The turn outlives this request: only `session/cancel` ends it.
    let request_cancel = responder.cancellation().child_token();
    let when_busy = if router.sessions.unstable().steering {
        WhenBusy::Steer
    } else {
        WhenBusy::Refuse
    };
    // Answered by the session as the message goes in, so the answer
    // precedes what the session shows next.
    let reply = InsertReply::new(move |inserted| responder.respond_with(answered(inserted)));
    session.send(SessionMsg::Prompt(PromptSubmission {
        content,
        request_cancel,
        idempotency_key: request.idempotency_key.map(|key| key.as_str().to_string()),
        when_busy,
        answer: PromptAnswer::AtInsertion(reply),
    }));
}

fn answered(inserted: Result<Inserted, SessionError>) -> Result<v2::PromptResponse, RpcError> {
    inserted
        .map(|inserted| v2::PromptResponse::new(inserted.message_id))
        .map_err(session_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v2_prompt_params_are_read_and_bad_keys_named() {
        let request: v2::PromptRequest = crate::acp::router::parse(
            "session/prompt",
            json!({"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}], "idempotencyKey": "k1"}),
        )
        .unwrap();
        assert_eq!(
            parts(&request.prompt).unwrap(),
            vec![Part::Text { text: "hi".into() }]
        );
        assert_eq!(request.idempotency_key.unwrap().as_str(), "k1");
        for key in [String::new(), "x".repeat(256)] {
            let err = crate::acp::router::parse::<v2::PromptRequest>(
                "session/prompt",
                json!({"sessionId": "s", "prompt": [], "idempotencyKey": key}),
            )
            .unwrap_err();
            assert_eq!(err.code, crate::transport::jsonrpc::INVALID_PARAMS);
            assert!(err.message.contains("idempotencyKey"), "{}", err.message);
        }
        let longest = "é".repeat(255);
        assert!(
            crate::acp::router::parse::<v2::PromptRequest>(
                "session/prompt",
                json!({"sessionId": "s", "prompt": [], "idempotencyKey": longest}),
            )
            .is_ok(),
            "255 characters are fine, whatever their bytes"
        );
    }

    #[test]
    fn the_answer_is_the_message_id_or_the_sessions_error() {
        let value = serde_json::to_value(
            answered(Ok(Inserted {
                message_id: "m1".into(),
            }))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(value, json!({"messageId": "m1"}));
        let err = answered(Err(SessionError::Busy("s".into()))).unwrap_err();
        assert_eq!(err.code, crate::transport::jsonrpc::INVALID_REQUEST);
    }
}
