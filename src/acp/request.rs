//! The neutral inside of the adapter: what a client asks, in the agent's
//! own terms (a prompt is `Vec<Part>`, a session is its id, a directory a
//! path), whatever ACP version it came in. The v1 and v2 codecs
//! ([`super::v1`], [`super::v2::requests`]) read their wire into a
//! [`Request`]; the router serves each one with one handler that knows
//! nothing of versions, and answers through the request's [`Reply`], which
//! the codec made to write its own version's answer.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::client::SelectOption;
use crate::mcp::McpServerSpec;
use crate::model::{ClientPrompt, Part};
use crate::session::{Inserted, TurnEnd};
use crate::store::ArchiveMark;
use crate::transport::{Responder, RpcError};

pub use crate::model::SessionId;

/// Turns a handler's answer into the wire's: the codec's part of a reply.
type Encode<T> = Box<dyn FnOnce(T) -> serde_json::Result<Value> + Send>;

/// The one answer a request is owed, written in the version it came in.
pub struct Reply<T> {
    responder: Responder,
    encode: Encode<T>,
}

impl<T> Reply<T> {
    /// A reply whose answer `encode` writes as the wire type `W`.
    pub fn new<W: Serialize>(
        responder: Responder,
        encode: impl FnOnce(T) -> W + Send + 'static,
    ) -> Self {
        Self {
            responder,
            encode: Box::new(move |answer| serde_json::to_value(encode(answer))),
        }
    }

    /// A reply whose encoding can itself fail (an answer with extras).
    pub fn encoded(
        responder: Responder,
        encode: impl FnOnce(T) -> serde_json::Result<Value> + Send + 'static,
    ) -> Self {
        Self {
            responder,
            encode: Box::new(encode),
        }
    }

    pub fn send(self, answer: Result<T, RpcError>) {
        let encode = self.encode;
        let answer = answer.and_then(|answer| {
            encode(answer)
                .map_err(|err| RpcError::internal(format!("could not encode the result: {err}")))
        });
        self.responder.respond(answer);
    }

    pub fn fail(self, err: RpcError) {
        self.responder.respond(Err(err));
    }

    /// Fired when the client withdraws the request (`$/cancel_request`).
    pub fn cancellation(&self) -> &CancellationToken {
        self.responder.cancellation()
    }
}

/// A request its codec could not read: the error it earns, and the
/// answer it is owed.
pub struct Refusal {
    responder: Responder,
    error: RpcError,
}

impl Refusal {
    pub fn new(responder: Responder, error: RpcError) -> Box<Self> {
        Box::new(Self { responder, error })
    }

    pub fn answer(self) {
        self.responder.respond(Err(self.error));
    }
}

/// What a codec makes of a request.
pub type Decoded = Result<Request, Box<Refusal>>;

/// Where a session works and what the client brings to it: the params
/// session/new, load, resume and fork share.
pub struct Place {
    pub cwd: PathBuf,
    pub additional_directories: Vec<PathBuf>,
    pub mcp_servers: Vec<McpWanted>,
    pub client_prompt: Option<ClientPrompt>,
    /// The initial `configOptions` as given (checked by the router).
    pub choices: Vec<Choice>,
}

/// One `mcpServers` entry, read; an `acp` one needs the connection's relay.
pub enum McpWanted {
    Spec(Box<McpServerSpec>),
    /// Served by the client over ACP (unstable `mcp_over_acp`).
    Acp {
        name: String,
        server_id: String,
    },
    /// A transport this agent does not speak.
    Unsupported {
        name: String,
    },
}

/// An initial config option: a value id, or a value of another kind.
pub struct Choice {
    pub option: String,
    pub value: Option<String>,
}

/// How a stored session comes back: `session/load` replays its history to
/// the client first, `session/resume` does not; `session/fork` (unstable)
/// resumes a copy under a new id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reopen {
    Load,
    Resume,
    /// ACP v2's `session/resume` with `replayFrom: {type: "start"}`: a
    /// load by another name.
    ResumeReplaying,
    Fork,
}

/// A session opened (new, loaded, resumed, forked): its id and options.
pub struct Opened {
    pub id: SessionId,
    pub options: Vec<SelectOption>,
}

/// How a prompt is answered.
pub enum PromptReply {
    /// v1: when the turn ends, with its stop reason.
    AtEnd(Reply<TurnEnd>),
    /// v2: as the message goes in, with its id; a busy session takes it
    /// as steering when the config allows.
    AtInsertion {
        reply: Reply<Inserted>,
        idempotency_key: Option<String>,
    },
}

/// Which sessions `session/list` shows by their archive mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArchiveFilter {
    #[default]
    Exclude,
    Include,
    Only,
}

/// One page of `session/list`.
pub struct ListQuery {
    pub cwd: Option<PathBuf>,
    pub cursor: Option<String>,
    /// `None`: a filter this agent does not know (refused).
    pub archived: Option<ArchiveFilter>,
}

/// A page of `session/list`.
pub struct Listed {
    pub page: crate::store::ListPage,
    /// Whether each session says if it is archived (`[acp] unstable`
    /// names `archive`).
    pub archive_marks: bool,
}

/// Where a session stands, for `session/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whereabouts {
    Open,
    Saved,
}

/// A provider the config names, for `providers/list`.
pub struct ProviderListing {
    pub name: String,
    /// Its protocol and URL, unless disabled.
    pub current: Option<(crate::providers::settings::ProviderKind, String)>,
    /// The default provider cannot be disabled.
    pub required: bool,
}

/// The protocol a `providers/set` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskedProtocol {
    Spoken(crate::providers::settings::ProviderKind),
    /// One this agent does not speak, by its wire name.
    Unknown(String),
}

/// A `providers/set`.
pub struct ProviderChange {
    pub provider: String,
    pub protocol: AskedProtocol,
    pub base_url: String,
    pub headers: Vec<(String, String)>,
}

/// Every request a client may make, in the agent's terms, each with the
/// reply it is owed.
pub enum Request {
    SignIn {
        method: String,
        reply: Reply<()>,
    },
    SignOut(Reply<()>),
    AuthStatus(Reply<crate::acp::auth::Status>),
    NewSession {
        place: Place,
        reply: Reply<Opened>,
    },
    Reopen {
        how: Reopen,
        session: SessionId,
        /// A fork's cursor.
        at: Option<String>,
        place: Place,
        reply: Reply<Opened>,
    },
    Prompt {
        session: SessionId,
        content: Vec<Part>,
        reply: PromptReply,
    },
    SetOption {
        session: SessionId,
        option: String,
        value: Option<String>,
        reply: Reply<Vec<SelectOption>>,
    },
    SetMode {
        session: SessionId,
        mode: String,
        reply: Reply<()>,
    },
    SetModel {
        session: SessionId,
        model: String,
        reply: Reply<()>,
    },
    SetTitle {
        session: SessionId,
        title: String,
        reply: Reply<String>,
    },
    Options {
        session: Option<SessionId>,
        cwd: PathBuf,
        additional_directories: Vec<PathBuf>,
        reply: Reply<Vec<SelectOption>>,
    },
    Close {
        session: SessionId,
        reply: Reply<()>,
    },
    Delete {
        session: SessionId,
        reply: Reply<()>,
    },
    List {
        query: ListQuery,
        reply: Reply<Listed>,
    },
    Status {
        session: SessionId,
        reply: Reply<Whereabouts>,
    },
    Archive {
        session: SessionId,
        mark: ArchiveMark,
        reply: Reply<()>,
    },
    ListProviders(Reply<Vec<ProviderListing>>),
    SetProvider {
        change: ProviderChange,
        reply: Reply<()>,
    },
    DisableProvider {
        provider: String,
        reply: Reply<()>,
    },
}
