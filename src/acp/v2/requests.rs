//! ACP v2 as a codec: its requests declared once ([`V2Request`]), read
//! into the neutral [`Request`] (errors name v2's fields), and answered
//! with v2 types. What v2 removed (`session/load`, `session/set_mode`,
//! `session/set_model`, `authenticate`, `logout`, `session/options`) is
//! not in the table, so it is -32601 here, as is anything unstable the
//! config did not turn on.

use agent_client_protocol_schema::v2::{self, AGENT_METHOD_NAMES as NAMES};
use serde_json::Value;

use super::updates;
use crate::acp::auth;
use crate::acp::mcp_spec;
use crate::acp::methods::{self, read_place, requests};
use crate::acp::readers::v2 as read;
use crate::acp::request::{
    Decoded, Listed, Opened, Place, PromptReply, ProviderListing, Refusal, Reopen, Reply, Request,
    SessionId,
};
use crate::config::Unstable;
use crate::providers::settings::ProviderKind;
use crate::session::Inserted;
use crate::store::ArchiveMark;
use crate::transport::{Responder, RpcError};

requests! {
    /// Every request ACP v2 serves here.
    pub enum V2Request {
        Login(v2::LoginAuthRequest) = NAMES.auth_login;
        Logout(Value) = NAMES.auth_logout;
        NewSession(v2::NewSessionRequest) = NAMES.session_new;
        Resume(v2::ResumeSessionRequest) = NAMES.session_resume;
        Prompt(v2::PromptRequest) = NAMES.session_prompt;
        SetConfigOption(v2::SetSessionConfigOptionRequest) = NAMES.session_set_config_option;
        List(v2::ListSessionsRequest) = NAMES.session_list;
        Close(v2::CloseSessionRequest) = NAMES.session_close;
        Delete(v2::DeleteSessionRequest) = NAMES.session_delete;
        Fork(v2::ForkSessionRequest) = NAMES.session_fork, if fork;
        SetTitle(v2::SetSessionTitleRequest) = NAMES.session_set_title, if set_title;
        Status(v2::SessionStatusRequest) = NAMES.session_status, if status;
        Archive(v2::ArchiveSessionRequest) = NAMES.session_archive, if archive;
        Unarchive(v2::UnarchiveSessionRequest) = NAMES.session_unarchive, if archive;
        ListProviders(Value) = NAMES.providers_list, if providers;
        SetProvider(v2::SetProviderRequest) = NAMES.providers_set, if providers;
        DisableProvider(v2::DisableProviderRequest) = NAMES.providers_disable, if providers;
        AuthStatus(Value) = NAMES.auth_status, if auth_status;
    }
}

/// A v2 request read into the neutral one; `None` when it was answered
/// with the error its params earn.
pub fn decode(
    method: &str,
    params: Value,
    responder: Responder,
    unstable: &Unstable,
) -> Option<Request> {
    tracing::debug!(%method, "request (ACP v2)");
    methods::decode(
        V2Request::read(method, params, unstable),
        responder,
        neutral,
    )
}

fn neutral(request: V2Request, responder: Responder) -> Decoded {
    let id = |session: v2::SessionId| SessionId::from(session.0);
    Ok(match request {
        V2Request::Login(request) => Request::SignIn {
            method: request.method_id.0.to_string(),
            reply: Reply::new(responder, |()| v2::LoginAuthResponse::new()),
        },
        V2Request::Logout(_) => {
            Request::SignOut(Reply::new(responder, |()| v2::LogoutAuthResponse::new()))
        }
        V2Request::AuthStatus(_) => Request::AuthStatus(Reply::new(responder, auth_status)),
        V2Request::NewSession(request) => {
            let place = match read_place!(NAMES.session_new, request) {
                Ok(place) => place,
                Err(err) => return Err(Refusal::new(responder, err)),
            };
            Request::NewSession {
                place,
                reply: Reply::new(responder, |opened: Opened| {
                    v2::NewSessionResponse::new(opened.id.to_string())
                        .config_options(updates::config_options(&opened.options))
                }),
            }
        }
        V2Request::Resume(request) => {
            let how = match &request.replay_from {
                None => Reopen::Resume,
                Some(v2::ReplayFrom::Start(_)) => Reopen::ResumeReplaying,
                Some(_) => {
                    return Err(Refusal::new(
                        responder,
                        RpcError::invalid_params(format!(
                            "{}: field `replayFrom`: this agent replays from `start` only; send {{\"type\":\"start\"}} or leave it out",
                            NAMES.session_resume
                        )),
                    ));
                }
            };
            reopen(
                how,
                id(request.session_id),
                None,
                read_place!(NAMES.session_resume, request),
                responder,
            )?
        }
        V2Request::Fork(request) => reopen(
            Reopen::Fork,
            id(request.session_id),
            request.cursor_id.map(|cursor| cursor.0.to_string()),
            read_place!(NAMES.session_fork, request),
            responder,
        )?,
        V2Request::Prompt(request) => {
            let content = match read::prompt_parts(request.prompt) {
                Ok(content) => content,
                Err(err) => {
                    return Err(Refusal::new(
                        responder,
                        RpcError::invalid_params(err.to_string()),
                    ));
                }
            };
            Request::Prompt {
                session: id(request.session_id),
                content,
                reply: PromptReply::AtInsertion {
                    reply: Reply::new(responder, |inserted: Inserted| {
                        v2::PromptResponse::new(inserted.message_id)
                    }),
                    idempotency_key: request.idempotency_key.map(|key| key.as_str().to_string()),
                },
            }
        }
        V2Request::SetConfigOption(request) => Request::SetOption {
            session: id(request.session_id),
            option: request.config_id.0.to_string(),
            value: request.value.as_id().map(|value| value.0.to_string()),
            reply: Reply::new(responder, |options: Vec<_>| {
                v2::SetSessionConfigOptionResponse::new(updates::config_options(&options))
            }),
        },
        V2Request::SetTitle(request) => set_title(request, responder),
        V2Request::Close(request) => close(request, responder),
        V2Request::Delete(request) => delete(request, responder),
        V2Request::List(request) => list(request, responder),
        V2Request::Status(request) => status(request, responder),
        V2Request::Archive(request) => {
            archive(request.session_id, ArchiveMark::Archived, responder)
        }
        V2Request::Unarchive(request) => {
            archive(request.session_id, ArchiveMark::Active, responder)
        }
        V2Request::ListProviders(_) => list_providers(responder),
        V2Request::SetProvider(request) => set_provider(request, responder),
        V2Request::DisableProvider(request) => disable_provider(request, responder),
    })
}

/// A session request's shared params, read.
fn place(
    method: &str,
    cwd: v2::AbsolutePath,
    additional_directories: Vec<v2::AbsolutePath>,
    mcp_servers: &[v2::McpServer],
    system_prompt: Option<v2::SystemPrompt>,
    config_options: Vec<v2::InitialSessionConfigOption>,
) -> Result<Place, RpcError> {
    Ok(Place {
        cwd: cwd.0,
        additional_directories: additional_directories
            .into_iter()
            .map(|path| path.0)
            .collect(),
        mcp_servers: mcp_servers.iter().map(mcp_spec::read_v2).collect(),
        client_prompt: read::system_prompt(method, system_prompt)?,
        choices: read::choices(config_options),
    })
}

/// A resume or a fork, answered in v2: the options, no modes, no `models`.
fn reopen(
    how: Reopen,
    session: SessionId,
    at: Option<String>,
    place: Result<Place, RpcError>,
    responder: Responder,
) -> Decoded {
    let place = match place {
        Ok(place) => place,
        Err(err) => return Err(Refusal::new(responder, err)),
    };
    Ok(Request::Reopen {
        how,
        session,
        at,
        place,
        reply: Reply::encoded(responder, move |opened: Opened| reopened(how, &opened)),
    })
}

/// v2's answer to a resume or a fork: the options, no modes, no `models`.
fn reopened(how: Reopen, opened: &Opened) -> serde_json::Result<Value> {
    let config = updates::config_options(&opened.options);
    match how {
        Reopen::Fork => serde_json::to_value(
            v2::ForkSessionResponse::new(opened.id.to_string()).config_options(config),
        ),
        _ => serde_json::to_value(v2::ResumeSessionResponse::new().config_options(config)),
    }
}

crate::acp::v1::shared_answers!(
    v2,
    directory: v2::AbsolutePath,
    path: |path: v2::AbsolutePath| path.0
);

/// `auth/status`'s answer: each account labelled with its provider's name.
fn auth_status(status: auth::Status) -> v2::AuthStatusResponse {
    let state = match status.state {
        auth::State::NotRequired => v2::AuthState::NotRequired,
        auth::State::Authenticated => v2::AuthState::Authenticated,
        auth::State::Unauthenticated => v2::AuthState::Unauthenticated,
    };
    let accounts = status
        .accounts
        .into_iter()
        .map(|account| {
            v2::AuthAccount::new(account.name.clone())
                .name(account.name)
                .description(account.description)
        })
        .collect();
    v2::AuthStatusResponse::new(state).accounts(accounts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::methods::parse;
    use crate::acp::request::McpWanted;
    use crate::client::{OptionCategory, OptionValue, SelectOption};
    use serde_json::json;

    #[test]
    fn v2_session_params_become_the_neutral_place() {
        let request: v2::NewSessionRequest = parse(
            "session/new",
            json!({
                "cwd": "/tmp",
                "mcpServers": [
                    {"type": "stdio", "name": "fs", "command": "/bin/fs", "args": [], "env": [{"name": "A", "value": "1"}]},
                    {"type": "http", "name": "web", "url": "https://example.com/mcp", "headers": []}
                ]
            }),
        )
        .unwrap();
        let place = place(
            NAMES.session_new,
            request.cwd,
            request.additional_directories,
            &request.mcp_servers,
            None,
            Vec::new(),
        )
        .unwrap();
        assert_eq!(place.cwd, std::path::PathBuf::from("/tmp"));
        assert_eq!(place.mcp_servers.len(), 2);
        assert!(matches!(&place.mcp_servers[0], McpWanted::Spec(spec) if spec.name == "fs"));
        assert!(matches!(&place.mcp_servers[1], McpWanted::Spec(spec) if spec.name == "web"));
        // `mcpServers` may be left out in v2.
        let request: v2::NewSessionRequest = parse("session/new", json!({"cwd": "/tmp"})).unwrap();
        assert!(request.mcp_servers.is_empty());
    }

    #[test]
    fn v2_answers_have_no_modes_and_the_mode_among_the_options() {
        let options = vec![SelectOption {
            id: "mode".into(),
            name: "Mode".into(),
            description: String::new(),
            category: OptionCategory::Mode,
            current: "act".into(),
            values: vec![OptionValue {
                id: "act".into(),
                name: "Act".into(),
                description: None,
            }],
        }];
        let opened = Opened {
            id: "s1".into(),
            options,
        };
        let value = reopened(Reopen::Fork, &opened).unwrap();
        assert_eq!(value["sessionId"], "s1");
        assert!(value.get("modes").is_none() && value.get("models").is_none());
        assert_eq!(value["configOptions"][0]["configId"], "mode");
        assert_eq!(value["configOptions"][0]["category"], "mode");
        let value = reopened(Reopen::ResumeReplaying, &opened).unwrap();
        assert!(value.get("sessionId").is_none());
        assert_eq!(value["configOptions"][0]["currentValue"], "act");
    }
}
