//! Reading a streamed answer: the response body, framed as server-sent
//! events or as JSON lines, pumped through a wire format's decoder under an
//! idle timeout. Decoders are pure and know nothing of the provider; the
//! pump names it in their errors.

use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use tokio::sync::mpsc::Sender;

use super::{EventStream, ProviderError, ProviderEvent};
use crate::util::{error_chain, truncate};

/// The most one response may stream. A model's answer is far smaller; a
/// server that sends more is cut off, so memory stays bounded whatever it
/// sends.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// The most one line (an SSE field, a JSON line) may take before it ends.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Why reading the body stopped before the stream did.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    #[error("the response passed {} MiB; the rest was not read", MAX_RESPONSE_BYTES >> 20)]
    TooLong,
    #[error("one line of the stream passed {} MiB without ending", MAX_LINE_BYTES >> 20)]
    LineTooLong,
}

/// The body in whole lines: each item ends at a newline (the last may not,
/// when the body does not). Network reads end anywhere; handing the parsers
/// whole lines keeps their work linear (eventsource-stream re-reads an
/// unfinished line from its start on every read), and the limits keep
/// memory bounded.
fn whole_lines(
    response: reqwest::Response,
) -> impl futures::Stream<Item = Result<bytes::Bytes, BodyError>> {
    struct State<S> {
        body: S,
        pending: bytes::BytesMut,
        total: usize,
        ended: bool,
    }
    let state = State {
        body: Box::pin(response.bytes_stream()),
        pending: bytes::BytesMut::new(),
        total: 0,
        ended: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if state.ended {
                return None;
            }
            match state.body.next().await {
                Some(Ok(chunk)) => {
                    state.total += chunk.len();
                    if state.total > MAX_RESPONSE_BYTES {
                        state.ended = true;
                        return Some((Err(BodyError::TooLong), state));
                    }
                    let before = state.pending.len();
                    state.pending.extend_from_slice(&chunk);
                    // Only the new bytes are searched.
                    match state.pending[before..].iter().rposition(|&b| b == b'\n') {
                        Some(last) => {
                            let lines = state.pending.split_to(before + last + 1).freeze();
                            return Some((Ok(lines), state));
                        }
                        None if state.pending.len() > MAX_LINE_BYTES => {
                            state.ended = true;
                            return Some((Err(BodyError::LineTooLong), state));
                        }
                        None => {}
                    }
                }
                Some(Err(err)) => {
                    state.ended = true;
                    return Some((Err(BodyError::Http(err)), state));
                }
                None => {
                    state.ended = true;
                    if state.pending.is_empty() {
                        return None;
                    }
                    let rest = state.pending.split().freeze();
                    return Some((Ok(rest), state));
                }
            }
        }
    })
}

/// Turns one wire format's framed payloads into [`ProviderEvent`]s. Pure, so
/// every quirk is tested without a server.
pub trait WireDecoder: Default + Send + 'static {
    /// How the payloads arrive.
    const FRAMING: Framing;
    /// Why the answer may be cut off when the body ends too early.
    const CUT_OFF: &'static str;

    /// One SSE event (its `event:` name, empty when absent, and its data), or
    /// one NDJSON line (empty name). The data is trimmed and never blank.
    fn on_event(&mut self, event: &str, data: &str) -> Vec<Decoded>;

    fn progress(&self) -> Progress;

    /// What is still open when the body ends after the finish but before
    /// the end marker.
    fn close(&mut self) -> Vec<ProviderEvent> {
        Vec::new()
    }

    /// The body ended. Anything incomplete is an error here.
    fn finish(&mut self) -> Vec<Decoded> {
        let progress = self.progress();
        if progress.done {
            Vec::new()
        } else if !progress.saw_anything {
            vec![Err(StreamError::Empty)]
        } else if progress.finished {
            self.close().into_iter().map(Ok).collect()
        } else {
            vec![Err(StreamError::Truncated(Self::CUT_OFF.into()))]
        }
    }

    /// The format's own end marker arrived; stop reading.
    fn done(&self) -> bool {
        self.progress().done
    }
}

/// How far a stream got, which decides what its end means.
#[derive(Debug, Default, Clone, Copy)]
pub struct Progress {
    /// The format's end marker arrived.
    pub done: bool,
    /// Anything that counts as an answer arrived.
    pub saw_anything: bool,
    /// The finish reason arrived (the end marker may still be missing).
    pub finished: bool,
}

/// One item a decoder yields.
pub type Decoded = Result<ProviderEvent, StreamError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `text/event-stream` (OpenAI, Anthropic).
    Sse,
    /// One JSON document per line (Ollama).
    Ndjson,
}

/// What can go wrong in a stream, before the provider is named
/// ([`StreamError::for_provider`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamError {
    /// Data this agent cannot read.
    Malformed(String),
    /// The server reported an error in the stream.
    Remote { detail: String, transient: bool },
    /// The stream ended without text, a tool call or a finish.
    Empty,
    /// The stream ended before the format's end marker.
    Truncated(String),
    /// No bytes for this long.
    Idle(Duration),
}

impl StreamError {
    /// A payload that does not parse: `what` is "event" or "line".
    pub fn not_json(what: &str, err: &serde_json::Error, data: &str) -> Self {
        StreamError::Malformed(format!(
            "a stream {what} is not JSON ({err}): {}",
            truncate(data, 200)
        ))
    }

    pub fn for_provider(self, provider: &str) -> ProviderError {
        let provider = provider.to_string();
        match self {
            StreamError::Malformed(detail) => ProviderError::Malformed { provider, detail },
            StreamError::Remote { detail, transient } => ProviderError::Remote {
                provider,
                detail,
                transient,
            },
            StreamError::Empty => ProviderError::EmptyStream {
                provider,
                window: None,
            },
            StreamError::Truncated(detail) => ProviderError::Truncated { provider, detail },
            StreamError::Idle(idle) => ProviderError::IdleTimeout {
                provider,
                seconds: idle.as_secs(),
            },
        }
    }
}

/// Feed a streaming response through `decoder`. No bytes for `idle` ends
/// the stream with [`ProviderError::IdleTimeout`]; a slow but steady stream
/// is never cut. The stream ends after its first error. Dropping the stream
/// closes the connection.
pub fn event_stream<D: WireDecoder>(
    response: reqwest::Response,
    idle: Duration,
    provider: String,
    decoder: D,
) -> EventStream {
    // Bounded: when the turn stops reading (its client is not keeping up),
    // the pump stops too, and the server waits on the socket.
    let (tx, rx) = tokio::sync::mpsc::channel(EVENTS_AHEAD);
    let outlet = Outlet { tx, provider, idle };
    let task = tokio::spawn(async move {
        match D::FRAMING {
            Framing::Sse => pump_events(response, decoder, &outlet).await,
            Framing::Ndjson => pump_lines(response, decoder, &outlet).await,
        }
    });
    let abort = AbortOnDrop(task);
    futures::stream::unfold((rx, abort), |(mut rx, abort)| async move {
        rx.recv().await.map(|item| (item, (rx, abort)))
    })
    .boxed()
}

/// Decoded events a pump may hold ahead of the turn reading them.
const EVENTS_AHEAD: usize = 256;

/// Where a pump sends what it decoded.
struct Outlet {
    tx: Sender<Result<ProviderEvent, ProviderError>>,
    provider: String,
    idle: Duration,
}

impl Outlet {
    /// Send `items` in order; false once an error went out (the stream ends
    /// there) or nobody listens any more.
    async fn send(&self, items: Vec<Decoded>) -> bool {
        for item in items {
            let failed = item.is_err();
            let item = item.map_err(|err| err.for_provider(&self.provider));
            if self.tx.send(item).await.is_err() || failed {
                return false;
            }
        }
        true
    }

    async fn fail(&self, err: StreamError) {
        self.send(vec![Err(err)]).await;
    }
}

/// Server-sent events, one decoder call per event.
async fn pump_events(response: reqwest::Response, mut decoder: impl WireDecoder, outlet: &Outlet) {
    let mut events = Box::pin(whole_lines(response).eventsource());
    loop {
        let Ok(next) = tokio::time::timeout(outlet.idle, events.next()).await else {
            return outlet.fail(StreamError::Idle(outlet.idle)).await;
        };
        let items = match next {
            // Blank payloads (keep-alives) carry nothing.
            Some(Ok(event)) if event.data.trim().is_empty() => continue,
            Some(Ok(event)) => decoder.on_event(&event.event, event.data.trim()),
            Some(Err(EventStreamError::Transport(BodyError::Http(err)))) => {
                vec![Err(StreamError::Truncated(error_chain(&err)))]
            }
            Some(Err(EventStreamError::Transport(err))) => {
                vec![Err(StreamError::Malformed(err.to_string()))]
            }
            Some(Err(err)) => vec![Err(StreamError::Malformed(format!(
                "the event stream cannot be read: {err}"
            )))],
            None => {
                outlet.send(decoder.finish()).await;
                return;
            }
        };
        if !outlet.send(items).await || decoder.done() {
            return;
        }
    }
}

/// JSON lines, one decoder call per non-blank line.
async fn pump_lines(response: reqwest::Response, mut decoder: impl WireDecoder, outlet: &Outlet) {
    let mut bytes = Box::pin(whole_lines(response));
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let Ok(next) = tokio::time::timeout(outlet.idle, bytes.next()).await else {
            return outlet.fail(StreamError::Idle(outlet.idle)).await;
        };
        let ended = match next {
            Some(Ok(chunk)) => {
                buffer.extend_from_slice(&chunk);
                false
            }
            Some(Err(BodyError::Http(err))) => {
                return outlet.fail(StreamError::Truncated(error_chain(&err))).await;
            }
            Some(Err(err)) => return outlet.fail(StreamError::Malformed(err.to_string())).await,
            None => true,
        };
        // Whole lines only: a chunk may end inside a line or a character.
        let mut lines: Vec<Vec<u8>> = Vec::new();
        while let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            lines.push(buffer.drain(..=end).collect());
        }
        if ended && !buffer.is_empty() {
            lines.push(std::mem::take(&mut buffer));
        }
        for line in lines {
            let items = match std::str::from_utf8(&line) {
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => decoder.on_event("", text.trim()),
                Err(err) => vec![Err(StreamError::Malformed(format!(
                    "a stream line is not UTF-8: {err}"
                )))],
            };
            if !outlet.send(items).await || decoder.done() {
                return;
            }
        }
        if ended {
            outlet.send(decoder.finish()).await;
            return;
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
