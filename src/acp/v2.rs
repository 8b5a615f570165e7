//! ACP v2 beside v1, chosen per connection by `initialize`
//! ([`initialize`]). A v2 connection's requests go through [`requests`],
//! which reads v2 params, hands the sessions the same internal requests as
//! v1 (the router's own calls) and answers with v2 types; its sessions'
//! client port is [`client::NegotiatedClient`], which writes updates
//! through [`updates`] and asks permissions as [`permission`] has them.
//! Notifications and the client's answers keep v1's path: their shape did
//! not change.

pub mod client;
pub mod convert;
pub mod initialize;
pub mod permission;
pub mod prompt;
pub mod requests;
pub mod updates;

use super::router::Router;
use crate::transport::jsonrpc::{Message, Request};
use crate::transport::{Incoming, Responder};

/// One message from the client, on a connection of either version.
pub fn handle(router: &mut Router, message: Incoming) {
    match message {
        Incoming::Message(Message::Request(Request { id, method, params }))
            if method == "initialize" =>
        {
            let responder = Responder::new(id, router.connection.clone(), method);
            requests::initialize(router, params, responder);
        }
        Incoming::Message(Message::Request(Request { id, method, params }))
            if router.protocol.is_v2() =>
        {
            let responder = Responder::new(id, router.connection.clone(), method.clone());
            requests::request(router, &method, params, responder);
        }
        message => router.handle(message),
    }
}
