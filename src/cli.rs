//! Command-line flags and the paths they resolve to, and the subcommands
//! for people (`config`, `doctor`, `sessions`, `setup`) and `serve` (ACP
//! for remote clients); without one the binary speaks ACP on stdio.

pub mod doctor;
pub mod init;
pub mod serve;
pub mod sessions;
pub mod setup;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use thiserror::Error;

use crate::config::ChosenBy;

/// Crucible's agent, spoken over the Agent Client Protocol on stdin/stdout.
///
/// Editors (Zed, the Crucible TUI, acpx…) start this binary and talk
/// JSON-RPC to it. Logs go to stderr (RUST_LOG, default `warn`) and to
/// --log-file if given; stdout carries protocol messages only.
#[derive(Debug, Parser)]
#[command(name = "crucible-agent", version, about, long_about)]
pub struct Cli {
    /// Config file [default: $XDG_CONFIG_HOME/crucible/config.toml]
    #[arg(long, env = "CRUCIBLE_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Where sessions are stored [default: $XDG_DATA_HOME/crucible]
    #[arg(long, env = "CRUCIBLE_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Provider to use (a name from [llm.providers.*])
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model to use by default
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Agent card to start sessions with
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Crucible ACP profile this agent runs under: its
    /// [acp.agents.NAME.permissions] replace the [permissions] lists
    #[arg(long, env = "CRUCIBLE_AGENT_PROFILE", value_name = "NAME")]
    pub profile: Option<String>,
    /// Also write logs to this file (appended)
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write or locate the config file
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Check the config, provider keys and endpoints, MCP commands and the data dir
    Doctor,
    /// Choose a model interactively (in a terminal): finds the local servers
    /// running (Ollama, llama-server, LM Studio), or asks for a hosted
    /// provider's key, and writes the config and secrets.toml
    Setup {
        /// Also look for a model server here (Ollama's root or an
        /// OpenAI-compatible base URL); may be given more than once
        #[arg(long, value_name = "URL")]
        endpoint: Vec<String>,
    },
    /// List, show or delete stored sessions
    Sessions {
        #[command(subcommand)]
        action: SessionsAction,
    },
    /// Serve remote ACP clients over Streamable HTTP and WebSocket on
    /// /acp, with a bearer token (CRUCIBLE_AGENT_TOKEN, [serve] token_file,
    /// or one generated into the data dir); see the manual's "Remote agents"
    Serve {
        /// Address and port [default: [serve] listen, else 127.0.0.1:8719];
        /// another than loopback needs a token you set
        #[arg(long, value_name = "HOST:PORT", value_parser = crate::config::serve::parse_listen)]
        listen: Option<std::net::SocketAddr>,
        /// TLS certificate chain (PEM); with --tls-key
        #[arg(long, value_name = "PATH", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// TLS private key (PEM); with --tls-cert
        #[arg(long, value_name = "PATH", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Write a commented sample config to the config path
    Init {
        /// Replace an existing file
        #[arg(long)]
        force: bool,
    },
    /// Print where the config and the data live
    Path,
}

#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// Stored sessions, newest first
    List {
        /// Only sessions of this working directory
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// A session's metadata and conversation
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove a session from disk
    Delete { id: String },
}

/// Why a subcommand could not do its work (the message says what to do).
#[derive(Debug, Error)]
pub enum CliError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl Cli {
    /// The config path, and who chose it (a path the user named must exist).
    pub fn config_path(&self) -> (PathBuf, ChosenBy) {
        match &self.config {
            Some(path) => (path.clone(), ChosenBy::User),
            None => (
                config_home().join("crucible").join("config.toml"),
                ChosenBy::Default,
            ),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| xdg_dir("XDG_DATA_HOME", ".local/share").join("crucible"))
    }
}

fn config_home() -> PathBuf {
    xdg_dir("XDG_CONFIG_HOME", ".config")
}

fn xdg_dir(variable: &str, fallback_under_home: &str) -> PathBuf {
    match std::env::var_os(variable) {
        Some(dir) if !dir.is_empty() && PathBuf::from(&dir).is_absolute() => PathBuf::from(dir),
        _ => home().join(fallback_under_home),
    }
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}
