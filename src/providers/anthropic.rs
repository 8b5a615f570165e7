//! Placeholder until the native client lands.

use futures::future::BoxFuture;

use super::http::HttpBase;
use super::{ChatRequest, EventStream, ModelInfo, Provider, ProviderError};
use crate::config::ProviderConfig;

pub struct AnthropicProvider {
    http: HttpBase,
}

impl AnthropicProvider {
    pub fn new(config: ProviderConfig) -> Self {
        Self {
            http: HttpBase::new(config),
        }
    }
}

impl Provider for AnthropicProvider {
    fn config(&self) -> &ProviderConfig {
        &self.http.config
    }

    fn stream_chat(
        &self,
        _request: ChatRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        Box::pin(async move { Err(self.http.malformed("not yet")) })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<ModelInfo>, ProviderError>> {
        Box::pin(async move { Ok(Vec::new()) })
    }
}
