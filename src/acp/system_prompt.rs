//! The `systemPrompt` of session/new, load, resume and fork (stable since
//! ACP 1.20, advertised as `sessionCapabilities.systemPrompt`): the
//! client's instructions, checked and turned into the agent's own type.

use agent_client_protocol_schema::v1 as acp;

use crate::model::ClientPrompt;
use crate::transport::RpcError;

/// What this agent advertises: both modes (`append`, `override`).
pub fn capabilities() -> acp::SessionSystemPromptCapabilities {
    acp::SessionSystemPromptCapabilities::new().mode(
        acp::SessionSystemPromptModeCapabilities::new()
            .override_(acp::SessionSystemPromptOverrideCapabilities::new()),
    )
}

/// A request's `systemPrompt`. The spec asks an agent that cannot apply
/// one to refuse the request rather than ignore it: so an unknown mode, a
/// block other than text and an empty list are all refused (-32602).
pub fn read(
    method: &str,
    prompt: Option<acp::SystemPrompt>,
) -> Result<Option<ClientPrompt>, RpcError> {
    let Some(prompt) = prompt else {
        return Ok(None);
    };
    let refuse = |why: String| {
        Err(RpcError::invalid_params(format!(
            "{method}: field `systemPrompt`: {why}"
        )))
    };
    let replaces_base = match &prompt.mode {
        acp::SystemPromptMode::Append => false,
        acp::SystemPromptMode::Override => true,
        other => {
            return refuse(format!(
                "mode {other:?} is not supported; use `append` or `override`"
            ));
        }
    };
    if prompt.content.is_empty() {
        return refuse("`content` is empty; send at least one text block".into());
    }
    let mut texts = Vec::new();
    for (n, block) in prompt.content.iter().enumerate() {
        match block {
            acp::ContentBlock::Text(text) => texts.push(text.text.as_str()),
            _ => {
                return refuse(format!(
                    "content[{n}] is not a text block; only text is taken"
                ));
            }
        }
    }
    Ok(Some(ClientPrompt {
        replaces_base,
        text: texts.join("\n\n"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prompt(value: serde_json::Value) -> acp::SystemPrompt {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_blocks_become_the_prompt_and_the_rest_is_refused() {
        let read_one = |value| read("session/new", Some(prompt(value)));
        let appended =
            read_one(json!({"mode": "append", "content": [{"type": "text", "text": "Be brief."}]}))
                .unwrap()
                .unwrap();
        assert_eq!(
            appended,
            ClientPrompt {
                replaces_base: false,
                text: "Be brief.".into()
            }
        );
        let overridden =
            read_one(json!({"mode": "override", "content": [{"type": "text", "text": "X"}]}))
                .unwrap()
                .unwrap();
        assert!(overridden.replaces_base);
        for (value, says) in [
            (
                json!({"mode": "_mine", "content": [{"type": "text", "text": "X"}]}),
                "not supported",
            ),
            (json!({"mode": "append", "content": []}), "empty"),
            (
                json!({"mode": "append", "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]}),
                "content[0]",
            ),
        ] {
            let err = read_one(value).unwrap_err();
            assert!(err.message.contains(says), "{}", err.message);
            assert!(err.message.contains("systemPrompt"), "{}", err.message);
        }
        assert_eq!(read("session/new", None).unwrap(), None);
    }
}
