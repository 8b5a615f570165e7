//! The server's connections by their `Acp-Connection-Id`: each a task that
//! hands its messages to its [`Peer`] in the order they came, bounded in
//! number, closed when its client deletes it, goes away, or leaves it
//! without a stream past the idle time.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::access::TokenDigest;
use super::streams::Streams;
use super::{Host, Peer};
use crate::transport::{Connection, Incoming, Outgoing};
use crate::util::lock;

/// Messages from one client waiting for its peer: past this, a POST waits.
const INBOX: usize = 256;

/// An `Acp-Connection-Id`: 128 random bits from the operating system, as
/// 32 hex digits, so no one can guess another client's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConnectionId(String);

impl ConnectionId {
    fn random() -> std::io::Result<Self> {
        let mut bits = [0u8; 16];
        getrandom::fill(&mut bits).map_err(std::io::Error::other)?;
        Ok(Self(bits.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Self(text.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a client reaches its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// POSTs in, GET streams out (their mailboxes: `Remote::streams`).
    Http,
    WebSocket,
}

/// One client's connection.
pub struct Remote {
    pub id: ConnectionId,
    /// The token that opened it: only that token may use it.
    pub token: TokenDigest,
    pub carrier: Carrier,
    inbox: mpsc::Sender<Incoming>,
    /// Its GET streams (Streamable HTTP only).
    pub streams: Option<Arc<Streams>>,
    /// Cancelled when it ends, for whatever reason.
    pub closed: CancellationToken,
}

impl Remote {
    /// Hand a message to the peer, in order; false once the connection has ended.
    pub async fn deliver(&self, message: Incoming) -> bool {
        tokio::select! {
            sent = self.inbox.send(message) => sent.is_ok(),
            () = self.closed.cancelled() => false,
        }
    }
}

/// Every connection of the server.
pub struct Registry {
    connections: Mutex<HashMap<ConnectionId, Arc<Remote>>>,
    limit: usize,
    host: Arc<dyn Host>,
    /// The carriers' tasks and streams (WebSockets, HTTP pumps, SSE
    /// readers): waited for when the server stops, so they flush.
    carriers: TaskTracker,
}

/// The server has as many connections as it may (503).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

impl Registry {
    pub fn new(host: Arc<dyn Host>, limit: usize) -> Arc<Self> {
        Arc::new(Self {
            connections: Mutex::default(),
            limit,
            host,
            carriers: TaskTracker::new(),
        })
    }

    pub fn host(&self) -> &dyn Host {
        &*self.host
    }

    /// Carriers' work, waited for when the server stops.
    pub fn carriers(&self) -> &TaskTracker {
        &self.carriers
    }

    /// Waits (at most `grace`) for the carriers to hand clients what is left.
    pub async fn flushed(&self, grace: Duration) {
        self.carriers.close();
        if tokio::time::timeout(grace, self.carriers.wait())
            .await
            .is_err()
        {
            tracing::debug!("some streams did not flush within {grace:?}");
        }
    }

    /// A new connection and the peer that serves it; the caller carries
    /// its `Outgoing` to the client.
    pub fn open(
        self: &Arc<Self>,
        carrier: Carrier,
        token: TokenDigest,
    ) -> Result<(Arc<Remote>, Outgoing), Full> {
        let mut connections = lock(&self.connections);
        if connections.len() >= self.limit {
            return Err(Full);
        }
        let id = loop {
            let id = ConnectionId::random().map_err(|err| {
                tracing::error!(%err, "no random bits for a connection id");
                Full
            })?;
            if !connections.contains_key(&id) {
                break id;
            }
        };
        let (connection, outgoing) = Connection::new();
        let (inbox, messages) = mpsc::channel(INBOX);
        let remote = Arc::new(Remote {
            id: id.clone(),
            token,
            carrier,
            inbox,
            streams: (carrier == Carrier::Http).then(Streams::new),
            closed: CancellationToken::new(),
        });
        connections.insert(id.clone(), Arc::clone(&remote));
        drop(connections);
        let peer = self.host.open(connection);
        tokio::spawn(Arc::clone(self).serve(Arc::clone(&remote), peer, messages));
        tracing::info!(connection = %id, ?carrier, "connection opened");
        Ok((remote, outgoing))
    }

    /// The connection `id`, if it exists and `token` opened it.
    pub fn get(&self, id: &ConnectionId, token: TokenDigest) -> Option<Arc<Remote>> {
        lock(&self.connections)
            .get(id)
            .filter(|remote| remote.token == token)
            .cloned()
    }

    /// End connection `id` (its sessions run on, to be loaded elsewhere).
    pub fn close(&self, id: &ConnectionId) -> bool {
        let removed = lock(&self.connections).remove(id);
        match removed {
            Some(remote) => {
                remote.closed.cancel();
                true
            }
            None => false,
        }
    }

    /// Every connection ends (the server stops).
    pub fn close_all(&self) {
        let all: Vec<Arc<Remote>> = lock(&self.connections).drain().map(|(_, r)| r).collect();
        for remote in all {
            remote.closed.cancel();
        }
    }

    /// The connection's task: messages to the peer in order until it ends,
    /// then the peer is told the client is gone.
    async fn serve(
        self: Arc<Self>,
        remote: Arc<Remote>,
        mut peer: Box<dyn Peer>,
        mut messages: mpsc::Receiver<Incoming>,
    ) {
        loop {
            tokio::select! {
                biased;
                () = remote.closed.cancelled() => break,
                message = messages.recv() => match message {
                    Some(message) => peer.handle(message),
                    None => break,
                },
            }
        }
        self.close(&remote.id);
        if let Some(streams) = &remote.streams {
            streams.close();
        }
        peer.close().await;
        tracing::info!(connection = %remote.id, "connection closed");
    }

    /// Closes Streamable HTTP connections that have had no stream open for
    /// `idle`: a client that went without a DELETE.
    pub async fn reap_idle(self: Arc<Self>, idle: Duration) {
        let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(15));
        let mut interval = tokio::time::interval(tick);
        loop {
            interval.tick().await;
            let idle_ones: Vec<ConnectionId> = lock(&self.connections)
                .values()
                .filter(|remote| {
                    (remote.streams.as_ref())
                        .and_then(|streams| streams.unread_for())
                        .is_some_and(|unread| unread >= idle)
                })
                .map(|remote| remote.id.clone())
                .collect();
            for id in idle_ones {
                tracing::info!(connection = %id, "no stream open for {idle:?}: closing it");
                self.close(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_ids_are_128_random_bits() {
        let a = ConnectionId::random().unwrap();
        let b = ConnectionId::random().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 32);
        assert_eq!(ConnectionId::parse(a.as_str()), Some(a.clone()));
        assert_eq!(ConnectionId::parse("short"), None);
        assert_eq!(ConnectionId::parse(&"z".repeat(32)), None);
    }
}
