//! Each version's table, through its codec, without I/O: every method is
//! reachable (behind its gate), a name in no table is -32601, and every
//! method's params decode into the neutral request whose answer encodes
//! back as the schema's own response type for that method.

use agent_client_protocol_schema::{v1, v2};
use serde_json::{Value, json};

use crate::acp::request::{Listed, Opened, PromptReply, ProviderListing, Request, Whereabouts};
use crate::acp::{auth, v1 as codec1, v2::requests as codec2};
use crate::config::Unstable;
use crate::events::StopReason;
use crate::session::{Inserted, TurnEnd};
use crate::transport::jsonrpc::ErrorCode;
use crate::transport::{Connection, Responder, RpcError};

fn all_on() -> Unstable {
    Unstable {
        set_title: true,
        status: true,
        fork: true,
        providers: true,
        auth_status: true,
        archive: true,
        options: true,
        ..Unstable::default()
    }
}

fn code(err: Result<impl Sized, RpcError>) -> Option<ErrorCode> {
    err.err().map(|err| err.code)
}

#[test]
fn every_method_is_reachable_behind_its_gate_and_no_other_name_is() {
    let (off, on) = (Unstable::default(), all_on());
    type Read = fn(&str, &Unstable) -> Option<ErrorCode>;
    let read_v1: Read = |m, u| code(codec1::V1Request::read(m, Value::Null, u));
    let read_v2: Read = |m, u| code(codec2::V2Request::read(m, Value::Null, u));
    for (version, table, read) in [
        ("v1", codec1::V1Request::TABLE, read_v1),
        ("v2", codec2::V2Request::TABLE, read_v2),
    ] {
        for (method, gate) in table {
            assert_ne!(
                read(method, &on),
                Some(ErrorCode::METHOD_NOT_FOUND),
                "{version} {method} is in the table"
            );
            if gate.is_some() {
                assert_eq!(
                    read(method, &off),
                    Some(ErrorCode::METHOD_NOT_FOUND),
                    "{version} {method} is behind {gate:?}"
                );
            }
        }
        for stranger in ["no/such", "session/update", "fs/read_text_file", ""] {
            assert_eq!(
                read(stranger, &on),
                Some(ErrorCode::METHOD_NOT_FOUND),
                "{version} {stranger}"
            );
        }
    }
    // What v2 removed stays v1's, and v2's new names are not v1's.
    for removed in [
        "session/load",
        "session/set_mode",
        "session/set_model",
        "authenticate",
        "logout",
        "session/options",
    ] {
        assert_eq!(
            code(codec2::V2Request::read(removed, json!({}), &all_on())),
            Some(ErrorCode::METHOD_NOT_FOUND),
            "{removed}"
        );
    }
    for added in ["auth/login", "auth/logout"] {
        assert_eq!(
            code(codec1::V1Request::read(added, json!({}), &all_on())),
            Some(ErrorCode::METHOD_NOT_FOUND),
            "{added}"
        );
    }
}

/// Answers `request` with a made-up neutral answer of its kind.
fn answer(request: Request) {
    let opened = || Opened {
        id: "s1".into(),
        options: Vec::new(),
    };
    match request {
        Request::SignIn { reply, .. } | Request::SignOut(reply) => reply.send(Ok(())),
        Request::AuthStatus(reply) => reply.send(Ok(auth::Status {
            state: auth::State::Unauthenticated,
            accounts: vec![auth::Account {
                name: "claude".into(),
                description: "no API key".into(),
            }],
        })),
        Request::NewSession { reply, .. } | Request::Reopen { reply, .. } => {
            reply.send(Ok(opened()));
        }
        Request::Prompt { reply, .. } => match reply {
            PromptReply::AtEnd(reply) => reply.send(Ok(TurnEnd {
                stop: StopReason::EndTurn,
                usage: None,
            })),
            PromptReply::AtInsertion { reply, .. } => reply.send(Ok(Inserted {
                message_id: "m1".into(),
            })),
        },
        Request::SetOption { reply, .. } | Request::Options { reply, .. } => {
            reply.send(Ok(Vec::new()));
        }
        Request::SetMode { reply, .. }
        | Request::SetModel { reply, .. }
        | Request::Close { reply, .. }
        | Request::Delete { reply, .. }
        | Request::Archive { reply, .. }
        | Request::SetProvider { reply, .. }
        | Request::DisableProvider { reply, .. } => reply.send(Ok(())),
        Request::SetTitle { reply, .. } => reply.send(Ok("Title".into())),
        Request::List { reply, .. } => reply.send(Ok(Listed {
            page: crate::store::list_page(Vec::new(), None, None, 10),
            archive_marks: true,
        })),
        Request::Status { reply, .. } => reply.send(Ok(Whereabouts::Saved)),
        Request::ListProviders(reply) => reply.send(Ok(vec![ProviderListing {
            name: "local".into(),
            current: Some((
                crate::providers::settings::ProviderKind::Ollama,
                "http://127.0.0.1:11434".into(),
            )),
            required: true,
        }])),
    }
}

/// Decodes `method` with `params` through a codec, answers it, and gives
/// back what was written.
fn round_trip(
    decode: impl FnOnce(&str, Value, Responder) -> Option<Request>,
    method: &str,
    params: Value,
) -> Value {
    let (connection, mut lines) = Connection::new();
    let responder = Responder::new(v1::RequestId::Number(1), connection, method);
    let request = decode(method, params.clone(), responder)
        .unwrap_or_else(|| panic!("{method} {params} did not decode"));
    answer(request);
    let line = lines.try_recv().expect("an answer");
    serde_json::from_slice(&line).expect("JSON")
}

/// The methods whose params both versions write alike.
fn alike_in_both() -> Vec<(&'static str, Value)> {
    vec![
        ("session/close", json!({"sessionId": "s1"})),
        ("session/delete", json!({"sessionId": "s1"})),
        ("session/list", json!({})),
        (
            "session/set_title",
            json!({"sessionId": "s1", "title": "T"}),
        ),
        ("session/status", json!({"sessionId": "s1"})),
        ("session/archive", json!({"sessionId": "s1"})),
        ("session/unarchive", json!({"sessionId": "s1"})),
    ]
}

#[test]
fn every_v1_method_decodes_and_its_answer_is_the_schemas_response() {
    let cwd = std::env::temp_dir();
    let session = |extra: Value| {
        let mut params = json!({"sessionId": "s1", "cwd": cwd, "mcpServers": []});
        if let (Value::Object(params), Value::Object(extra)) = (&mut params, extra) {
            params.extend(extra);
        }
        params
    };
    let table = [
        ("authenticate", json!({"methodId": "setup"})),
        ("logout", json!({})),
        ("session/new", json!({"cwd": cwd, "mcpServers": []})),
        ("session/load", session(json!({}))),
        ("session/resume", session(json!({}))),
        ("session/fork", session(json!({}))),
        (
            "session/prompt",
            json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": "s1", "configId": "mode", "value": "plan"}),
        ),
        (
            "session/set_mode",
            json!({"sessionId": "s1", "modeId": "plan"}),
        ),
        ("session/options", json!({"cwd": cwd})),
        ("providers/list", json!({})),
        (
            "providers/set",
            json!({"providerId": "local", "apiType": "openai", "baseUrl": "http://x.test/v1"}),
        ),
        ("providers/disable", json!({"providerId": "local"})),
        ("auth/status", json!({})),
    ];
    let table = table.into_iter().chain(alike_in_both());
    let context = codec1::Context {
        unstable: all_on(),
        extras: Default::default(),
    };
    for (method, params) in table {
        let written = round_trip(|m, p, r| codec1::decode(m, p, r, &context), method, params);
        let result = written["result"].clone();
        assert!(
            v1::AgentResponse::from_method_and_result(method, result).is_ok(),
            "{method}: {written}"
        );
    }
    // The old session-model extension is not in the schema: an empty object.
    let written = round_trip(
        |m, p, r| codec1::decode(m, p, r, &context),
        "session/set_model",
        json!({"sessionId": "s1", "modelId": "m"}),
    );
    assert_eq!(written["result"], json!({}));
}

#[test]
fn every_v2_method_decodes_and_its_answer_is_the_schemas_response() {
    let cwd = std::env::temp_dir();
    let table = [
        ("auth/login", json!({"methodId": "setup"})),
        ("auth/logout", json!({})),
        ("session/new", json!({"cwd": cwd})),
        (
            "session/resume",
            json!({"sessionId": "s1", "cwd": cwd, "replayFrom": {"type": "start"}}),
        ),
        ("session/fork", json!({"sessionId": "s1", "cwd": cwd})),
        (
            "session/prompt",
            json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}], "idempotencyKey": "k"}),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": "s1", "configId": "mode", "type": "id", "value": "plan"}),
        ),
        ("providers/list", json!({})),
        (
            "providers/set",
            json!({"providerId": "local", "apiType": "openai", "baseUrl": "http://x.test/v1"}),
        ),
        ("providers/disable", json!({"providerId": "local"})),
        ("auth/status", json!({})),
    ];
    let unstable = all_on();
    for (method, params) in table.into_iter().chain(alike_in_both()) {
        let written = round_trip(|m, p, r| codec2::decode(m, p, r, &unstable), method, params);
        let result = written["result"].clone();
        assert!(
            v2::AgentResponse::from_method_and_result(method, result).is_ok(),
            "{method}: {written}"
        );
    }
}

#[test]
fn bad_params_are_answered_by_the_codec_with_the_field_named() {
    let (connection, mut lines) = Connection::new();
    let responder = Responder::new(v1::RequestId::Number(1), connection, "session/prompt");
    let decoded = codec2::decode(
        "session/prompt",
        json!({"sessionId": "s1", "prompt": [{"type": "audio", "mimeType": "audio/wav", "data": "AA"}]}),
        responder,
        &all_on(),
    );
    assert!(decoded.is_none());
    let written: Value = serde_json::from_slice(&lines.try_recv().unwrap()).unwrap();
    assert_eq!(written["error"]["code"], ErrorCode::INVALID_PARAMS.0);
    assert!(
        written["error"]["message"]
            .as_str()
            .unwrap()
            .contains("prompt[0]"),
        "{written}"
    );
}
