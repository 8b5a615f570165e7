//! JSON-RPC 2.0 messages as types: what the peer sends is read into a
//! [`Message`] (request, notification, response) or an [`Invalid`] one,
//! by serde into an [`Envelope`] of typed fields; what we send is written
//! from typed structs. The framing (a line, an HTTP body, a WebSocket
//! frame) belongs to the carrier: this module sees whole messages only,
//! and is pure, so it is tested without any I/O.

use agent_client_protocol_schema::v1::RequestId;
use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// The `jsonrpc` member: a type of its own, written as `"2.0"` and read
/// from nothing else.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonRpcVersion;

impl Serialize for JsonRpcVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("2.0")
    }
}

impl<'de> Deserialize<'de> for JsonRpcVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let version = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        if version == "2.0" {
            Ok(Self)
        } else {
            Err(serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(&version),
                &"\"2.0\"",
            ))
        }
    }
}

/// A JSON-RPC error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    pub const PARSE_ERROR: Self = Self(-32700);
    pub const INVALID_REQUEST: Self = Self(-32600);
    pub const METHOD_NOT_FOUND: Self = Self(-32601);
    pub const INVALID_PARAMS: Self = Self(-32602);
    pub const INTERNAL_ERROR: Self = Self(-32603);
    /// `$/cancel_request` withdrew the request (ACP).
    pub const REQUEST_CANCELLED: Self = Self(-32800);
    /// ACP's "resource not found" (a session, a file).
    pub const RESOURCE_NOT_FOUND: Self = Self(-32002);
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A JSON-RPC error object, as sent on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The `data` of a -32601: the method that does not exist.
#[derive(Serialize)]
struct MissingMethod<'a> {
    method: &'a str,
}

/// The `data` of an error about one session.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AboutSession<'a> {
    session_id: &'a str,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
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
    /// `data` from a typed value (nothing when it cannot be written).
    fn with_typed_data(mut self, data: &impl Serialize) -> Self {
        self.data = serde_json::to_value(data).ok();
        self
    }
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::PARSE_ERROR, format!("Parse error: {detail}"))
    }
    pub fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::INVALID_REQUEST,
            format!("Invalid request: {}", detail.into()),
        )
    }
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
        .with_typed_data(&MissingMethod { method })
    }
    pub fn invalid_params(detail: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::INVALID_PARAMS,
            format!("Invalid params: {}", detail.into()),
        )
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::INTERNAL_ERROR,
            format!("Internal error: {}", detail.into()),
        )
    }
    pub fn request_cancelled() -> Self {
        Self::new(ErrorCode::REQUEST_CANCELLED, "Request cancelled")
    }
    pub fn session_not_found(session_id: &str) -> Self {
        Self::new(
            ErrorCode::RESOURCE_NOT_FOUND,
            format!("Resource not found: no session `{session_id}` in this agent process; start one with session/new"),
        )
        .with_typed_data(&AboutSession { session_id })
    }

    /// A session that was open in this process and has stopped.
    pub fn session_stopped(session_id: &str) -> Self {
        Self::new(
            ErrorCode::RESOURCE_NOT_FOUND,
            format!("Resource not found: session `{session_id}` is no longer running in this agent process (it stopped on an internal error, or did not load); session/load opens it again from what was saved"),
        )
        .with_typed_data(&AboutSession { session_id })
    }

    /// A session another connection has loaded since (`serve`).
    pub fn session_taken_over(session_id: &str) -> Self {
        Self::new(
            ErrorCode::RESOURCE_NOT_FOUND,
            format!("Resource not found: session `{session_id}` was loaded by another connection, which has it now; session/load (or session/resume) takes it back"),
        )
        .with_typed_data(&AboutSession { session_id })
    }

    /// A connection with as many sessions open as it may have (`serve`).
    pub fn too_many_sessions(limit: usize) -> Self {
        Self::new(
            ErrorCode::INTERNAL_ERROR,
            format!(
                "This connection has {limit} sessions open, the most it may ([serve] max_sessions_per_connection); close one with session/close first"
            ),
        )
    }
}

/// A request from the peer: it is owed one answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    pub params: Value,
}

/// A notification from the peer: it gets no answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Value,
}

/// The peer's answer to a request of ours.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: RequestId,
    pub result: Result<Value, RpcError>,
}

/// One valid message from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

/// Not a valid message. `id` is set when it had a usable one, so the error
/// can be correlated; otherwise the answer carries `id: null`.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub id: Option<RequestId>,
    pub error: RpcError,
}

/// What one unit from the carrier (a line, a body, a frame) held.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Message(Message),
    Invalid(Invalid),
    /// A non-empty array of messages (a JSON-RPC 2.0 batch): its requests
    /// are answered together, in one array. An entry is never itself a
    /// batch; invalid entries carry no id (the batch rules).
    Batch(Vec<Incoming>),
}

impl Incoming {
    fn invalid(id: Option<RequestId>, error: RpcError) -> Self {
        Self::Invalid(Invalid { id, error })
    }

    /// The request, if this is a single one.
    pub fn as_request(&self) -> Option<&Request> {
        match self {
            Self::Message(Message::Request(request)) => Some(request),
            _ => None,
        }
    }
}

/// A member as the peer wrote it: absent, of the expected type, or not.
/// Reading every member this way lets a bad one become an answer that
/// names it (with the id, when that one is fine), not a failure of the
/// whole message.
#[derive(Debug, Default)]
enum Member<T> {
    #[default]
    Absent,
    Valid(T),
    Malformed,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Member<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(T::deserialize(value).map_or(Self::Malformed, Self::Valid))
    }
}

/// Every member a JSON-RPC message may have, each typed.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    jsonrpc: Member<JsonRpcVersion>,
    /// `null` is an id (a request with `id: null`), unlike an absent one.
    #[serde(default)]
    id: Member<RequestId>,
    #[serde(default)]
    method: Member<String>,
    #[serde(default)]
    params: Option<Value>,
    /// `null` is a result (`{"result": null}`), unlike an absent one.
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default)]
    error: Member<RpcError>,
}

impl Envelope {
    /// The typed message, or what is wrong with it.
    fn classify(self) -> Incoming {
        let id = match self.id {
            Member::Absent => None,
            Member::Valid(id) => Some(id),
            Member::Malformed => return invalid(None, "`id` must be a string, an integer or null"),
        };
        if !matches!(self.jsonrpc, Member::Valid(JsonRpcVersion)) {
            return invalid(id, "`jsonrpc` must be \"2.0\"");
        }
        let params = self.params.unwrap_or(Value::Null);
        let message = match (self.method, id) {
            (Member::Valid(method), Some(id)) => Message::Request(Request { id, method, params }),
            (Member::Valid(method), None) => Message::Notification(Notification { method, params }),
            (Member::Malformed, id) => return invalid(id, "`method` must be a string"),
            (Member::Absent, None) => {
                return invalid(
                    None,
                    "a message needs `method` (request) or `id` (response)",
                );
            }
            (Member::Absent, Some(id)) => {
                let result = match (self.error, self.result) {
                    (Member::Valid(error), _) => Err(error),
                    (Member::Malformed, _) => Err(RpcError::internal(
                        "the client sent a malformed error object",
                    )),
                    (Member::Absent, Some(result)) => Ok(result),
                    (Member::Absent, None) => {
                        return invalid(Some(id), "a response needs `result` or `error`");
                    }
                };
                Message::Response(Response { id, result })
            }
        };
        Incoming::Message(message)
    }
}

/// A member that is there, whatever it holds (`null` included).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

fn invalid(id: Option<RequestId>, detail: &str) -> Incoming {
    Incoming::invalid(id, RpcError::invalid_request(detail))
}

/// One batch entry: an object, or anything else (answered as invalid).
#[derive(Deserialize)]
#[serde(untagged)]
enum Entry {
    Object(Box<Envelope>),
    Other(serde::de::IgnoredAny),
}

const NOT_AN_OBJECT: &str =
    "expected a JSON object (a request, a notification or a response), or a batch of them";

/// Read one whole message (or batch) as the carrier delivered it. Blank
/// input (white space only) is `None`.
pub fn parse(bytes: &[u8]) -> Option<Incoming> {
    let trimmed = bytes.trim_ascii();
    let first = *trimmed.first()?;
    Some(match first {
        b'[' => match serde_json::from_slice::<Vec<Entry>>(trimmed) {
            Ok(entries) if entries.is_empty() => Incoming::invalid(
                None,
                RpcError::invalid_request("an empty batch (a batch needs at least one message)"),
            ),
            Ok(entries) => Incoming::Batch(entries.into_iter().map(batch_entry).collect()),
            Err(err) => Incoming::invalid(None, RpcError::parse_error(err)),
        },
        b'{' => match serde_json::from_slice::<Envelope>(trimmed) {
            Ok(envelope) => envelope.classify(),
            Err(err) => Incoming::invalid(None, RpcError::parse_error(err)),
        },
        _ => match serde_json::from_slice::<serde::de::IgnoredAny>(trimmed) {
            Ok(_) => Incoming::invalid(None, RpcError::invalid_request(NOT_AN_OBJECT)),
            Err(err) => Incoming::invalid(None, RpcError::parse_error(err)),
        },
    })
}

/// An invalid batch entry is answered with `id: null`, as the batch rules
/// ask, whatever id it had.
fn batch_entry(entry: Entry) -> Incoming {
    match entry {
        Entry::Object(envelope) => match envelope.classify() {
            Incoming::Invalid(Invalid { error, .. }) => Incoming::invalid(None, error),
            entry => entry,
        },
        Entry::Other(_) => Incoming::invalid(None, RpcError::invalid_request(NOT_AN_OBJECT)),
    }
}

/// A request or notification as we write it (no `id`: a notification).
#[derive(Serialize)]
struct Call<'a, P> {
    jsonrpc: JsonRpcVersion,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    method: &'a str,
    params: &'a P,
}

/// An answer as we write it.
#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: JsonRpcVersion,
    id: &'a RequestId,
    #[serde(flatten)]
    outcome: Outcome<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum Outcome<'a> {
    Result(&'a Value),
    Error(&'a RpcError),
}

/// An answer, encoded (without framing).
pub fn encode_response(id: &RequestId, result: &Result<Value, RpcError>) -> Vec<u8> {
    let outcome = match result {
        Ok(value) => Outcome::Result(value),
        Err(error) => Outcome::Error(error),
    };
    let answer = Answer {
        jsonrpc: JsonRpcVersion,
        id,
        outcome,
    };
    // Plain JSON values written to memory cannot fail; keep a valid answer anyway.
    serde_json::to_vec(&answer).unwrap_or_else(|_| unencodable(id))
}

/// A request (with `id`) or a notification, encoded (without framing).
pub fn encode_call<P: Serialize>(
    id: Option<&RequestId>,
    method: &str,
    params: &P,
) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&Call {
        jsonrpc: JsonRpcVersion,
        id,
        method,
        params,
    })
}

fn unencodable(id: &RequestId) -> Vec<u8> {
    encode_response(
        id,
        &Err(RpcError::internal("response could not be encoded")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Incoming {
        parse(text.as_bytes()).unwrap()
    }

    fn request(id: RequestId, method: &str, params: Value) -> Incoming {
        Incoming::Message(Message::Request(Request {
            id,
            method: method.into(),
            params,
        }))
    }

    #[test]
    fn classifies_each_kind_of_message() {
        let table: Vec<(&str, Incoming)> = vec![
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#,
                request(RequestId::Number(1), "initialize", json!({"a":1})),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"x","method":"m"}"#,
                request(RequestId::Str("x".into()), "m", Value::Null),
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
                request(RequestId::Null, "m", Value::Null),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#,
                Incoming::Message(Message::Notification(Notification {
                    method: "session/cancel".into(),
                    params: json!({"sessionId":"s"}),
                })),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"ok":true}}"#,
                Incoming::Message(Message::Response(Response {
                    id: RequestId::Number(7),
                    result: Ok(json!({"ok":true})),
                })),
            ),
            (
                r#"{"jsonrpc":"2.0","id":9,"result":null}"#,
                Incoming::Message(Message::Response(Response {
                    id: RequestId::Number(9),
                    result: Ok(Value::Null),
                })),
            ),
            (
                r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"no"}}"#,
                Incoming::Message(Message::Response(Response {
                    id: RequestId::Number(8),
                    result: Err(RpcError::new(ErrorCode::METHOD_NOT_FOUND, "no")),
                })),
            ),
        ];
        for (text, expected) in table {
            assert_eq!(read(text), expected, "{text}");
        }
    }

    #[test]
    fn bad_messages_are_errors_with_the_right_code() {
        let table = [
            (r#"{"jsonrpc":"2.0","id":1,"#, ErrorCode::PARSE_ERROR, false),
            ("not json", ErrorCode::PARSE_ERROR, false),
            ("[]", ErrorCode::INVALID_REQUEST, false),
            ("5", ErrorCode::INVALID_REQUEST, false),
            (r#""text""#, ErrorCode::INVALID_REQUEST, false),
            (r#"{"id":1,"method":"x"}"#, ErrorCode::INVALID_REQUEST, true),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
                ErrorCode::INVALID_REQUEST,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
                ErrorCode::INVALID_REQUEST,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#,
                ErrorCode::INVALID_REQUEST,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":3}"#,
                ErrorCode::INVALID_REQUEST,
                true,
            ),
            (r#"{"jsonrpc":"2.0"}"#, ErrorCode::INVALID_REQUEST, false),
        ];
        for (text, code, has_id) in table {
            match read(text) {
                Incoming::Invalid(Invalid { id, error }) => {
                    assert_eq!(error.code, code, "{text}");
                    assert_eq!(id.is_some(), has_id, "{text}");
                }
                other => panic!("{text} parsed as {other:?}"),
            }
        }
    }

    #[test]
    fn a_malformed_error_object_is_still_the_answer_to_its_request() {
        let answer = read(r#"{"jsonrpc":"2.0","id":4,"error":"nope"}"#);
        let Incoming::Message(Message::Response(Response { id, result })) = answer else {
            panic!("not a response: {answer:?}");
        };
        assert_eq!(id, RequestId::Number(4));
        assert_eq!(result.map_err(|e| e.code), Err(ErrorCode::INTERNAL_ERROR));
    }

    #[test]
    fn a_batch_is_its_entries_with_invalid_ones_answered_without_an_id() {
        let batch = read(
            r#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":2,"result":{}},1,{"id":3,"method":"x"},{"foo":"boo"},[]]"#,
        );
        let Incoming::Batch(entries) = batch else {
            panic!("not a batch: {batch:?}");
        };
        assert_eq!(entries.len(), 7);
        assert!(matches!(&entries[0], Incoming::Message(Message::Request(r)) if r.method == "a"));
        assert!(
            matches!(&entries[1], Incoming::Message(Message::Notification(n)) if n.method == "n")
        );
        assert!(matches!(
            &entries[2],
            Incoming::Message(Message::Response(Response { result: Ok(_), .. }))
        ));
        for entry in &entries[3..] {
            assert!(
                matches!(entry, Incoming::Invalid(Invalid { id: None, error }) if error.code == ErrorCode::INVALID_REQUEST),
                "{entry:?}"
            );
        }
        // Broken JSON is one parse error, batch or not.
        assert!(matches!(
            read(r#"[{"jsonrpc":"2.0","id":1,"method":"a"},"#),
            Incoming::Invalid(Invalid { error, .. }) if error.code == ErrorCode::PARSE_ERROR
        ));
    }

    #[test]
    fn blank_input_is_skipped_and_crlf_is_tolerated() {
        assert_eq!(parse(b"   \r\n"), None);
        assert!(matches!(
            parse(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\r"),
            Some(Incoming::Message(Message::Notification(_)))
        ));
    }

    #[test]
    fn what_we_write_reads_back() {
        let answer = encode_response(&RequestId::Number(3), &Ok(json!({"stopReason":"end_turn"})));
        assert_eq!(
            String::from_utf8(answer).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#
        );
        let answer = encode_response(&RequestId::Null, &Err(RpcError::parse_error("eof")));
        assert!(matches!(
            parse(&answer),
            Some(Incoming::Message(Message::Response(Response { id: RequestId::Null, result: Err(error) })))
                if error.code == ErrorCode::PARSE_ERROR
        ));
        let call = encode_call(None, "session/update", &json!({"x":1})).unwrap();
        assert_eq!(
            String::from_utf8(call).unwrap(),
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"x":1}}"#
        );
        let call =
            encode_call(Some(&RequestId::Number(0)), "fs/read_text_file", &json!({})).unwrap();
        assert_eq!(
            parse(&call),
            Some(request(
                RequestId::Number(0),
                "fs/read_text_file",
                json!({})
            ))
        );
    }

    #[test]
    fn error_data_names_what_it_is_about() {
        let error = RpcError::method_not_found("no/such");
        assert_eq!(error.data, Some(json!({"method": "no/such"})));
        let error = RpcError::session_not_found("s1");
        assert_eq!(error.data, Some(json!({"sessionId": "s1"})));
        assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND);
    }
}
