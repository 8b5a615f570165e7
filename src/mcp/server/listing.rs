//! A server's tools and prompts as last listed: listed when it starts and
//! again on `list_changed`. Each listing takes a ticket first, so one that
//! finishes late never replaces a newer one.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use rmcp::model::{
    ClientRequest, CustomResult, ListToolsRequest, PaginatedRequestParams, Prompt, ServerResult,
    Tool,
};
use rmcp::service::{Peer, RoleClient, ServiceError};
use serde_json::Value;

use super::ServerInner;
use crate::mcp::error::StartError;
use crate::util::{error_chain, lock};

/// A server's tools or prompts, as last listed.
pub(super) struct Listing<T> {
    /// Which connection and which listing the items came from: an older
    /// listing finishing late must not replace a newer one.
    connection: u64,
    ticket: u64,
    pub(super) items: Vec<T>,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Self {
            connection: 0,
            ticket: 0,
            items: Vec::new(),
        }
    }
}

impl ServerInner {
    pub(super) fn lock_tools(&self) -> MutexGuard<'_, Listing<Tool>> {
        lock(&self.tools)
    }

    pub(super) fn lock_prompts(&self) -> MutexGuard<'_, Listing<Prompt>> {
        lock(&self.prompts)
    }

    /// The first listing on a new connection: what the server offers.
    pub(super) async fn list_at_start(
        &self,
        peer: &Peer<RoleClient>,
        connection: u64,
    ) -> Result<(), StartError> {
        let offers_tools = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.tools.is_some());
        let ticket = self.take_ticket();
        let tools = if offers_tools {
            self.list_tools(peer)
                .await
                .map_err(|err| StartError::ListTools(error_chain(&err)))?
        } else {
            Vec::new()
        };
        self.replace_listing(&self.tools, connection, ticket, tools);
        let offers_prompts = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.prompts.is_some());
        if offers_prompts {
            let ticket = self.take_ticket();
            // Prompts are an extra: a server whose listing fails still serves its tools.
            match peer.list_all_prompts().await {
                Ok(prompts) => self.replace_listing(&self.prompts, connection, ticket, prompts),
                Err(err) => {
                    tracing::warn!(server = %self.spec.name, error = %error_chain(&err), "listing MCP prompts failed");
                }
            }
        }
        Ok(())
    }

    /// After `notifications/tools/list_changed` (rmcp has already dropped
    /// its cached listing).
    pub(super) async fn relist_tools(&self, peer: &Peer<RoleClient>, connection: u64) {
        self.relist("tools", &self.tools, connection, self.list_tools(peer))
            .await;
    }

    /// After `notifications/prompts/list_changed`.
    pub(super) async fn relist_prompts(&self, peer: &Peer<RoleClient>, connection: u64) {
        self.relist(
            "prompts",
            &self.prompts,
            connection,
            peer.list_all_prompts(),
        )
        .await;
    }

    /// Lists `kind` again within the call timeout; a failure keeps the
    /// listing there is.
    async fn relist<T: PartialEq>(
        &self,
        kind: &str,
        slot: &Mutex<Listing<T>>,
        connection: u64,
        listing: impl Future<Output = Result<Vec<T>, ServiceError>>,
    ) {
        let ticket = self.take_ticket();
        let timeout = self.options.call_timeout;
        let listed = tokio::time::timeout(timeout, listing).await;
        match listed.unwrap_or(Err(ServiceError::Timeout { timeout })) {
            Ok(items) => {
                tracing::debug!(server = %self.spec.name, count = items.len(), "MCP {kind} listed again");
                self.replace_listing(slot, connection, ticket, items);
            }
            Err(err) => {
                tracing::warn!(server = %self.spec.name, error = %err, "listing MCP {kind} again failed");
            }
        }
    }

    /// Every page of the server's tools. A tool this client cannot read (a
    /// schema that is not an object, a missing name) is left out with a
    /// warning; rmcp alone would refuse the whole page, and with it every
    /// good tool of the server.
    async fn list_tools(&self, peer: &Peer<RoleClient>) -> Result<Vec<Tool>, ServiceError> {
        let mut tools = Vec::new();
        let mut cursor = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
            let (page, next) = match peer.send_request(request).await? {
                ServerResult::ListToolsResult(page) => (page.tools, page.next_cursor),
                ServerResult::CustomResult(CustomResult(page)) => self.readable_tools(&page),
                _ => return Err(ServiceError::UnexpectedResponse),
            };
            tools.extend(page);
            match next {
                // A server repeating a cursor would page forever.
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
    }

    /// The tools of a page rmcp could not read as a whole.
    fn readable_tools(&self, page: &Value) -> (Vec<Tool>, Option<String>) {
        let listed = page["tools"].as_array().map_or(&[][..], Vec::as_slice);
        let tools = listed
            .iter()
            .filter_map(|tool| match serde_json::from_value::<Tool>(tool.clone()) {
                Ok(tool) => Some(tool),
                Err(err) => {
                    let name = tool["name"].as_str().unwrap_or("(no name)");
                    tracing::warn!(server = %self.spec.name, tool = name, %err, "skipping an MCP tool this client cannot read");
                    None
                }
            })
            .collect();
        let next = page["nextCursor"].as_str().map(str::to_string);
        (tools, next)
    }

    fn take_ticket(&self) -> u64 {
        self.next_ticket.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Keep a listing unless a newer one is already in; tell the session
    /// when what it offers changed.
    fn replace_listing<T: PartialEq>(
        &self,
        slot: &Mutex<Listing<T>>,
        connection: u64,
        ticket: u64,
        items: Vec<T>,
    ) {
        let changed = {
            let mut list = lock(slot);
            if connection < list.connection || ticket < list.ticket {
                return;
            }
            let changed = list.items != items;
            *list = Listing {
                connection,
                ticket,
                items,
            };
            changed
        };
        if changed {
            self.changes.send_modify(|generation| *generation += 1);
        }
    }
}
