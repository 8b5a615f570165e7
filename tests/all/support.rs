//! What the topic modules share: the harness (a scripted local model server
//! and a driver for the agent binary), an editor-like client that answers the
//! agent's requests, the context tests' scripted model, a v2 client (`v2`),
//! and the clients of `serve` (`remote` over HTTP, `websocket`).

pub mod client;
pub mod context;
pub mod harness;
pub mod homes;
pub mod remote;
pub mod sessions;
pub mod v2;
pub mod wait;
pub mod websocket;
