//! What the topic modules share: the harness (a scripted local model server
//! and a driver for the agent binary), an editor-like client that answers the
//! agent's requests, the context tests' scripted model, and a v2 client
//! (`v2`).

pub mod client;
pub mod context;
pub mod harness;
pub mod homes;
pub mod remote;
pub mod sessions;
pub mod v2;
pub mod wait;
