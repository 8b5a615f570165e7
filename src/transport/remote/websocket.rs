//! The WebSocket carrier: `GET /acp` with `Upgrade: websocket`, one
//! JSON-RPC message per text frame each way (binary frames are ignored),
//! pings every 15 s to keep proxies from closing a quiet socket. A client
//! that takes no frame for the stall time is disconnected; its turns run
//! on, saved, for another connection to load.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message as Frame, WebSocket};
use futures::{SinkExt, StreamExt};

use super::registry::{Registry, Remote};
use crate::transport::{Outgoing, jsonrpc};

const PING_EVERY: Duration = Duration::from_secs(15);

/// Carry one connection's messages over `socket` until either side ends.
pub async fn run(
    socket: WebSocket,
    remote: Arc<Remote>,
    outgoing: Outgoing,
    registry: Arc<Registry>,
    stall: Duration,
) {
    let (sink, frames) = socket.split();
    tokio::select! {
        () = write(sink, outgoing, &remote, stall) => {}
        () = read(frames, &remote) => {}
    }
    registry.close(&remote.id);
}

async fn write(
    mut sink: futures::stream::SplitSink<WebSocket, Frame>,
    mut outgoing: Outgoing,
    remote: &Remote,
    stall: Duration,
) {
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        let frame = tokio::select! {
            message = outgoing.recv() => match message.map(String::from_utf8) {
                Some(Ok(text)) => Frame::Text(text.into()),
                // Ours are JSON, always UTF-8.
                Some(Err(_)) => continue,
                None => break,
            },
            _ = ping.tick() => Frame::Ping(Default::default()),
            () = remote.closed.cancelled() => {
                // What was sent before the end still goes out, then Close.
                let last = async {
                    while let Ok(message) = outgoing.try_recv() {
                        if let Ok(text) = String::from_utf8(message) {
                            sink.feed(Frame::Text(text.into())).await?;
                        }
                    }
                    sink.send(Frame::Close(None)).await
                };
                let _ = tokio::time::timeout(stall, last).await;
                return;
            }
        };
        // A burst goes out in one write, as on stdio: flushed once the
        // queue is momentarily empty, so one message is never held back.
        let more = !outgoing.is_empty();
        let sending = async {
            if more {
                sink.feed(frame).await
            } else {
                sink.send(frame).await
            }
        };
        match tokio::time::timeout(stall, sending).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::debug!(connection = %remote.id, %err, "the WebSocket closed");
                return;
            }
            Err(_) => {
                tracing::info!(connection = %remote.id, "a WebSocket client read nothing for {stall:?}: disconnecting it");
                return;
            }
        }
    }
}

async fn read(mut frames: futures::stream::SplitStream<WebSocket>, remote: &Remote) {
    while let Some(frame) = frames.next().await {
        let text = match frame {
            Ok(Frame::Text(text)) => text,
            Ok(Frame::Close(_)) | Err(_) => return,
            // Binary frames are not ACP; pings are answered by the socket.
            Ok(_) => continue,
        };
        if let Some(message) = jsonrpc::parse(text.as_bytes())
            && !remote.deliver(message).await
        {
            return;
        }
    }
}
