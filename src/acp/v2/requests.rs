//! The requests a v2 connection serves: v2 params read (errors name v2's
//! fields), turned into the router's own calls (the same internal requests
//! as v1), and answered with v2 types. What v2 removed (`session/load`,
//! `session/set_mode`, `session/set_model`, `authenticate`, `logout`) is
//! -32601 here, as is anything unstable the config did not turn on.

use agent_client_protocol_schema::{v1, v2};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::convert::{self, convert};
use super::initialize::negotiate;
use super::prompt;
use super::updates;
use crate::acp::router::{self, Extras, Reopen, Router};
use crate::client::SelectOption;
use crate::model::SessionId;
use crate::transport::{Responder, RpcError};

/// A v2 request's handler, its params still raw.
type Handler = Box<dyn FnOnce(&mut Router, &str, Value, Responder)>;

/// `initialize` on any connection: it settles the version spoken after it.
pub fn initialize(router: &mut Router, params: Value, responder: Responder) {
    let negotiated = negotiate(params, router.sessions.unstable());
    if let Some(client) = negotiated.client {
        router.client = Some(client);
        router.protocol.set(negotiated.version);
    }
    responder.respond(negotiated.answer);
}

pub fn request(router: &mut Router, method: &str, params: Value, responder: Responder) {
    tracing::debug!(%method, "request (ACP v2)");
    let unstable = router.sessions.unstable();
    let handler: Handler = match method {
        "auth/login" => v2_handler(login),
        "auth/logout" => return responder.respond_with(Ok(v2::LogoutAuthResponse::new())),
        "session/new" => v2_handler(new_session),
        "session/resume" => v2_handler(resume_session),
        "session/prompt" => v2_handler(prompt::prompt),
        "session/set_config_option" => v2_handler(set_config_option),
        // Their params and answers kept v1's shape: v1's handlers serve them.
        "session/list" => via_v1::<v2::ListSessionsRequest, _>(Router::list_sessions),
        "session/close" => via_v1::<v2::CloseSessionRequest, _>(Router::close_session),
        "session/delete" => via_v1::<v2::DeleteSessionRequest, _>(Router::delete_session),
        // Unstable: served only when `[acp] unstable` names them, as in v1.
        "session/fork" if unstable.fork => v2_handler(fork_session),
        "session/set_title" if unstable.set_title => {
            via_v1::<v2::SetSessionTitleRequest, _>(Router::set_title)
        }
        "session/status" if unstable.status => {
            via_v1::<v2::SessionStatusRequest, _>(Router::session_status)
        }
        "session/archive" if unstable.archive => {
            via_v1::<v2::ArchiveSessionRequest, _>(Router::archive_session)
        }
        "session/unarchive" if unstable.archive => {
            via_v1::<v2::UnarchiveSessionRequest, _>(Router::unarchive_session)
        }
        "providers/list" if unstable.providers => {
            via_v1::<v2::ListProvidersRequest, _>(Router::list_providers)
        }
        "providers/set" if unstable.providers => {
            via_v1::<v2::SetProviderRequest, _>(Router::set_provider)
        }
        "providers/disable" if unstable.providers => {
            via_v1::<v2::DisableProviderRequest, _>(Router::disable_provider)
        }
        "auth/status" if unstable.auth_status => {
            via_v1::<v2::AuthStatusRequest, _>(Router::auth_status)
        }
        _ => return responder.respond(Err(RpcError::method_not_found(method))),
    };
    handler(router, method, params, responder);
}

/// A handler taking the v2 request type.
fn v2_handler<Req: DeserializeOwned + 'static>(
    handler: fn(&mut Router, Req, Responder),
) -> Handler {
    Box::new(
        move |router, method, params, responder| match router::parse::<Req>(method, params) {
            Ok(request) => handler(router, request, responder),
            Err(err) => responder.respond(Err(err)),
        },
    )
}

/// v1's handler for a request whose v2 params it reads once checked as v2.
fn via_v1<V2: DeserializeOwned + Serialize + 'static, V1: DeserializeOwned + 'static>(
    handler: fn(&mut Router, V1, Responder),
) -> Handler {
    Box::new(move |router, method, params, responder| {
        let request = router::parse::<V2>(method, params)
            .and_then(|request| convert::params::<_, V1>(method, &request));
        match request {
            Ok(request) => handler(router, request, responder),
            Err(err) => responder.respond(Err(err)),
        }
    })
}

fn login(router: &mut Router, request: v2::LoginAuthRequest, responder: Responder) {
    let (providers, _) = router.sessions.providers();
    let request = v1::AuthenticateRequest::new(request.method_id.0.to_string());
    let answer = crate::acp::auth::authenticate(&request, &crate::acp::auth::state(&providers))
        .map(|_| v2::LoginAuthResponse::new());
    responder.respond_with(answer);
}

/// The parts of a session request v1 and v2 share, as v1 has them.
struct Place {
    additional_directories: Vec<std::path::PathBuf>,
    mcp_servers: Vec<v1::McpServer>,
    system_prompt: Option<v1::SystemPrompt>,
    config_options: Vec<v1::InitialSessionConfigOption>,
}

fn place(
    method: &str,
    additional_directories: &[v2::AbsolutePath],
    mcp_servers: &[v2::McpServer],
    system_prompt: Option<&v2::SystemPrompt>,
    config_options: &[v2::InitialSessionConfigOption],
) -> Result<Place, RpcError> {
    Ok(Place {
        additional_directories: (additional_directories.iter())
            .map(|path| path.0.clone())
            .collect(),
        mcp_servers: (mcp_servers.iter())
            .map(|server| mcp_server(method, server))
            .collect::<Result<_, _>>()?,
        system_prompt: system_prompt
            .map(|prompt| convert::params(method, prompt))
            .transpose()?,
        config_options: convert::params(method, &config_options)?,
    })
}

/// v2 tags a stdio server (`type: "stdio"`) and may leave empty lists
/// out; v1 does neither: the rest is alike.
fn mcp_server(method: &str, server: &v2::McpServer) -> Result<v1::McpServer, RpcError> {
    match server {
        v2::McpServer::Stdio(stdio) => Ok(v1::McpServer::Stdio(
            v1::McpServerStdio::new(stdio.name.clone(), stdio.command.0.clone())
                .args(stdio.args.clone())
                .env(convert::params(method, &stdio.env)?),
        )),
        v2::McpServer::Http(http) => Ok(v1::McpServer::Http(
            v1::McpServerHttp::new(http.name.clone(), http.url.clone())
                .headers(convert::params(method, &http.headers)?),
        )),
        other => convert::params(method, other),
    }
}

fn new_session(router: &mut Router, request: v2::NewSessionRequest, responder: Responder) {
    let place = place(
        "session/new",
        &request.additional_directories,
        &request.mcp_servers,
        request.system_prompt.as_ref(),
        &request.config_options,
    );
    let place = match place {
        Ok(place) => place,
        Err(err) => return responder.respond(Err(err)),
    };
    let request = v1::NewSessionRequest::new(request.cwd.0)
        .additional_directories(place.additional_directories)
        .mcp_servers(place.mcp_servers)
        .system_prompt(place.system_prompt)
        .config_options(place.config_options);
    router.open_new(request, new_answer, responder);
}

/// v2's `session/new` answer: no modes (the mode is a config option), no
/// `models`.
/// (v2 answers never carry the v1 extras.)
fn new_answer(id: &str, options: &[SelectOption], _: Extras) -> serde_json::Result<Value> {
    serde_json::to_value(
        v2::NewSessionResponse::new(id.to_string())
            .config_options(updates::config_options(options)),
    )
}

fn resume_session(router: &mut Router, request: v2::ResumeSessionRequest, responder: Responder) {
    let how = match &request.replay_from {
        None => Reopen::Resume,
        Some(v2::ReplayFrom::Start(_)) => Reopen::ResumeReplaying,
        Some(_) => {
            return responder.respond(Err(RpcError::invalid_params(
                "session/resume: field `replayFrom`: this agent replays from `start` only; send {\"type\":\"start\"} or leave it out",
            )));
        }
    };
    let place = place(
        "session/resume",
        &request.additional_directories,
        &request.mcp_servers,
        request.system_prompt.as_ref(),
        &request.config_options,
    );
    let place = match place {
        Ok(place) => place,
        Err(err) => return responder.respond(Err(err)),
    };
    let request = v1::ResumeSessionRequest::new(request.session_id.0.to_string(), request.cwd.0)
        .additional_directories(place.additional_directories)
        .mcp_servers(place.mcp_servers)
        .system_prompt(place.system_prompt)
        .config_options(place.config_options);
    router.resume_as(request, how, reopen_answer, responder);
}

fn fork_session(router: &mut Router, request: v2::ForkSessionRequest, responder: Responder) {
    let place = place(
        "session/fork",
        &request.additional_directories,
        &request.mcp_servers,
        request.system_prompt.as_ref(),
        &request.config_options,
    );
    let place = match place {
        Ok(place) => place,
        Err(err) => return responder.respond(Err(err)),
    };
    let cursor: Option<v1::CursorId> = match request.cursor_id.as_ref().map(convert) {
        Some(Ok(cursor)) => Some(cursor),
        Some(Err(err)) => {
            return responder.respond(Err(RpcError::invalid_params(format!(
                "session/fork: field `cursorId`: {err}"
            ))));
        }
        None => None,
    };
    let request = v1::ForkSessionRequest::new(request.session_id.0.to_string(), request.cwd.0)
        .cursor_id(cursor)
        .additional_directories(place.additional_directories)
        .mcp_servers(place.mcp_servers)
        .system_prompt(place.system_prompt)
        .config_options(place.config_options);
    router.fork_as(request, reopen_answer, responder);
}

/// v2's answer to a resume or a fork: the options, no modes, no `models`.
fn reopen_answer(
    how: Reopen,
    id: &str,
    options: &[SelectOption],
    _: Extras,
) -> serde_json::Result<Value> {
    let config = updates::config_options(options);
    match how {
        Reopen::Fork => serde_json::to_value(
            v2::ForkSessionResponse::new(id.to_string()).config_options(config),
        ),
        _ => serde_json::to_value(v2::ResumeSessionResponse::new().config_options(config)),
    }
}

fn set_config_option(
    router: &mut Router,
    request: v2::SetSessionConfigOptionRequest,
    responder: Responder,
) {
    let value = request.value.as_id().map(|value| value.0.to_string());
    let option = request.config_id.0.to_string();
    let id = SessionId::from(request.session_id.0.clone());
    router.set_option(&id, option, value, responder, |options| {
        v2::SetSessionConfigOptionResponse::new(updates::config_options(options))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v2_session_params_become_v1_requests() {
        let request: v2::NewSessionRequest = router::parse(
            "session/new",
            json!({
                "cwd": "/tmp",
                "mcpServers": [
                    {"type": "stdio", "name": "fs", "command": "/bin/fs", "args": [], "env": []},
                    {"type": "http", "name": "web", "url": "https://example.com/mcp", "headers": []}
                ]
            }),
        )
        .unwrap();
        let place = place(
            "session/new",
            &request.additional_directories,
            &request.mcp_servers,
            None,
            &[],
        )
        .unwrap();
        assert_eq!(place.mcp_servers.len(), 2);
        assert!(matches!(place.mcp_servers[0], v1::McpServer::Stdio(_)));
        assert!(matches!(place.mcp_servers[1], v1::McpServer::Http(_)));
        // `mcpServers` may be left out in v2.
        let request: v2::NewSessionRequest =
            router::parse("session/new", json!({"cwd": "/tmp"})).unwrap();
        assert!(request.mcp_servers.is_empty());
        let resume: v2::ResumeSessionRequest = router::parse(
            "session/resume",
            json!({"sessionId": "s", "cwd": "/tmp", "replayFrom": {"type": "start"}}),
        )
        .unwrap();
        assert!(matches!(resume.replay_from, Some(v2::ReplayFrom::Start(_))));
    }

    #[test]
    fn v2_answers_have_no_modes_and_the_mode_among_the_options() {
        let options = vec![SelectOption {
            id: "mode".into(),
            name: "Mode".into(),
            description: String::new(),
            category: crate::client::OptionCategory::Mode,
            current: "act".into(),
            values: vec![crate::client::OptionValue {
                id: "act".into(),
                name: "Act".into(),
                description: None,
            }],
        }];
        let value = new_answer("s1", &options, Extras::default()).unwrap();
        assert_eq!(value["sessionId"], "s1");
        assert!(value.get("modes").is_none() && value.get("models").is_none());
        assert_eq!(value["configOptions"][0]["configId"], "mode");
        assert_eq!(value["configOptions"][0]["category"], "mode");
        let value =
            reopen_answer(Reopen::ResumeReplaying, "s1", &options, Extras::default()).unwrap();
        assert!(value.get("sessionId").is_none());
        assert_eq!(value["configOptions"][0]["currentValue"], "act");
    }
}
