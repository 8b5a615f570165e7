//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer
//! ships: a GET opens an event stream whose first `endpoint` event names
//! where to POST messages; the server's messages arrive as `message` events.

use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::mcp::error::StartError;
use crate::util::error_chain;

/// Messages buffered between the event stream and the client loop.
const CHANNEL_CAPACITY: usize = 64;

#[derive(Debug, Error)]
pub enum SseError {
    #[error("POST to {endpoint} failed: {reason}")]
    Post { endpoint: String, reason: String },
}

pub struct SseTransport {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SseTransport {
    /// Opens the event stream and waits for the `endpoint` event.
    pub async fn connect(url: &str, headers: &[(String, String)]) -> Result<Self, StartError> {
        let fail = |reason: String| StartError::Initialize {
            reason,
            stderr: String::new(),
        };
        let base = reqwest::Url::parse(url).map_err(|err| fail(format!("invalid URL: {err}")))?;
        let mut header_map = HeaderMap::new();
        for (key, value) in headers {
            let key = HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| fail(format!("invalid header name `{key}`")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| fail(format!("invalid value for header `{key}`")))?;
            header_map.insert(key, value);
        }
        let client = reqwest::Client::new();
        let response = client
            .get(base.clone())
            .headers(header_map.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|err| StartError::Unreachable {
                url: url.to_string(),
                reason: error_chain(&err),
            })?;
        if !response.status().is_success() {
            return Err(fail(format!("GET {url} answered {}", response.status())));
        }
        let mut events = response.bytes_stream().eventsource();
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event == "endpoint" => {
                    let endpoint = base.join(event.data.trim()).map_err(|err| {
                        fail(format!("invalid endpoint `{}`: {err}", event.data.trim()))
                    })?;
                    // Messages (and headers) must not be sent to another host.
                    if endpoint.origin() != base.origin() {
                        return Err(fail(format!(
                            "the endpoint {endpoint} is not on the server's origin"
                        )));
                    }
                    break endpoint;
                }
                Some(Ok(_)) => continue,
                Some(Err(err)) => return Err(fail(format!("reading the event stream: {err}"))),
                None => {
                    return Err(fail(
                        "the event stream ended before naming an endpoint".into(),
                    ));
                }
            }
        };
        let (tx, incoming) = mpsc::channel(CHANNEL_CAPACITY);
        let reader = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(err) => {
                        tracing::debug!(%err, "MCP SSE stream failed");
                        break;
                    }
                };
                if !(event.event.is_empty() || event.event == "message") {
                    continue;
                }
                match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&event.data) {
                    Ok(message) => {
                        if tx.send(message).await.is_err() {
                            break;
                        }
                    }
                    Err(err) => tracing::warn!(%err, "MCP SSE message is not JSON-RPC"),
                }
            }
            // Dropping `tx` ends the client loop: the server is gone.
        });
        Ok(Self {
            client,
            endpoint,
            headers: header_map,
            incoming,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let client = self.client.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        async move {
            let fail = |reason: String| SseError::Post {
                endpoint: endpoint.to_string(),
                reason,
            };
            let response = client
                .post(endpoint.clone())
                .headers(headers)
                .json(&item)
                .send()
                .await
                .map_err(|err| fail(error_chain(&err)))?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(fail(format!("the server answered {}", response.status())))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}
