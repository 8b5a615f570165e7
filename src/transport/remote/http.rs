//! The `/acp` endpoint, as the Streamable HTTP & WebSocket transport RFD
//! routes it: `POST` a message (`initialize` opens a connection and is
//! answered in the response, 200; everything else 202, its answer on a
//! stream), `GET` a connection's or a session's SSE stream or upgrade to a
//! WebSocket, `DELETE` the connection. Every request carries the token.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde::Deserialize;
use tokio::sync::oneshot;

use super::access::{Access, TokenDigest};
use super::registry::{Carrier, ConnectionId, Registry, Remote};
use super::route;
use super::streams::{Reader, Refused, Route};
use crate::transport::jsonrpc::Incoming;
use crate::transport::stdio::MAX_LINE_BYTES;

pub const CONNECTION_HEADER: &str = "acp-connection-id";
pub const SESSION_HEADER: &str = "acp-session-id";
/// SSE comments this often keep proxies from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// A chunk of SSE events grows no larger than this.
const BURST_BYTES: usize = 256 * 1024;
/// How long `initialize` may take before its POST gives up.
const INITIALIZE_WAIT: Duration = Duration::from_secs(30);

/// What the endpoint's handlers share.
pub struct Endpoint {
    pub access: Access,
    pub registry: Arc<Registry>,
    /// A client that reads nothing for this long is disconnected.
    pub stall: Duration,
}

/// The `/acp` routes.
pub fn router(endpoint: Arc<Endpoint>) -> axum::Router {
    axum::Router::new()
        .route("/acp", post(on_post).get(on_get).delete(on_delete))
        .layer(DefaultBodyLimit::max(MAX_LINE_BYTES))
        .with_state(endpoint)
}

/// A request turned away: its status and what to do (plain text).
struct Turned {
    status: StatusCode,
    message: &'static str,
}

impl IntoResponse for Turned {
    fn into_response(self) -> Response {
        let mut response = text(self.status, self.message);
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

fn text(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_string(),
    )
        .into_response()
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

impl Endpoint {
    /// The token, or the response that turns the request away.
    fn admit(&self, headers: &HeaderMap) -> Result<TokenDigest, Turned> {
        self.access.check(headers).map_err(|refusal| Turned {
            status: refusal.status(),
            message: refusal.message(),
        })
    }

    /// The Streamable HTTP connection the request names (400 without
    /// one, 404 when unknown or another token's).
    fn connection(&self, headers: &HeaderMap, token: TokenDigest) -> Result<Arc<Remote>, Turned> {
        let Some(id) = header_text(headers, CONNECTION_HEADER) else {
            return Err(Turned {
                status: StatusCode::BAD_REQUEST,
                message: "Missing Acp-Connection-Id: send the id the initialize response carried",
            });
        };
        let remote = ConnectionId::parse(id).and_then(|id| self.registry.get(&id, token));
        match remote {
            Some(remote) if remote.carrier == Carrier::Http => Ok(remote),
            _ => Err(Turned {
                status: StatusCode::NOT_FOUND,
                message: "Unknown Acp-Connection-Id: the connection ended or never was; initialize a new one",
            }),
        }
    }
}

async fn on_post(
    State(endpoint): State<Arc<Endpoint>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = match endpoint.admit(&headers) {
        Ok(token) => token,
        Err(turned) => return turned.into_response(),
    };
    let json = header_text(&headers, header::CONTENT_TYPE.as_str())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: POST one JSON-RPC message as application/json",
        );
    }
    let Some(message) = crate::transport::jsonrpc::parse(&body) else {
        return text(
            StatusCode::BAD_REQUEST,
            "Empty body: POST one JSON-RPC message",
        );
    };
    if matches!(message, Incoming::Batch(_)) {
        return text(
            StatusCode::NOT_IMPLEMENTED,
            "JSON-RPC batches are not supported over HTTP: POST each message on its own",
        );
    }
    let initialize = message
        .as_request()
        .is_some_and(|request| request.method == "initialize");
    if initialize {
        if headers.contains_key(CONNECTION_HEADER) {
            return text(
                StatusCode::BAD_REQUEST,
                "initialize opens a new connection: send it without Acp-Connection-Id",
            );
        }
        return open_connection(&endpoint, token, message).await;
    }
    let remote = match endpoint.connection(&headers, token) {
        Ok(remote) => remote,
        Err(turned) => return turned.into_response(),
    };
    let header_session = header_text(&headers, SESSION_HEADER);
    let message_session = route::session_of(&message);
    match (&message_session, header_session) {
        (Some(_), None) => {
            return text(
                StatusCode::BAD_REQUEST,
                "Missing Acp-Session-Id: a message about a session carries its id in this header too",
            );
        }
        (Some(session), Some(header)) if session != header => {
            return text(
                StatusCode::BAD_REQUEST,
                "Mismatched Acp-Session-Id: the header and params.sessionId name different sessions",
            );
        }
        _ => {}
    }
    if let (Some(request), Some(streams)) = (message.as_request(), &remote.streams) {
        // A load's answer follows its replay on the session's stream when
        // the client reads that stream already (as the SDK's client does),
        // so it cannot overtake the replay; else it goes on the
        // connection's, as the RFD's diagram has it.
        let route = match header_session {
            Some(session) if request.method != "session/load" || streams.is_read(session) => {
                Route::Session(session.to_string())
            }
            _ => Route::Connection,
        };
        streams.expect_answer(request.id.clone(), route);
    }
    if remote.deliver(message).await {
        StatusCode::ACCEPTED.into_response()
    } else {
        text(
            StatusCode::NOT_FOUND,
            "Unknown Acp-Connection-Id: the connection has ended",
        )
    }
}

/// `error` of an answer, to tell a refused `initialize`.
#[derive(Deserialize)]
struct AnswerError {
    error: Option<serde::de::IgnoredAny>,
}

/// `initialize` without a connection: a new one, answered in this response.
async fn open_connection(endpoint: &Endpoint, token: TokenDigest, message: Incoming) -> Response {
    let Ok((remote, outgoing)) = endpoint.registry.open(Carrier::Http, token) else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: the agent has as many connections as it may ([serve] max_connections); try again later",
        );
    };
    let Some(streams) = remote.streams.clone() else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "an HTTP connection without streams",
        );
    };
    let (first, answer) = oneshot::channel();
    endpoint.registry.carriers().spawn(streams.pump(
        outgoing,
        Some(first),
        remote.closed.clone(),
        endpoint.stall,
    ));
    let answered = remote.deliver(message).await;
    let answer = match tokio::time::timeout(INITIALIZE_WAIT, answer).await {
        Ok(Ok(answer)) if answered => answer,
        _ => {
            endpoint.registry.close(&remote.id);
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "initialize got no answer",
            );
        }
    };
    let refused = serde_json::from_slice::<AnswerError>(&answer).is_ok_and(|a| a.error.is_some());
    let status = if refused {
        endpoint.registry.close(&remote.id);
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut response =
        (status, [(header::CONTENT_TYPE, "application/json")], answer).into_response();
    if !refused && let Ok(id) = HeaderValue::from_str(remote.id.as_str()) {
        response.headers_mut().insert(CONNECTION_HEADER, id);
    }
    response
}

async fn on_get(State(endpoint): State<Arc<Endpoint>>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let token = match endpoint.admit(&parts.headers) {
        Ok(token) => token,
        Err(turned) => return turned.into_response(),
    };
    let upgrade = header_text(&parts.headers, header::UPGRADE.as_str())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"));
    if upgrade {
        return match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
            Ok(upgrade) => open_websocket(&endpoint, token, upgrade),
            Err(rejection) => rejection.into_response(),
        };
    }
    let streams_ok = header_text(&parts.headers, header::ACCEPT.as_str())
        .is_some_and(|accept| accept.to_ascii_lowercase().contains("text/event-stream"));
    if !streams_ok {
        return text(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: a GET opens an SSE stream (Accept: text/event-stream) or a WebSocket (Upgrade: websocket)",
        );
    }
    let remote = match endpoint.connection(&parts.headers, token) {
        Ok(remote) => remote,
        Err(turned) => return turned.into_response(),
    };
    let Some(streams) = &remote.streams else {
        return text(StatusCode::NOT_FOUND, "Unknown Acp-Connection-Id");
    };
    let session = header_text(&parts.headers, SESSION_HEADER);
    let reader = match streams.read(session) {
        Ok(reader) => reader,
        Err(Refused::Taken) => {
            return text(
                StatusCode::CONFLICT,
                "Conflict: this stream already has a reader (one GET per stream)",
            );
        }
        Err(Refused::TooMany) => {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: too many session streams wait unread on this connection",
            );
        }
        Err(Refused::Closed) => {
            return text(
                StatusCode::NOT_FOUND,
                "Unknown Acp-Connection-Id: the connection has ended",
            );
        }
    };
    // The token: a stopping server waits for the stream to flush.
    let carrier = endpoint.registry.carriers().token();
    let events = events(reader).map(move |chunk| {
        let _flushing = &carrier;
        Ok::<_, Infallible>(chunk)
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

/// One SSE event: ours are compact JSON, no line breaks, one `data:` line.
fn push_event(chunk: &mut Vec<u8>, message: &[u8]) {
    chunk.extend_from_slice(b"data: ");
    chunk.extend_from_slice(message);
    chunk.extend_from_slice(b"\n\n");
}

/// A stream's SSE body: each message a `data:` event, the messages that
/// wait together written as one chunk (a burst is one write, as on
/// stdio), and a comment after 15 s without one, so proxies keep it open.
fn events(reader: Reader) -> impl futures::Stream<Item = Bytes> {
    let quiet = tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
    futures::stream::unfold((reader, quiet), |(mut reader, mut quiet)| async move {
        let first = tokio::select! {
            message = reader.next() => message?,
            _ = quiet.tick() => return Some((Bytes::from_static(b": keep-alive\n\n"), (reader, quiet))),
        };
        let mut chunk = Vec::with_capacity(first.len() + 8);
        push_event(&mut chunk, &first);
        while chunk.len() < BURST_BYTES
            && let Some(message) = reader.ready()
        {
            push_event(&mut chunk, &message);
        }
        quiet.reset();
        Some((Bytes::from(chunk), (reader, quiet)))
    })
}

/// A WebSocket connection, its id in the 101 response.
fn open_websocket(endpoint: &Endpoint, token: TokenDigest, upgrade: WebSocketUpgrade) -> Response {
    let Ok((remote, outgoing)) = endpoint.registry.open(Carrier::WebSocket, token) else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: the agent has as many connections as it may ([serve] max_connections); try again later",
        );
    };
    let (registry, stall) = (Arc::clone(&endpoint.registry), endpoint.stall);
    let id = remote.id.clone();
    let failed = (Arc::clone(&registry), id.clone());
    // Small buffers: an idle connection holds little (tungstenite's
    // defaults are 128 KiB each way); a large message still fits.
    let mut response = upgrade
        .read_buffer_size(8 * 1024)
        .write_buffer_size(8 * 1024)
        .max_write_buffer_size(MAX_LINE_BYTES + 8 * 1024)
        .max_message_size(MAX_LINE_BYTES)
        .on_failed_upgrade(move |err| {
            tracing::debug!(%err, "a WebSocket upgrade failed");
            failed.0.close(&failed.1);
        })
        .on_upgrade(move |socket| {
            let carriers = registry.carriers().clone();
            carriers.track_future(super::websocket::run(
                socket, remote, outgoing, registry, stall,
            ))
        });
    if let Ok(value) = HeaderValue::from_str(id.as_str()) {
        response.headers_mut().insert(CONNECTION_HEADER, value);
    }
    response
}

async fn on_delete(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap) -> Response {
    let token = match endpoint.admit(&headers) {
        Ok(token) => token,
        Err(turned) => return turned.into_response(),
    };
    match endpoint.connection(&headers, token) {
        Ok(remote) => {
            endpoint.registry.close(&remote.id);
            StatusCode::ACCEPTED.into_response()
        }
        Err(turned) => turned.into_response(),
    }
}
