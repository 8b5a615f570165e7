//! `[sandbox]`: how commands the model runs are confined (the policy is the
//! tools domain's [`SandboxSettings`]).

use std::path::{Path, PathBuf};

use super::error::{ConfigError, invalid};
use super::raw::RawSandbox;
use crate::tools::sandbox::{SandboxMode, SandboxSettings};

pub(super) fn validate(
    raw: RawSandbox,
    path: &Path,
    home: Option<PathBuf>,
) -> Result<SandboxSettings, ConfigError> {
    let mode = match raw.mode.as_deref() {
        None => SandboxMode::default(),
        Some(text) => SandboxMode::parse(text).ok_or_else(|| {
            invalid(
                path,
                "sandbox.mode",
                format!("`{text}` is not a sandbox mode"),
                "Use \"workspace-write\" (the default), \"read-only\" or \"off\".",
            )
        })?,
    };
    let mut writable = Vec::new();
    for (index, entry) in raw.writable.unwrap_or_default().into_iter().enumerate() {
        let expanded = match (entry.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(&entry),
        };
        if !expanded.is_absolute() {
            return Err(invalid(
                path,
                format!("sandbox.writable[{index}]"),
                format!("`{entry}` is not an absolute path"),
                "Give an absolute path or one starting with `~/`, such as \"~/.cargo\".",
            ));
        }
        writable.push(expanded);
    }
    Ok(SandboxSettings {
        mode,
        network: raw.network.unwrap_or(false),
        writable,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{load, refusal};
    use crate::tools::sandbox::{SandboxMode, SandboxSettings};

    #[test]
    fn the_sandbox_is_read_and_checked() {
        assert_eq!(load("", &[]).unwrap().sandbox, SandboxSettings::default());
        let text = "[sandbox]\nmode = \"read-only\"\nnetwork = true\nwritable = [\"/opt/cache\"]";
        let sandbox = load(text, &[]).unwrap().sandbox;
        assert_eq!(sandbox.mode, SandboxMode::ReadOnly);
        assert!(sandbox.network);
        assert_eq!(sandbox.writable, [std::path::PathBuf::from("/opt/cache")]);
        let err = refusal("[sandbox]\nmode = \"strict\"");
        assert!(err.contains("sandbox.mode"), "{err}");
        assert!(err.contains("\"workspace-write\""), "{err}");
        let err = refusal("[sandbox]\nwritable = [\"cache\"]");
        assert!(err.contains("sandbox.writable[0]"), "{err}");
        let err = refusal("[sandbox]\nnetwrk = true");
        assert!(err.contains("netwrk"), "{err}");
    }

    #[test]
    fn a_stdio_server_may_ask_for_the_sandbox_and_a_remote_one_may_not() {
        let text =
            "[mcp_servers.a]\ncommand = \"x\"\nsandbox = true\n[mcp_servers.b]\ncommand = \"y\"";
        let servers = load(text, &[]).unwrap().mcp_servers;
        let sandboxes: Vec<_> = servers
            .iter()
            .map(|server| match &server.transport {
                crate::mcp::McpTransport::Stdio { sandbox, .. } => sandbox.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        use crate::mcp::StdioSandbox;
        assert_eq!(sandboxes, [StdioSandbox::Wanted, StdioSandbox::Off]);
        let err = refusal("[mcp_servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\nsandbox = true");
        assert!(err.contains("mcp_servers.r.sandbox"), "{err}");
    }
}
