//! The sessions on disk as the client sees them: `session/list`,
//! `session/delete`, and the unstable `session/status`, `session/archive`
//! and `session/unarchive`. The store is read and written off the async
//! threads.

use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;

use super::Router;
use super::answers::store_error;
use crate::acp::translate;
use crate::model::SessionId;
use crate::store::{ArchiveMark, Store, StoreError};
use crate::transport::{Responder, RpcError};

/// Sessions per `session/list` page.
const LIST_PAGE_SIZE: usize = 50;

impl Router {
    pub(in crate::acp) fn list_sessions(
        &mut self,
        request: acp::ListSessionsRequest,
        responder: Responder,
    ) {
        let Some(store) = self.sessions.store() else {
            return responder.respond_with(Ok(acp::ListSessionsResponse::new(Vec::new())));
        };
        // Without the opt-in, archived sessions (from an earlier run that had
        // it) stay out of the list: they cannot be opened.
        let archive = self.sessions.unstable().archive;
        let filter = if archive {
            request.archived.clone().unwrap_or_default()
        } else {
            acp::SessionArchiveFilter::Exclude
        };
        let keep: fn(bool) -> bool = match filter {
            acp::SessionArchiveFilter::Exclude => |archived| !archived,
            acp::SessionArchiveFilter::Include => |_| true,
            acp::SessionArchiveFilter::Only => |archived| archived,
            _ => {
                return responder.respond(Err(RpcError::invalid_params(
                    "session/list: field `archived` is not one of `exclude`, `include`, `only`",
                )));
            }
        };
        tokio::spawn(async move {
            let listed = tokio::task::spawn_blocking(move || store.list()).await;
            let mut sessions = match listed {
                Ok(sessions) => sessions,
                Err(err) => return responder.respond(Err(RpcError::internal(err.to_string()))),
            };
            sessions.retain(|s| keep(s.archived));
            let page = crate::store::list_page(
                sessions,
                request.cwd.as_deref(),
                request.cursor.as_deref(),
                LIST_PAGE_SIZE,
            );
            let infos = page
                .sessions
                .into_iter()
                .map(|s| {
                    let meta = translate::list_meta(&s);
                    acp::SessionInfo::new(acp::SessionId::new(s.id), s.cwd)
                        .additional_directories(s.additional_directories)
                        .title(s.title)
                        .updated_at(s.updated_at)
                        .archived(archive.then_some(s.archived))
                        .meta(meta)
                })
                .collect();
            responder.respond_with(Ok(
                acp::ListSessionsResponse::new(infos).next_cursor(page.next_cursor)
            ));
        });
    }

    pub(in crate::acp) fn delete_session(
        &mut self,
        request: acp::DeleteSessionRequest,
        responder: Responder,
    ) {
        let id = SessionId::from(request.session_id.0.clone());
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
            let answer = match deleted {
                Ok(()) => Ok(acp::DeleteSessionResponse::new()),
                // Open only in memory (it could not be saved): closing it was
                // the delete. Not there at all: what the client wanted holds
                // already, so it succeeds too (the spec's SHOULD).
                Err(StoreError::NotFound(_)) => Ok(acp::DeleteSessionResponse::new()),
                Err(err) => Err(store_error(err)),
            };
            responder.respond_with(answer);
        });
    }

    /// Open here, saved on disk, or unknown.
    pub(in crate::acp) fn session_status(
        &mut self,
        request: acp::SessionStatusRequest,
        responder: Responder,
    ) {
        let id = SessionId::from(request.session_id.0.clone());
        if self.sessions.get(&id).is_some() {
            return responder.respond_with(Ok(acp::SessionStatusResponse::new(
                acp::SessionStatus::Open,
            )));
        }
        let store = self.sessions.store();
        tokio::spawn(async move {
            let saved = is_saved(store, id.clone()).await;
            let answer = if saved {
                Ok(acp::SessionStatusResponse::new(acp::SessionStatus::Saved))
            } else {
                Err(RpcError::session_not_found(id.as_str()))
            };
            responder.respond_with(answer);
        });
    }

    /// `session/archive`: closed here first (as `session/close` would),
    /// then marked in its metadata; its files stay.
    pub(in crate::acp) fn archive_session(
        &mut self,
        request: acp::ArchiveSessionRequest,
        responder: Responder,
    ) {
        let id = SessionId::from(request.session_id.0.clone());
        let open = self.sessions.remove(&id);
        let store = self.sessions.store();
        tokio::spawn(async move {
            if let Some(session) = open {
                session.close().await;
            }
            let answer = mark_archived(store, id, ArchiveMark::Archived)
                .await
                .map(|()| acp::ArchiveSessionResponse::new());
            responder.respond_with(answer);
        });
    }

    /// `session/unarchive`: the mark gone, the session lists and loads again.
    pub(in crate::acp) fn unarchive_session(
        &mut self,
        request: acp::UnarchiveSessionRequest,
        responder: Responder,
    ) {
        let id = SessionId::from(request.session_id.0.clone());
        let store = self.sessions.store();
        tokio::spawn(async move {
            let answer = mark_archived(store, id, ArchiveMark::Active)
                .await
                .map(|()| acp::UnarchiveSessionResponse::new());
            responder.respond_with(answer);
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
