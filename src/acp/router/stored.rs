//! The sessions on disk as the client sees them: `session/list`,
//! `session/delete`, and the unstable `session/status`, `session/archive`
//! and `session/unarchive`. The store is read and written off the async
//! threads.

use std::sync::Arc;

use super::Router;
use super::answers::store_error;
use crate::acp::request::{ArchiveFilter, ListQuery, Listed, Reply, SessionId, Whereabouts};
use crate::store::{ArchiveMark, Store, StoreError};
use crate::transport::RpcError;

/// Sessions per `session/list` page.
const LIST_PAGE_SIZE: usize = 50;

impl Router {
    pub(in crate::acp) fn list_sessions(&mut self, query: ListQuery, reply: Reply<Listed>) {
        let archive_marks = self.sessions.unstable().archive;
        let Some(store) = self.sessions.store() else {
            let page = crate::store::list_page(Vec::new(), None, None, LIST_PAGE_SIZE);
            return reply.send(Ok(Listed {
                page,
                archive_marks,
            }));
        };
        // Without the opt-in, archived sessions (from an earlier run that had
        // it) stay out of the list: they cannot be opened.
        let filter = if archive_marks {
            query.archived
        } else {
            Some(ArchiveFilter::Exclude)
        };
        let keep: fn(bool) -> bool = match filter {
            Some(ArchiveFilter::Exclude) => |archived| !archived,
            Some(ArchiveFilter::Include) => |_| true,
            Some(ArchiveFilter::Only) => |archived| archived,
            None => {
                return reply.fail(RpcError::invalid_params(
                    "field `archived` is not one of `exclude`, `include`, `only`",
                ));
            }
        };
        tokio::spawn(async move {
            let listed = tokio::task::spawn_blocking(move || store.list()).await;
            let mut sessions = match listed {
                Ok(sessions) => sessions,
                Err(err) => return reply.fail(RpcError::internal(err.to_string())),
            };
            sessions.retain(|s| keep(s.archived));
            let page = crate::store::list_page(
                sessions,
                query.cwd.as_deref(),
                query.cursor.as_deref(),
                LIST_PAGE_SIZE,
            );
            reply.send(Ok(Listed {
                page,
                archive_marks,
            }));
        });
    }

    pub(in crate::acp) fn delete_session(&mut self, id: SessionId, reply: Reply<()>) {
        let open = self.sessions.remove(&id);
        let store = self.sessions.store();
        tokio::spawn(async move {
            if let Some(session) = open {
                session.close().await;
            }
            let deleted = match store {
                Some(store) => {
                    let id = id.clone();
                    tokio::task::spawn_blocking(move || store.delete(&id))
                        .await
                        .unwrap_or_else(|err| {
                            Err(StoreError::Io {
                                action: "cannot delete",
                                path: Default::default(),
                                source: std::io::Error::other(err),
                            })
                        })
                }
                None => Err(StoreError::NotFound(id.clone())),
            };
            reply.send(match deleted {
                // Open only in memory (it could not be saved): closing it was
                // the delete. Not there at all: what the client wanted holds
                // already, so it succeeds too (the spec's SHOULD).
                Ok(()) | Err(StoreError::NotFound(_)) => Ok(()),
                Err(err) => Err(store_error(err)),
            });
        });
    }

    /// Open here, saved on disk, or unknown.
    pub(in crate::acp) fn session_status(&mut self, id: SessionId, reply: Reply<Whereabouts>) {
        if self.sessions.get(&id).is_some() {
            return reply.send(Ok(Whereabouts::Open));
        }
        let store = self.sessions.store();
        tokio::spawn(async move {
            let saved = is_saved(store, id.clone()).await;
            reply.send(if saved {
                Ok(Whereabouts::Saved)
            } else {
                Err(RpcError::session_not_found(id.as_str()))
            });
        });
    }

    /// `session/archive`: closed here first (as `session/close` would),
    /// then marked in its metadata; its files stay. `session/unarchive`:
    /// the mark gone, the session lists and loads again.
    pub(in crate::acp) fn archive_session(
        &mut self,
        id: SessionId,
        mark: ArchiveMark,
        reply: Reply<()>,
    ) {
        let open = match mark {
            ArchiveMark::Archived => self.sessions.remove(&id),
            ArchiveMark::Active => None,
        };
        let store = self.sessions.store();
        tokio::spawn(async move {
            if let Some(session) = open {
                session.close().await;
            }
            reply.send(mark_archived(store, id, mark).await);
        });
    }
}

async fn mark_archived(
    store: Option<Arc<Store>>,
    id: SessionId,
    mark: ArchiveMark,
) -> Result<(), RpcError> {
    let Some(store) = store else {
        return Err(RpcError::session_not_found(id.as_str()));
    };
    let marked = tokio::task::spawn_blocking(move || store.set_archived(&id, mark)).await;
    match marked {
        Ok(marked) => marked.map_err(store_error),
        Err(err) => Err(RpcError::internal(err.to_string())),
    }
}

/// Whether the store holds a session `id` (its metadata reads), off the
/// async threads.
pub(super) async fn is_saved(store: Option<Arc<Store>>, id: SessionId) -> bool {
    match store {
        Some(store) => tokio::task::spawn_blocking(move || store.metadata(&id).is_ok())
            .await
            .unwrap_or(false),
        None => false,
    }
}
