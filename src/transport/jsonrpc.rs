//! JSON-RPC 2.0 framing: one message per line, a JSON object or a batch
//! (an array of them). Parsing is pure so it is tested without any I/O.

use agent_client_protocol_schema::v1::RequestId;
use serde::Serialize;
use serde_json::{Map, Value};

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;
pub const REQUEST_CANCELLED: i32 = -32800;
pub const RESOURCE_NOT_FOUND: i32 = -32002;

/// A JSON-RPC error object, as sent on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(PARSE_ERROR, format!("Parse error: {detail}"))
    }
    pub fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new(
            INVALID_REQUEST,
            format!("Invalid request: {}", detail.into()),
        )
    }
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
            .with_data(serde_json::json!({ "method": method }))
    }
    pub fn invalid_params(detail: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, format!("Invalid params: {}", detail.into()))
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, format!("Internal error: {}", detail.into()))
    }
    pub fn request_cancelled() -> Self {
        Self::new(REQUEST_CANCELLED, "Request cancelled")
    }
    pub fn session_not_found(session_id: &str) -> Self {
        Self::new(
            RESOURCE_NOT_FOUND,
            format!("Resource not found: no session `{session_id}` in this agent process; start one with session/new"),
        )
        .with_data(serde_json::json!({ "sessionId": session_id }))
    }

    /// A session that was open in this process and has stopped.
    pub fn session_stopped(session_id: &str) -> Self {
        Self::new(
            RESOURCE_NOT_FOUND,
            format!("Resource not found: session `{session_id}` is no longer running in this agent process (it stopped on an internal error, or did not load); session/load opens it again from what was saved"),
        )
        .with_data(serde_json::json!({ "sessionId": session_id }))
    }
}

/// One parsed line from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: RequestId,
        result: Result<Value, RpcError>,
    },
    /// Not a valid message. `id` is set when the line had a usable id, so the
    /// error can be correlated; otherwise the answer carries `id: null`.
    Invalid {
        id: Option<RequestId>,
        error: RpcError,
    },
    /// A non-empty array of messages on one line (JSON-RPC 2.0 batch): its
    /// requests are answered together, in one array. An entry is never
    /// itself a batch; invalid entries carry no id (the batch rules).
    Batch(Vec<Incoming>),
}

/// Parse one line. Blank lines are `None`.
pub fn parse_line(line: &[u8]) -> Option<Incoming> {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return None;
    }
    let value: Value = match serde_json::from_slice(trimmed) {
        Ok(value) => value,
        Err(err) => {
            return Some(Incoming::Invalid {
                id: None,
                error: RpcError::parse_error(err),
            });
        }
    };
    Some(match value {
        Value::Array(entries) if entries.is_empty() => Incoming::Invalid {
            id: None,
            error: RpcError::invalid_request("an empty batch (a batch needs at least one message)"),
        },
        Value::Array(entries) => Incoming::Batch(entries.into_iter().map(batch_entry).collect()),
        value => classify(value),
    })
}

/// One entry of a batch: an invalid one is answered with `id: null`, as
/// the batch rules ask, whatever id it had.
fn batch_entry(value: Value) -> Incoming {
    match classify(value) {
        Incoming::Invalid { error, .. } => Incoming::Invalid { id: None, error },
        entry => entry,
    }
}

fn classify(value: Value) -> Incoming {
    let Value::Object(mut object) = value else {
        return Incoming::Invalid {
            id: None,
            error: RpcError::invalid_request(
                "expected a JSON object (a request, a notification or a response), or a batch of them",
            ),
        };
    };
    let id = match object.remove("id") {
        None => None,
        Some(raw) => match serde_json::from_value::<RequestId>(raw) {
            Ok(id) => Some(id),
            Err(_) => {
                return Incoming::Invalid {
                    id: None,
                    error: RpcError::invalid_request("`id` must be a string, an integer or null"),
                };
            }
        },
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid {
            id,
            error: RpcError::invalid_request("`jsonrpc` must be \"2.0\""),
        };
    }
    match object.remove("method") {
        Some(Value::String(method)) => {
            let params = object.remove("params").unwrap_or(Value::Null);
            match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            }
        }
        Some(_) => Incoming::Invalid {
            id,
            error: RpcError::invalid_request("`method` must be a string"),
        },
        None => classify_response(id, object),
    }
}

fn classify_response(id: Option<RequestId>, mut object: Map<String, Value>) -> Incoming {
    let Some(id) = id else {
        return Incoming::Invalid {
            id: None,
            error: RpcError::invalid_request(
                "a message needs `method` (request) or `id` (response)",
            ),
        };
    };
    if let Some(error) = object.remove("error") {
        let error = serde_json::from_value::<RpcError>(error).unwrap_or_else(|err| {
            RpcError::internal(format!("the client sent a malformed error object: {err}"))
        });
        return Incoming::Response {
            id,
            result: Err(error),
        };
    }
    match object.remove("result") {
        Some(result) => Incoming::Response {
            id,
            result: Ok(result),
        },
        None => Incoming::Invalid {
            id: Some(id),
            error: RpcError::invalid_request("a response needs `result` or `error`"),
        },
    }
}

/// Serialize a response line (without the newline).
pub fn response_line(id: &RequestId, result: &Result<Value, RpcError>) -> Vec<u8> {
    #[derive(Serialize)]
    struct Ok<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: &'a Value,
    }
    #[derive(Serialize)]
    struct Err<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        error: &'a RpcError,
    }
    let encoded = match result {
        Result::Ok(result) => serde_json::to_vec(&Ok {
            jsonrpc: "2.0",
            id,
            result,
        }),
        Result::Err(error) => serde_json::to_vec(&Err {
            jsonrpc: "2.0",
            id,
            error,
        }),
    };
    // Serializing plain JSON values to memory cannot fail; keep a valid fallback anyway.
    encoded.unwrap_or_else(|_| fallback_error_line(id))
}

/// Serialize a request or notification line.
pub fn call_line(id: Option<&RequestId>, method: &str, params: &Value) -> Vec<u8> {
    #[derive(Serialize)]
    struct Call<'a> {
        jsonrpc: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a RequestId>,
        method: &'a str,
        params: &'a Value,
    }
    serde_json::to_vec(&Call {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
    .unwrap_or_default()
}

fn fallback_error_line(id: &RequestId) -> Vec<u8> {
    let id = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32603,"message":"Internal error: response could not be encoded"}}}}"#).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Incoming {
        parse_line(text.as_bytes()).unwrap()
    }

    #[test]
    fn classifies_each_kind_of_line() {
        let table: Vec<(&str, Incoming)> = vec![
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#,
                Incoming::Request {
                    id: RequestId::Number(1),
                    method: "initialize".into(),
                    params: json!({"a":1}),
                },
            ),
            (
                r#"{"jsonrpc":"2.0","id":"x","method":"m"}"#,
                Incoming::Request {
                    id: RequestId::Str("x".into()),
                    method: "m".into(),
                    params: Value::Null,
                },
            ),
            (
                r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#,
                Incoming::Notification {
                    method: "session/cancel".into(),
                    params: json!({"sessionId":"s"}),
                },
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"ok":true}}"#,
                Incoming::Response {
                    id: RequestId::Number(7),
                    result: Ok(json!({"ok":true})),
                },
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"no"}}"#,
                Incoming::Response {
                    id: RequestId::Number(8),
                    result: Err(RpcError::new(-32601, "no")),
                },
            ),
        ];
        for (line, expected) in table {
            assert_eq!(parse(line), expected, "{line}");
        }
    }

    #[test]
    fn bad_lines_are_errors_with_the_right_code() {
        let table = [
            (r#"{"jsonrpc":"2.0","id":1,"#, PARSE_ERROR, false),
            ("not json", PARSE_ERROR, false),
            ("[]", INVALID_REQUEST, false),
            ("5", INVALID_REQUEST, false),
            (r#"{"id":1,"method":"x"}"#, INVALID_REQUEST, true),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
                INVALID_REQUEST,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#,
                INVALID_REQUEST,
                false,
            ),
            (r#"{"jsonrpc":"2.0","id":3}"#, INVALID_REQUEST, true),
        ];
        for (line, code, has_id) in table {
            match parse(line) {
                Incoming::Invalid { id, error } => {
                    assert_eq!(error.code, code, "{line}");
                    assert_eq!(id.is_some(), has_id, "{line}");
                }
                other => panic!("{line} parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn a_batch_is_its_entries_with_invalid_ones_answered_without_an_id() {
        let batch = parse(
            r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":2,"result":{}},1,{"id":3,"method":"x"},{"foo":"boo"},[]]"#,
        );
        let Incoming::Batch(entries) = batch else {
            panic!("not a batch: {batch:?}");
        };
        assert_eq!(entries.len(), 7);
        assert!(matches!(&entries[0], Incoming::Request { method, .. } if method == "a"));
        assert!(matches!(&entries[1], Incoming::Notification { method, .. } if method == "n"));
        assert!(matches!(
            &entries[2],
            Incoming::Response { result: Ok(_), .. }
        ));
        for invalid in &entries[3..] {
            assert!(
                matches!(invalid, Incoming::Invalid { id: None, error } if error.code == INVALID_REQUEST),
                "{invalid:?}"
            );
        }
        // Broken JSON is one parse error, batch or not.
        assert!(matches!(
            parse(r#"[{"jsonrpc":"2.0","id":1,"method":"a"},"#),
            Incoming::Invalid { error, .. } if error.code == PARSE_ERROR
        ));
    }

    #[test]
    fn blank_lines_are_skipped_and_crlf_is_tolerated() {
        assert_eq!(parse_line(b"   \r\n"), None);
        assert!(matches!(
            parse_line(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\r"),
            Some(Incoming::Notification { .. })
        ));
    }

    #[test]
    fn response_lines_round_trip() {
        let line = response_line(&RequestId::Number(3), &Ok(json!({"stopReason":"end_turn"})));
        assert_eq!(
            String::from_utf8(line).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#
        );
        let line = response_line(&RequestId::Null, &Err(RpcError::parse_error("eof")));
        let value: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["id"], Value::Null);
        assert_eq!(value["error"]["code"], PARSE_ERROR);
        let line = call_line(None, "session/update", &json!({"x":1}));
        assert_eq!(
            String::from_utf8(line).unwrap(),
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"x":1}}"#
        );
    }
}
