//! A server's tools and prompts as last listed: listed when it starts and
//! again on `list_changed`. Each listing takes a ticket first, so one that
//! finishes late never replaces a newer one.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use rmcp::model::{Prompt, Tool};
use rmcp::service::{Peer, RoleClient, ServiceError};

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
            peer.list_all_tools()
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
        self.relist("tools", &self.tools, connection, peer.list_all_tools())
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
