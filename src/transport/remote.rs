//! Remote ACP (`crucible-agent serve`): the Streamable HTTP and WebSocket
//! carriers on one `/acp` endpoint (ACP's transport RFD), HTTP/1.1 and
//! HTTP/2, plain or TLS. Each client connection gets a [`Peer`] from the
//! [`Host`] (the ACP layer) and sees whole messages, as on stdio; this
//! module knows JSON-RPC and HTTP, not ACP.
//!
//! An attack surface, so: a bearer token on every request, `Origin`
//! checked, bodies and frames no larger than stdio's line limit, bounded
//! connections, streams and buffers, unguessable connection ids, and a
//! client that stops reading is disconnected rather than buffered for.

mod access;
mod http;
mod registry;
mod route;
mod streams;
pub mod tls;
mod websocket;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

pub use access::{Access, TokenDigest};
pub use http::{CONNECTION_HEADER, SESSION_HEADER};

use super::{Connection, Incoming};

/// What serves remote connections: the ACP layer.
pub trait Host: Send + Sync + 'static {
    /// A new connection's peer; its answers and requests go out through
    /// `connection`.
    fn open(&self, connection: Connection) -> Box<dyn Peer>;
    /// The server stops: every session ends, answering its turn through
    /// its connection (still open while this runs).
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

/// One connection's server side.
pub trait Peer: Send + 'static {
    /// One message from the client, in the order they came. Never waits.
    fn handle(&mut self, message: Incoming);
    /// The connection ended (the client left, deleted it, or was dropped).
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// How the server takes clients.
pub struct Options {
    pub access: Access,
    pub max_connections: usize,
    /// An HTTP connection with no stream open this long is closed.
    pub idle_timeout: Duration,
    /// A client that reads nothing this long is disconnected.
    pub stall: Duration,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

/// How long a client may take to send a request's headers (or TLS hello).
const HANDSHAKE_WAIT: Duration = Duration::from_secs(30);
/// How long the streams may take to hand clients their last messages
/// when the server stops.
const FLUSH_GRACE: Duration = Duration::from_secs(3);

/// Serve `/acp` on `listener` until `stop` resolves; then every session
/// ends (its turn answered to its client), every connection closes, and
/// the streams hand their clients what is left (for a little while).
pub async fn serve(
    listener: TcpListener,
    options: Options,
    host: Arc<dyn Host>,
    stop: impl std::future::Future<Output = ()>,
) {
    let registry = registry::Registry::new(host, options.max_connections);
    let reaper = tokio::spawn(Arc::clone(&registry).reap_idle(options.idle_timeout));
    let endpoint = Arc::new(http::Endpoint {
        access: options.access,
        registry: Arc::clone(&registry),
        stall: options.stall,
    });
    let app = http::router(endpoint);
    // Sockets, not connections: HTTP/1.1 clients open one per stream.
    let sockets = Arc::new(Semaphore::new(
        options.max_connections.saturating_mul(4) + 16,
    ));
    let tls = options.tls.map(Arc::new);
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors, most often: breathe, go on.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Ok(permit) = Arc::clone(&sockets).try_acquire_owned() else {
            tracing::warn!(%peer, "too many open sockets: refusing one");
            continue;
        };
        let (app, tls) = (app.clone(), tls.clone());
        tokio::spawn(async move {
            let _permit = permit;
            serve_socket(stream, peer, tls.as_deref(), app).await;
        });
    }
    reaper.abort();
    registry.host().shutdown().await;
    registry.close_all();
    registry.flushed(FLUSH_GRACE).await;
}

/// One TCP connection: TLS when configured, then HTTP/1.1 (with upgrades,
/// for WebSocket) or HTTP/2, whichever the client speaks.
async fn serve_socket(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<&tokio_rustls::TlsAcceptor>,
    app: axum::Router,
) {
    let _ = stream.set_nodelay(true);
    let service = TowerToHyperService::new(app);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_WAIT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(20)));
    let served = match tls {
        Some(acceptor) => {
            match tokio::time::timeout(HANDSHAKE_WAIT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => {
                    builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .await
                }
                Ok(Err(err)) => {
                    tracing::debug!(%peer, %err, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            }
        }
        None => {
            builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await
        }
    };
    if let Err(err) = served {
        tracing::debug!(%peer, %err, "HTTP connection ended with an error");
    }
}
