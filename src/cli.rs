//! Command-line flags and the paths they resolve to.

use std::path::PathBuf;

use clap::Parser;

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
    /// Also write logs to this file (appended)
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
}

impl Cli {
    /// The config path, and whether the user named it (then it must exist).
    pub fn config_path(&self) -> (PathBuf, bool) {
        match &self.config {
            Some(path) => (path.clone(), true),
            None => (config_home().join("crucible").join("config.toml"), false),
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
