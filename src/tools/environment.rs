//! What environment a command or a server started for the model gets. The
//! agent's own environment often holds keys (`OPENAI_API_KEY`,
//! `GITHUB_TOKEN`, …) that the model must not read back.

/// The variables a program needs to run normally: the base of an MCP stdio
/// server's environment, and what `inherit = "core"` keeps.
pub const CORE_VARIABLES: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR",
];

/// The core variables of the agent's own environment that are set.
pub fn core_environment() -> Vec<(String, String)> {
    CORE_VARIABLES
        .iter()
        .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
        .collect()
}
