//! The Agent Client Protocol adapter: the only place that speaks ACP.
//! [`router`] turns the client's requests into messages for the sessions,
//! [`client`] implements the client port ([`crate::client::ClientSink`])
//! with ACP requests and notifications, [`translate`] maps the agent's own
//! types to ACP's and back, and [`mcp_spec`] reads the client's MCP server
//! entries. A new ACP version touches this module and the transport, nothing
//! else.

pub mod client;
pub mod mcp_spec;
pub mod router;
pub mod translate;

pub use router::Router;
