//! `crucible-agent serve` through the binary, as remote clients meet it:
//! Streamable HTTP (`http`), WebSocket (`websocket`), sessions that outlive
//! their connection (`sessions`), and who may come in (`access`).

mod access;
mod http;
mod sessions;
mod websocket;
