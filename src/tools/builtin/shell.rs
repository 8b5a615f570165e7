//! `shell`: runs a command line through `ctx.shell` in the working directory.

use std::sync::OnceLock;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::titled;
use crate::events::{ToolCallInfo, ToolContent, ToolKind};
use crate::tools::sandbox::Escalated;
use crate::tools::{
    LocalShell, Shell, ShellOutput, ShellRun, ToolContext, ToolError, ToolOutput, TypedTool,
    shorten,
};

/// The longest timeout the model may ask for.
pub const MAX_TIMEOUT_SECS: u64 = 3600;

#[derive(Debug, Clone, Copy, Default)]
pub struct ShellTool;

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct Args {
    /// The command line, e.g. `cargo test --lib`
    command: String,
    /// Seconds before the command is killed (default 120)
    #[schemars(range(min = 1, max = MAX_TIMEOUT_SECS))]
    timeout_secs: Option<u64>,
}

impl TypedTool for ShellTool {
    type Args = Args;
    const NAME: &'static str = "shell";
    /// `sh -c` stands for the interpreter of this machine ([`Self::description_here`]).
    const DESCRIPTION: &'static str = "Run a command line with `sh -c` in the working directory and return its exit code and output \
         (stdout and stderr together; long output keeps its start and end). There is no input: commands must not wait for the keyboard. \
         Commands stop after 120 seconds unless `timeout_secs` says otherwise. \
         Prefer read_file, list_dir, glob and grep to cat, ls, find and grep.";
    const BRIEF: Option<&'static str> = Some("Run a shell command.");
    const KIND: ToolKind = ToolKind::Execute;
    const MUTATES: bool = true;

    fn description_here(&self) -> &str {
        static HERE: OnceLock<String> = OnceLock::new();
        HERE.get_or_init(|| {
            let interpreter = crate::platform::interpreter().describe();
            Self::DESCRIPTION.replacen("`sh -c`", &interpreter, 1)
        })
    }

    fn title_for(&self, args: &Args) -> String {
        titled("Run a command", Some(&args.command), |command| {
            let first_line = command.lines().next().unwrap_or_default();
            let mut shown = shorten(first_line, 80);
            if command.trim_end().contains('\n') && !shown.ends_with('…') {
                shown.push('…');
            }
            format!("Run `{shown}`")
        })
    }

    async fn run(&self, args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run_command(args, ctx).await
    }
}

async fn run_command(args: Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::InvalidArguments("`command` is empty".into()));
    }
    let timeout = match args.timeout_secs {
        None => ctx.settings.shell_timeout,
        Some(secs @ 1..=MAX_TIMEOUT_SECS) => Duration::from_secs(secs),
        Some(secs) => {
            return Err(ToolError::InvalidArguments(format!(
                "`timeout_secs` is {secs}; it must be between 1 and {MAX_TIMEOUT_SECS}"
            )));
        }
    };
    let (out, note) = run_in_sandbox(&args, ctx, timeout).await?;
    if out.timed_out {
        return Err(ToolError::Timeout {
            seconds: timeout.as_secs(),
            output: out.output,
        });
    }
    Ok(result(out, note))
}

/// Runs the command in the session's sandbox; when the sandbox blocked it,
/// once more outside if allowed. Also returns the note for the model on
/// what the sandbox blocked.
async fn run_in_sandbox(
    args: &Args,
    ctx: &ToolContext,
    timeout: Duration,
) -> Result<(ShellOutput, Option<String>), ToolError> {
    let environment = ctx.settings.environment.for_command();
    let confinement = (ctx.sandbox).confinement(&ctx.allowed_roots(), &environment.variables);
    // The editor's terminal cannot confine a command: a sandboxed one runs
    // here instead (README, "Sandbox").
    let shell: &dyn Shell = match &confinement {
        Some(_) if !ctx.shell.can_confine() => &LocalShell,
        _ => &*ctx.shell,
    };
    let run = ShellRun {
        command: &args.command,
        cwd: &ctx.cwd,
        env: &environment.variables,
        timeout,
        output_cap: ctx.settings.output_cap,
        cancel: &ctx.cancel,
        progress: &ctx.progress,
        confinement: confinement.as_ref(),
    };
    let out = shell.run(run).await?;
    let blocked = match &confinement {
        Some(confinement) if !out.success() && !out.timed_out => {
            confinement.explain(&out.output, &ctx.cwd)
        }
        _ => None,
    };
    let Some(blocked) = blocked else {
        return Ok((out, None));
    };
    match escalate(args, ctx, &blocked).await {
        Escalated::Granted => {
            let unconfined = ShellRun {
                confinement: None,
                ..run
            };
            let out = ctx.shell.run(unconfined).await?;
            let note = format!(
                "[{blocked}; the user let it run once outside the sandbox, and this is that run's result]"
            );
            Ok((out, Some(note)))
        }
        Escalated::Refused(reason) => Ok((out, Some(format!("[{blocked}. {reason}]")))),
        Escalated::Cancelled => Err(ToolError::Cancelled),
    }
}

/// The result: exit, output and the sandbox's note, for the model and the editor.
fn result(out: ShellOutput, note: Option<String>) -> ToolOutput {
    let shown = shown_output(&out.output);
    let mut text = ending(&out);
    // Said first, where a later cut to fit the window never reaches.
    if out.omitted_bytes > 0 {
        text.push_str(&format!(
            " (output cut: {} bytes left out of the middle)",
            out.omitted_bytes
        ));
    }
    let mut text = format!("{text}\n{shown}");
    if let Some(note) = &note {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(note);
    }
    // The output too: some clients (Crucible's) show a result only from here.
    let mut raw = json!({
        "output": shown,
        "exit_code": out.exit_code,
        "signal": out.signal,
        "omitted_bytes": out.omitted_bytes,
    });
    if let Some(note) = &note {
        raw["sandbox"] = json!(note);
    }
    let mut output = ToolOutput::text(text).with_raw_output(raw);
    if let Some(terminal_id) = out.terminal_id {
        // The editor keeps showing the released terminal's output.
        output.content = vec![ToolContent::Terminal { terminal_id }];
        output.content.extend(note.map(ToolContent::Text));
    }
    output
}

/// Asks whether a command the sandbox blocked may run once outside it.
async fn escalate(args: &Args, ctx: &ToolContext, blocked: &str) -> Escalated {
    let Some(escalation) = ctx.sandbox.escalation() else {
        return Escalated::Refused(NOT_ESCALATED.into());
    };
    let call = ToolCallInfo {
        id: ctx.call_id.clone().unwrap_or_default(),
        name: "shell".into(),
        title: ShellTool.title_for(args),
        kind: ToolKind::Execute,
        raw_input: json!({ "command": args.command }),
        locations: Vec::new(),
    };
    tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Escalated::Cancelled,
        answer = escalation.escalate(&call, blocked) => answer,
    }
}

/// What the model reads when a blocked command was not let out.
pub const NOT_ESCALATED: &str = "Do not try to get around the sandbox. Work inside the project directory, or tell the user what the command needs (they can allow it, or change the session's sandbox option)";

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
    use crate::tools::Tool;
    use crate::tools::test_support::{assert_contains, workspace};

    #[tokio::test]
    async fn reports_the_exit_code_and_output() {
        let ws = workspace();
        ws.write("marker.txt", "");
        let out = ws
            .run(&ShellTool, json!({"command": "ls; echo oops >&2; exit 2"}))
            .await;
        assert!(
            out.for_model.starts_with("Exit code: 2\n"),
            "{}",
            out.for_model
        );
        assert_contains(&out.for_model, "marker.txt\n");
        assert_contains(&out.for_model, "oops\n");
        assert_eq!(out.raw_output["exit_code"], 2);

        let quiet = ws.run(&ShellTool, json!({"command": "true"})).await;
        assert_eq!(quiet.for_model, "Exit code: 0\n(no output)");
    }

    #[tokio::test]
    async fn a_timeout_is_an_error_with_the_output_so_far() {
        let ws = workspace();
        let started = std::time::Instant::now();
        let err = ws
            .fail(
                &ShellTool,
                json!({"command": "echo begun; sleep 30", "timeout_secs": 1}),
            )
            .await;
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
        let out = ws.run(&ShellTool, json!({"command": "seq 1 10000"})).await;
        assert_contains(&out.for_model, "[output truncated: ");
        assert!(out.for_model.starts_with("Exit code: 0 (output cut: "));
        assert!(out.for_model.len() < 360);
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
        let err = ws.fail(&ShellTool, json!({"command": "sleep 30"})).await;
        assert!(matches!(err, ToolError::Cancelled));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn bad_arguments_are_errors() {
        let ws = workspace();
        let empty = ws.fail(&ShellTool, json!({"command": "  "})).await;
        assert!(matches!(empty, ToolError::InvalidArguments(_)));
        let zero = ws
            .fail(&ShellTool, json!({"command": "true", "timeout_secs": 0}))
            .await;
        assert_contains(&zero, "between 1 and 3600");
        let negative = ws
            .fail(&ShellTool, json!({"command": "true", "timeout_secs": -5}))
            .await;
        assert_contains(&negative, "`timeout_secs`");
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
