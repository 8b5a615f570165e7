//! How long starting and calling MCP servers may take.

use std::time::Duration;

/// Limits for talking to MCP servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpOptions {
    /// How long starting a server (spawn or connect, `initialize`, listing
    /// its tools) may take.
    pub start_timeout: Duration,
    /// How long one tool call may take before it is cancelled.
    pub call_timeout: Duration,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            start_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
        }
    }
}
