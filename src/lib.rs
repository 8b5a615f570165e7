//! crucible-agent: Crucible's internal agent, spoken over the Agent Client
//! Protocol. The binary (`main.rs`) wires these modules to stdin/stdout.
//!
//! Data flow: [`transport`] reads JSON-RPC lines → [`acp::router`] parses
//! params → [`session`] actors (one per session) run [`agent_loop`] turns
//! against a [`providers`] stream → the [`client`] port, implemented by
//! [`acp::client`] ([`acp::translate`] turns events into ACP updates) → the
//! transport's single writer puts them on stdout.

pub mod acp;
pub mod agent_loop;
pub mod agents;
pub mod cli;
pub mod client;
pub mod commands;
pub mod config;
pub mod context;
pub mod events;
pub mod mcp;
pub mod model;
pub mod modes;
pub mod permissions;
pub mod platform;
pub mod prompt;
pub mod providers;
pub mod session;
pub mod skills;
pub mod store;
pub mod tools;
pub mod transport;
pub mod util;
