//! The `systemPrompt` of session/new, load, resume and fork (stable since
//! ACP 1.20, advertised as `sessionCapabilities.systemPrompt`): what this
//! agent advertises. The prompt itself is read by [`super::readers`].

use agent_client_protocol_schema::v1 as acp;

/// What this agent advertises: both modes (`append`, `override`), in the
/// version whose schema module is given.
macro_rules! capabilities {
    ($version:ident) => {
        $version::SessionSystemPromptCapabilities::new().mode(
            $version::SessionSystemPromptModeCapabilities::new()
                .override_($version::SessionSystemPromptOverrideCapabilities::new()),
        )
    };
}

pub(crate) use capabilities;

/// What this agent advertises, in v1.
pub fn v1_capabilities() -> acp::SessionSystemPromptCapabilities {
    capabilities!(acp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ClientPrompt;
    use serde_json::json;

    fn read(
        method: &str,
        prompt: Option<acp::SystemPrompt>,
    ) -> Result<Option<ClientPrompt>, crate::transport::RpcError> {
        crate::acp::readers::v1::system_prompt(method, prompt)
    }

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
