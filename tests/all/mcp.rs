//! The MCP client through its public face: [`McpManager`] and the tools it
//! hands out, run as the agent loop runs them.
//!
//! The hermetic tests talk to `tests/fixtures/mcp/echo_server.py` (Python 3,
//! standard library only). The tests marked ignored talk to the real npm
//! servers (server-everything over stdio, streamable HTTP and legacy SSE;
//! server-filesystem over stdio); `make e2e` (`scripts/e2e.sh`) installs
//! them and sets `CRUCIBLE_E2E_MCP_EVERYTHING` and
//! `CRUCIBLE_E2E_MCP_FILESYSTEM`. Run without those they fail, saying so.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crucible_agent::mcp::{McpCallError, McpManager, McpOptions, McpServer, McpServerSpec};
use crucible_agent::tools::{
    Progress, Tool, ToolContent, ToolContext, ToolError, ToolKind, ToolRegistry,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mcp")
        .join(name)
}

pub(crate) fn echo_spec(name: &str) -> McpServerSpec {
    McpServerSpec::stdio(name, "python3")
        .with_args([fixture("echo_server.py").display().to_string()])
}

pub(crate) fn options(call_timeout: Duration) -> McpOptions {
    McpOptions {
        start_timeout: Duration::from_secs(20),
        call_timeout,
    }
}

pub(crate) async fn start(specs: Vec<McpServerSpec>) -> McpManager {
    McpManager::start(specs, options(Duration::from_secs(20))).await
}

pub(crate) fn tool(manager: &McpManager, name: &str) -> Arc<dyn Tool> {
    let tools = manager.tools();
    let names: Vec<String> = tools.iter().map(|t| t.name().to_string()).collect();
    tools
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name} among {names:?}"))
}

pub(crate) fn names(manager: &McpManager) -> Vec<String> {
    manager
        .tools()
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}

pub(crate) fn ctx() -> ToolContext {
    ToolContext::local(std::env::temp_dir())
}

/// Alive and not a zombie (a zombie is dead, only not yet reaped).
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------
// Hermetic: the Python fixture.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn lists_every_page_of_tools_under_sanitized_names() {
    let manager = start(vec![echo_spec("echo fixture")]).await;
    assert!(manager.failures().is_empty(), "{:?}", manager.failures());
    assert_eq!(
        names(&manager),
        [
            "echo_fixture__echo",
            "echo_fixture__add",
            "echo_fixture__fail",
            "echo_fixture__crash",
            "echo_fixture__hang",
            "echo_fixture__add_tool",
            "echo_fixture__child_pid",
            "echo_fixture__odd_name_tool",
            "echo_fixture__progress",
            "echo_fixture__add_prompt",
        ]
    );

    let echo = tool(&manager, "echo_fixture__echo");
    assert_eq!(
        echo.description(),
        "[MCP server `echo fixture`] Returns its text."
    );
    assert_eq!(echo.title(&json!({})), "echo fixture: echo");
    assert_eq!(echo.kind(), ToolKind::Other);
    assert!(echo.mutates());
    assert_eq!(echo.parameters()["required"], json!(["text"]));
    let add = tool(&manager, "echo_fixture__add");
    assert_eq!(add.kind(), ToolKind::Read);
    assert!(!add.mutates());
    // A schema without properties gets an empty one.
    assert_eq!(
        tool(&manager, "echo_fixture__fail").parameters(),
        json!({"type": "object", "properties": {}})
    );

    // Through a registry, as the agent loop calls it: the sanitized name
    // maps back to the server's exact one.
    let mut registry = ToolRegistry::builtin();
    for tool in manager.tools() {
        registry.register(tool);
    }
    let output = registry
        .call("echo_fixture__odd_name_tool", json!({}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "dynamic odd.name/tool");
    manager.shutdown().await;
}

#[tokio::test]
async fn calls_return_text_and_structured_content() {
    let manager = start(vec![echo_spec("echo")]).await;
    let output = tool(&manager, "echo__echo")
        .call(json!({"text": "héllo ✓"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "héllo ✓");
    let sum = tool(&manager, "echo__add")
        .call(json!({"a": 2, "b": 3}), &ctx())
        .await
        .unwrap();
    assert_eq!(sum.for_model, "5");
    assert_eq!(sum.raw_output["structuredContent"], json!({"sum": 5}));
    // No arguments at all (some models send null).
    let empty = tool(&manager, "echo__echo")
        .call(Value::Null, &ctx())
        .await
        .unwrap();
    assert_eq!(empty.for_model, "(no output)");
    manager.shutdown().await;
}

#[tokio::test]
async fn is_error_results_and_protocol_errors_are_tool_errors() {
    let manager = start(vec![echo_spec("echo")]).await;
    let err = tool(&manager, "echo__fail")
        .call(json!({}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m == "something went wrong"),
        "{err}"
    );

    // A JSON-RPC error (here: invalid params for an unknown tool).
    let server = &manager.servers()[0];
    let err = server
        .call_tool("no_such_tool", None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, McpCallError::InvalidParams { .. }), "{err}");
    assert!(
        err.to_string().contains("Unknown tool: no_such_tool"),
        "{err}"
    );
    manager.shutdown().await;
}

#[tokio::test]
async fn a_crash_mid_call_fails_that_call_and_the_next_call_restarts_the_server() {
    let manager = start(vec![echo_spec("echo")]).await;
    let first_pid = manager.process_ids()[0].1;
    let err = tool(&manager, "echo__crash")
        .call(json!({}), &ctx())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, ToolError::ServerDown { .. }), "{message}");
    assert!(
        message.starts_with(
            "MCP server `echo` stopped during the call: the process exited with status 3"
        ),
        "{message}"
    );
    assert!(
        message.contains("crashing on purpose"),
        "its stderr is quoted: {message}"
    );
    assert!(
        message.ends_with("it will be restarted on the next call"),
        "{message}"
    );

    let output = tool(&manager, "echo__echo")
        .call(json!({"text": "back"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "back");
    let second_pid = manager.process_ids()[0].1;
    assert_ne!(first_pid, second_pid);
    assert!(!alive(first_pid));
    manager.shutdown().await;
}

#[tokio::test]
async fn a_call_that_never_answers_times_out_and_the_server_keeps_working() {
    let manager =
        McpManager::start(vec![echo_spec("echo")], options(Duration::from_millis(500))).await;
    let started = Instant::now();
    let err = tool(&manager, "echo__hang")
        .call(json!({}), &ctx())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        err.to_string(),
        "MCP tool `hang` of server `echo` did not answer within 0.5 s; the call was cancelled"
    );
    let pid = manager.process_ids()[0].1;
    let output = tool(&manager, "echo__echo")
        .call(json!({"text": "still here"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "still here");
    assert_eq!(
        manager.process_ids()[0].1,
        pid,
        "no restart after a timeout"
    );
    manager.shutdown().await;
}

#[tokio::test]
async fn cancelling_the_turn_cancels_the_call() {
    let manager = start(vec![echo_spec("echo")]).await;
    let ctx = ctx();
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let err = tool(&manager, "echo__hang")
        .call(json!({}), &ctx)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Cancelled), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    manager.shutdown().await;
}

#[tokio::test]
async fn list_changed_makes_the_new_tool_appear() {
    let manager = start(vec![echo_spec("echo")]).await;
    let mut changes = manager.changes();
    changes.mark_unchanged();
    let output = tool(&manager, "echo__add_tool")
        .call(json!({"name": "late.tool"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "added late.tool");
    tokio::time::timeout(Duration::from_secs(10), changes.changed())
        .await
        .expect("a change is signalled")
        .unwrap();
    eventually("the new tool is listed", || {
        names(&manager).contains(&"echo__late_tool".to_string())
    })
    .await;
    let output = tool(&manager, "echo__late_tool")
        .call(json!({}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "dynamic late.tool");
    manager.shutdown().await;
}

#[tokio::test]
async fn servers_that_cannot_start_are_recorded_and_the_rest_work() {
    let started = Instant::now();
    let never_answers = |name: &str| McpServerSpec::stdio(name, "sleep").with_args(["30"]);
    let manager = McpManager::start(
        vec![
            McpServerSpec::stdio("ghost", "/nonexistent/mcp-ghost"),
            echo_spec("echo"),
            echo_spec("broken").with_args(["--exit-at-start"]),
            never_answers("silent1"),
            never_answers("silent2"),
            never_answers("silent3"),
            never_answers("silent4"),
            echo_spec("nowhere").with_cwd("/nonexistent/dir"),
            McpServerSpec::http("", "http://127.0.0.1:1/mcp"),
            echo_spec("echo"),
            McpServerSpec::http("down", "http://127.0.0.1:1/mcp"),
            McpServerSpec::sse("down-sse", "http://127.0.0.1:1/sse"),
        ],
        McpOptions {
            start_timeout: Duration::from_secs(2),
            call_timeout: Duration::from_secs(10),
        },
    )
    .await;
    // Started together: the four silent servers' 2 s timeouts overlap (one
    // after another they would take 8 s; the bound leaves a busy machine
    // room for the rest).
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
    let failures = manager.failures();
    let reason = |name: &str| {
        failures
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, reason)| reason.clone())
            .unwrap_or_else(|| panic!("no failure for {name}: {failures:?}"))
    };
    assert_eq!(
        reason("ghost"),
        "server `ghost` failed to start: command `/nonexistent/mcp-ghost` not found"
    );
    let broken = reason("broken");
    assert!(
        broken.starts_with("server `broken` failed to start: the process exited with status 2"),
        "{broken}"
    );
    assert!(broken.contains("bad configuration: no token"), "{broken}");
    assert_eq!(
        reason("silent1"),
        "server `silent1` failed to start: no answer within 2 s"
    );
    for silent in ["silent2", "silent3", "silent4"] {
        assert!(reason(silent).contains("no answer within 2 s"));
    }
    assert_eq!(
        reason("nowhere"),
        "server `nowhere` failed to start: working directory `/nonexistent/dir` does not exist"
    );
    assert_eq!(reason(""), "an MCP server has an empty name");
    assert_eq!(
        reason("echo"),
        "server `echo` is configured twice; only the first is used"
    );
    for (name, url) in [
        ("down", "http://127.0.0.1:1/mcp"),
        ("down-sse", "http://127.0.0.1:1/sse"),
    ] {
        let reason = reason(name);
        assert!(
            reason.starts_with(&format!(
                "server `{name}` failed to start: cannot reach {url}: "
            )),
            "{reason}"
        );
        assert!(reason.contains("Connection refused"), "{reason}");
    }
    assert_eq!(failures.len(), 11, "{failures:?}");

    assert_eq!(manager.server_names(), ["echo"]);
    let output = tool(&manager, "echo__echo")
        .call(json!({"text": "ok"}), &ctx())
        .await
        .unwrap();
    assert_eq!(output.for_model, "ok");
    manager.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_the_server_and_what_it_started() {
    let manager = start(vec![echo_spec("a"), echo_spec("b")]).await;
    let pids: Vec<u32> = manager
        .process_ids()
        .into_iter()
        .map(|(_, pid)| pid)
        .collect();
    assert_eq!(pids.len(), 2);
    let grandchild: u32 = tool(&manager, "a__child_pid")
        .call(json!({}), &ctx())
        .await
        .unwrap()
        .for_model
        .parse()
        .unwrap();
    assert!(alive(grandchild));
    let kept = tool(&manager, "b__echo");
    let clone = manager.clone();

    manager.shutdown().await;
    for pid in pids.iter().chain([&grandchild]) {
        eventually(&format!("{pid} is gone"), || !alive(*pid)).await;
    }
    assert!(clone.process_ids().is_empty());
    let err = kept.call(json!({"text": "x"}), &ctx()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("MCP server `b` has been shut down"),
        "{err}"
    );
}

#[tokio::test]
async fn dropping_the_manager_kills_its_servers() {
    let manager = start(vec![echo_spec("a")]).await;
    let pid = manager.process_ids()[0].1;
    let grandchild: u32 = tool(&manager, "a__child_pid")
        .call(json!({}), &ctx())
        .await
        .unwrap()
        .for_model
        .parse()
        .unwrap();
    let kept = tool(&manager, "a__echo");
    drop(manager);
    eventually("the server is gone", || !alive(pid)).await;
    eventually("its child is gone", || !alive(grandchild)).await;
    let err = kept.call(json!({"text": "x"}), &ctx()).await.unwrap_err();
    assert!(err.to_string().contains("has been shut down"), "{err}");
}

#[tokio::test]
async fn one_server_on_its_own() {
    let server = McpServer::start(echo_spec("solo"), McpOptions::default())
        .await
        .unwrap();
    assert_eq!(server.name(), "solo");
    assert!(server.tool_names().contains(&"odd.name/tool".to_string()));
    let result = server
        .call_tool(
            "echo",
            Some(json!({"text": "direct"}).as_object().unwrap().clone()),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(result.content.len(), 1);
    server.stop().await;
    let err = server
        .call_tool("echo", None, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, McpCallError::ShutDown { .. }), "{err}");
}

// ---------------------------------------------------------------------------
// Real servers (npm), run by `make e2e`.
// ---------------------------------------------------------------------------

const NEEDS_NPM: &str =
    "run these through `make e2e` (scripts/e2e.sh), which installs the npm MCP servers";

fn npm_entry(var: &str) -> PathBuf {
    let path = std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: {NEEDS_NPM}"));
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "{var}={} does not exist: {NEEDS_NPM}",
        path.display()
    );
    path
}

fn everything() -> PathBuf {
    npm_entry("CRUCIBLE_E2E_MCP_EVERYTHING")
}

/// server-everything's tools, checked the same way over every transport.
async fn exercise_everything(manager: &McpManager, server: &str) {
    assert!(manager.failures().is_empty(), "{:?}", manager.failures());
    let names = names(manager);
    for expected in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
    ] {
        assert!(
            names.contains(&format!("{server}__{expected}")),
            "{expected} in {names:?}"
        );
    }
    let echo = tool(manager, &format!("{server}__echo"));
    assert_eq!(echo.kind(), ToolKind::Read);
    let output = echo.call(json!({"message": "hi ✓"}), &ctx()).await.unwrap();
    assert_eq!(output.for_model, "Echo: hi ✓");

    let sum = tool(manager, &format!("{server}__get-sum"));
    assert!(!sum.mutates());
    let output = sum.call(json!({"a": 2, "b": 3}), &ctx()).await.unwrap();
    assert!(output.for_model.contains('5'), "{}", output.for_model);

    let image = tool(manager, &format!("{server}__get-tiny-image"))
        .call(json!({}), &ctx())
        .await
        .unwrap();
    assert!(
        image.for_model.contains("[image: image/png, "),
        "{}",
        image.for_model
    );

    let structured = tool(manager, &format!("{server}__get-structured-content"))
        .call(json!({"location": "New York"}), &ctx())
        .await
        .unwrap();
    assert!(
        structured.raw_output["structuredContent"].is_object(),
        "{:?}",
        structured.raw_output
    );

    // Wrong arguments: the server says what is wrong, the model reads it.
    let err = sum.call(json!({"a": "x"}), &ctx()).await.unwrap_err();
    assert!(err.to_string().contains("expected number"), "{err}");

    // Its progress notifications reach the call's progress hook.
    let (progress, mut reports) = Progress::channel();
    let mut context = ctx();
    context.progress = progress;
    let output = tool(
        manager,
        &format!("{server}__trigger-long-running-operation"),
    )
    .call(json!({"duration": 0.6, "steps": 3}), &context)
    .await
    .unwrap();
    assert!(
        output.for_model.contains("completed"),
        "{}",
        output.for_model
    );
    let mut shown = Vec::new();
    while let Ok(content) = reports.try_recv() {
        shown.extend(content);
    }
    assert!(
        shown.contains(&ToolContent::Text("Progress 2/3".into())),
        "{shown:?}"
    );
}

#[tokio::test]
#[ignore = "needs npm MCP servers: run make e2e"]
async fn real_everything_over_stdio() {
    let spec = McpServerSpec::stdio("everything", "node")
        .with_args([everything().display().to_string(), "stdio".to_string()]);
    let manager = start(vec![spec]).await;
    exercise_everything(&manager, "everything").await;
    let pid = manager.process_ids()[0].1;
    manager.shutdown().await;
    eventually("node is gone", || !alive(pid)).await;
}

/// server-everything serving HTTP on 127.0.0.1 (it binds every interface
/// unless told otherwise: the preload narrows it).
struct HttpEverything {
    child: tokio::process::Child,
    port: u16,
}

impl HttpEverything {
    async fn start(transport: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = tokio::process::Command::new("node")
            .arg("--require")
            .arg(fixture("localhost-only.cjs"))
            .arg(everything())
            .arg(transport)
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "server-everything {transport} did not listen"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Bound to loopback only.
        let outside = local_non_loopback_ip();
        if let Some(ip) = outside {
            assert!(
                std::net::TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(1))
                    .is_err(),
                "server-everything listens on {ip}"
            );
        }
        Self { child, port }
    }
}

/// This machine's address on its default route, if it has one.
fn local_non_loopback_ip() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test]
#[ignore = "needs npm MCP servers: run make e2e"]
async fn real_everything_over_streamable_http() {
    let mut server = HttpEverything::start("streamableHttp").await;
    let spec = McpServerSpec::http(
        "everything",
        format!("http://127.0.0.1:{}/mcp", server.port),
    )
    .with_header("X-Test", "crucible");
    let manager = start(vec![spec]).await;
    exercise_everything(&manager, "everything").await;
    manager.shutdown().await;
    server.child.kill().await.unwrap();
}

#[tokio::test]
#[ignore = "needs npm MCP servers: run make e2e"]
async fn real_everything_over_legacy_sse() {
    let mut server = HttpEverything::start("sse").await;
    let spec = McpServerSpec::sse("old", format!("http://127.0.0.1:{}/sse", server.port));
    let manager = start(vec![spec]).await;
    exercise_everything(&manager, "old").await;
    manager.shutdown().await;
    server.child.kill().await.unwrap();
}

#[tokio::test]
#[ignore = "needs npm MCP servers: run make e2e"]
async fn real_http_server_that_goes_away_fails_the_call_then_comes_back() {
    let mut server = HttpEverything::start("streamableHttp").await;
    let port = server.port;
    let spec = McpServerSpec::http("everything", format!("http://127.0.0.1:{port}/mcp"));
    let manager = start(vec![spec]).await;
    let echo = tool(&manager, "everything__echo");
    echo.call(json!({"message": "1"}), &ctx()).await.unwrap();

    server.child.kill().await.unwrap();
    let err = echo
        .call(json!({"message": "2"}), &ctx())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "MCP server `everything` stopped during the call: the connection to http://127.0.0.1:{port}/mcp failed: "
        )),
        "{message}"
    );
    assert!(
        message.ends_with("it will be reconnected on the next call"),
        "{message}"
    );

    // Same port, new process: the next call opens a new session.
    let child = tokio::process::Command::new("node")
        .arg("--require")
        .arg(fixture("localhost-only.cjs"))
        .arg(everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    server.child = child;
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let output = echo.call(json!({"message": "3"}), &ctx()).await.unwrap();
    assert_eq!(output.for_model, "Echo: 3");
    manager.shutdown().await;
    server.child.kill().await.unwrap();
}

#[tokio::test]
#[ignore = "needs npm MCP servers: run make e2e"]
async fn real_filesystem_over_stdio() {
    let entry = npm_entry("CRUCIBLE_E2E_MCP_FILESYSTEM");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "alpha\n").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    let spec = McpServerSpec::stdio("fs", "node")
        .with_args([entry.display().to_string(), root.display().to_string()]);
    let manager = start(vec![spec]).await;
    assert!(manager.failures().is_empty(), "{:?}", manager.failures());

    let list = tool(&manager, "fs__list_directory");
    assert_eq!(list.kind(), ToolKind::Read);
    let output = list
        .call(json!({"path": root.display().to_string()}), &ctx())
        .await
        .unwrap();
    assert!(
        output.for_model.contains("[FILE] a.txt"),
        "{}",
        output.for_model
    );
    assert!(
        output.for_model.contains("[DIR] sub"),
        "{}",
        output.for_model
    );

    let read = tool(&manager, "fs__read_text_file")
        .call(
            json!({"path": root.join("a.txt").display().to_string()}),
            &ctx(),
        )
        .await
        .unwrap();
    assert!(read.for_model.contains("alpha"), "{}", read.for_model);

    // Outside the allowed directory: the server refuses, the model reads why.
    let err = tool(&manager, "fs__read_text_file")
        .call(json!({"path": "/etc/hostname"}), &ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Failed(_)), "{err}");
    assert!(tool(&manager, "fs__write_file").mutates());
    manager.shutdown().await;
}

// ---------------------------------------------------------------------------
// Prompts.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn prompts_are_listed_and_fetched_as_messages() {
    let manager = start(vec![echo_spec("fx")]).await;
    let prompts = manager.prompts();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["greet", "compact", "translate"]);
    assert_eq!(prompts[0].server, "fx");
    assert!(prompts[0].arguments[0].required);
    assert!(!prompts[2].arguments[1].required);
    let mut arguments = serde_json::Map::new();
    arguments.insert("name".into(), json!("Ann"));
    let messages = manager
        .get_prompt("fx", "greet", arguments, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].text(), "PROMPT-GREET: please greet Ann warmly.");
    let err = manager
        .get_prompt(
            "fx",
            "greet",
            serde_json::Map::new(),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpCallError::InvalidParams { .. }), "{err}");
    assert!(err.to_string().contains("missing argument: name"), "{err}");
    manager.shutdown().await;
}

#[tokio::test]
#[ignore = "needs npm MCP servers: run make e2e"]
async fn real_everything_prompts() {
    let spec = McpServerSpec::stdio("everything", "node")
        .with_args([everything().display().to_string(), "stdio".to_string()]);
    let manager = start(vec![spec]).await;
    let prompts = manager.prompts();
    let args = prompts
        .iter()
        .find(|p| p.name == "args-prompt")
        .unwrap_or_else(|| panic!("{prompts:?}"));
    assert_eq!(args.arguments[0].name, "city");
    assert!(args.arguments[0].required);
    assert!(!args.arguments[1].required);
    assert!(prompts.iter().any(|p| p.name == "simple-prompt"));
    let mut arguments = serde_json::Map::new();
    arguments.insert("city".into(), json!("Paris"));
    let messages = manager
        .get_prompt(
            "everything",
            "args-prompt",
            arguments,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(messages[0].text().contains("Paris"), "{messages:?}");
    let mut arguments = serde_json::Map::new();
    arguments.insert("resourceType".into(), json!("Text"));
    arguments.insert("resourceId".into(), json!("1"));
    let messages = manager
        .get_prompt(
            "everything",
            "resource-prompt",
            arguments,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let text: String = messages.iter().map(|m| m.text()).collect();
    assert!(text.contains("<context uri="), "{messages:?}");
    manager.shutdown().await;
}
