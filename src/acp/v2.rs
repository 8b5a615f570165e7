//! ACP v2 beside v1, chosen per connection by `initialize`
//! ([`initialize`]). Its codec is [`requests`] (its table of methods, read
//! into the neutral requests, answered in v2); its sessions' client port
//! is [`client::NegotiatedClient`], which writes updates through
//! [`updates`] and asks permissions as [`permission`] has them.
//! Notifications and the client's answers keep v1's shape.

pub mod client;
pub mod initialize;
pub mod permission;
pub mod requests;
pub mod updates;
