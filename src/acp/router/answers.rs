//! How the sessions' and the store's results become ACP answers: their
//! errors as JSON-RPC errors with the right code, and a session's options
//! with the old session-model extension's `models` beside them.

use serde_json::Value;
use tokio::sync::oneshot;

use super::capabilities::Extras;
use crate::acp::translate;
use crate::client::SelectOption;
use crate::session::SessionError;
use crate::store::StoreError;
use crate::transport::RpcError;
use crate::transport::jsonrpc::ErrorCode;

/// A session actor's answer, or why there is none.
pub async fn session_answer<T>(
    answer: oneshot::Receiver<Result<T, SessionError>>,
) -> Result<T, RpcError> {
    match answer.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(session_error(err)),
        Err(_) => Err(RpcError::internal("the session stopped before answering")),
    }
}

pub fn store_error(err: StoreError) -> RpcError {
    match &err {
        StoreError::NotFound(id) => RpcError::new(
            ErrorCode::RESOURCE_NOT_FOUND,
            format!(
                "Resource not found: no stored session `{id}`; session/list shows the stored ones"
            ),
        ),
        StoreError::Locked { .. } | StoreError::Archived(_) => {
            RpcError::new(ErrorCode::INVALID_REQUEST, err.to_string())
        }
        StoreError::UnknownCheckpoint { .. } => RpcError::invalid_params(format!(
            "cursorId: {err}; send a cursor this agent announced in a cursor_update"
        )),
        StoreError::Corrupt { .. }
        | StoreError::NewerFormat { .. }
        | StoreError::MissingBlob(_)
        | StoreError::Io { .. } => RpcError::internal(err.to_string()),
    }
}

pub fn session_error(err: SessionError) -> RpcError {
    match &err {
        SessionError::Busy(_)
        | SessionError::SteeringFull(_)
        | SessionError::SteeringCancelled
        | SessionError::Duplicate(_) => RpcError::new(ErrorCode::INVALID_REQUEST, err.to_string()),
        SessionError::UnknownOption(..) | SessionError::UnknownValue { .. } => {
            RpcError::invalid_params(err.to_string())
        }
        SessionError::Provider(provider) => {
            RpcError::new(ErrorCode::INTERNAL_ERROR, err.to_string()).with_data(
                serde_json::json!({ "kind": "provider", "detail": provider.to_string() }),
            )
        }
        SessionError::Crashed(_) => RpcError::internal(err.to_string()),
        SessionError::RequestCancelled => RpcError::request_cancelled(),
    }
}

/// A session answer, with the old session-model extension's `models` field
/// beside `configOptions` for a client that gets it.
pub fn with_models(
    response: impl serde::Serialize,
    options: &[SelectOption],
    extras: Extras,
) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(response)?;
    if !extras.models {
        return Ok(value);
    }
    if let (Value::Object(fields), Some(models)) = (&mut value, translate::session_models(options))
    {
        fields.insert("models".into(), models);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::v1 as acp;
    use serde_json::json;

    #[test]
    fn session_answers_carry_the_model_list_beside_the_config_options() {
        let options = vec![SelectOption {
            id: "model".into(),
            name: "Model".into(),
            description: String::new(),
            category: crate::client::OptionCategory::Model,
            current: "b".into(),
            values: ["a", "b"]
                .map(|id| crate::client::OptionValue {
                    id: id.into(),
                    name: id.into(),
                    description: None,
                })
                .to_vec(),
        }];
        let with = Extras {
            models: true,
            usage: false,
        };
        let value = with_models(acp::NewSessionResponse::new("s1"), &options, with).unwrap();
        assert_eq!(value["sessionId"], "s1");
        let without = with_models(
            acp::NewSessionResponse::new("s1"),
            &options,
            Extras::default(),
        )
        .unwrap();
        assert!(without.get("models").is_none(), "{without}");
        assert_eq!(value["models"]["currentModelId"], "b");
        assert_eq!(
            value["models"]["availableModels"],
            json!([{"modelId": "a", "name": "a"}, {"modelId": "b", "name": "b"}])
        );
    }
}
