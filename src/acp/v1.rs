//! ACP v1 as a codec: its requests declared once ([`V1Request`]), read
//! into the neutral [`Request`], and their answers written back as v1.

use agent_client_protocol_schema::v1::{self as acp, AGENT_METHOD_NAMES as NAMES};
use serde_json::Value;

use super::methods::{self, read_place, requests};
use super::readers::v1 as read;
use super::request::{
    Decoded, Listed, Opened, Place, PromptReply, ProviderListing, Refusal, Reopen, Reply, Request,
    SessionId,
};
use super::router::{Extras, with_models};
use super::translate;
use crate::acp::auth;
use crate::config::Unstable;
use crate::session::TurnEnd;
use crate::store::ArchiveMark;
use crate::transport::{Responder, RpcError};

requests! {
    /// Every request ACP v1 serves here.
    pub enum V1Request {
        Authenticate(acp::AuthenticateRequest) = NAMES.authenticate;
        Logout(Value) = NAMES.logout;
        NewSession(acp::NewSessionRequest) = NAMES.session_new;
        Prompt(acp::PromptRequest) = NAMES.session_prompt;
        SetConfigOption(acp::SetSessionConfigOptionRequest) = NAMES.session_set_config_option;
        SetMode(acp::SetSessionModeRequest) = NAMES.session_set_mode;
        SetModel(SetModelRequest) = SET_MODEL;
        Close(acp::CloseSessionRequest) = NAMES.session_close;
        Load(acp::LoadSessionRequest) = NAMES.session_load;
        Resume(acp::ResumeSessionRequest) = NAMES.session_resume;
        List(acp::ListSessionsRequest) = NAMES.session_list;
        Delete(acp::DeleteSessionRequest) = NAMES.session_delete;
        SetTitle(acp::SetSessionTitleRequest) = NAMES.session_set_title, if set_title;
        Status(acp::SessionStatusRequest) = NAMES.session_status, if status;
        Fork(acp::ForkSessionRequest) = NAMES.session_fork, if fork;
        ListProviders(Value) = NAMES.providers_list, if providers;
        SetProvider(acp::SetProviderRequest) = NAMES.providers_set, if providers;
        DisableProvider(acp::DisableProviderRequest) = NAMES.providers_disable, if providers;
        AuthStatus(Value) = NAMES.auth_status, if auth_status;
        Archive(acp::ArchiveSessionRequest) = NAMES.session_archive, if archive;
        Unarchive(acp::UnarchiveSessionRequest) = NAMES.session_unarchive, if archive;
        Options(acp::SessionOptionsRequest) = NAMES.session_options, if options;
    }
}

/// The old session-model extension's method (Zed's, before config options).
const SET_MODEL: &str = "session/set_model";

/// `session/set_model` (the old session-model extension).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModelRequest {
    session_id: String,
    model_id: String,
}

/// What the answers need besides the request: the client's extras.
pub struct Context {
    pub unstable: Unstable,
    pub extras: Extras,
}

/// A v1 request read into the neutral one, or the error its params earn.
pub fn decode(
    method: &str,
    params: Value,
    responder: Responder,
    context: &Context,
) -> Option<Request> {
    let read = V1Request::read(method, params, &context.unstable);
    methods::decode(read, responder, |request, responder| {
        neutral(request, responder, context)
    })
}

fn neutral(request: V1Request, responder: Responder, context: &Context) -> Decoded {
    let extras = context.extras;
    let id = |session: acp::SessionId| SessionId::from(session.0);
    Ok(match request {
        V1Request::Authenticate(request) => Request::SignIn {
            method: request.method_id.0.to_string(),
            reply: Reply::new(responder, |()| acp::AuthenticateResponse::new()),
        },
        V1Request::Logout(_) => {
            Request::SignOut(Reply::new(responder, |()| acp::LogoutResponse::new()))
        }
        V1Request::AuthStatus(_) => Request::AuthStatus(Reply::new(responder, auth_status)),
        V1Request::NewSession(request) => new_session(request, responder, extras)?,
        V1Request::Load(request) => reopen(
            Reopen::Load,
            id(request.session_id),
            None,
            read_place!(NAMES.session_load, request),
            responder,
            extras,
        )?,
        V1Request::Resume(request) => reopen(
            Reopen::Resume,
            id(request.session_id),
            None,
            read_place!(NAMES.session_resume, request),
            responder,
            extras,
        )?,
        V1Request::Fork(request) => reopen(
            Reopen::Fork,
            id(request.session_id),
            request.cursor_id.map(|cursor| cursor.0.to_string()),
            read_place!(NAMES.session_fork, request),
            responder,
            extras,
        )?,
        V1Request::Prompt(request) => prompt(request, responder, extras)?,
        V1Request::SetConfigOption(request) => Request::SetOption {
            session: id(request.session_id),
            option: request.config_id.0.to_string(),
            value: request.value.as_value_id().map(|value| value.0.to_string()),
            reply: Reply::new(responder, |options: Vec<_>| {
                acp::SetSessionConfigOptionResponse::new(translate::config_options(&options))
            }),
        },
        V1Request::SetMode(request) => Request::SetMode {
            session: id(request.session_id),
            mode: request.mode_id.0.to_string(),
            reply: Reply::new(responder, |()| acp::SetSessionModeResponse::new()),
        },
        V1Request::SetModel(request) => Request::SetModel {
            session: request.session_id.into(),
            model: request.model_id,
            reply: Reply::new(responder, |()| serde_json::Map::new()),
        },
        V1Request::SetTitle(request) => set_title(request, responder),
        V1Request::Options(request) => Request::Options {
            session: request.session_id.map(id),
            cwd: request.cwd,
            additional_directories: request.additional_directories,
            reply: Reply::new(responder, |options: Vec<_>| {
                acp::SessionOptionsResponse::new()
                    .modes(translate::mode_state(&options))
                    .config_options(translate::config_options(&options))
            }),
        },
        V1Request::Close(request) => close(request, responder),
        V1Request::Delete(request) => delete(request, responder),
        V1Request::List(request) => list(request, responder),
        V1Request::Status(request) => status(request, responder),
        V1Request::Archive(request) => {
            archive(request.session_id, ArchiveMark::Archived, responder)
        }
        V1Request::Unarchive(request) => {
            archive(request.session_id, ArchiveMark::Active, responder)
        }
        V1Request::ListProviders(_) => list_providers(responder),
        V1Request::SetProvider(request) => set_provider(request, responder),
        V1Request::DisableProvider(request) => disable_provider(request, responder),
    })
}

/// A session request's shared params, read.
fn place(
    method: &str,
    cwd: std::path::PathBuf,
    additional_directories: Vec<std::path::PathBuf>,
    mcp_servers: &[acp::McpServer],
    system_prompt: Option<acp::SystemPrompt>,
    config_options: Vec<acp::InitialSessionConfigOption>,
) -> Result<Place, RpcError> {
    Ok(Place {
        cwd,
        additional_directories,
        mcp_servers: mcp_servers.iter().map(super::mcp_spec::read_v1).collect(),
        client_prompt: read::system_prompt(method, system_prompt)?,
        choices: read::choices(config_options),
    })
}

/// `session/new`, answered with modes beside the options (and the old
/// session-model extension's `models` for clients that take it).
fn new_session(request: acp::NewSessionRequest, responder: Responder, extras: Extras) -> Decoded {
    let place = match read_place!(NAMES.session_new, request) {
        Ok(place) => place,
        Err(err) => return Err(Refusal::new(responder, err)),
    };
    Ok(Request::NewSession {
        place,
        reply: Reply::encoded(responder, move |opened: Opened| {
            let response = acp::NewSessionResponse::new(opened.id.to_string())
                .modes(translate::mode_state(&opened.options))
                .config_options(translate::config_options(&opened.options));
            with_models(response, &opened.options, extras)
        }),
    })
}

/// `session/prompt`, answered when the turn ends (with its usage, for
/// clients that take it).
fn prompt(request: acp::PromptRequest, responder: Responder, extras: Extras) -> Decoded {
    let content = match read::prompt_parts(request.prompt) {
        Ok(content) => content,
        Err(err) => {
            return Err(Refusal::new(
                responder,
                RpcError::invalid_params(err.to_string()),
            ));
        }
    };
    Ok(Request::Prompt {
        session: SessionId::from(request.session_id.0),
        content,
        reply: PromptReply::AtEnd(Reply::new(responder, move |end: TurnEnd| {
            acp::PromptResponse::new(translate::stop_reason(end.stop)).usage(
                end.usage
                    .filter(|_| extras.usage)
                    .map(translate::turn_usage),
            )
        })),
    })
}

/// A load, resume or fork, answered in v1.
fn reopen(
    how: Reopen,
    session: SessionId,
    at: Option<String>,
    place: Result<Place, RpcError>,
    responder: Responder,
    extras: Extras,
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
        reply: Reply::encoded(responder, move |opened: Opened| {
            reopened(how, &opened, extras)
        }),
    })
}

/// The answer to a load, a resume or a fork: where the session's settings stand.
fn reopened(how: Reopen, opened: &Opened, extras: Extras) -> serde_json::Result<Value> {
    let options = &opened.options;
    let (modes, config) = (
        translate::mode_state(options),
        translate::config_options(options),
    );
    match how {
        Reopen::Load => with_models(
            acp::LoadSessionResponse::new()
                .modes(modes)
                .config_options(config),
            options,
            extras,
        ),
        Reopen::Resume | Reopen::ResumeReplaying => with_models(
            acp::ResumeSessionResponse::new()
                .modes(modes)
                .config_options(config),
            options,
            extras,
        ),
        Reopen::Fork => with_models(
            acp::ForkSessionResponse::new(opened.id.to_string())
                .modes(modes)
                .config_options(config),
            options,
            extras,
        ),
    }
}

/// The requests whose params and answers both versions write alike (and
/// the provider protocols), written once and expanded for each version's
/// schema module.
macro_rules! shared_answers {
    ($version:ident, directory: $directory:ty, path: $path:expr) => {
        fn session(id: $version::SessionId) -> $crate::acp::request::SessionId {
            $crate::acp::request::SessionId::from(id.0)
        }

        fn close(request: $version::CloseSessionRequest, responder: Responder) -> Request {
            Request::Close {
                session: session(request.session_id),
                reply: Reply::new(responder, |()| $version::CloseSessionResponse::new()),
            }
        }

        fn delete(request: $version::DeleteSessionRequest, responder: Responder) -> Request {
            Request::Delete {
                session: session(request.session_id),
                reply: Reply::new(responder, |()| $version::DeleteSessionResponse::new()),
            }
        }

        fn set_title(request: $version::SetSessionTitleRequest, responder: Responder) -> Request {
            Request::SetTitle {
                session: session(request.session_id),
                title: request.title,
                reply: Reply::new(responder, $version::SetSessionTitleResponse::new),
            }
        }

        fn list(request: $version::ListSessionsRequest, responder: Responder) -> Request {
            use $crate::acp::request::{ArchiveFilter, ListQuery};
            Request::List {
                query: ListQuery {
                    cwd: request.cwd.map($path),
                    cursor: request.cursor.map(|cursor| cursor.to_string()),
                    archived: match request.archived.unwrap_or_default() {
                        $version::SessionArchiveFilter::Exclude => Some(ArchiveFilter::Exclude),
                        $version::SessionArchiveFilter::Include => Some(ArchiveFilter::Include),
                        $version::SessionArchiveFilter::Only => Some(ArchiveFilter::Only),
                        _ => None,
                    },
                },
                reply: Reply::new(responder, session_list),
            }
        }

        fn status(request: $version::SessionStatusRequest, responder: Responder) -> Request {
            use $crate::acp::request::Whereabouts;
            Request::Status {
                session: session(request.session_id),
                reply: Reply::new(responder, |status| {
                    $version::SessionStatusResponse::new(match status {
                        Whereabouts::Open => $version::SessionStatus::Open,
                        Whereabouts::Saved => $version::SessionStatus::Saved,
                    })
                }),
            }
        }

        /// `session/archive` and `session/unarchive`, whose answers are both `{}`.
        fn archive(
            id: $version::SessionId,
            mark: $crate::store::ArchiveMark,
            responder: Responder,
        ) -> Request {
            Request::Archive {
                session: session(id),
                mark,
                reply: Reply::new(responder, |()| serde_json::Map::new()),
            }
        }

        fn list_providers(responder: Responder) -> Request {
            Request::ListProviders(Reply::new(responder, |listed| {
                $version::ListProvidersResponse::new(provider_infos(listed))
            }))
        }

        fn set_provider(request: $version::SetProviderRequest, responder: Responder) -> Request {
            Request::SetProvider {
                change: $crate::acp::request::ProviderChange {
                    provider: request.provider_id.0.to_string(),
                    protocol: provider_kind(&request.api_type),
                    base_url: request.base_url,
                    headers: request.headers.into_iter().collect(),
                },
                reply: Reply::new(responder, |()| $version::SetProviderResponse::new()),
            }
        }

        fn disable_provider(
            request: $version::DisableProviderRequest,
            responder: Responder,
        ) -> Request {
            Request::DisableProvider {
                provider: request.provider_id.0.to_string(),
                reply: Reply::new(responder, |()| $version::DisableProviderResponse::new()),
            }
        }

        /// `session/list`'s answer.
        pub fn session_list(listed: Listed) -> $version::ListSessionsResponse {
            let archive = listed.archive_marks;
            let infos = listed
                .page
                .sessions
                .into_iter()
                .map(|s| {
                    let meta = $crate::acp::translate::list_meta(&s);
                    $version::SessionInfo::new(s.id.to_string(), s.cwd)
                        .additional_directories(
                            s.additional_directories
                                .into_iter()
                                .map(<$directory>::from)
                                .collect::<Vec<_>>(),
                        )
                        .title(s.title)
                        .updated_at(s.updated_at)
                        .archived(archive.then_some(s.archived))
                        .meta(meta)
                })
                .collect();
            $version::ListSessionsResponse::new(infos)
                .next_cursor(listed.page.next_cursor.map(Into::into))
        }

        /// `providers/list`'s entries: the default one cannot be disabled.
        pub fn provider_infos(listed: Vec<ProviderListing>) -> Vec<$version::ProviderInfo> {
            listed
                .into_iter()
                .map(|provider| {
                    let current = provider.current.map(|(kind, url)| {
                        $version::ProviderCurrentConfig::new(protocol_of(kind), url)
                    });
                    let supported = vec![
                        $version::LlmProtocol::OpenAi,
                        $version::LlmProtocol::Anthropic,
                        $version::LlmProtocol::Other("_ollama".into()),
                    ];
                    $version::ProviderInfo::new(
                        provider.name,
                        supported,
                        provider.required,
                        current,
                    )
                })
                .collect()
        }

        fn protocol_of(kind: ProviderKind) -> $version::LlmProtocol {
            match kind {
                ProviderKind::OpenAi => $version::LlmProtocol::OpenAi,
                ProviderKind::Anthropic => $version::LlmProtocol::Anthropic,
                ProviderKind::Ollama => $version::LlmProtocol::Other("_ollama".into()),
            }
        }

        /// The provider kind a `providers/set` asks for, or the protocol's
        /// name when this agent does not speak it.
        pub fn provider_kind(
            protocol: &$version::LlmProtocol,
        ) -> $crate::acp::request::AskedProtocol {
            use $crate::acp::request::AskedProtocol;
            match protocol {
                $version::LlmProtocol::OpenAi => AskedProtocol::Spoken(ProviderKind::OpenAi),
                $version::LlmProtocol::Anthropic => AskedProtocol::Spoken(ProviderKind::Anthropic),
                $version::LlmProtocol::Other(name) if name == "_ollama" || name == "ollama" => {
                    AskedProtocol::Spoken(ProviderKind::Ollama)
                }
                other => AskedProtocol::Unknown(serde_json::to_string(other).unwrap_or_default()),
            }
        }
    };
}

pub(crate) use shared_answers;

use crate::providers::settings::ProviderKind;
use agent_client_protocol_schema::v1;
shared_answers!(v1, directory: std::path::PathBuf, path: std::convert::identity);

/// `auth/status`'s answer.
fn auth_status(status: auth::Status) -> acp::AuthStatusResponse {
    let state = match status.state {
        auth::State::NotRequired => acp::AuthState::NotRequired,
        auth::State::Authenticated => acp::AuthState::Authenticated,
        auth::State::Unauthenticated => acp::AuthState::Unauthenticated,
    };
    let accounts = status
        .accounts
        .into_iter()
        .map(|account| acp::AuthAccount::new(account.name).description(account.description))
        .collect();
    acp::AuthStatusResponse::new(state).accounts(accounts)
}
