//! The Agent Client Protocol adapter: the only place that speaks ACP.
//! [`router`] turns the client's requests into messages for the sessions,
//! [`client`] implements the client port ([`crate::client::ClientSink`])
//! with ACP requests and notifications, [`translate`] maps the agent's own
//! types to ACP's and back, and [`mcp_spec`] reads the client's MCP server
//! entries. [`handshake`] answers `initialize` before the agent is built.
//! A new ACP version touches this module and the transport, nothing else.

pub mod auth;
pub mod client;
pub mod handshake;
pub mod mcp_relay;
pub mod mcp_spec;
pub mod router;
pub mod system_prompt;
pub mod translate;
pub mod unconfigured;
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
            Service::Ready(router) => router.handle(message),
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
