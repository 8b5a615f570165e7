//! `initialize` with version negotiation: a client asking for
//! `protocolVersion` 2 or more gets ACP v2 (`info`, `capabilities`,
//! `authMethods`), unless `[acp] protocol_v2 = false`; anyone else gets
//! the v1 answer exactly as before.

use agent_client_protocol_schema::v2;
use agent_client_protocol_schema::{ProtocolVersion, v1};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::acp::protocol::Version;
use crate::acp::router::{self, ClientInfo};
use crate::config::{ProtocolV2, Unstable};
use crate::transport::RpcError;

const METHOD: &str = v2::AGENT_METHOD_NAMES.initialize;

/// What an `initialize` settled: the version spoken from now on, what the
/// client said about itself (when its params were good) and the answer.
#[derive(Debug)]
pub struct Negotiated {
    pub version: Version,
    pub client: Option<ClientInfo>,
    pub answer: Result<Value, RpcError>,
}

/// Only the version asked for, read before the params are parsed as
/// that version's request.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Asked {
    #[serde(default)]
    protocol_version: Option<u64>,
}

/// `initialize` answered from its raw params, in the version it settles.
pub fn negotiate(params: Value, unstable: Unstable) -> Negotiated {
    let params = match router::tolerate(METHOD, params) {
        Ok(params) => params,
        Err(err) => return failed(Version::V1, err),
    };
    let asked = serde_json::from_value::<Asked>(params.clone())
        .ok()
        .and_then(|asked| asked.protocol_version);
    let offered = unstable.protocol_v2 == ProtocolV2::Offered;
    if offered && asked.is_some_and(|version| version >= 2) {
        negotiate_v2(params, unstable)
    } else {
        negotiate_v1(params, unstable)
    }
}

fn failed(version: Version, err: RpcError) -> Negotiated {
    Negotiated {
        version,
        client: None,
        answer: Err(err),
    }
}

fn encoded(value: serde_json::Result<Value>) -> Result<Value, RpcError> {
    value.map_err(|err| RpcError::internal(format!("could not encode the result: {err}")))
}

fn negotiate_v1(params: Value, unstable: Unstable) -> Negotiated {
    match router::parse::<v1::InitializeRequest>(METHOD, params) {
        Ok(request) => {
            let client = ClientInfo::from_request(&request);
            let response = router::sign_in_for(router::initialize_response_with(unstable), &client);
            Negotiated {
                version: Version::V1,
                client: Some(client),
                answer: encoded(serde_json::to_value(response)),
            }
        }
        Err(err) => failed(Version::V1, err),
    }
}

fn negotiate_v2(params: Value, unstable: Unstable) -> Negotiated {
    match router::parse::<v2::InitializeRequest>(METHOD, params.clone()) {
        Ok(request) => {
            let client = client_info(&request);
            Negotiated {
                version: Version::V2,
                answer: encoded(response(unstable, &client)),
                client: Some(client),
            }
        }
        // A higher version in a v1 request (no `info`) is a v1 client
        // trying its luck: it gets v1, as before v2 existed.
        Err(v2_error) => match negotiate_v1(params, unstable) {
            negotiated @ Negotiated { answer: Ok(_), .. } => negotiated,
            _ => failed(Version::V1, v2_error),
        },
    }
}

/// What a v2 client says about itself. v2 has no client `fs` or
/// `terminal`: the agent does its own files and commands.
pub fn client_info(request: &v2::InitializeRequest) -> ClientInfo {
    let caps = &request.capabilities;
    let info = ClientInfo {
        elicitation: (caps.elicitation.as_ref()).is_some_and(|e| e.form.is_some()),
        prompt_suggestions: (caps.session.as_ref()).is_some_and(|s| s.prompt_suggestions.is_some()),
        terminal_auth: (caps.auth.as_ref()).is_some_and(|auth| auth.terminal.is_some()),
        // v2 has plans by id only (`plan_update`, `plan_removed`).
        plans: true,
        name: Some(request.info.name.clone()),
        ..ClientInfo::default()
    };
    tracing::info!(client = ?info, requested = %request.protocol_version, "initialize (ACP v2)");
    info
}

/// This agent's v2 answer: what it serves given `unstable`, with the
/// terminal sign-in for a client that runs it.
pub fn response(unstable: Unstable, client: &ClientInfo) -> serde_json::Result<Value> {
    let auth_methods = if client.terminal_auth {
        sign_in_methods()
    } else {
        Vec::new()
    };
    let (capabilities, session) = capabilities(unstable)?;
    serde_json::to_value(Answer {
        protocol_version: ProtocolVersion::V2,
        info: v2::Implementation::new("crucible-agent", env!("CARGO_PKG_VERSION"))
            .title("Crucible".to_string()),
        capabilities: WithSession {
            capabilities,
            session: SessionWithSteering {
                session,
                steering: unstable.steering.then(Steering::default),
            },
        },
        auth_methods,
    })
}

/// The terminal method v1 offers, as v2 writes it (`auth/login` takes it).
fn sign_in_methods() -> Vec<v2::AuthMethod> {
    use crate::acp::auth::{SETUP_DESCRIPTION, SETUP_METHOD, SETUP_NAME};
    vec![v2::AuthMethod::Terminal(
        v2::AuthMethodTerminal::new(SETUP_METHOD, SETUP_NAME)
            .description(SETUP_DESCRIPTION.to_string())
            .args(vec!["setup".to_string()]),
    )]
}

/// `v2::InitializeResponse` as written, with `capabilities.session.steering`
/// (the steering RFD's capability, not in the schema's
/// `SessionCapabilities` yet) beside the schema's own session fields.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    protocol_version: ProtocolVersion,
    info: v2::Implementation,
    capabilities: WithSession,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    auth_methods: Vec<v2::AuthMethod>,
}

#[derive(Serialize)]
struct WithSession {
    /// Its own `session` left unset: [`Self::session`] is written instead.
    #[serde(flatten)]
    capabilities: v2::AgentCapabilities,
    session: SessionWithSteering,
}

#[derive(Serialize)]
struct SessionWithSteering {
    #[serde(flatten)]
    session: v2::SessionCapabilities,
    #[serde(skip_serializing_if = "Option::is_none")]
    steering: Option<Steering>,
}

/// `session.steering`: a prompt sent while a turn runs joins it.
#[derive(Serialize, Default)]
struct Steering {}

fn capabilities(
    unstable: Unstable,
) -> serde_json::Result<(v2::AgentCapabilities, v2::SessionCapabilities)> {
    let mut session = v2::SessionCapabilities::new()
        .prompt(
            v2::PromptCapabilities::new()
                .image(v2::PromptImageCapabilities::new())
                .embedded_context(v2::PromptEmbeddedContextCapabilities::new()),
        )
        .mcp(mcp(unstable))
        .delete(v2::SessionDeleteCapabilities::new())
        .additional_directories(v2::SessionAdditionalDirectoriesCapabilities::new())
        .system_prompt(crate::acp::system_prompt::capabilities!(v2));
    if unstable.fork {
        session = session.fork(v2::SessionForkCapabilities::new());
    }
    if unstable.archive {
        session = session.archive(v2::SessionArchiveCapabilities::new());
    }
    if unstable.status {
        session = session.status(v2::SessionStatusCapabilities::new());
    }
    if unstable.options {
        session = session.options(v2::SessionOptionsCapabilities::new());
    }
    if unstable.set_title {
        session = session.title(v2::SessionTitleCapabilities::new());
    }
    let mut capabilities = v2::AgentCapabilities::new();
    if unstable.providers {
        capabilities = capabilities.providers(v2::ProvidersCapabilities::new());
    }
    if unstable.auth_status {
        capabilities = capabilities
            .auth(v2::AgentAuthCapabilities::new().status(v2::AuthStatusCapabilities::new()));
    }
    Ok((capabilities, session))
}

fn mcp(unstable: Unstable) -> v2::McpCapabilities {
    let mcp = v2::McpCapabilities::new()
        .stdio(v2::McpStdioCapabilities::new())
        .http(v2::McpHttpCapabilities::new());
    if unstable.mcp_over_acp {
        mcp.acp(v2::McpAcpCapabilities::new())
    } else {
        mcp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(params: Value, unstable: Unstable) -> (Version, Value) {
        let negotiated = negotiate(params, unstable);
        (negotiated.version, negotiated.answer.unwrap())
    }

    #[test]
    fn a_v2_client_gets_v2_and_anyone_else_v1() {
        let v2_params = json!({"protocolVersion": 2, "info": {"name": "zed", "version": "1"}});
        let (version, value) = answer(v2_params.clone(), Unstable::default());
        assert_eq!(version, Version::V2);
        assert_eq!(value["protocolVersion"], 2);
        assert_eq!(value["info"]["name"], "crucible-agent");
        let session = &value["capabilities"]["session"];
        for capability in ["prompt", "mcp", "delete", "additionalDirectories"] {
            assert!(session[capability].is_object(), "{capability}: {value}");
        }
        assert!(value.get("agentCapabilities").is_none(), "{value}");
        assert!(session.get("steering").is_none(), "steering is opt-in");
        let (version, value) = answer(
            json!({"protocolVersion": 7, "info": {"name": "x", "version": "1"}}),
            Unstable::default(),
        );
        assert_eq!(
            (version, value["protocolVersion"].clone()),
            (Version::V2, json!(2))
        );
        let (version, value) = answer(json!({"protocolVersion": 1}), Unstable::default());
        assert_eq!(version, Version::V1);
        assert_eq!(
            value,
            serde_json::to_value(router::initialize_response()).unwrap(),
            "v1 as before"
        );
        let off = Unstable {
            protocol_v2: ProtocolV2::Off,
            ..Unstable::default()
        };
        let (version, value) = answer(v2_params, off);
        assert_eq!(version, Version::V1);
        assert_eq!(value["protocolVersion"], 1);
        assert!(value["agentCapabilities"].is_object());
    }

    #[test]
    fn steering_and_sign_in_are_offered_as_asked() {
        let unstable = Unstable {
            steering: true,
            fork: true,
            ..Unstable::default()
        };
        let params = json!({
            "protocolVersion": 2,
            "info": {"name": "zed", "version": "1"},
            "capabilities": {"auth": {"terminal": {}}}
        });
        let (_, value) = answer(params, unstable);
        let session = &value["capabilities"]["session"];
        assert_eq!(session["steering"], json!({}));
        assert!(session["fork"].is_object());
        assert_eq!(value["authMethods"][0]["type"], "terminal");
        assert_eq!(value["authMethods"][0]["methodId"], "setup");
        // A request asking for more but written as v1 (no `info`) is
        // answered in v1, as before v2 existed.
        for asked in [2, 7] {
            let (version, value) = answer(json!({"protocolVersion": asked}), Unstable::default());
            assert_eq!(
                (version, value["protocolVersion"].clone()),
                (Version::V1, json!(1))
            );
        }
    }

    #[test]
    fn a_v2_client_offers_no_files_or_terminals() {
        let request: v2::InitializeRequest = serde_json::from_value(json!({
            "protocolVersion": 2,
            "info": {"name": "zed", "version": "1"},
            "capabilities": {"elicitation": {"form": {}}}
        }))
        .unwrap();
        let info = client_info(&request);
        assert!(!info.read_text_file && !info.write_text_file && !info.terminal);
        assert!(info.elicitation);
        assert!(info.plans, "v2 has plans by id only");
        assert_eq!(info.name.as_deref(), Some("zed"));
    }
}
