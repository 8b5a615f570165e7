//! `shell`: runs a command line through `ctx.shell` in the working directory.

use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::json;

use crate::tools::{
    ShellOutput, Tool, ToolContext, ToolError, ToolOutput, deserialize_arguments, shorten,
    str_argument,
};

use crate::events::{Location, ToolContent, ToolKind};

/// The longest timeout the model may ask for.
pub const MAX_TIMEOUT_SECS: u64 = 3600;

#[derive(Debug, Clone, Copy, Default)]
pub struct ShellTool;

#[derive(Debug, Deserialize)]
struct Arguments {
    command: String,
    timeout_secs: Option<u64>,
}

impl Tool for ShellTool {
    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> &str {
        "Run a command line with `sh -c` in the working directory and return its exit code and output \
         (stdout and stderr together; long output keeps its start and end). There is no input: commands must not wait for the keyboard. \
         Commands stop after 120 seconds unless `timeout_secs` says otherwise. \
         Prefer read_file, list_dir, glob and grep to cat, ls, find and grep."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The command line, e.g. `cargo test --lib`"
                },
                "timeout_secs": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TIMEOUT_SECS,
                    "description": "Seconds before the command is killed (default 120)"
                }
            },
            "required": ["command"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn title(&self, arguments: &serde_json::Value) -> String {
        match str_argument(arguments, "command") {
            Some(command) => {
                let first_line = command.lines().next().unwrap_or_default();
                let mut shown = shorten(first_line, 80);
                if command.trim_end().contains('\n') && !shown.ends_with('…') {
                    shown.push('…');
                }
                format!("Run `{shown}`")
            }
            None => "Run a command".into(),
        }
    }

    fn locations(&self, _arguments: &serde_json::Value, _ctx: &ToolContext) -> Vec<Location> {
        Vec::new()
    }

    fn mutates(&self) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments: Arguments = deserialize_arguments(arguments)?;
            run(arguments, ctx).await
        })
    }
}

async fn run(arguments: Arguments, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if arguments.command.trim().is_empty() {
        return Err(ToolError::InvalidArguments("`command` is empty".into()));
    }
    let timeout = match arguments.timeout_secs {
        None => ctx.settings.shell_timeout,
        Some(secs @ 1..=MAX_TIMEOUT_SECS) => Duration::from_secs(secs),
        Some(secs) => {
            return Err(ToolError::InvalidArguments(format!(
                "`timeout_secs` is {secs}; it must be between 1 and {MAX_TIMEOUT_SECS}"
            )));
        }
    };
    let out = ctx
        .shell
        .run(
            &arguments.command,
            &ctx.cwd,
            timeout,
            ctx.settings.output_cap,
            &ctx.cancel,
            &ctx.progress,
        )
        .await?;
    if out.timed_out {
        return Err(ToolError::Timeout {
            seconds: timeout.as_secs(),
            output: out.output,
        });
    }
    let text = format!("{}\n{}", ending(&out), shown_output(&out.output));
    let mut output = ToolOutput::text(text);
    if let Some(terminal_id) = out.terminal_id.clone() {
        // The editor keeps showing the released terminal's output.
        output.content = vec![ToolContent::Terminal { terminal_id }];
    }
    output.raw_output = json!({
        "exit_code": out.exit_code,
        "signal": out.signal,
        "omitted_bytes": out.omitted_bytes,
    });
    Ok(output)
}

fn ending(out: &ShellOutput) -> String {
    match (out.exit_code, out.signal) {
        (Some(code), _) => format!("Exit code: {code}"),
        (None, Some(signal)) => format!("Killed by signal {signal}"),
        (None, None) => "Ended without an exit code".into(),
    }
}

fn shown_output(output: &str) -> &str {
    if output.is_empty() {
        "(no output)"
    } else {
        output
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_support::workspace;

    #[tokio::test]
    async fn reports_the_exit_code_and_output() {
        let ws = workspace();
        ws.write("marker.txt", "");
        let out = ws
            .call(&ShellTool, json!({"command": "ls; echo oops >&2; exit 2"}))
            .await
            .unwrap();
        assert!(
            out.for_model.starts_with("Exit code: 2\n"),
            "{}",
            out.for_model
        );
        assert!(out.for_model.contains("marker.txt\n"), "{}", out.for_model);
        assert!(out.for_model.contains("oops\n"), "{}", out.for_model);
        assert_eq!(out.raw_output["exit_code"], 2);

        let quiet = ws
            .call(&ShellTool, json!({"command": "true"}))
            .await
            .unwrap();
        assert_eq!(quiet.for_model, "Exit code: 0\n(no output)");
    }

    #[tokio::test]
    async fn a_timeout_is_an_error_with_the_output_so_far() {
        let ws = workspace();
        let started = std::time::Instant::now();
        let err = ws
            .call(
                &ShellTool,
                json!({"command": "echo begun; sleep 30", "timeout_secs": 1}),
            )
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        let message = err.to_string();
        assert!(
            message.starts_with("the command timed out after 1 s"),
            "{message}"
        );
        assert!(message.ends_with("begun\n"), "{message}");
    }

    #[tokio::test]
    async fn the_settings_cap_the_output() {
        let mut ws = workspace();
        ws.ctx.settings.output_cap = 200;
        let out = ws
            .call(&ShellTool, json!({"command": "seq 1 10000"}))
            .await
            .unwrap();
        assert!(
            out.for_model.contains("[output truncated: "),
            "{}",
            out.for_model
        );
        assert!(out.for_model.len() < 300);
    }

    #[tokio::test]
    async fn cancel_stops_the_command() {
        let ws = workspace();
        let cancel = ws.ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        });
        let started = std::time::Instant::now();
        let err = ws
            .call(&ShellTool, json!({"command": "sleep 30"}))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Cancelled));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn bad_arguments_are_errors() {
        let ws = workspace();
        let empty = ws
            .call(&ShellTool, json!({"command": "  "}))
            .await
            .unwrap_err();
        assert!(matches!(empty, ToolError::InvalidArguments(_)));
        let zero = ws
            .call(&ShellTool, json!({"command": "true", "timeout_secs": 0}))
            .await
            .unwrap_err();
        assert!(zero.to_string().contains("between 1 and 3600"), "{zero}");
        let negative = ws
            .call(&ShellTool, json!({"command": "true", "timeout_secs": -5}))
            .await
            .unwrap_err();
        assert!(
            negative.to_string().contains("`timeout_secs`"),
            "{negative}"
        );
    }

    #[test]
    fn title_shows_the_command() {
        assert_eq!(
            ShellTool.title(&json!({"command": "cargo test"})),
            "Run `cargo test`"
        );
        assert_eq!(
            ShellTool.title(&json!({"command": "cd x\nmake"})),
            "Run `cd x…`"
        );
        assert_eq!(ShellTool.title(&json!({})), "Run a command");
    }
}
