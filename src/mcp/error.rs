//! What can go wrong with an MCP server: using or starting it, and calling it.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use super::spec::SpecError;

/// Why a server could not be used or started.
#[derive(Debug, Error)]
pub enum McpError {
    #[error("server `{server}` failed to start: {source}")]
    Start {
        server: String,
        #[source]
        source: StartError,
    },
    #[error("server `{0}` is configured twice; only the first is used")]
    DuplicateName(String),
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// What went wrong while starting a server.
#[derive(Debug, Error)]
pub enum StartError {
    #[error("command `{command}` not found")]
    CommandNotFound { command: String },
    #[error("command `{command}` could not be run: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("working directory `{}` does not exist", .0.display())]
    MissingCwd(PathBuf),
    #[error("the process {status} before answering `initialize`{stderr}")]
    Exited { status: String, stderr: String },
    #[error("no answer within {} s{stderr}", .after.as_secs_f64())]
    Timeout { after: Duration, stderr: String },
    #[error("`initialize` failed: {reason}{stderr}")]
    Initialize { reason: String, stderr: String },
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("listing its tools failed: {0}")]
    ListTools(String),
    #[error("it asks for the sandbox (`sandbox = true`), which cannot confine it: {0}")]
    Sandbox(String),
}

/// Why a tool call failed (besides the tool reporting an error itself,
/// which is a result with `isError`).
#[derive(Debug, Error)]
pub enum McpCallError {
    #[error("cancelled by the user")]
    Cancelled,
    #[error(
        "MCP tool `{tool}` of server `{server}` did not answer within {} s; the call was cancelled",
        .after.as_secs_f64()
    )]
    Timeout {
        server: String,
        tool: String,
        after: Duration,
    },
    #[error(
        "MCP server `{server}` stopped during the call: {detail}; it will be {again} on the next call"
    )]
    Died {
        server: String,
        detail: String,
        /// "restarted" (stdio) or "reconnected" (HTTP).
        again: &'static str,
    },
    #[error("MCP server `{server}` is not available: {source}")]
    Unavailable {
        server: String,
        #[source]
        source: StartError,
    },
    #[error("MCP server `{server}` has been shut down")]
    ShutDown { server: String },
    #[error("MCP server `{server}` rejected the arguments: {message}")]
    InvalidParams { server: String, message: String },
    #[error("MCP server `{server}` answered with an error: {message}")]
    Server { server: String, message: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::error_chain;

    #[test]
    fn error_chains_skip_repeated_causes() {
        let inner = std::io::Error::other("connection refused");
        let outer = StartError::Spawn {
            command: "x".into(),
            source: inner,
        };
        assert_eq!(
            error_chain(&outer),
            "command `x` could not be run: connection refused"
        );
    }
}
