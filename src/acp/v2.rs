//! ACP version 2, beside v1: [`updates`] translates the agent's session
//! updates into v2 `session/update` variants (message ids, tool calls as
//! upserts, display terminals, plans by id), keeping what one session's
//! translation needs to remember.

pub mod updates;
