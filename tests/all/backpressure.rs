//! The outbound queue's bound: a client that stops reading (a paused
//! editor, a full pipe) holds the model's stream back instead of making the
//! agent buffer the whole answer, and loses nothing once it reads again.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::Command;

use crate::support::harness::{PATIENCE, agent_binary};

/// Text deltas of 16 bytes each, numbered so order and loss show.
const DELTAS: usize = 6 * 1024 * 1024 / 16;

fn delta(n: usize) -> String {
    format!("{n:015} ")
}

/// An OpenAI-style server streaming [`DELTAS`] deltas, counting what it
/// managed to write.
async fn streaming_server(written: Arc<AtomicUsize>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let written = Arc::clone(&written);
            tokio::spawn(async move {
                let mut reader = BufReader::new(socket);
                let mut head = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body).await;
                let mut socket = reader.into_inner();
                if head.starts_with("GET") {
                    let body = r#"{"object":"list","data":[{"id":"m"}]}"#;
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    return;
                }
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for n in 0..DELTAS {
                    let event = json!({"choices": [{"index": 0, "delta": {"content": delta(n)}}]});
                    if socket
                        .write_all(format!("data: {event}\n\n").as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                    written.fetch_add(1, Ordering::Relaxed);
                }
                let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
                let _ = socket
                    .write_all(format!("data: {end}\n\ndata: [DONE]\n\n").as_bytes())
                    .await;
            });
        }
    });
    port
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_client_that_stops_reading_holds_the_model_back_and_loses_nothing() {
    let written = Arc::new(AtomicUsize::new(0));
    let port = streaming_server(Arc::clone(&written)).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[chat]\ndefault_provider = \"p\"\n[llm.providers.p]\ntype = \"openai\"\nendpoint = \"http://127.0.0.1:{port}/v1\"\ndefault_model = \"m\"\ncontext_window = 32768\nprewarm = false\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(agent_binary())
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Read only when this test chooses to, as a paused editor would.
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |message: Value| {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})).await;
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": dir.path(), "mcpServers": []}})).await;
    let session = loop {
        let line = stdout.next_line().await.unwrap().unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message["result"]["sessionId"].as_str().unwrap().to_string();
        }
    };
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}})).await;

    // Not reading. The server soon stops (the sockets' buffers, which the
    // kernel may let grow to tens of MB, are full or the answer is all
    // sent); the agent meanwhile may hold only what its bounded queue takes.
    // Unbounded, it would hold every update: some 65 MiB of lines, more as
    // allocated.
    let deadline = tokio::time::Instant::now() + 3 * *PATIENCE;
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = written.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream never stalled"
        );
        last = now;
    }
    let mut peak_rss = 0;
    for _ in 0..10 {
        peak_rss = peak_rss.max(rss_kib(pid));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        peak_rss < 64 * 1024,
        "agent RSS {peak_rss} KiB while the client was not reading"
    );

    // Reading again: everything arrives, in order, and the turn ends.
    let mut text = String::with_capacity(DELTAS * 16);
    loop {
        let line = tokio::time::timeout(*PATIENCE, stdout.next_line())
            .await
            .expect("the agent went quiet")
            .unwrap()
            .unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 3 {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk" {
            text.push_str(update["content"]["text"].as_str().unwrap());
        }
    }
    assert_eq!(text.len(), DELTAS * 16);
    assert!(
        text.as_bytes()
            .chunks(16)
            .enumerate()
            .all(|(n, piece)| piece == delta(n).as_bytes()),
        "text lost or out of order"
    );
}
