//! A Streamable HTTP connection's outgoing side: the connection's stream
//! and one stream per session (the RFD's long-lived GET streams), each a
//! mailbox where messages wait until the client's GET takes them, and the
//! route each of the client's requests is answered on.
//!
//! Bounded: what waits in all of a connection's mailboxes together stops
//! the pump at [`MAX_BUFFERED_BYTES`] (turns then wait for room, as on
//! stdio), and a client that takes nothing for the stall time is dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1::RequestId;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use super::route::{self, Bound};
use crate::transport::Outgoing;
use crate::util::lock;

/// Bytes of messages a connection's streams may hold for its client.
pub const MAX_BUFFERED_BYTES: usize = 8 << 20;
/// Session streams a connection may hold that no GET is reading.
const MAX_WAITING_SESSION_STREAMS: usize = 256;

/// Which stream a message goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Connection,
    Session(String),
}

/// One stream's waiting messages.
#[derive(Default)]
struct Mailbox {
    state: Mutex<MailboxState>,
    wake: Notify,
}

impl Mailbox {
    fn push(&self, message: Vec<u8>) {
        lock(&self.state).queue.push_back(message);
        self.wake.notify_one();
    }

    /// A GET's claim on it: one reader at a time, none once it is closed.
    fn take(&self) -> Result<(), Refused> {
        let mut state = lock(&self.state);
        if state.closed {
            return Err(Refused::Closed);
        }
        if state.taken {
            return Err(Refused::Taken);
        }
        state.taken = true;
        Ok(())
    }
}

#[derive(Default)]
struct MailboxState {
    queue: VecDeque<Vec<u8>>,
    /// A GET is reading it.
    taken: bool,
    /// The connection ended: the reader finishes what is queued, then stops.
    closed: bool,
}

/// A connection's streams.
#[derive(Default)]
pub struct Streams {
    connection: Arc<Mailbox>,
    sessions: Mutex<HashMap<String, Arc<Mailbox>>>,
    /// Where the answer to each request of the client's goes.
    answers: Mutex<HashMap<RequestId, Route>>,
    queued: AtomicUsize,
    /// A reader took something (or the connection ended).
    progress: Notify,
    /// Streams being read now; when none, since when.
    readers: Mutex<(usize, Option<Instant>)>,
}

/// Why a GET cannot read a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Another GET reads it already (409).
    Taken,
    /// Too many session streams wait with nobody reading them.
    TooMany,
    /// The connection has ended.
    Closed,
}

impl Streams {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            readers: Mutex::new((0, Some(Instant::now()))),
            ..Self::default()
        })
    }

    /// The client's request `id` came with this route: its answer goes there.
    pub fn expect_answer(&self, id: RequestId, route: Route) {
        lock(&self.answers).insert(id, route);
    }

    /// Put one outgoing message on its stream.
    fn deliver(&self, message: Vec<u8>) {
        let route = match route::outgoing(&message) {
            Bound::Answer(id) => lock(&self.answers).remove(&id).unwrap_or(Route::Connection),
            Bound::Call { session, .. } => session.map_or(Route::Connection, Route::Session),
        };
        self.queued.fetch_add(message.len(), Ordering::AcqRel);
        match route {
            Route::Connection => self.connection.push(message),
            // Pushed under the map's lock: a reader that goes forgets its
            // empty mailbox under it, so nothing lands in a forgotten one.
            Route::Session(id) => lock(&self.sessions).entry(id).or_default().push(message),
        }
    }

    fn full(&self) -> bool {
        self.queued.load(Ordering::Acquire) >= MAX_BUFFERED_BYTES
    }

    /// A GET's reader of the connection's stream, or of a session's.
    pub fn read(self: &Arc<Self>, session: Option<&str>) -> Result<Reader, Refused> {
        let mailbox = match session {
            None => {
                self.connection.take()?;
                Arc::clone(&self.connection)
            }
            Some(id) => {
                // Taken under the map's lock, as a reader that goes
                // forgets the mailbox under it.
                let mut sessions = lock(&self.sessions);
                if !sessions.contains_key(id) {
                    let waiting = sessions.values().filter(|m| !lock(&m.state).taken).count();
                    if waiting >= MAX_WAITING_SESSION_STREAMS {
                        return Err(Refused::TooMany);
                    }
                }
                let mailbox = sessions.entry(id.to_string()).or_default();
                mailbox.take()?;
                Arc::clone(mailbox)
            }
        };
        let mut readers = lock(&self.readers);
        readers.0 += 1;
        readers.1 = None;
        Ok(Reader {
            streams: Arc::clone(self),
            mailbox,
            session: session.map(str::to_string),
        })
    }

    /// Whether a GET reads session `id`'s stream now.
    pub fn is_read(&self, id: &str) -> bool {
        lock(&self.sessions)
            .get(id)
            .is_some_and(|mailbox| lock(&mailbox.state).taken)
    }

    /// How long no stream has been read (None while one is).
    pub fn unread_for(&self) -> Option<Duration> {
        lock(&self.readers).1.map(|since| since.elapsed())
    }

    /// The connection ended: readers finish what waits, then end.
    pub fn close(&self) {
        let sessions: Vec<Arc<Mailbox>> = lock(&self.sessions).values().cloned().collect();
        for mailbox in sessions.iter().chain([&self.connection]) {
            lock(&mailbox.state).closed = true;
            mailbox.wake.notify_one();
        }
        self.progress.notify_waiters();
    }

    /// Drain `outgoing` into the streams until the connection ends. The
    /// first message is the answer to `initialize`, which goes back in the
    /// POST's own response when `first` waits for it. While the streams
    /// are full the pump stops (so turns wait for room); a client that
    /// reads nothing for `stall` is given up on (`closed` is cancelled).
    pub async fn pump(
        self: Arc<Self>,
        mut outgoing: Outgoing,
        mut first: Option<oneshot::Sender<Vec<u8>>>,
        closed: CancellationToken,
        stall: Duration,
    ) {
        loop {
            while self.full() {
                let progress = self.progress.notified();
                tokio::pin!(progress);
                progress.as_mut().enable();
                if !self.full() {
                    break;
                }
                tokio::select! {
                    () = progress => {}
                    () = closed.cancelled() => return,
                    () = tokio::time::sleep(stall) => {
                        tracing::info!("a client read none of its streams for {stall:?}: disconnecting it");
                        closed.cancel();
                        return;
                    }
                }
            }
            let message = tokio::select! {
                message = outgoing.recv() => message,
                () = closed.cancelled() => {
                    // What was sent before the end still goes to its stream.
                    while let Ok(message) = outgoing.try_recv() {
                        self.deliver(message);
                    }
                    None
                }
            };
            let Some(message) = message else { return };
            match first.take() {
                Some(waiting) => {
                    if let Err(message) = waiting.send(message) {
                        self.deliver(message);
                    }
                }
                None => self.deliver(message),
            }
        }
    }
}

/// A GET reading one stream: the messages in order, until the connection
/// ends. Dropped (the client went), the stream may be read again.
pub struct Reader {
    streams: Arc<Streams>,
    mailbox: Arc<Mailbox>,
    session: Option<String>,
}

impl Reader {
    /// The next message; None once the connection has ended and all is read.
    pub async fn next(&mut self) -> Option<Vec<u8>> {
        let mailbox = Arc::clone(&self.mailbox);
        loop {
            let woken = mailbox.wake.notified();
            match self.take() {
                Taken::Message(message) => return Some(message),
                Taken::Ended => return None,
                Taken::Nothing => woken.await,
            }
        }
    }

    /// A message already waiting, without waiting for one.
    pub fn ready(&mut self) -> Option<Vec<u8>> {
        match self.take() {
            Taken::Message(message) => Some(message),
            Taken::Ended | Taken::Nothing => None,
        }
    }

    fn take(&mut self) -> Taken {
        let mut state = lock(&self.mailbox.state);
        match state.queue.pop_front() {
            Some(message) => {
                drop(state);
                self.streams
                    .queued
                    .fetch_sub(message.len(), Ordering::AcqRel);
                self.streams.progress.notify_waiters();
                Taken::Message(message)
            }
            None if state.closed => Taken::Ended,
            None => Taken::Nothing,
        }
    }
}

/// What a reader found in its mailbox.
enum Taken {
    Message(Vec<u8>),
    Ended,
    Nothing,
}

impl Drop for Reader {
    fn drop(&mut self) {
        match &self.session {
            // An empty session stream nobody reads is forgotten, under the
            // map's lock so that no message and no new reader comes in
            // between the look and the removal.
            Some(session) => {
                let mut sessions = lock(&self.streams.sessions);
                let empty = {
                    let mut state = lock(&self.mailbox.state);
                    state.taken = false;
                    state.queue.is_empty()
                };
                if empty {
                    sessions.remove(session);
                }
            }
            None => lock(&self.mailbox.state).taken = false,
        }
        let mut readers = lock(&self.streams.readers);
        readers.0 = readers.0.saturating_sub(1);
        if readers.0 == 0 {
            readers.1 = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Connection;
    use futures::FutureExt;
    use serde_json::json;

    fn text(message: &[u8]) -> serde_json::Value {
        serde_json::from_slice(message).unwrap()
    }

    #[tokio::test]
    async fn updates_go_to_their_session_stream_and_answers_where_their_request_said() {
        let streams = Streams::new();
        let (connection, outgoing) = Connection::new();
        let closed = CancellationToken::new();
        tokio::spawn(Arc::clone(&streams).pump(
            outgoing,
            None,
            closed.clone(),
            Duration::from_secs(60),
        ));
        streams.expect_answer(RequestId::Number(1), Route::Connection);
        streams.expect_answer(RequestId::Number(2), Route::Session("s".into()));
        connection.notify(
            "session/update",
            &json!({"sessionId": "s", "update": {"n": 1}}),
        );
        connection.respond(&RequestId::Number(1), Ok(json!({"sessionId": "s"})));
        connection.respond(&RequestId::Number(2), Ok(json!({"stopReason": "end_turn"})));
        // Read after they were sent: they waited for their reader.
        let mut session = streams.read(Some("s")).unwrap();
        let mut main = streams.read(None).unwrap();
        assert_eq!(
            text(&session.next().await.unwrap())["params"]["update"]["n"],
            1
        );
        assert_eq!(text(&session.next().await.unwrap())["id"], 2);
        assert_eq!(text(&main.next().await.unwrap())["id"], 1);
        // One reader per stream; a second GET is refused until the first goes.
        assert_eq!(streams.read(Some("s")).err(), Some(Refused::Taken));
        drop(session);
        assert!(streams.read(Some("s")).is_ok());
        closed.cancel();
        streams.close();
        assert_eq!(main.next().await, None);
    }

    #[tokio::test]
    async fn a_client_that_reads_nothing_stops_the_pump_then_is_dropped() {
        let streams = Streams::new();
        let (connection, outgoing) = Connection::new();
        let closed = CancellationToken::new();
        let pump = tokio::spawn(Arc::clone(&streams).pump(
            outgoing,
            None,
            closed.clone(),
            Duration::from_millis(50),
        ));
        let chunk = "x".repeat(1 << 20);
        for _ in 0..12 {
            connection.notify("session/update", &json!({"sessionId": "s", "text": chunk}));
        }
        pump.await.unwrap();
        assert!(closed.is_cancelled(), "dropped for reading nothing");
        let held = streams.queued.load(Ordering::Acquire);
        assert!(held < MAX_BUFFERED_BYTES + (2 << 20), "held {held} bytes");
    }

    /// Takes what waits on the stream now, without waiting for more.
    fn drain(reader: &mut Reader) -> usize {
        let mut taken = 0;
        while let Some(Some(_)) = reader.next().now_or_never() {
            taken += 1;
        }
        taken
    }

    #[test]
    fn a_session_stream_read_again_and_again_loses_no_message() {
        const MESSAGES: usize = 200_000;
        let streams = Streams::new();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (streams, done) = (Arc::clone(&streams), Arc::clone(&done));
            std::thread::spawn(move || {
                for _ in 0..MESSAGES {
                    streams.deliver(
                        br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}"#
                            .to_vec(),
                    );
                }
                done.store(true, Ordering::Release);
            })
        };
        // A client whose GET of the session's stream comes and goes.
        let mut received = 0;
        while !done.load(Ordering::Acquire) {
            if let Ok(mut reader) = streams.read(Some("s")) {
                received += drain(&mut reader);
            }
        }
        writer.join().unwrap();
        let mut reader = streams.read(Some("s")).unwrap();
        received += drain(&mut reader);
        assert_eq!(received, MESSAGES, "messages lost");
        assert_eq!(
            streams.queued.load(Ordering::Acquire),
            0,
            "bytes counted for no one"
        );
    }
}
