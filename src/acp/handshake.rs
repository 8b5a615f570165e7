//! `initialize` answered before the rest of the agent exists. Editors spawn
//! an agent per thread and wait for this answer, and it needs nothing but
//! the client's message: so `main` reads the first line with blocking I/O,
//! answers it here, and only then reads the config and starts the runtime,
//! the writer thread and the sessions.

use std::io::Write;

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use super::router::{self, ClientInfo};
use crate::transport::{self, Incoming, RpcError};

/// What the early answer leaves for the router.
#[derive(Debug, Default)]
pub struct Handshake {
    /// What the client said in `initialize`, if it was answered here.
    pub client: Option<ClientInfo>,
    /// A first message that was not `initialize`, for the router to handle.
    pub pending: Option<Incoming>,
}

/// Answer the client's first message on `output` if it is `initialize`;
/// any other message is handed back untouched.
pub fn answer_first(first: Incoming, output: &mut impl Write) -> std::io::Result<Handshake> {
    let Incoming::Request { id, method, params } = first else {
        return Ok(Handshake {
            client: None,
            pending: Some(first),
        });
    };
    if method != "initialize" {
        return Ok(Handshake {
            client: None,
            pending: Some(Incoming::Request { id, method, params }),
        });
    }
    let (client, answer) = initialize(params);
    transport::respond_now(output, &id, &answer)?;
    Ok(Handshake {
        client,
        pending: None,
    })
}

/// `initialize` answered from its raw params, as the router would answer
/// it, with what the client said about itself when the params were good.
pub(super) fn initialize(params: Value) -> (Option<ClientInfo>, Result<Value, RpcError>) {
    const METHOD: &str = "initialize";
    let request = router::tolerate(METHOD, params)
        .and_then(|params| router::parse::<acp::InitializeRequest>(METHOD, params));
    match request {
        Ok(request) => {
            let client = ClientInfo::from_request(&request);
            let response = router::sign_in_for(router::initialize_response(), &client);
            let answer = serde_json::to_value(response)
                .map_err(|err| RpcError::internal(format!("could not encode the result: {err}")));
            (Some(client), answer)
        }
        Err(err) => (None, Err(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::jsonrpc::parse_line;

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
            matches!(handshake.pending, Some(Incoming::Request { ref method, .. }) if method == "session/new")
        );
        // A batch, even one with `initialize` in it, is the router's to answer whole.
        let (handshake, out) = first(
            r#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}]"#,
        );
        assert!(out.is_empty());
        assert!(matches!(handshake.pending, Some(Incoming::Batch(_))));
        let (handshake, out) = first("not json");
        assert!(out.is_empty());
        assert!(matches!(handshake.pending, Some(Incoming::Invalid { .. })));
    }
}
