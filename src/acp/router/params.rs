//! Reading a request's params: the odd but readable ones tolerated, the
//! rest parsed into the schema's types with the offending field named, and
//! the checks every session request shares (its `cwd`, its
//! `additionalDirectories`, its `mcpServers`).

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::AGENT_METHOD_NAMES as NAMES;
use serde::Deserialize;
use serde_json::Value;

use crate::acp::mcp_spec;
use crate::acp::request::McpWanted;
use crate::mcp::{McpServerSpec, Relay};
use crate::transport::RpcError;

/// Params made acceptable where clients differ from the schema in ways
/// with one sensible reading; refused with a pointed message where not.
pub fn tolerate(method: &str, mut params: Value) -> Result<Value, RpcError> {
    match method {
        // Version negotiation: whatever the client asks for (a string such
        // as "1", a version we do not know), the answer names the version
        // we speak and the client decides. Only a missing one is refused.
        m if m == NAMES.initialize => {
            if let Ok(AskedVersion {
                protocol_version: Some(version),
            }) = AskedVersion::deserialize(&params)
                && version.as_u64().is_none_or(|v| v > u64::from(u16::MAX))
                && let Value::Object(fields) = &mut params
            {
                tracing::info!(requested = %version, "protocol version not understood; answering with ours");
                fields.insert("protocolVersion".into(), Value::from(1));
            }
            Ok(params)
        }
        m if m == NAMES.session_prompt && EarlyPrompt::is_one(&params) => {
            Err(RpcError::invalid_params(format!(
                "{m}: field `content` is not a prompt parameter; send the content blocks as `prompt` (`content` was an early draft's name)"
            )))
        }
        _ => Ok(params),
    }
}

/// The version an `initialize` asks for, whatever its type.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AskedVersion {
    protocol_version: Option<Value>,
}

/// A prompt as an early draft of ACP wrote it: `content`, no `prompt`.
#[derive(serde::Deserialize)]
struct EarlyPrompt {
    prompt: Option<serde::de::IgnoredAny>,
    content: Option<serde::de::IgnoredAny>,
}

impl EarlyPrompt {
    fn is_one(params: &Value) -> bool {
        EarlyPrompt::deserialize(params)
            .is_ok_and(|early| early.prompt.is_none() && early.content.is_some())
    }
}

/// A session's directory checked and the client's MCP servers read.
pub fn session_servers(
    method: &str,
    cwd: &Path,
    servers: Vec<McpWanted>,
    relay: Option<&Relay>,
) -> Result<Vec<McpServerSpec>, RpcError> {
    check_cwd(cwd)?;
    servers
        .into_iter()
        .enumerate()
        .map(|(n, server)| {
            mcp_spec::server_spec(server, cwd, relay).map_err(|err| {
                RpcError::invalid_params(format!("{method}: field mcpServers[{n}]: {err}"))
            })
        })
        .collect()
}

/// `additionalDirectories`: each an absolute, existing directory (the
/// error names its index); duplicates of one another are dropped.
pub fn check_roots(roots: &[PathBuf]) -> Result<Vec<PathBuf>, RpcError> {
    let mut checked: Vec<PathBuf> = Vec::new();
    for (n, root) in roots.iter().enumerate() {
        check_cwd(root).map_err(|err| {
            let detail = err.message.trim_start_matches("cwd: ");
            RpcError::invalid_params(format!("additionalDirectories[{n}]: {detail}"))
        })?;
        if !checked.contains(root) {
            checked.push(root.clone());
        }
    }
    Ok(checked)
}

/// The directories a session may work in (`[serve] roots`, canonical),
/// or anywhere (stdio: the client started the agent where it is).
#[derive(Debug, Clone, Default)]
pub enum AllowedRoots {
    #[default]
    Anywhere,
    Within(std::sync::Arc<[PathBuf]>),
}

impl AllowedRoots {
    /// Refuses a `cwd` or additional directory outside every root (after
    /// symbolic links are resolved), naming the roots.
    pub fn check(&self, directories: &[&Path]) -> Result<(), RpcError> {
        let Self::Within(roots) = self else {
            return Ok(());
        };
        for directory in directories {
            let real = std::fs::canonicalize(directory).unwrap_or_else(|_| directory.to_path_buf());
            if !roots.iter().any(|root| real.starts_with(root)) {
                let names: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
                return Err(RpcError::invalid_params(format!(
                    "`{}` is outside the directories this agent serves ({}); open a session in one of them, or add the directory to `[serve] roots` where the agent runs",
                    directory.display(),
                    names.join(", ")
                )));
            }
        }
        Ok(())
    }
}

pub fn check_cwd(cwd: &Path) -> Result<(), RpcError> {
    if !cwd.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "cwd: `{}` is not an absolute path; send the project's absolute path",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(RpcError::invalid_params(format!(
            "cwd: `{}` is not an existing directory",
            cwd.display()
        )));
    }
    Ok(())
}

/// A cwd or root error as the method's own.
pub fn prefixed(method: &str, err: RpcError) -> RpcError {
    RpcError::invalid_params(format!("{method}: {}", err.message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::methods::parse;
    use agent_client_protocol_schema::v1 as acp;
    use serde_json::json;

    #[test]
    fn param_errors_name_the_field() {
        let err =
            parse::<acp::NewSessionRequest>("session/new", json!({"mcpServers": []})).unwrap_err();
        assert_eq!(
            err.code,
            crate::transport::jsonrpc::ErrorCode::INVALID_PARAMS
        );
        assert!(err.message.contains("cwd"), "{}", err.message);
        let err = parse::<acp::PromptRequest>(
            "session/prompt",
            json!({"sessionId":"s","prompt":[{"type":"text"}]}),
        )
        .unwrap_err();
        assert!(
            err.message.contains("prompt[0]") || err.message.contains("text"),
            "{}",
            err.message
        );
        let err = parse::<acp::InitializeRequest>("initialize", Value::Null).unwrap_err();
        assert!(err.message.contains("protocolVersion"), "{}", err.message);
    }

    #[test]
    fn odd_but_readable_params_are_tolerated_and_the_rest_named() {
        let version = |v: Value| {
            tolerate("initialize", json!({ "protocolVersion": v })).unwrap()["protocolVersion"]
                .clone()
        };
        assert_eq!(version(json!(1)), 1);
        assert_eq!(
            version(json!(2)),
            2,
            "a number we read is left for the answer"
        );
        assert_eq!(version(json!("1")), 1);
        assert_eq!(version(json!("2025-06-18")), 1);
        assert_eq!(version(json!(100_000)), 1);
        // Missing stays missing: serde names the field.
        let params = tolerate("initialize", json!({})).unwrap();
        assert!(parse::<acp::InitializeRequest>("initialize", params).is_err());
        let err = tolerate(
            "session/prompt",
            json!({"sessionId": "s", "content": [{"type": "text", "text": "hi"}]}),
        )
        .unwrap_err();
        assert_eq!(
            err.code,
            crate::transport::jsonrpc::ErrorCode::INVALID_PARAMS
        );
        assert!(err.message.contains("`content`"), "{}", err.message);
    }

    #[test]
    fn cwd_must_be_an_absolute_existing_directory() {
        assert!(check_cwd(Path::new("relative/dir")).is_err());
        assert!(check_cwd(Path::new("/definitely/not/a/dir")).is_err());
        assert!(check_cwd(&std::env::temp_dir()).is_ok());
    }
}
