//! The Agent Client Protocol adapter: the only place that speaks ACP.
//! Each version is a codec beside the other ([`v1`], [`v2`]; chosen per
//! connection by `initialize`, [`protocol`]): it declares its methods once
//! ([`methods`]), reads its wire into the neutral [`request::Request`],
//! and writes the answers back. [`router`] serves each neutral request
//! with one handler, whatever version it came in. [`client`] implements
//! the client port ([`crate::client::ClientSink`]) with ACP requests and
//! notifications, [`translate`] (v1) and `v2::updates` map the agent's
//! events to ACP updates, [`readers`] and [`mcp_spec`] read what both
//! versions write alike. [`handshake`] answers `initialize` before the
//! agent is built.

pub mod auth;
pub mod client;
pub mod connection;
pub mod handshake;
pub mod mcp_relay;
pub mod mcp_spec;
pub mod methods;
pub mod permission;
pub mod protocol;
pub mod readers;
pub mod remote;
pub mod request;
pub mod router;
pub mod system_prompt;
pub mod translate;
pub mod unconfigured;
pub mod v1;
pub mod v2;

pub use router::Router;
pub use unconfigured::Unconfigured;

use crate::transport::Incoming;

/// What serves the client after the handshake: the router, or, when the
/// config cannot be used, [`Unconfigured`], which says why to every request.
pub enum Service {
    Ready(Box<Router>),
    Unconfigured(Unconfigured),
}

impl Service {
    pub fn handle(&mut self, message: Incoming) {
        match self {
            Service::Ready(router) => connection::handle(router, message),
            Service::Unconfigured(service) => service.handle(message),
        }
    }

    /// The client is gone: stop every session, answering their turns.
    pub async fn shutdown(&mut self) {
        if let Service::Ready(router) = self {
            router.shutdown().await;
        }
    }
}
