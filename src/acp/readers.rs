//! The params both ACP versions write alike, read into the agent's own
//! types from one source: each reader is written once, in [`readers!`],
//! and expanded for each version's schema module (no JSON round trip from
//! one version's types to the other's).

use thiserror::Error;

/// Why a prompt's content cannot go to the model.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PromptError {
    #[error(
        "prompt[{index}]: binary resource {uri} cannot be sent to the model; attach it as text or an image"
    )]
    BinaryResource { index: usize, uri: String },
    #[error("prompt[{index}]: unsupported resource kind")]
    ResourceKind { index: usize },
    #[error("prompt[{index}]: audio is not supported (promptCapabilities.audio is false)")]
    Audio { index: usize },
    #[error("prompt[{index}]: unsupported content block")]
    Block { index: usize },
    #[error("prompt: is empty; send at least one content block")]
    Empty,
}

macro_rules! readers {
    ($version:ident, value_id: $value_id:ident) => {
        pub mod $version {
            use agent_client_protocol_schema::$version as acp;

            use super::PromptError;
            use crate::acp::request::Choice;
            use crate::model::{ClientPrompt, Part};
            use crate::transport::RpcError;

            /// A prompt's content blocks as the model's parts.
            pub fn prompt_parts(blocks: Vec<acp::ContentBlock>) -> Result<Vec<Part>, PromptError> {
                let mut parts = Vec::with_capacity(blocks.len());
                for (index, block) in blocks.into_iter().enumerate() {
                    let part = match block {
                        acp::ContentBlock::Text(text) => Part::Text { text: text.text },
                        acp::ContentBlock::Image(image) => Part::Image {
                            mime_type: image.mime_type.to_string(),
                            data: image.data,
                        },
                        acp::ContentBlock::Resource(resource) => match resource.resource {
                            acp::EmbeddedResourceResource::TextResourceContents(contents) => {
                                Part::Text {
                                    text: format!(
                                        "<context uri=\"{}\">\n{}\n</context>",
                                        contents.uri, contents.text
                                    ),
                                }
                            }
                            acp::EmbeddedResourceResource::BlobResourceContents(contents) => {
                                return Err(PromptError::BinaryResource {
                                    index,
                                    uri: contents.uri.to_string(),
                                });
                            }
                            _ => return Err(PromptError::ResourceKind { index }),
                        },
                        acp::ContentBlock::ResourceLink(link) => Part::Text {
                            text: format!("[{}]({})", link.name, link.uri),
                        },
                        acp::ContentBlock::Audio(_) => return Err(PromptError::Audio { index }),
                        _ => return Err(PromptError::Block { index }),
                    };
                    parts.push(part);
                }
                if parts.is_empty() {
                    return Err(PromptError::Empty);
                }
                Ok(parts)
            }

            /// A request's `systemPrompt`. The spec asks an agent that
            /// cannot apply one to refuse the request rather than ignore
            /// it: so an unknown mode, a block other than text and an
            /// empty list are all refused (-32602).
            pub fn system_prompt(
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

            /// The initial `configOptions`, as given.
            pub fn choices(given: Vec<acp::InitialSessionConfigOption>) -> Vec<Choice> {
                given
                    .into_iter()
                    .map(|option| Choice {
                        value: option.value.$value_id().map(|value| value.0.to_string()),
                        option: option.config_id.0.to_string(),
                    })
                    .collect()
            }
        }
    };
}

readers!(v1, value_id: as_value_id);
readers!(v2, value_id: as_id);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Part;
    use agent_client_protocol_schema::{v1 as acp1, v2 as acp2};
    use serde_json::json;

    /// The same blocks, read through each version's reader.
    fn both(
        blocks: serde_json::Value,
    ) -> (
        Result<Vec<Part>, PromptError>,
        Result<Vec<Part>, PromptError>,
    ) {
        let one: Vec<acp1::ContentBlock> = serde_json::from_value(blocks.clone()).unwrap();
        let two: Vec<acp2::ContentBlock> = serde_json::from_value(blocks).unwrap();
        (v1::prompt_parts(one), v2::prompt_parts(two))
    }

    #[test]
    fn prompts_read_alike_in_both_versions() {
        let table = [
            (
                json!([{"type": "text", "text": "hi"}]),
                Ok(vec![Part::Text { text: "hi".into() }]),
            ),
            (
                json!([{"type": "image", "mimeType": "image/png", "data": "AAAA"}]),
                Ok(vec![Part::Image {
                    mime_type: "image/png".into(),
                    data: "AAAA".into(),
                }]),
            ),
            (
                json!([{"type": "resource", "resource": {"uri": "file:///a.rs", "text": "fn a() {}"}}]),
                Ok(vec![Part::Text {
                    text: "<context uri=\"file:///a.rs\">\nfn a() {}\n</context>".into(),
                }]),
            ),
            (
                json!([{"type": "resource_link", "name": "a.rs", "uri": "file:///a.rs"}]),
                Ok(vec![Part::Text {
                    text: "[a.rs](file:///a.rs)".into(),
                }]),
            ),
            (
                json!([{"type": "text", "text": "x"}, {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"}]),
                Err(PromptError::Audio { index: 1 }),
            ),
            (
                json!([{"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}}]),
                Err(PromptError::BinaryResource {
                    index: 0,
                    uri: "file:///b.bin".into(),
                }),
            ),
            (json!([]), Err(PromptError::Empty)),
        ];
        for (blocks, expected) in table {
            let (one, two) = both(blocks.clone());
            assert_eq!(one, expected, "v1: {blocks}");
            assert_eq!(two, expected, "v2: {blocks}");
        }
    }

    #[test]
    fn system_prompts_and_choices_read_alike_in_both_versions() {
        let prompt =
            json!({"mode": "override", "content": [{"type": "text", "text": "Be brief."}]});
        let one = v1::system_prompt(
            "session/new",
            serde_json::from_value(prompt.clone()).unwrap(),
        );
        let two = v2::system_prompt("session/new", serde_json::from_value(prompt).unwrap());
        assert_eq!(one, two);
        let read = one.unwrap().unwrap();
        assert!(read.replaces_base);
        assert_eq!(read.text, "Be brief.");
        let refused = json!({"mode": "append", "content": [{"type": "image", "mimeType": "image/png", "data": "AA"}]});
        let err =
            v2::system_prompt("session/new", serde_json::from_value(refused).unwrap()).unwrap_err();
        assert!(err.message.contains("content[0]"), "{}", err.message);
        let one = json!([{"configId": "mode", "value": "plan"}]);
        let two = json!([{"configId": "mode", "type": "id", "value": "plan"}]);
        let one = v1::choices(serde_json::from_value(one).unwrap());
        let two = v2::choices(serde_json::from_value(two).unwrap());
        assert_eq!(one.len(), 1);
        assert_eq!(
            (one[0].option.as_str(), one[0].value.as_deref()),
            ("mode", Some("plan"))
        );
        assert_eq!(
            (two[0].option.as_str(), two[0].value.as_deref()),
            ("mode", Some("plan"))
        );
    }
}
