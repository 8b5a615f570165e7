//! The agent as `serve` offers it to remote connections: each connection
//! gets a router of its own (its negotiated version, its client, its
//! `initialize`), all of them over one set of sessions, which outlive the
//! connection that opened them (see `session::attachments`).

use std::sync::Arc;

use futures::future::BoxFuture;

use super::protocol::Protocol;
use super::router::AllowedRoots;
use super::v2::client::NegotiatedClient;
use super::{Router, Service};
use crate::client::ClientSink;
use crate::session::manager::SessionManager;
use crate::transport::remote::{Host, Peer};
use crate::transport::{Connection, Incoming};

/// Every remote connection's router, over one set of sessions.
pub struct Hub {
    /// Shared by connections (`SessionManager::shared_by_connections`).
    sessions: SessionManager,
    roots: AllowedRoots,
    sessions_per_connection: usize,
}

impl Hub {
    pub fn new(
        sessions: SessionManager,
        roots: AllowedRoots,
        sessions_per_connection: usize,
    ) -> Self {
        Self {
            sessions: sessions.shared_by_connections(),
            roots,
            sessions_per_connection,
        }
    }

    /// The server stops: every session closes, its turn answered and saved.
    pub async fn shutdown(&self) {
        self.sessions.client_gone().await;
    }
}

impl Host for Hub {
    fn open(&self, connection: Connection) -> Box<dyn Peer> {
        let hub = self;
        let protocol = Protocol::default();
        let client: Arc<dyn ClientSink> =
            Arc::new(NegotiatedClient::new(connection.clone(), protocol.clone()));
        let Some(sessions) = hub
            .sessions
            .for_connection(Arc::clone(&client), hub.sessions_per_connection)
        else {
            tracing::error!("the sessions are not shared by connections");
            return Box::new(Closed);
        };
        let router = Router::new(connection, sessions)
            .with_protocol(protocol, client)
            .within(hub.roots.clone());
        Box::new(Service::Ready(Box::new(router)))
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(Hub::shutdown(self))
    }
}

impl Peer for Service {
    fn handle(&mut self, message: Incoming) {
        Service::handle(self, message);
    }

    fn close(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.shutdown().await })
    }
}

/// A connection that cannot be served (a bug): it serves nothing.
struct Closed;

impl Peer for Closed {
    fn handle(&mut self, _message: Incoming) {}

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}
