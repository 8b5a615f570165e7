//! `initialize` answered before the rest of the agent exists. Editors spawn
//! an agent per thread and wait for this answer, and it needs nothing but
//! the client's message: so `main` reads the first line with blocking I/O,
//! answers it here, and only then reads the config and starts the runtime,
//! the writer thread and the sessions.

use std::io::Write;

use serde_json::Value;

use super::protocol::Version;
use super::router::ClientInfo;
use super::v2::initialize::{Negotiated, negotiate};
use crate::config::Unstable;
use crate::transport::{self, Incoming};

/// What the early answer leaves for the router.
#[derive(Debug, Default)]
pub struct Handshake {
    /// What the client said in `initialize`, if it was answered here.
    pub client: Option<ClientInfo>,
    /// The version `initialize` settled (v1 when there was none).
    pub version: Version,
    /// A first message that was not `initialize`, for the router to handle.
    pub pending: Option<Incoming>,
}

/// Answer the client's first message on `output` if it is `initialize`;
/// any other message is handed back untouched.
pub fn answer_first(first: Incoming, output: &mut impl Write) -> std::io::Result<Handshake> {
    let Some(request) = first
        .as_request()
        .filter(|request| is_initialize(&request.method))
    else {
        return Ok(Handshake {
            pending: Some(first),
            ..Handshake::default()
        });
    };
    let negotiated = initialize(request.params.clone());
    transport::stdio::respond_now(output, &request.id, &negotiated.answer)?;
    Ok(Handshake {
        client: negotiated.client,
        version: negotiated.version,
        pending: None,
    })
}

/// Whether `method` is the handshake's.
fn is_initialize(method: &str) -> bool {
    method == agent_client_protocol_schema::v1::AGENT_METHOD_NAMES.initialize
}

/// `initialize` answered from its raw params, as the router would answer
/// it with no unstable feature on (a config that may turn one on is read
/// first, and the router answers): v2 to a client that asks for it.
pub(super) fn initialize(params: Value) -> Negotiated {
    negotiate(params, Unstable::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::router;
    use crate::transport::jsonrpc::parse as parse_line;

    fn first(line: &str) -> (Handshake, Vec<Value>) {
        let mut out = Vec::new();
        let message = parse_line(line.as_bytes()).unwrap();
        let handshake = answer_first(message, &mut out).unwrap();
        let lines = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        (handshake, lines)
    }

    #[test]
    fn initialize_is_answered_at_once_with_what_the_router_would_say() {
        let (handshake, out) = first(
            r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"terminal":true},"clientInfo":{"name":"zed","version":"1"}}}"#,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["id"], 7);
        assert_eq!(
            out[0]["result"],
            serde_json::to_value(router::initialize_response()).unwrap()
        );
        let client = handshake.client.unwrap();
        assert!(client.terminal);
        assert_eq!(client.name.as_deref(), Some("zed"));
        assert!(handshake.pending.is_none());
        assert_eq!(handshake.version, Version::V1);
    }

    #[test]
    fn a_v2_initialize_is_answered_in_v2_and_settles_the_version() {
        let (handshake, out) = first(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"zed","version":"1"}}}"#,
        );
        assert_eq!(out[0]["result"]["protocolVersion"], 2, "{}", out[0]);
        assert!(out[0]["result"]["capabilities"]["session"].is_object());
        assert_eq!(handshake.version, Version::V2);
        assert!(!handshake.client.unwrap().terminal);
    }

    #[test]
    fn a_broken_initialize_gets_the_routers_error_and_leaves_no_client() {
        let (handshake, out) =
            first(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
        assert_eq!(out[0]["error"]["code"], -32602, "{}", out[0]);
        assert!(
            out[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("protocolVersion")
        );
        assert!(handshake.client.is_none());
    }

    #[test]
    fn any_other_first_message_is_left_for_the_router() {
        let (handshake, out) =
            first(r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}"#);
        assert!(out.is_empty());
        assert!(
            handshake
                .pending
                .as_ref()
                .and_then(Incoming::as_request)
                .is_some_and(|r| r.method == "session/new")
        );
        // A batch, even one with `initialize` in it, is the router's to answer whole.
        let (handshake, out) = first(
            r#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}]"#,
        );
        assert!(out.is_empty());
        assert!(matches!(handshake.pending, Some(Incoming::Batch(_))));
        let (handshake, out) = first("not json");
        assert!(out.is_empty());
        assert!(matches!(handshake.pending, Some(Incoming::Invalid(_))));
    }
}
